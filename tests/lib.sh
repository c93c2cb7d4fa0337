# lib.sh: sourced by the shell tests. Same line protocol as test.h:
# "ok - ...", "not ok - ...", "skip - ...". $BIN holds the tools, $TMP a scratch dir.
: "${BIN:=$(pwd)/bin}"
: "${SHARED:=../shared}"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILED=0
ok()   { echo "ok - $*"; }
fail() { echo "not ok - $*"; FAILED=1; }
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
