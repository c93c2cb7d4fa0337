#!/bin/sh
# quality.sh: BEST against the baselines on a real model, equal token budget for every
# trained method (the issue's comparison; results go to docs/results.md).
#
#   dense+       best-train --sparsity 0 (the same budget, no pruning)
#   BEST         best-train --sparsity S (cubic schedule, global second-order saliency)
#   2nd-order+   best-train --schedule oneshot --prune-updates 1: the whole sparsity at
#                the first update (after step 1, Adam's v from one batch), then training
#                under that fixed mask
#   magnitude+   best-mask --saliency magnitude (one shot, global), then best-train --mask
#   magnitude    best-mask --saliency magnitude --apply, no training
#
# Model ../shared/models/stories260K, data ../shared/data/stories260K (train for
# training, valid for perplexity, windows of 512). Budget: STEPS x BATCH x SEQ tokens.
# usage: sh bench/quality.sh [OUT]   (env: STEPS BATCH SEQ LR SPARSITIES)
set -e
SHARED=${SHARED:-../shared}
OUT=${1:-out/quality}
STEPS=${STEPS:-300} BATCH=${BATCH:-16} SEQ=${SEQ:-256} LR=${LR:-1e-3}
SPARSITIES=${SPARSITIES:-"0.7 0.9 0.95 0.99"}
M=$SHARED/models/stories260K
mkdir -p "$OUT"
[ -f "$OUT/train.bin" ] || bin/best-tokenize --tokenizer "$M" --quiet --out "$OUT/train.bin" "$SHARED/data/stories260K/train.jsonl.zst"
[ -f "$OUT/valid.bin" ] || bin/best-tokenize --tokenizer "$M" --quiet --out "$OUT/valid.bin" "$SHARED/data/stories260K/valid.jsonl"
TRAIN="--data $OUT/train.bin --steps $STEPS --batch $BATCH --seq $SEQ --lr $LR --quiet"
ppl() { bin/best-eval --model "$1" --data "$OUT/valid.bin" --seq 512 --json --quiet | python3 -c "import json,sys; print('%.3f' % json.load(sys.stdin)['ppl'])"; }
echo "| sparsity | magnitude (no training) | magnitude+ | 2nd-order+ | BEST |" >"$OUT/table.md"
echo "|---|---:|---:|---:|---:|" >>"$OUT/table.md"
[ -d "$OUT/dense/model" ] || bin/best-train --model "$M" --out "$OUT/dense" $TRAIN --sparsity 0
echo "dense: pretrained $(ppl "$M"), dense+ $(ppl "$OUT/dense/model")" | tee "$OUT/dense.txt"
for s in $SPARSITIES; do
    d=$OUT/s$s
    mkdir -p "$d"
    [ -d "$d/mag/model" ] || bin/best-mask --model "$M" --sparsity "$s" --saliency magnitude --quiet \
        --out "$d/mag.mask" --apply --out-model "$d/mag/model"
    [ -d "$d/magplus/model" ] || bin/best-train --model "$M" --out "$d/magplus" $TRAIN --mask "$d/mag.mask"
    [ -d "$d/second/model" ] || bin/best-train --model "$M" --out "$d/second" $TRAIN --sparsity "$s" \
        --schedule oneshot --prune-updates 1 --prune-start 0 --prune-end 0
    [ -d "$d/best/model" ] || bin/best-train --model "$M" --out "$d/best" $TRAIN --sparsity "$s"
    row="| $s | $(ppl "$d/mag/model") | $(ppl "$d/magplus/model") | $(ppl "$d/second/model") | $(ppl "$d/best/model") |"
    echo "$row" | tee -a "$OUT/table.md"
done
cat "$OUT/dense.txt" "$OUT/table.md"
