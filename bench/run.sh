#!/bin/sh
# run.sh: every benchmark, in turn. Each prints its own table of ratios.
set -e
python3 bench/tokenize_speed.py bin "${SHARED:-../shared}" "${REPEAT:-10}"
