#!/bin/sh
# zeroshot_gpu.sh: zero-shot tasks on a GPU, best-eval against transformers scoring the
# same requests the way lm-evaluation-harness does, in one run (issue 16's "minutes on
# one GPU"; docs/benchmarks.md):
#
#   1. a LLaMA-2-7B-shaped model with random weights in bf16 (build/bench/bench_decode
#      --init bench/configs/llama2-7b.json; LAYERS=n keeps n of its 32 layers so that the
#      run fits one call of the device tool; decode_gpu.sh's folder, shared with it);
#   2. best-eval --device cuda --tasks TASKS --limit LIMIT --json --log-samples: each
#      task's seconds (tokenizing included; the model is uploaded once, before the first
#      task, and counted in the whole run's wall time, printed too), the rows it ran
#      (shared prefixes once) and the tokens of its requests' inputs;
#   3. bench/zeroshot_gpu.py: the same requests through transformers in bf16, one a row,
#      by length in padded batches of BATCH rows (HFLM's way): seconds (scoring alone), and
#      how its loglikelihoods agree with ours;
#   4. the table: per task our seconds and rows/s, the peer's seconds and tokens/s, the
#      ratio of the two times, and the agreement.
#
# The random model's loglikelihoods mean nothing; the times and the agreement do. All 32
# layers take about 32/LAYERS times the layers' share of the time (the head and the
# tokenizing do not grow).
#
# usage: sh bench/zeroshot_gpu.sh   (after `make`, on a machine with a GPU and torch +
#        transformers; env: OUT=out/bench-zeroshot-gpu, WORK=out/decode-gpu (models, kept
#        and reused), LAYERS=4, TASKS=the six of ../shared/tasks, LIMIT=1000 (0: all),
#        BATCH=64, TOK=LLaMA-2's tokenizer.model, TASK_DIR=../shared/tasks (or shared/,
#        tests/gpu/shared.sh's copy), PY=python3; CONFIG=bench/configs/llama2-7b.json and
#        DEVICE=cuda: CONFIG=bench/configs/llama-30m.json DEVICE=cpu LIMIT=20 is a smoke
#        test of the script on a CPU). Results on an H200: docs/benchmarks.md.
set -e
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
BD=${BD:-build/bench/bench_decode}
OUT=${OUT:-out/bench-zeroshot-gpu}
WORK=${WORK:-out/decode-gpu}
LAYERS=${LAYERS:-4}
TASKS=${TASKS:-arc_easy,arc_challenge,hellaswag,openbookqa,rte,winogrande}
LIMIT=${LIMIT:-1000}
BATCH=${BATCH:-64}
PY=${PY:-python3}
CONFIG=${CONFIG:-bench/configs/llama2-7b.json}
DEVICE=${DEVICE:-cuda}
SH=../shared
[ -d "$SH" ] || SH=shared
TOK=${TOK:-$SH/tokenizers/llama2/tokenizer.model}
TASK_DIR=${TASK_DIR:-$SH/tasks}
for f in "$BD" "$BIN/best-eval" "$BIN/best-tokenize" "$TOK" "$TASK_DIR"; do
    [ -e "$f" ] || { echo "zeroshot_gpu.sh: $f is missing (make; sh tests/gpu/shared.sh)" >&2; exit 1; }
done
mkdir -p "$OUT" "$WORK"
M=$WORK/l$LAYERS
[ "$CONFIG" = bench/configs/llama2-7b.json ] || M=$WORK/$(basename "$CONFIG" .json)
if [ ! -f "$M/dense/model.safetensors" ]; then
    mkdir -p "$M"
    sed "s/\"num_hidden_layers\": 32/\"num_hidden_layers\": $LAYERS/" "$CONFIG" >"$M/config.json"
    "$BD" --init "$M/config.json" --out "$M/dense"
fi

t0=$(date +%s.%N)
"$BIN/best-eval" --model "$M/dense" --tokenizer "$TOK" --device "$DEVICE" --tasks "$TASKS" --task-dir "$TASK_DIR" \
    --limit "$LIMIT" --json --log-samples "$OUT/samples.jsonl" --quiet >"$OUT/ours.json"
wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
# LLaMA-2's tokenizer puts BOS (id 1) first, as best-eval's JSON says it did
DEVICE=$DEVICE "$PY" bench/zeroshot_gpu.py "$M/dense" "$BIN" "$TOK" 1 "$TASK_DIR" "$TASKS" "$LIMIT" "$BATCH" \
    "$OUT/samples.jsonl" >"$OUT/peer.jsonl"

"$PY" - "$OUT/ours.json" "$OUT/peer.jsonl" "$LAYERS" "$CONFIG" "$DEVICE" "$wall" <<'EOF'
import json, sys
ours = json.load(open(sys.argv[1]))
peer = {}
for line in open(sys.argv[2]):
    if line.startswith("{"):
        p = json.loads(line)
        peer[p["task"]] = p
print(f"{sys.argv[4]} (LLaMA-2-7B: {sys.argv[3]} of its 32 layers), random bf16 weights, on {sys.argv[5]}; "
      f"tokenizer: {ours['tokenizer']}")
print("| task | requests | our rows | our s | rows/s | peer tokens (padded) | peer s | tokens/s | peer s / our s "
      "| lls within (rel) | same argmax |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
tot_o = tot_p = 0.0
for name, t in ours["tasks"].items():
    p = peer[name]
    tot_o += t["seconds"]
    tot_p += p["seconds"]
    print(f"| {name} | {t['requests']} | {t['rows']} | {t['seconds']:.2f} | {t['rows'] / t['seconds']:,.0f} "
          f"| {p['tokens']} ({p['padded']}) | {p['seconds']:.2f} | {p['tokens'] / p['seconds']:,.0f} "
          f"| {p['seconds'] / t['seconds']:.2f} | {p['ll_worst_rel']:.1e} | {p['argmax_same']:.3f} |")
print(f"| all | | | {tot_o:.2f} | | | {tot_p:.2f} | | {tot_p / tot_o:.2f} | | |")
print(f"best-eval's whole run: {float(sys.argv[6]):.2f} s (the model read, uploaded once, every task; "
      f"the peer's load and warm-up not counted)")
EOF
