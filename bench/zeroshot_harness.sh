#!/bin/sh
# zeroshot_harness.sh: best-eval --tasks against the real lm-evaluation-harness (lm_eval
# from PyPI) on the same model and task files: every document's loglikelihoods, the gold
# indices, acc / acc_norm and their standard errors; and the time each takes.
#
#   sh bench/zeroshot_harness.sh [MODEL] [TASK_DIR] [LIMIT]
#   (defaults: ../shared/models/stories260K, ../shared/tasks, 40 documents a task;
#   NUM_FEWSHOT=K: K-shot on both sides, the examples from TASK_DIR/NAME_train.jsonl, which
#   must then be there for every task)
#
# lm_eval and what it needs beyond torch + transformers go into a folder of their own
# (~/.cache/best/lmeval-0.4.13, PYTHONPATH) next to the venv of tests/hf_env.sh, which
# is used as it is (make deps makes it). Offline: each task is the harness's own task file
# (include:) with only its dataset swapped for the local file (dataset_path json). Not in
# make test: the install is ~400 MB and the harness takes minutes on 2 cores.
set -e
. tests/hf_env.sh
MODEL=${1:-${SHARED:-../shared}/models/stories260K}
TASK_DIR=$(cd "${2:-${SHARED:-../shared}/tasks}" && pwd)
LIMIT=${3:-40}
NUM_FEWSHOT=${NUM_FEWSHOT:-0}
BIN=${BIN:-$(pwd)/bin}
VER=0.4.13
PKGS=${BEST_LMEVAL:-$(dirname "$HF_VENV")/lmeval-$VER}
[ -x "$HF_PY" ] || { echo "zeroshot_harness: no venv at $HF_VENV (make deps)" >&2; exit 1; }
# the harness and the packages it imports that the venv lacks, pinned, without their own
# dependencies (which would bring a second torch)
DEPS="lm_eval==$VER absl_py==2.5.1 accelerate==1.15.0 aiohappyeyeballs==2.7.1 aiohttp==3.14.5 aiosignal==1.4.0
attrs==26.1.0 certifi==2026.10.19.post1 chardet==6.0.0.post1 charset_normalizer==3.5.3 cloudpickle==3.1.3
colorama==0.4.6 dataproperty==1.1.1 datasets==5.2.0 defusedxml==0.7.1 dill==0.4.1 evaluate==0.4.6 frozenlist==1.8.0
joblib==1.6.0 lxml==6.1.3 mbstrdecoder==1.1.5 more_itertools==11.2.1 multidict==7.2.1 multiprocess==0.70.19
narwhals==2.29.0 nltk==3.10.4 pandas==3.1.1 pathvalidate==3.3.1 portalocker==4.4.2 propcache==0.5.4 protobuf==7.36.2
psutil==7.2.2 pyarrow==26.0.1 pytablewriter==1.2.1 python_dateutil==2.9.0.post0 pytz==2026.6 requests==2.34.2
rouge_score==0.1.2 sacrebleu==2.6.0 scikit_learn==1.9.1 scipy==1.17.1 sentencepiece==0.2.3 six==1.17.0
sqlitedict==2.1.0 tabledata==1.3.5 tabulate==0.10.0 tcolorpy==0.1.7 threadpoolctl==3.8.0 typepy==1.3.5 urllib3==2.8.0
word2number==1.1 xxhash==4.1.0 yarl==1.25.1"
if [ ! -f "$PKGS/.complete" ]; then
    echo "zeroshot_harness: installing lm_eval $VER into $PKGS" >&2
    # shellcheck disable=SC2086
    "$HF_PY" -m pip install -q --target "$PKGS" --no-deps $DEPS >&2
    touch "$PKGS/.complete"
fi
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
TASKS="arc_easy arc_challenge openbookqa rte winogrande hellaswag"
[ -f "$TASK_DIR/boolq.jsonl" ] && TASKS="$TASKS boolq"
mkdir -p "$W/tasks"
for t in $TASKS; do
    case $t in
    arc_*) yaml=arc/$t.yaml split=test ;;
    openbookqa) yaml=openbookqa/openbookqa.yaml split=test ;;
    rte) yaml=glue/rte/default.yaml split=validation ;;
    boolq) yaml=super_glue/boolq/default.yaml split=validation ;;
    winogrande) yaml=winogrande/default.yaml split=validation ;;
    hellaswag) yaml=hellaswag/hellaswag.yaml split=validation ;;
    esac
    f=$(ls "$TASK_DIR/$t.jsonl" "$TASK_DIR/$t.jsonl.gz" 2>/dev/null | head -n 1)
    if [ $split = test ]; then other=validation_split; else other=test_split; fi
    train="training_split: null" files=""
    if [ "$NUM_FEWSHOT" -gt 0 ]; then
        train="training_split: train" files="    train: $TASK_DIR/${t}_train.jsonl"
    fi
    cat >"$W/tasks/local_$t.yaml" <<EOF
include: $PKGS/lm_eval/tasks/$yaml
task: local_$t
dataset_path: json
dataset_name: null
dataset_kwargs:
  data_files:
    $split: $f
$files
$train
${split}_split: $split
$other: null
fewshot_split: null
EOF
done
LIST=$(echo $TASKS | tr ' ' ',')
t0=$(date +%s.%N)
PYTHONPATH=$PKGS HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HOME=$W/hf \
    "$HF_PY" -m lm_eval --model hf --model_args "pretrained=$MODEL,dtype=float32" \
    --tasks "$(echo "$LIST" | sed 's/\([a-z_]*\)/local_\1/g')" --include_path "$W/tasks" --limit "$LIMIT" --num_fewshot "$NUM_FEWSHOT" --log_samples \
    --output_path "$W/out" --device cpu --batch_size 1 >"$W/harness.log" 2>&1 ||
    { tail -n 20 "$W/harness.log" >&2; exit 1; }
t1=$(date +%s.%N)
"$BIN/best-eval" --model "$MODEL" --tasks "$LIST" --task-dir "$TASK_DIR" --limit "$LIMIT" --num-fewshot "$NUM_FEWSHOT" \
    --log-samples "$W/ours.jsonl" \
    --json --quiet >"$W/ours.json"
t2=$(date +%s.%N)
"$HF_PY" - "$W" "$LIST" "$t0" "$t1" "$t2" "$(lscpu | sed -n 's/^Model name: *//p')" "$VER" <<'EOF'
import glob, json, sys
w, tasks, t0, t1, t2, cpu, ver = sys.argv[1], sys.argv[2].split(","), *map(float, sys.argv[3:6]), sys.argv[6], sys.argv[7]
ours = {(r["task"], r["doc"]): r for r in map(json.loads, open(f"{w}/ours.jsonl"))}
mine = json.load(open(f"{w}/ours.json"))["tasks"]
res = json.load(open(glob.glob(f"{w}/out/*/results_*.json")[0]))["results"]
bad, rows = 0, []
for t in tasks:
    (path,) = glob.glob(f"{w}/out/*/samples_local_{t}_*.jsonl")
    worst, n, same_pred = 0.0, 0, 0
    for r in map(json.loads, open(path)):
        lls = [float(x[0]) for x in r["filtered_resps"]]
        gold = {"1": 0, "2": 1}[r["doc"]["answer"]] if t == "winogrande" else int(r["target"])
        o = ours[(t, r["doc_id"])]
        if o["gold"] != gold or len(o["lls"]) != len(lls):
            bad += 1
            print(f"{t} doc {r['doc_id']}: gold {o['gold']} / {gold}, {len(o['lls'])} / {len(lls)} choices")
            continue
        if o["prompt_hash"] != r["prompt_hash"]:
            bad += 1
            print(f"{t} doc {r['doc_id']}: prompt_hash {o['prompt_hash']}, the harness's {r['prompt_hash']}")
        worst = max(worst, max(abs(a - b) for a, b in zip(o["lls"], lls)))
        n += 1
        same_pred += (o["acc"] == bool(r["acc"]))
    h = {k.split(",")[0]: v for k, v in res["local_" + t].items()}
    diffs = {k: abs(mine[t][k] - h[k]) for k in ("acc", "acc_stderr", "acc_norm", "acc_norm_stderr") if k in h}
    ok = worst <= 1e-4 and same_pred == n and all(d < 1e-12 for d in diffs.values())
    bad += not ok
    rows.append({"task": t, "docs": n, "max_ll_diff": worst, "acc": mine[t]["acc"], "harness_acc": h["acc"],
                 "acc_norm": mine[t].get("acc_norm"), "harness_acc_norm": h.get("acc_norm"), "same_correct": same_pred,
                 "metrics_equal": all(d < 1e-12 for d in diffs.values())})
    print(f"{'ok' if ok else 'DIFFERENT'}  {t:14s} {n} docs: loglikelihoods within {worst:.2g}; acc {mine[t]['acc']:.4f} "
          f"(harness {h['acc']:.4f})" + (f", acc_norm {mine[t]['acc_norm']:.4f} (harness {h['acc_norm']:.4f})"
                                          if "acc_norm" in h else "") + f"; right/wrong as the harness on {same_pred}/{n}")
print(f"time: harness {t1 - t0:.1f} s, best-eval {t2 - t1:.1f} s ({(t1 - t0) / (t2 - t1):.1f}x), on {cpu}")
print(json.dumps({"lm_eval": ver, "cpu": cpu, "harness_s": t1 - t0, "ours_s": t2 - t1, "tasks": rows}))
sys.exit(1 if bad else 0)
EOF
