#!/bin/sh
# run.sh: every benchmark, in turn. Each prints its own table of ratios against a
# peer measured in the same run; docs/benchmarks.md records results.
set -e
SHARED="${SHARED:-../shared}"
python3 bench/tokenize_speed.py bin "$SHARED" "${REPEAT:-1}"
python3 bench/select_speed.py build "${SELECT_LOG2N:-28}"
if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    /usr/bin/python3 bench/model.py
else
    echo "bench/model.py: skipped (needs torch for /usr/bin/python3: apt-get install python3-torch)"
fi
sh bench/mask_update.sh
sh bench/decode.sh
if [ -d "$SHARED/models/stories260K" ]; then
    echo "bench/quality.sh: not run here (about 40 minutes); sh bench/quality.sh for docs/results.md"
fi
