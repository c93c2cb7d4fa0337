#!/bin/sh
# shellcheck disable=SC2086  # (the option strings $TRAIN and $EVAL split into words on purpose)
# quality.sh: BEST against the baselines on a real model, equal token budget for every
# trained method (the issue's comparison; results go to docs/results.md).
#
#   dense+        best-train --sparsity 0 (the same budget, no pruning)
#   BEST          best-train --sparsity S (cubic schedule, global second-order saliency)
#   2nd-order+    one-shot global second-order mask of the pretrained model, then training
#                 under that fixed mask. Adam's v comes from CALIB_STEPS calibration batches
#                 at lr 0 (best-train --lr 0 --moments-every: the weights do not move, v
#                 accumulates g^2 of every batch), then best-mask --saliency second scores
#                 0.5 v w^2 of the pretrained weights; one calibration serves every sparsity
#   magnitude+    best-mask --saliency magnitude (one shot), then best-train --mask
#   magnitude     best-mask --saliency magnitude --apply, no training
#   wanda, sparsegpt  best-mask --method NAME --apply (one shot, per layer; NSAMPLES
#                 calibration windows of CALIB_SEQ tokens from the training text, as many
#                 tokens as 2nd-order+'s calibration), no training
#   wanda+, sparsegpt+  best-train from that model under its mask (SparseGPT's updated
#                 weights kept)
#
# N:M patterns (issue 39), each of PATTERNS (default 2:4): magnitude, wanda and sparsegpt with
# best-mask --pattern (one shot, no training; the same calibration), and their "+" (training
# under the fixed N:M mask with the same budget, which keeps it N:M); BEST N:M, best-train
# --pattern with each ramp of NM_RAMPS (default "global group"; docs/best-train.md):
# OUT/table_nm.md. SKIP_UNSTRUCTURED=1 runs only this part.
#
# magnitude and magnitude+ run for each group of MAG_GROUPS: layer (per-layer uniform
# sparsity, the one-shot protocol of SparseGPT, Wanda and the paper's baselines: the
# default in pipelines/best.mk too) and global (one threshold for the model).
#
# Model $SHARED/models/stories260K, data $SHARED/data/stories260K (train for training
# and calibration, valid for perplexity, windows of 512). Budget: STEPS x BATCH x SEQ
# tokens per trained method, seed SEED (data order). OUT/env.txt records the machine,
# the commit and the settings; OUT/table.md the table.
# usage: sh bench/quality.sh [OUT]
#        (env: SHARED STEPS BATCH SEQ LR SEED SPARSITIES MAG_GROUPS CALIB_STEPS ONESHOT
#        NSAMPLES CALIB_SEQ PATTERNS NM_RAMPS SKIP_UNSTRUCTURED)
set -e
SHARED=${SHARED:-../shared}
OUT=${1:-out/quality}
STEPS=${STEPS:-300} BATCH=${BATCH:-16} SEQ=${SEQ:-256} LR=${LR:-1e-3} SEED=${SEED:-0}
SPARSITIES=${SPARSITIES:-"0.7 0.9 0.95 0.99"}
MAG_GROUPS=${MAG_GROUPS:-"layer global"}
# 64 x 16 x 256 = 262,144 tokens: as many as the 128 x 2048 calibration tokens of
# SparseGPT and Wanda
CALIB_STEPS=${CALIB_STEPS:-64}
ONESHOT=${ONESHOT:-"wanda sparsegpt"}
NSAMPLES=${NSAMPLES:-1024} CALIB_SEQ=${CALIB_SEQ:-256} # 262,144 tokens too
# (4:8 does not fit stories260K: its down_proj has 172 columns, not a multiple of 8)
PATTERNS=${PATTERNS:-"2:4"}
NM_RAMPS=${NM_RAMPS:-"global group"}
M=$SHARED/models/stories260K
mkdir -p "$OUT"
{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')"
    echo "cpu: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p')"
    echo "threads: ${OMP_NUM_THREADS:-all cores}"
    echo "STEPS=$STEPS BATCH=$BATCH SEQ=$SEQ LR=$LR SEED=$SEED CALIB_STEPS=$CALIB_STEPS MAG_GROUPS='$MAG_GROUPS'"
    echo "ONESHOT='$ONESHOT' NSAMPLES=$NSAMPLES CALIB_SEQ=$CALIB_SEQ PATTERNS='$PATTERNS' NM_RAMPS='$NM_RAMPS'"
    echo "tokens per trained method: $((STEPS * BATCH * SEQ)); calibration: $((CALIB_STEPS * BATCH * SEQ))"
} >"$OUT/env.txt"
[ -f "$OUT/train.bin" ] || bin/best-tokenize --tokenizer "$M" --quiet --out "$OUT/train.bin" "$SHARED/data/stories260K/train.jsonl.zst"
[ -f "$OUT/valid.bin" ] || bin/best-tokenize --tokenizer "$M" --quiet --out "$OUT/valid.bin" "$SHARED/data/stories260K/valid.jsonl"
TRAIN="--data $OUT/train.bin --batch $BATCH --seq $SEQ --seed $SEED --quiet"
EVAL="--data $OUT/valid.bin --seq 512 --json --quiet"
ppl() { bin/best-eval --model "$1" $EVAL | python3 -c "import json,sys; print('%.4g' % json.load(sys.stdin)['ppl'])"; }
echo "evaluation: $(bin/best-eval --model "$M" $EVAL | python3 -c "import json,sys; print(json.load(sys.stdin)['tokens'])") predicted tokens, windows of 512" >>"$OUT/env.txt"

head="| sparsity |" rule="|---|"
for g in $MAG_GROUPS; do head="$head magnitude $g (no training) | magnitude+ $g |" rule="$rule---:|---:|"; done
for m in $ONESHOT; do head="$head $m (no training) | $m+ |" rule="$rule---:|---:|"; done
echo "$head 2nd-order+ | BEST | BEST's margin over the best baseline |" >"$OUT/table.md"
echo "$rule---:|---:|---:|" >>"$OUT/table.md"

[ -d "$OUT/dense/model" ] || bin/best-train --model "$M" --out "$OUT/dense" $TRAIN --steps "$STEPS" --lr "$LR" --sparsity 0
echo "dense: pretrained $(ppl "$M"), dense+ $(ppl "$OUT/dense/model")" | tee "$OUT/dense.txt"
# Calibration for 2nd-order+: CALIB_STEPS batches at lr 0 (the weights stay the pretrained
# ones, bit for bit), Adam's moments dumped after the last one.
CAL=$OUT/calib/moments/step-$CALIB_STEPS.safetensors
[ -f "$CAL" ] || bin/best-train --model "$M" --out "$OUT/calib" $TRAIN --steps "$CALIB_STEPS" --lr 0 --sparsity 0 \
    --moments-every "$CALIB_STEPS"
[ "${SKIP_UNSTRUCTURED:-0}" = 1 ] && SPARSITIES=""
for s in $SPARSITIES; do
    d=$OUT/s$s
    mkdir -p "$d"
    row="| $s |"
    for g in $MAG_GROUPS; do
        [ -d "$d/mag-$g/model" ] || bin/best-mask --model "$M" --sparsity "$s" --saliency magnitude --group "$g" --quiet \
            --out "$d/mag-$g.mask" --apply --out-model "$d/mag-$g/model"
        [ -d "$d/magplus-$g/model" ] || bin/best-train --model "$M" --out "$d/magplus-$g" $TRAIN --steps "$STEPS" --lr "$LR" \
            --mask "$d/mag-$g.mask"
        row="$row $(ppl "$d/mag-$g/model") | $(ppl "$d/magplus-$g/model") |"
    done
    for m in $ONESHOT; do
        [ -d "$d/$m/model" ] || bin/best-mask --model "$M" --sparsity "$s" --method "$m" --calib "$OUT/train.bin" \
            --nsamples "$NSAMPLES" --seq "$CALIB_SEQ" --seed "$SEED" --quiet --out "$d/$m.mask" --apply --out-model "$d/$m/model"
        [ -d "$d/${m}plus/model" ] || bin/best-train --model "$d/$m/model" --out "$d/${m}plus" $TRAIN --steps "$STEPS" \
            --lr "$LR" --mask "$d/$m.mask"
        row="$row $(ppl "$d/$m/model") | $(ppl "$d/${m}plus/model") |"
    done
    [ -f "$d/second.mask" ] || bin/best-mask --model "$M" --moments "$CAL" --sparsity "$s" --saliency second --group global \
        --quiet --out "$d/second.mask"
    [ -d "$d/second/model" ] || bin/best-train --model "$M" --out "$d/second" $TRAIN --steps "$STEPS" --lr "$LR" \
        --mask "$d/second.mask"
    [ -d "$d/best/model" ] || bin/best-train --model "$M" --out "$d/best" $TRAIN --steps "$STEPS" --lr "$LR" --sparsity "$s"
    row="$row $(ppl "$d/second/model") | $(ppl "$d/best/model") |"
    # the margin: the lowest baseline perplexity of the row over BEST's
    echo "$row" | python3 -c "
import sys
row = sys.stdin.read().strip()
v = [float(c) for c in row.strip('|').split('|')[1:]]
print('%s %.3gx |' % (row, min(v[:-1]) / v[-1]))" | tee -a "$OUT/table.md"
done

# N:M patterns: the one-shot masks and their "+"
head="| pattern | magnitude (no training) | magnitude+ | wanda (no training) | wanda+ | sparsegpt (no training) | sparsegpt+ |"
rule="|---|---:|---:|---:|---:|---:|---:|"
for r in $NM_RAMPS; do head="$head BEST N:M, $r ramp |"; rule="$rule---:|"; done
printf '%s\n%s\n' "$head" "$rule" >"$OUT/table_nm.md"
for p in $PATTERNS; do
    d=$OUT/p$(echo "$p" | tr : o)
    mkdir -p "$d"
    row="| $p |"
    for m in magnitude wanda sparsegpt; do
        c=""
        [ "$m" = magnitude ] || c="--calib $OUT/train.bin --nsamples $NSAMPLES --seq $CALIB_SEQ --seed $SEED"
        [ -d "$d/$m/model" ] || bin/best-mask --model "$M" --method "$m" --pattern "$p" $c --device cpu --quiet \
            --out "$d/$m.mask" --apply --out-model "$d/$m/model"
        [ -d "$d/${m}plus/model" ] || bin/best-train --model "$d/$m/model" --out "$d/${m}plus" $TRAIN --steps "$STEPS" \
            --lr "$LR" --mask "$d/$m.mask"
        row="$row $(ppl "$d/$m/model") | $(ppl "$d/${m}plus/model") |"
    done
    for r in $NM_RAMPS; do
        [ -d "$d/best-$r/model" ] || bin/best-train --model "$M" --out "$d/best-$r" $TRAIN --steps "$STEPS" --lr "$LR" \
            --pattern "$p" --nm-ramp "$r"
        row="$row $(ppl "$d/best-$r/model") |"
    done
    echo "$row" | tee -a "$OUT/table_nm.md"
done
cat "$OUT/env.txt" "$OUT/dense.txt" "$OUT/table.md" "$OUT/table_nm.md"
