#!/bin/sh
# zeroshot_table.sh: zero-shot accuracy (best-eval --tasks) of the models of a quality run
# (bench/quality.sh's output folder), one row per model, one column per task, as
# docs/results.md shows it.
#
#   [THREADS=N] sh bench/zeroshot_table.sh QUALITY_OUT [TASK_DIR] [LIMIT] [METHODS]
#   (defaults: ../shared/tasks, 1000 documents a task at most, and the methods
#    "mag-layer magplus-layer wanda wandaplus sparsegpt sparsegptplus best")
#
# Reads QUALITY_OUT/dense (the pretrained model) and QUALITY_OUT/sS/METHOD/model for each
# sparsity folder sS there. Each result also goes to QUALITY_OUT/zeroshot/NAME.json.
set -e
Q=$1
TASK_DIR=${2:-${SHARED:-../shared}/tasks}
LIMIT=${3:-1000}
METHODS=${4:-mag-layer magplus-layer wanda wandaplus sparsegpt sparsegptplus best}
BIN=${BIN:-$(pwd)/bin}
[ -d "$Q/dense" ] || { echo "zeroshot_table: $Q/dense: no such model folder (a bench/quality.sh output?)" >&2; exit 1; }
TASKS=$(for t in arc_easy arc_challenge boolq hellaswag openbookqa rte winogrande; do
    [ -f "$TASK_DIR/$t.jsonl" ] || [ -f "$TASK_DIR/$t.jsonl.gz" ] && printf '%s,' $t; done | sed 's/,$//')
mkdir -p "$Q/zeroshot"
run() { # NAME MODEL_DIR
    [ -s "$Q/zeroshot/$1.json" ] ||
        "$BIN/best-eval" --model "$2" --tasks "$TASKS" --task-dir "$TASK_DIR" --limit "$LIMIT" ${THREADS:+--threads $THREADS} --json --quiet \
            >"$Q/zeroshot/$1.json.tmp" && mv "$Q/zeroshot/$1.json.tmp" "$Q/zeroshot/$1.json"
    echo "$1 $Q/zeroshot/$1.json"
}
{
    run dense "$Q/dense"
    for s in $(ls -d "$Q"/s* | sed 's|.*/s||' | sort -n); do
        for m in $METHODS; do
            d="$Q/s$s/$m/model"
            [ -d "$d" ] || d="$Q/s$s/$m"
            [ -f "$d/config.json" ] && run "$m@$s" "$d"
        done
    done
} >"$Q/zeroshot/list.txt"
python3 - "$Q/zeroshot/list.txt" "$LIMIT" <<'EOF'
import json, sys
rows = [l.split() for l in open(sys.argv[1])]
res = [(name, json.load(open(path))) for name, path in rows]
tasks = list(res[0][1]["tasks"])
ns = {t: res[0][1]["tasks"][t]["n"] for t in tasks}
print("| model | sparsity | " + " | ".join(f"{t} ({ns[t]})" for t in tasks) + " | mean |")
print("|---|---:|" + "---:|" * (len(tasks) + 1))
for name, r in res:
    m, _, s = name.partition("@")
    cells = []
    for t in tasks:
        x = r["tasks"][t]
        v, e = (x["acc_norm"], x["acc_norm_stderr"]) if "acc_norm" in x else (x["acc"], x["acc_stderr"])
        cells.append(f"{100 * v:.1f} ± {100 * e:.1f}")
    print(f"| {m} | {s or 0} | " + " | ".join(cells) + f" | {100 * r['mean_acc_norm_or_acc']:.1f} |")
EOF
