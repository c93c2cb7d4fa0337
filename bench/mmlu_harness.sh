#!/bin/sh
# mmlu_harness.sh: best-eval --tasks mmlu against the real lm-evaluation-harness (lm_eval
# 0.4.13 from PyPI, installed as bench/zeroshot_harness.sh does) on the same model and
# records: every document's four loglikelihoods, each subject's acc and stderr, and the
# size-weighted group over the subjects (acc and pooled stderr, the harness's
# aggregate_metric_list with weight_by_size); and the time each takes.
#
#   sh bench/mmlu_harness.sh [MODEL] [TASK_DIR] [LIMIT]
#   (defaults: ../shared/models/stories260K, ../shared/tasks, 20 documents a subject;
#    SUBJECTS="abstract_algebra anatomy ..." picks the subjects, six of the four groups
#    by default)
#
# Offline: each subject is the harness's own mmlu_SUBJECT.yaml (include:) with its dataset
# swapped for a local file of that subject's records (dataset_path json), and one local
# group over them. 0-shot: ../shared has no dev split. Not in make test (the install is
# ~400 MB). Prints "ok"/"DIFFERENT" per subject and for the group; exit 1 on a difference.
set -e
. tests/hf_env.sh
MODEL=${1:-${SHARED:-../shared}/models/stories260K}
TASK_DIR=$(cd "${2:-${SHARED:-../shared}/tasks}" && pwd)
LIMIT=${3:-20}
BIN=${BIN:-$(pwd)/bin}
SUBJECTS=${SUBJECTS:-"abstract_algebra anatomy business_ethics econometrics formal_logic world_religions"}
VER=0.4.13
PKGS=${BEST_LMEVAL:-$(dirname "$HF_VENV")/lmeval-$VER}
[ -f "$PKGS/.complete" ] || { echo "mmlu_harness: no lm_eval at $PKGS (run bench/zeroshot_harness.sh once: it installs it)" >&2; exit 1; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/tasks" "$W/data" "$W/ours"
python3 - "$TASK_DIR" "$W" $SUBJECTS <<'EOF'
import gzip, json, os, sys
src, w, subjects = sys.argv[1], sys.argv[2], sys.argv[3:]
path = os.path.join(src, "mmlu.jsonl.gz")
opener = gzip.open if os.path.exists(path) else open
recs = [json.loads(l) for l in opener(path if os.path.exists(path) else os.path.join(src, "mmlu.jsonl"), "rt")]
with open(os.path.join(w, "ours", "mmlu.jsonl"), "w") as ours:
    for s in subjects:
        with open(os.path.join(w, "data", s + ".jsonl"), "w") as f:
            for r in recs:
                if r["subject"] == s:
                    f.write(json.dumps(r) + "\n")
                    ours.write(json.dumps(r) + "\n")
EOF
for s in $SUBJECTS; do
    cat >"$W/tasks/local_mmlu_$s.yaml" <<EOF
include: $PKGS/lm_eval/tasks/mmlu/default/mmlu_$s.yaml
task: local_mmlu_$s
tag: null
dataset_path: json
dataset_name: null
dataset_kwargs:
  data_files:
    test: $W/data/$s.jsonl
fewshot_split: null
EOF
done
{
    echo "group: local_mmlu"
    echo "task:"
    for s in $SUBJECTS; do echo "  - local_mmlu_$s"; done
    echo "aggregate_metric_list:"
    echo "  - metric: acc"
    echo "    weight_by_size: True"
} >"$W/tasks/local_mmlu.yaml"
t0=$(date +%s.%N)
PYTHONPATH=$PKGS HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HOME=$W/hf \
    "$HF_PY" -m lm_eval --model hf --model_args "pretrained=$MODEL,dtype=float32" --tasks local_mmlu \
    --include_path "$W/tasks" --limit "$LIMIT" --log_samples --output_path "$W/out" --device cpu --batch_size 1 \
    >"$W/harness.log" 2>&1 || { tail -n 20 "$W/harness.log" >&2; exit 1; }
t1=$(date +%s.%N)
"$BIN/best-eval" --model "$MODEL" --tasks mmlu --task-dir "$W/ours" --limit "$LIMIT" --log-samples "$W/ours.jsonl" \
    --json --quiet >"$W/ours.json" 2>"$W/ours.err"
t2=$(date +%s.%N)
"$HF_PY" - "$W" "$t0" "$t1" "$t2" "$(lscpu | sed -n 's/^Model name: *//p')" "$VER" $SUBJECTS <<'EOF'
import glob, json, sys
w, t0, t1, t2, cpu, ver, subjects = sys.argv[1], *map(float, sys.argv[2:5]), sys.argv[5], sys.argv[6], sys.argv[7:]
ours = {(r["task"], r["doc"]): r for r in map(json.loads, open(f"{w}/ours.jsonl"))}
mine = json.load(open(f"{w}/ours.json"))["tasks"]
res = json.load(open(glob.glob(f"{w}/out/*/results_*.json")[0]))["results"]
bad, rows = 0, []
for s in subjects:
    (path,) = glob.glob(f"{w}/out/*/samples_local_mmlu_{s}_*.jsonl")
    worst, n, same = 0.0, 0, 0
    for r in map(json.loads, open(path)):
        lls = [float(x[0]) for x in r["filtered_resps"]]
        o = ours[("mmlu_" + s, r["doc_id"])]
        if o["gold"] != int(r["target"]) or len(o["lls"]) != 4:
            bad += 1
            print(f"{s} doc {r['doc_id']}: gold {o['gold']} / {r['target']}")
            continue
        if o["prompt_hash"] != r["prompt_hash"]:
            bad += 1
            print(f"{s} doc {r['doc_id']}: prompt_hash {o['prompt_hash']}, the harness's {r['prompt_hash']}")
        worst = max(worst, max(abs(a - b) for a, b in zip(o["lls"], lls)))
        n += 1
        same += o["acc"] == bool(r["acc"])
    h = res["local_mmlu_" + s]
    m = mine["mmlu_" + s]
    ok = worst <= 1e-4 and same == n and abs(m["acc"] - h["acc,none"]) < 1e-12 and abs(m["acc_stderr"] - h["acc_stderr,none"]) < 1e-12
    bad += not ok
    rows.append({"subject": s, "docs": n, "max_ll_diff": worst, "acc": m["acc"], "harness_acc": h["acc,none"]})
    print(f"{'ok' if ok else 'DIFFERENT'}  mmlu_{s:20s} {n} docs: loglikelihoods within {worst:.2g}; acc {m['acc']:.4f} "
          f"(harness {h['acc,none']:.4f}), stderr {m['acc_stderr']:.6f} (harness {h['acc_stderr,none']:.6f}); "
          f"right/wrong as the harness on {same}/{n}")
g, m = res["local_mmlu"], mine["mmlu"]
ok = abs(m["acc"] - g["acc,none"]) < 1e-12 and abs(m["acc_stderr"] - g["acc_stderr,none"]) < 1e-12
bad += not ok
print(f"{'ok' if ok else 'DIFFERENT'}  the group over {len(subjects)} subjects: acc {m['acc']:.6f} (harness "
      f"{g['acc,none']:.6f}), stderr {m['acc_stderr']:.6f} (harness {g['acc_stderr,none']:.6f})")
print(f"time: harness {t1 - t0:.1f} s, best-eval {t2 - t1:.1f} s ({(t1 - t0) / (t2 - t1):.1f}x), on {cpu}")
print(json.dumps({"lm_eval": ver, "cpu": cpu, "harness_s": t1 - t0, "ours_s": t2 - t1, "subjects": rows}))
sys.exit(1 if bad else 0)
EOF
