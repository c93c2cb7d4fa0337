#!/bin/sh
# tests/gpu/oneshot_check.sh: best-mask --method magnitude|wanda|sparsegpt --device cuda
# against --device cpu through the tool, on a lent GPU (issue 38; tests/gpu/run.sh's
# BENCH=oneshot runs it first; full build: bin/best-mask, best-eval, best-tokenize). Both
# sides take the same windows (the same --calib, --nsamples, --seq and --seed: the draw is
# the host's), write the mask (--out) and the pruned model (--apply --out-model), and the
# two are compared in numpy (tests/safetensors_py.py), the device side at each of
# PRECISIONS (default "fp32 bf16": --precision fp32, products and X^T X in fp32 as on the
# CPU, first, the closest to the CPU and so what tells a wrong kernel; then bf16, the
# default, whose forward takes bf16 operands, so the statistics and the order of
# near-ties differ a little; the emulator measured that bf16 misses the 1% at 70% on
# stories260K, docs/best-mask.md; empty: no --precision):
#   * magnitude: the masks identical, and the models too (once, no --precision);
#   * wanda: the masks' agreement: stated, and a failure below 99%;
#   * sparsegpt: the masks' agreement, at least 99.9% (the issue's target), and the relative
#     normwise difference of the updated weights, ||W_gpu - W_cpu|| / ||W_cpu|| over every
#     prunable tensor, at most 1e-3 (the issue's target);
# on the LLaMA and Qwen3 fixtures (tests/fixtures/model, calibrated on the Qwen3 fixture's
# token shard: 16 windows of 32 tokens) at 50%, and on stories260K (16 windows of 256 tokens
# of its training text, as tests/t_oneshot.sh) at 50% and 70% when SHARED has it, where each
# pruned model's perplexity on the validation text (best-eval on the CPU, for both sides) is
# also within 1% of the CPU path's. On the fixtures (random weights) the scores hang on |W|
# far more than on the inputs: 2 windows instead of 16 still agree on 99.4% of wanda's mask
# (measured on the CPU), so there the sparsegpt weights' difference is what tells a wrong
# Hessian; stories260K (trained) tells both: on other windows (--seed 1, measured on the
# CPU) wanda's masks agree 97.5-98.4% and its perplexity is 6-14% off, sparsegpt's masks
# 98.2-98.7% and its weights 9e-2 to 1.7e-1 apart. Prints "ok - " / "not ok - " lines and
# "N passed, N failed"; exit 1 on a failure.
#
# `sh tests/gpu/oneshot_check.sh smoke` runs only each method on the Qwen3 fixture on GD
# (wanda and sparsegpt at each of PRECISIONS; under compute-sanitizer's memcheck when CSAN
# names it): run.sh's first step of BENCH=oneshot, before any comparison.
#
# GD (default cuda) is the side under test, CD (default cpu) the reference; an empty one
# passes no --device (the tool's default). GD=cpu CD=cpu runs both sides on the CPU (where
# --precision changes nothing): a check of this script on any machine
# (tests/t_gpu_script.sh), where every comparison must then be exact. GD_ARGS: more
# best-mask options for the side under test alone (the control of tests/t_gpu_script.sh:
# GD_ARGS="--seed 1 --nsamples 2", other windows, must fail the fixtures' sparsegpt lines).
set -u
GD=${GD-cuda}
CD=${CD-cpu}
GD_ARGS=${GD_ARGS:-}
PRECISIONS=${PRECISIONS-fp32 bf16}
BIN=${BIN:-bin}
SHARED=${SHARED:-../shared}
[ -d "$SHARED" ] || SHARED=shared # tests/gpu/shared.sh's copy on a device machine
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
pass=0 fail=0
ok() { echo "ok - $*"; pass=$((pass + 1)); }
notok() { echo "not ok - $*"; fail=$((fail + 1)); }
dev() { if [ -n "$1" ]; then echo "--device $1"; fi; }
name() { echo "${1:-default}"; }

# prune TAG MODEL METHOD S DEVICE CALIB...: best-mask into $W/TAG.mask and $W/TAG (the model)
prune() {
    pr_tag=$1 pr_model=$2 pr_method=$3 pr_s=$4 pr_d=$5 # (sh has no locals: pair's names are in use)
    shift 5
    # shellcheck disable=SC2046
    "$BIN/best-mask" --model "$pr_model" --sparsity "$pr_s" --method "$pr_method" "$@" $(dev "$pr_d") \
        --out "$W/$pr_tag.mask" --apply --out-model "$W/$pr_tag" --report "$W/$pr_tag.json" --quiet 2>"$W/$pr_tag.err"
}

# compare METHOD A B WHAT: the masks and models of tags A (the side under test) and B
# (the reference); prints one ok / not ok line and exits 1 on a failure
compare() {
    python3 - "$W" "$@" <<'PY'
import sys
sys.path.insert(0, "tests")
import numpy as np
from safetensors_py import load
w, method, a, b, what = sys.argv[1:6]
try:
    ma, mb = load(f"{w}/{a}.mask"), load(f"{w}/{b}.mask")
    wa, wb = load(f"{w}/{a}/model.safetensors", float32=True), load(f"{w}/{b}/model.safetensors", float32=True)
except (OSError, ValueError, KeyError) as e:
    print("not ok - %s %s: the outputs cannot be read: %s" % (what, method, e))
    sys.exit(1)
n = sum(m.size for m in mb.values())
agree = sum(int((ma[k].astype(bool) == mb[k].astype(bool)).sum()) for k in mb) / n
num = sum(float(np.sum((wa[k].astype(np.float64) - wb[k].astype(np.float64)) ** 2)) for k in mb)
den = sum(float(np.sum(wb[k].astype(np.float64) ** 2)) for k in mb)
rel = (num / den) ** 0.5 if den else 0.0
others = [k for k in wb if k not in mb and not np.array_equal(wa[k], wb[k])]
if method == "magnitude":
    good = agree == 1.0 and rel == 0.0
    say = "masks identical" if agree == 1.0 else "masks DIFFER (%.6f agree)" % agree
    say += ", models identical" if rel == 0.0 else ", models differ (rel %.1e)" % rel
elif method == "wanda":
    good = agree >= 0.99
    say = "mask agreement %.4f%% (at least 99%%)" % (100 * agree)
else:
    good = agree >= 0.999 and rel <= 1e-3
    say = ("mask agreement %.4f%% (target at least 99.9%%), updated weights' relative normwise difference %.2e "
           "(target at most 1e-3)" % (100 * agree, rel))
good = good and not others
if others:
    say += "; tensors that are not pruned differ: " + ", ".join(others[:5])
print("%s - %s, %s: %s; %d prunable weights" % ("ok" if good else "not ok", what, method, say, n))
sys.exit(0 if good else 1)
PY
}

# ppl MODEL: best-eval's perplexity on the stories260K validation text, on CD
ppl() {
    # shellcheck disable=SC2046
    "$BIN/best-eval" --model "$1" --data "$V" --seq 256 --max-tokens 16384 --json --quiet $(dev "$CD") 2>"$W/eval.err" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["ppl"])' 2>/dev/null
}

# pair MODEL METHOD S WHAT EVAL CALIB...: the reference side once, then the side under
# test at each of PRECISIONS (magnitude: once, no --precision), each compared with the
# reference; EVAL=1: the two models' perplexities too (stories260K)
pair() {
    model=$1 method=$2 s=$3 what=$4 eval=$5
    shift 5
    tag=$(basename "$model")-$method-$s
    if ! prune "$tag-c" "$model" "$method" "$s" "$CD" "$@"; then
        notok "$what, $method on $(name "$CD"): best-mask failed: $(tail -n 1 "$W/$tag-c.err")"
        return 1
    fi
    [ "$eval" = 1 ] && pc=$(ppl "$W/$tag-c")
    precs=$PRECISIONS
    [ "$method" = magnitude ] || [ -z "$precs" ] && precs=default
    for p in $precs; do
        popt="--precision $p" side="$(name "$GD") $p"
        [ "$p" = default ] && popt="" side=$(name "$GD")
        # shellcheck disable=SC2086
        if ! prune "$tag-g$p" "$model" "$method" "$s" "$GD" "$@" $popt $GD_ARGS; then
            notok "$what, $method on $side: best-mask failed: $(tail -n 1 "$W/$tag-g$p.err")"
            continue
        fi
        if compare "$method" "$tag-g$p" "$tag-c" "$what, $side vs $(name "$CD")" >"$W/line"; then
            pass=$((pass + 1))
        else
            fail=$((fail + 1))
        fi
        cat "$W/line"
        [ "$eval" = 1 ] || continue
        pg=$(ppl "$W/$tag-g$p")
        if python3 -c "import sys; a, b = map(float, sys.argv[1:]); sys.exit(abs(a - b) > 0.01 * b)" "$pg" "$pc" \
            2>/dev/null; then
            ok "$what, $method: perplexity $side $pg, $(name "$CD") $pc (within 1%)"
        elif [ -n "$pg" ] && [ -n "$pc" ]; then
            notok "$what, $method: perplexity $side $pg, $(name "$CD") $pc (more than 1% apart)"
        else
            notok "$what, $method on $side: best-eval failed: $(tail -n 1 "$W/eval.err")"
        fi
    done
}

QS=tests/fixtures/eval/qwen3_tokens.bin
if [ "${1:-}" = smoke ]; then
    # the first device runs: each method on the Qwen3 fixture (4 windows of 16 tokens),
    # wanda and sparsegpt at each of PRECISIONS, under CSAN (compute-sanitizer's path, when
    # given) with memcheck; each must exit 0 with no memcheck error, and its report must
    # carry the phases' seconds and, on a device, device_bytes (what oneshot_gpu.sh reads)
    for run in magnitude:default wanda sparsegpt; do
        method=${run%%:*} precs=${run#*:}
        [ "$precs" = "$run" ] && precs=${PRECISIONS:-default}
        for p in $precs; do
            c="" popt="" side=$(name "$GD") san=""
            [ "$method" = magnitude ] || c="--calib $QS --nsamples 4 --seq 16"
            [ "$p" = default ] || popt="--precision $p" side="$(name "$GD") $p"
            [ -n "${CSAN:-}" ] && [ "$method" != magnitude ] && san="timeout 120 $CSAN --tool memcheck --error-exitcode 97"
            # shellcheck disable=SC2046,SC2086
            $san "$BIN/best-mask" --model tests/fixtures/model/qwen3 --sparsity 0.5 --method $method $c $(dev "$GD") \
                $popt --out "$W/smoke.mask" --report "$W/smoke.json" >"$W/smoke.out" 2>&1
            rc=$?
            if [ "$rc" != 0 ]; then
                notok "smoke: best-mask --method $method on $side${san:+ under memcheck}: exit $rc: $(grep -m 1 -E 'error|ERROR' "$W/smoke.out" || tail -n 1 "$W/smoke.out")"
                continue
            fi
            if say=$(python3 - "$W/smoke.json" "$method" "$GD" <<'PY'
import json, sys
r, method, gd = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
s, d = r.get("seconds"), r.get("device_bytes")
good = (method == "magnitude" or (s is not None and set(s) >= {"forward", "statistics", "factor", "update", "total"})) and \
       (method == "magnitude" or gd != "cuda" or d is not None)
d = d and "%.3f GiB allocated, %.3f in use" % (d["allocated"] / 2**30, d["in_use"] / 2**30)
print("sparsity %.4f, seconds %s, device_bytes %s" % (r["total"]["sparsity"], s and "%.3f" % s["total"], d))
sys.exit(0 if good else 1)
PY
            ); then
                ok "smoke: best-mask --method $method on the qwen3 fixture, $side${san:+, memcheck: $(grep -m 1 'ERROR SUMMARY' "$W/smoke.out" | sed 's/^=* *//')}: $say"
            else
                notok "smoke: best-mask --method $method on $side: its report lacks the seconds by phase or device_bytes: $say"
            fi
        done
    done
    echo "$pass passed, $fail failed"
    [ "$fail" = 0 ]
    exit
fi
for m in llama qwen3; do
    for method in magnitude wanda sparsegpt; do
        c=""
        [ "$method" = magnitude ] || c="--calib $QS --nsamples 16 --seq 32"
        # shellcheck disable=SC2086
        pair "tests/fixtures/model/$m" "$method" 0.5 "$m fixture at 0.5" 0 $c
    done
done

S=$SHARED/models/stories260K V=$SHARED/data/stories260K/valid.jsonl
if [ -d "$S" ] && [ -f "$SHARED/data/stories260K/train.jsonl.zst" ]; then
    if "$BIN/best-tokenize" --tokenizer "$S" --out "$W/calib.bin" "$SHARED/data/stories260K/train.jsonl.zst" 2>"$W/tok.err"; then
        for s in 0.5 0.7; do
            for method in wanda sparsegpt; do
                pair "$S" "$method" "$s" "stories260K at $s" 1 --calib "$W/calib.bin" --nsamples 16 --seq 256
            done
        done
    else
        notok "stories260K: best-tokenize of the calibration text failed: $(tail -n 1 "$W/tok.err")"
    fi
else
    echo "skip - stories260K: $S or its training text not found (sh tests/gpu/shared.sh)"
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
