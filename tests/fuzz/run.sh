#!/bin/sh
# run.sh SECONDS FUZZER...: runs each libFuzzer target for SECONDS on a scratch copy of
# its seed corpus (tests/fuzz/corpus/NAME, NAME = target without "fuzz_"), so the
# repository's corpus stays small. SECONDS=0 only replays the seed corpus.
# Prints one ok/not ok line per target. An input that fails is kept in build-fuzz/crashes/
# (the failing line names it), not in the current folder (libFuzzer's default).
secs=$1; shift
status=0
for f in "$@"; do
    name=$(basename "$f" | sed 's/^fuzz_//')
    work=$(mktemp -d)
    [ -d "tests/fuzz/corpus/$name" ] && cp -r "tests/fuzz/corpus/$name/." "$work/"
    # Real files are never copied into the repository; seed from ../shared when it is there.
    shared=${SHARED:-../shared}
    if [ "$name" = spm_model ] && [ -f "$shared/models/stories260K/tokenizer.model" ]; then
        cp "$shared/models/stories260K/tokenizer.model" "$work/stories260K.model"
    fi
    if [ "$secs" = 0 ]; then args="-runs=0"; else args="-max_total_time=$secs"; fi
    mkdir -p build-fuzz/crashes
    if "$f" $args -timeout=10 -rss_limit_mb=2048 -artifact_prefix="build-fuzz/crashes/$name-" "$work" >"$work.log" 2>&1; then
        echo "ok - fuzz $name ($secs s): $(grep -o 'stat::number_of_executed_units: [0-9]*' "$work.log" | tail -1; tail -1 "$work.log" | cut -c1-80)"
    else
        echo "not ok - fuzz $name: $(grep -m1 -E 'ERROR|runtime error|SUMMARY' "$work.log") (input: $(grep -o 'build-fuzz/crashes/[^ ]*' "$work.log" | tail -1))"
        tail -n 30 "$work.log"
        status=1
    fi
    rm -rf "$work" "$work.log"
done
exit $status
