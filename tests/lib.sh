# lib.sh: sourced by the shell tests. Same line protocol as test.h:
# "ok - ...", "not ok - ...", "skip - ...". $BIN holds the tools, $TMP a scratch dir.
: "${BIN:=$(pwd)/bin}"
: "${SHARED:=../shared}"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILED=0
ok()   { echo "ok - $*"; }
# A failed line names the BLAS kernels behind this machine's numbers (tests/blas_info.py
# says why): ours, from the tools' --version, and numpy's; and torch's where BLAS_TORCH
# names the python that has it. Worked out once per test, at its first failure.
BEST_BLAS=$("$BIN/best-train" --version 2>/dev/null | sed -n 's/^[^(]*(\(.*\))$/\1/p')
export BEST_BLAS
blas_note() {
    [ -s "$TMP/blas_note" ] || { "${BLAS_TORCH:-python3}" tests/blas_info.py ${BLAS_TORCH:+--torch} 2>/dev/null ||
        echo "ours: ${BEST_BLAS:-unknown}"; } >"$TMP/blas_note"
    cat "$TMP/blas_note"
}
fail() { echo "not ok - $* [$(blas_note)]"; FAILED=1; }
skip() { echo "skip - $*"; }
# check NAME CMD...: ok when CMD succeeds
check() { name=$1; shift; if "$@" >/dev/null 2>&1; then ok "$name"; else fail "$name"; fi; }
# expect_error NAME CODE PATTERN CMD...: CMD must exit CODE and print exactly one
# error line on stderr, matching PATTERN (a configuration banner may come before it)
expect_error() {
    name=$1 code=$2 pat=$3; shift 3
    "$@" >"$TMP/out" 2>"$TMP/err"; rc=$?
    lines=$(grep -c 'error' "$TMP/err")
    if [ "$rc" = "$code" ] && grep 'error' "$TMP/err" | grep -q -- "$pat" && [ "$lines" = 1 ]; then ok "$name"
    else fail "$name (exit $rc, want $code; stderr: $(head -c 300 "$TMP/err"))"; fi
}
have_shared() { [ -d "$SHARED" ]; }
have_py() { python3 -c "import $1" 2>/dev/null; }
finish() { exit $FAILED; }
