#!/bin/sh
# gsm8k_harness.sh: best-eval --tasks gsm8k against the real lm-evaluation-harness (lm_eval
# 0.4.13, installed as bench/zeroshot_harness.sh does) on the same model and records: every
# document's prompt (the examples its sampler drew), generated text, both filters' answers
# and matches, and exact_match per filter; and the time each takes.
#
#   sh bench/gsm8k_harness.sh MODEL TASK_DIR [K] [LIMIT]
#   (TASK_DIR holds gsm8k.jsonl and gsm8k_train.jsonl in openai/gsm8k's layout; K 5, the
#    harness's default, LIMIT 8)
#
# Offline: the harness's own gsm8k.yaml (include:) with its dataset swapped for the local
# files (dataset_path json). Greedy on the CPU in fp32 on both sides, batch 1. Prints
# "ok"/"DIFFERENT"; exit 1 on a difference.
set -e
. tests/hf_env.sh
MODEL=$1
TASK_DIR=$(cd "$2" && pwd)
K=${3:-5}
LIMIT=${4:-8}
BIN=${BIN:-$(pwd)/bin}
VER=0.4.13
PKGS=${BEST_LMEVAL:-$(dirname "$HF_VENV")/lmeval-$VER}
[ -f "$PKGS/.complete" ] || { echo "gsm8k_harness: no lm_eval at $PKGS (run bench/zeroshot_harness.sh once: it installs it)" >&2; exit 1; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/tasks"
cat >"$W/tasks/local_gsm8k.yaml" <<EOF
include: $PKGS/lm_eval/tasks/gsm8k/gsm8k.yaml
task: local_gsm8k
tag: null
dataset_path: json
dataset_name: null
dataset_kwargs:
  data_files:
    test: $TASK_DIR/gsm8k.jsonl
    train: $TASK_DIR/gsm8k_train.jsonl
EOF
t0=$(date +%s.%N)
PYTHONPATH=$PKGS HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HOME=$W/hf \
    "$HF_PY" -m lm_eval --model hf --model_args "pretrained=$MODEL,dtype=float32" --tasks local_gsm8k \
    --include_path "$W/tasks" --num_fewshot "$K" --limit "$LIMIT" --log_samples --output_path "$W/out" --device cpu \
    --batch_size 1 >"$W/harness.log" 2>&1 || { tail -n 20 "$W/harness.log" >&2; exit 1; }
t1=$(date +%s.%N)
"$BIN/best-eval" --model "$MODEL" --tasks gsm8k --task-dir "$TASK_DIR" --num-fewshot "$K" --limit "$LIMIT" \
    --log-samples "$W/ours.jsonl" --json --quiet >"$W/ours.json"
t2=$(date +%s.%N)
"$HF_PY" - "$W" "$t0" "$t1" "$t2" "$(lscpu | sed -n 's/^Model name: *//p')" "$VER" <<'EOF'
import glob, json, sys
w, t0, t1, t2, cpu, ver = sys.argv[1], *map(float, sys.argv[2:5]), sys.argv[5], sys.argv[6]
ours = {r["doc"]: r for r in map(json.loads, open(f"{w}/ours.jsonl"))}
mine = json.load(open(f"{w}/ours.json"))["tasks"]["gsm8k"]
res = json.load(open(glob.glob(f"{w}/out/*/results_*.json")[0]))["results"]["local_gsm8k"]
bad, n, same_text = 0, 0, 0
for path in glob.glob(f"{w}/out/*/samples_local_gsm8k_*.jsonl"):
    for r in map(json.loads, open(path)):
        o = ours[r["doc_id"]]
        f = r["filter"]
        if f == "strict-match":
            n += 1
            if r["arguments"]["gen_args_0"]["arg_0"] != o["prompt"] or r["prompt_hash"] != o["prompt_hash"]:
                bad += 1
                print(f"doc {r['doc_id']}: the prompts differ")
            if r["resps"][0][0] != o["generated"]:
                bad += 1
                print(f"doc {r['doc_id']}: generated {o['generated'][:80]!r}, the harness {r['resps'][0][0][:80]!r}")
            else:
                same_text += 1
        if r["filtered_resps"][0] != o["answers"][f] or bool(r["exact_match"]) != o["exact_match"][f]:
            bad += 1
            print(f"doc {r['doc_id']} {f}: ours {o['answers'][f]!r} {o['exact_match'][f]}, the harness "
                  f"{r['filtered_resps'][0]!r} {r['exact_match']}")
for f in ("strict-match", "flexible-extract"):
    a, b = mine[f"exact_match,{f}"], res[f"exact_match,{f}"]
    sa, sb = mine[f"exact_match_stderr,{f}"], res[f"exact_match_stderr,{f}"]
    ok = abs(a - b) < 1e-12 and (sa is None or abs(sa - sb) < 1e-12)
    bad += not ok
    print(f"{'ok' if ok else 'DIFFERENT'}  exact_match,{f}: {a:.4f} (harness {b:.4f}), stderr {sa} (harness {sb})")
print(f"{'ok' if bad == 0 else 'DIFFERENT'}  {n} documents: prompts, {same_text} generations identical, answers and matches")
print(f"time: harness {t1 - t0:.1f} s, best-eval {t2 - t1:.1f} s ({(t1 - t0) / (t2 - t1):.1f}x), on {cpu}")
sys.exit(1 if bad else 0)
EOF
