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
# Every test's seconds go to $TIMES (build/test-times.txt: mode, seconds, name), and the
# ten slowest are printed before the last line.
: "${MODES:=plain}"
ONLY=" $* "
[ "$TIER" = check ] && [ "$ONLY" = "  " ] && CHECK_ONLY=" t_layout t_badinput t_eval "
TIMES=${TIMES:-build/test-times.txt}
mkdir -p "$(dirname "$TIMES")" && : >"$TIMES"
export SHARED="${SHARED:-$(pwd)/../shared}"
[ -d "$SHARED" ] || echo "note: $SHARED not found; tests that need real models and data will skip"
pass=0 fail=0 skipped=0
log=$(mktemp)
. tests/hf_env.sh
echo "# BLAS: ours $(bin/best-train --version 2>/dev/null | sed -n 's/^[^(]*(\(.*\))$/\1/p');" \
    "$(python3 tests/blas_info.py 2>/dev/null);" \
    "$("$HF_PY" tests/blas_info.py --torch 2>/dev/null || echo 'torch: not installed')"
[ -z "$TEST_LOGS" ] || mkdir -p "$TEST_LOGS"
for mode in $MODES; do
    if [ "$mode" = san ]; then
        BIN=$(pwd)/build-san/bin TBIN=$(pwd)/build-san/tests SAN=1
        export ASAN_OPTIONS="detect_leaks=1:exitcode=99"
        export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=98"
    else
        BIN=$(pwd)/bin TBIN=$(pwd)/build/tests SAN=0
    fi
    export BIN TBIN SAN
    for t in "$TBIN"/test_* tests/t_*.sh; do
        [ -e "$t" ] || continue
        case "$t" in *.d|*.o) continue ;; esac
        if [ "$ONLY" != "  " ]; then b=$(basename "$t" .sh); case "$ONLY" in *" $b "*) ;; *) continue ;; esac; fi
        if [ -n "$CHECK_ONLY" ]; then # the check tier: every unit program, and the named scripts
            case "$t" in *.sh) b=$(basename "$t" .sh); case "$CHECK_ONLY" in *" $b "*) ;; *) continue ;; esac ;; esac
        fi
        name="$mode/$(basename "$t")"
        start=$(date +%s)
        case "$t" in
            *.sh) sh "$t" >"$log" 2>&1 ;;
            *) "$t" >"$log" 2>&1 ;;
        esac
        rc=$?
        p=$(grep -c '^ok - ' "$log"); f=$(grep -c '^not ok - ' "$log"); s=$(grep -c '^skip - ' "$log")
        if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; echo "not ok - $name exited $rc" >>"$log"; fi
        # a test that reports nothing, not even why it skips, checked nothing: a failure
        if [ "$p" = 0 ] && [ "$f" = 0 ] && [ "$s" = 0 ]; then f=1; echo "not ok - $name reported no check and no skip" >>"$log"; fi
        pass=$((pass + p)); fail=$((fail + f)); skipped=$((skipped + s))
        secs=$(( $(date +%s) - start ))
        echo "$mode $secs $(basename "$t")" >>"$TIMES"
        echo "== $name: $p passed, $f failed, $s skipped (${secs}s)"
        grep -E '^(not ok|skip) - ' "$log" | sed 's/^/   /'
        if [ "$f" != 0 ]; then echo "   --- output tail:"; tail -n 25 "$log" | sed 's/^/   | /'; fi
        [ -z "$TEST_LOGS" ] || cp "$log" "$TEST_LOGS/$mode-$(basename "$t").log"
    done
done
rm -f "$log"
echo "# the ten slowest (seconds; all in $TIMES):"
sort -k2,2nr "$TIMES" | head -n 10 | sed 's/^/#   /'
echo "$pass passed, $fail failed, $skipped skipped"
[ "$fail" = 0 ]
