#!/bin/sh
# run.sh: runs every test (C programs test_*, shell scripts tests/t_*.sh) once per
# mode in $MODES ("plain": bin/ and build/tests; "san": the ASan+UBSan build in
# build-san/), counts their "ok"/"not ok"/"skip" lines, and ends with
# "N passed, N failed, N skipped". A test that exits non-zero without reporting a
# failure counts as one failure, and so does one that reports nothing at all. Shell tests see $SAN=1 in the sanitizer pass.
# It starts with the BLAS kernels every comparison ran on (tests/blas_info.py). TEST_LOGS=DIR
# keeps each test's whole output there (MODE-NAME.log), its measured errors included.
# Arguments name the tests to run, without their extension (sh tests/run.sh t_mask
# test_pack): after `make` (MODES=san after `make SAN=1 all`), one test in seconds.
# TIER=check (make check, the edit-test loop): the unit programs (test_*), t_layout and a
# smoke of the tools' command lines (t_badinput, t_eval), about 2.5 minutes on 2 cores.
#
# Tests are independent: JOBS of them (default 2) run at a time, each with its own
# temporary folder as TMPDIR (removed after it), the plain and sanitizer passes mixed in one
# queue. The queue starts with the slowest (SLOW below, then the rest in name order), so
# that the last to finish are short ones. A test's report is printed whole when it ends, so
# the order of the reports is the order of finishing. JOBS=1 runs them one by one.
# Every test's seconds go to $TIMES (build/test-times.txt: mode, seconds, name), and the
# ten slowest are printed before the last line.
: "${MODES:=plain}"
: "${JOBS:=2}"
ONLY=" $* "
[ "$TIER" = check ] && [ "$ONLY" = "  " ] && CHECK_ONLY=" t_layout t_badinput t_eval "
# The slowest tests (seconds on 2 cores, clean-clone CI of 2026-11-29: build/test-times.txt),
# started first; a test not named here starts after them.
SLOW="t_mpi t_fuzz t_examples test_step t_demo t_train t_pipeline test_spmv_cuda t_zeroshot
      test_pack t_hf_load t_gpu_script t_pack t_tokenize_oracle t_pack_eval t_mask t_hf_grad"
TIMES=${TIMES:-build/test-times.txt}
mkdir -p "$(dirname "$TIMES")" && : >"$TIMES"
export SHARED="${SHARED:-$(pwd)/../shared}"
[ -d "$SHARED" ] || echo "note: $SHARED not found; tests that need real models and data will skip"
# Two tests' OpenMP threads share the cores: a thread that spins at a barrier takes the
# core from the other test's working thread, so waiting threads sleep (no result changes).
[ "$JOBS" -gt 1 ] && export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
RUN=$(mktemp -d)
trap 'rm -rf "$RUN"' EXIT
trap 'exit 130' INT TERM
. tests/hf_env.sh
echo "# BLAS: ours $(bin/best-train --version 2>/dev/null | sed -n 's/^[^(]*(\(.*\))$/\1/p');" \
    "$(python3 tests/blas_info.py 2>/dev/null);" \
    "$("$HF_PY" tests/blas_info.py --torch 2>/dev/null || echo 'torch: not installed')"
[ -z "$TEST_LOGS" ] || mkdir -p "$TEST_LOGS"

# wanted PATH: whether the test at PATH is in this run (the arguments, the tier)
wanted() {
    local b=$(basename "$1" .sh)
    if [ "$ONLY" != "  " ]; then case "$ONLY" in *" $b "*) ;; *) return 1 ;; esac; fi
    if [ -n "$CHECK_ONLY" ]; then # the check tier: every unit program, and the named scripts
        case "$1" in *.sh) case "$CHECK_ONLY" in *" $b "*) ;; *) return 1 ;; esac ;; esac
    fi
    return 0
}

# The queue, one "MODE PATH" a line: the slow tests first, in SLOW's order, then the rest.
for mode in $MODES; do
    if [ "$mode" = san ]; then tbin=$(pwd)/build-san/tests; else tbin=$(pwd)/build/tests; fi
    for t in "$tbin"/test_* tests/t_*.sh; do
        [ -e "$t" ] || continue
        case "$t" in *.d|*.o) continue ;; esac
        wanted "$t" || continue
        b=$(basename "$t" .sh) rank=999 i=0
        for s in $SLOW; do i=$((i + 1)); [ "$s" = "$b" ] && rank=$i; done
        echo "$rank $mode $t"
    done
done | sort -s -n -k1,1 | cut -d' ' -f2- >"$RUN/queue"

# start MODE PATH ID: runs one test in the background, in its own TMPDIR; when it ends,
# $RUN/ID.log holds its output and $RUN/ID.end its exit status and seconds.
start() {
    local mode=$1 t=$2 id=$3
    (
        if [ "$mode" = san ]; then
            BIN=$(pwd)/build-san/bin TBIN=$(pwd)/build-san/tests SAN=1
            export ASAN_OPTIONS="detect_leaks=1:exitcode=99"
            export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=98"
        else
            BIN=$(pwd)/bin TBIN=$(pwd)/build/tests SAN=0
        fi
        export BIN TBIN SAN
        TMPDIR="$RUN/tmp.$id" && mkdir "$TMPDIR" && export TMPDIR
        t0=$(date +%s)
        case "$t" in
            *.sh) sh "$t" >"$RUN/$id.log" 2>&1 </dev/null ;;
            *) "$t" >"$RUN/$id.log" 2>&1 </dev/null ;;
        esac
        rc=$?
        rm -rf "$TMPDIR"
        echo "$rc $(( $(date +%s) - t0 ))" >"$RUN/$id.part" && mv "$RUN/$id.part" "$RUN/$id.end"
    ) &
    echo "$id $mode $t $!" >>"$RUN/running"
}

# report ID MODE PATH: counts a finished test's lines and prints its report
pass=0 fail=0 skipped=0
report() {
    local id=$1 mode=$2 t=$3 log="$RUN/$1.log" rc secs name p f s
    read -r rc secs <"$RUN/$id.end"
    name="$mode/$(basename "$t")"
    p=$(grep -c '^ok - ' "$log"); f=$(grep -c '^not ok - ' "$log"); s=$(grep -c '^skip - ' "$log")
    if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; echo "not ok - $name exited $rc" >>"$log"; fi
    # a test that reports nothing, not even why it skips, checked nothing: a failure
    if [ "$p" = 0 ] && [ "$f" = 0 ] && [ "$s" = 0 ]; then f=1; echo "not ok - $name reported no check and no skip" >>"$log"; fi
    pass=$((pass + p)); fail=$((fail + f)); skipped=$((skipped + s))
    echo "$mode $secs $(basename "$t")" >>"$TIMES"
    echo "== $name: $p passed, $f failed, $s skipped (${secs}s)"
    grep -E '^(not ok|skip) - ' "$log" | sed 's/^/   /'
    if [ "$f" != 0 ]; then echo "   --- output tail:"; tail -n 25 "$log" | sed 's/^/   | /'; fi
    [ -z "$TEST_LOGS" ] || cp "$log" "$TEST_LOGS/$mode-$(basename "$t").log"
    rm -f "$log" "$RUN/$id.end"
}

# reap: reports every finished test; $left is how many still run
reap() {
    local id mode t pid
    : >"$RUN/still"
    while read -r id mode t pid; do
        if [ -e "$RUN/$id.end" ]; then wait "$pid" 2>/dev/null; report "$id" "$mode" "$t"
        else echo "$id $mode $t $pid" >>"$RUN/still"; fi
    done <"$RUN/running"
    mv "$RUN/still" "$RUN/running"
    left=$(wc -l <"$RUN/running")
}

: >"$RUN/running"
n=0
while read -r qmode qtest; do
    reap; while [ "$left" -ge "$JOBS" ]; do sleep 0.2; reap; done
    n=$((n + 1)); start "$qmode" "$qtest" "$n"
done <"$RUN/queue"
reap; while [ "$left" -gt 0 ]; do sleep 0.2; reap; done
echo "# the ten slowest (seconds; all in $TIMES):"
sort -k2,2nr "$TIMES" | head -n 10 | sed 's/^/#   /'
echo "$pass passed, $fail failed, $skipped skipped"
[ "$fail" = 0 ]
