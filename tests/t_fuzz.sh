#!/bin/sh
# t_fuzz.sh: replays each fuzz target's seed corpus and fuzzes it for $FUZZ_SECONDS
# (make test sets 15). Longer runs: make fuzz FUZZ_SECONDS=600. Plain pass only
# (the targets carry their own ASan+UBSan).
. tests/lib.sh
if [ "$SAN" = 1 ]; then skip "fuzz replay: once, in the plain pass (the fuzz targets carry ASan themselves)"; finish; fi
set -- build-fuzz/fuzz_*
if [ ! -x "$1" ]; then skip "fuzz targets not built (make fuzz-build needs clang)"; finish; fi
sh tests/fuzz/run.sh "${FUZZ_SECONDS:-15}" "$@" || FAILED=1
finish
