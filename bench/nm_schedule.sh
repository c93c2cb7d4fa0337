#!/bin/sh
# shellcheck disable=SC2086  # ($TRAIN splits into words on purpose)
# nm_schedule.sh: the schedule of BEST with an N:M target (best-train --pattern), measured:
# stories260K at PATTERN (default 2:4), the same budget and data as bench/quality.sh, one
# run per variant (docs/results.md's schedule table), each a line "name: options:
# perplexity" on stdout and in OUT/table.md:
#   unstructured, unstructured-end0.25   --sparsity (M-N)/M, no pattern: what N:M costs
#   global, group          --pattern with --nm-ramp global | group, the default schedule
#   global-end0.25, -end0.1, -end0.25-u100, -s0.1-e0.35, -end0.25-magnitude
#                          the global ramp's schedule moved (--prune-end, --prune-start,
#                          --prune-updates) and another saliency
#   project-magnitude, project-sparsegpt   ramp unstructured, then project: BEST to (M-N)/M
#                          for half the steps, best-mask --method NAME --pattern on that
#                          model, the other half under the projected mask
# The one-shot baselines and their "+" are quality.sh's (SKIP_UNSTRUCTURED=1).
# usage: sh bench/nm_schedule.sh [OUT]   (env: SHARED STEPS BATCH SEQ LR SEED PATTERN;
#        OUT defaults to out/nm-schedule; the tokenized text is made there or taken from
#        QUALITY_OUT=out/quality-nm when that holds it)
set -e
SHARED=${SHARED:-../shared}
OUT=${1:-out/nm-schedule}
STEPS=${STEPS:-300} BATCH=${BATCH:-16} SEQ=${SEQ:-256} LR=${LR:-1e-3} SEED=${SEED:-0}
PATTERN=${PATTERN:-2:4}
Q=${QUALITY_OUT:-out/quality-nm}
M=$SHARED/models/stories260K
mkdir -p "$OUT"
for f in train valid; do
    if [ -f "$Q/$f.bin" ]; then cp "$Q/$f.bin" "$OUT/$f.bin"; fi
done
[ -f "$OUT/train.bin" ] || bin/best-tokenize --tokenizer "$M" --quiet --out "$OUT/train.bin" "$SHARED/data/stories260K/train.jsonl.zst"
[ -f "$OUT/valid.bin" ] || bin/best-tokenize --tokenizer "$M" --quiet --out "$OUT/valid.bin" "$SHARED/data/stories260K/valid.jsonl"
TRAIN="--data $OUT/train.bin --batch $BATCH --seq $SEQ --seed $SEED --steps $STEPS --lr $LR --quiet"
S=$(python3 -c "n, m = map(int, '$PATTERN'.split(':')); print((m - n) / m)")
: >"$OUT/table.md"
run() {
    name=$1
    shift
    [ -d "$OUT/$name/model" ] || bin/best-train --model "$M" --out "$OUT/$name" $TRAIN "$@"
    p=$(bin/best-eval --model "$OUT/$name/model" --data "$OUT/valid.bin" --seq 512 --json --quiet |
        python3 -c "import json,sys; print('%.4g' % json.load(sys.stdin)['ppl'])")
    echo "$name: $*: $p" | tee -a "$OUT/table.md"
}
run unstructured --sparsity "$S"
run unstructured-end0.25 --sparsity "$S" --prune-end 0.25
run global --pattern "$PATTERN" --nm-ramp global
run group --pattern "$PATTERN" --nm-ramp group
run global-end0.25 --pattern "$PATTERN" --prune-end 0.25
run global-end0.25-u100 --pattern "$PATTERN" --prune-end 0.25 --prune-updates 100
run global-end0.1 --pattern "$PATTERN" --prune-end 0.1
run global-s0.1-e0.35 --pattern "$PATTERN" --prune-start 0.1 --prune-end 0.35
run global-end0.25-magnitude --pattern "$PATTERN" --prune-end 0.25 --saliency magnitude
# ramp unstructured, then project (the other candidate)
half=$((STEPS / 2))
[ -d "$OUT/project-half/model" ] || bin/best-train --model "$M" --out "$OUT/project-half" \
    --data "$OUT/train.bin" --batch "$BATCH" --seq "$SEQ" --seed "$SEED" --steps "$half" --lr "$LR" --quiet --sparsity "$S"
for m in magnitude sparsegpt; do
    c=""
    [ "$m" = magnitude ] || c="--calib $OUT/train.bin --nsamples 1024 --seq 256 --seed $SEED"
    [ -d "$OUT/project-$m-oneshot/model" ] || bin/best-mask --model "$OUT/project-half/model" --method "$m" \
        --pattern "$PATTERN" $c --device cpu --quiet --out "$OUT/project-$m.mask" --apply --out-model "$OUT/project-$m-oneshot/model"
    [ -d "$OUT/project-$m/model" ] || bin/best-train --model "$OUT/project-$m-oneshot/model" --out "$OUT/project-$m" \
        --data "$OUT/train.bin" --batch "$BATCH" --seq "$SEQ" --seed "$SEED" --steps "$half" --lr "$LR" --quiet \
        --mask "$OUT/project-$m.mask"
    p=$(bin/best-eval --model "$OUT/project-$m/model" --data "$OUT/valid.bin" --seq 512 --json --quiet |
        python3 -c "import json,sys; print('%.4g' % json.load(sys.stdin)['ppl'])")
    echo "project-$m: BEST --sparsity $S for $half steps, best-mask --method $m --pattern $PATTERN, $half steps under it: $p" |
        tee -a "$OUT/table.md"
done
