#!/bin/sh
# tests/gpu/shared.sh: copies what tests/gpu/eval_check.sh and the benchmarks read from
# ../shared (the stories260K model, its validation text, the zero-shot task files,
# LLaMA-2's tokenizer.model: about 7 MB) into
# shared/ inside the checkout, which the device tool carries to a lent GPU machine (the
# ../shared beside the checkout stays behind). shared/ is git-ignored. tests/gpu/run.sh
# points eval_check at it when there is no ../shared.
#
#   sh tests/gpu/shared.sh [SRC]   (SRC: ../shared by default)
set -eu
cd "$(dirname "$0")/../.."
SRC=${1:-../shared}
for p in models/stories260K data/stories260K tasks tokenizers/llama2; do
    if [ ! -d "$SRC/$p" ]; then
        echo "tests/gpu/shared.sh: $SRC/$p not found" >&2
        exit 1
    fi
done
rm -rf shared.tmp
for p in models/stories260K data/stories260K tasks tokenizers/llama2; do
    mkdir -p "shared.tmp/$(dirname "$p")"
    cp -r "$SRC/$p" "shared.tmp/$p"
done
rm -rf shared
mv shared.tmp shared
echo "shared/: $(du -sh shared | cut -f1) (models/stories260K, data/stories260K, tasks, tokenizers/llama2)"
