#!/bin/sh
# tests/gpu/eval_check.sh: best-eval --device cuda against --device cpu, through the tool,
# on a lent GPU (tests/gpu/run.sh runs it; full build). Perplexity with the same windows
# on both devices within 1e-3 relative (the device's products take bf16 operands): the
# Qwen3 fixture's shard at --seq 64 in batches of 1 and of 3 (a last, padded batch), and
# stories260K on its validation text when ../shared has it; and stories260K pruned to 70%
# and packed (bf16 values): the pack on the device against its unpacked folder there, 200
# greedy tokens identical and the perplexity within 1e-3; zero-shot (--tasks, the first 100
# documents of ../shared/tasks' six tasks): every loglikelihood within 2% (at least 0.05)
# of the CPU's and each task's acc within 0.05. Prints "ok - " / "not ok - ".
#
# GD=cpu runs the "GPU" side on the CPU too: a check of this script on any machine
# (tests/t_gpu_script.sh), where the two sides must agree exactly.
set -u
GD=${GD:-cuda}
BIN=${BIN:-bin}
SHARED=${SHARED:-../shared}
FAILED=0

# same NAME ARGS...: perplexity with ARGS on GD and on the CPU, within 1e-3
same() {
    name=$1
    shift
    a=$("$BIN/best-eval" "$@" --json --quiet --device "$GD" 2>&1)
    b=$("$BIN/best-eval" "$@" --json --quiet --device cpu 2>&1)
    python3 - "$name" "$a" "$b" "$GD" <<'PY' || FAILED=1
import json, sys
name, gd = sys.argv[1], sys.argv[4]
try:
    a, b = json.loads(sys.argv[2]), json.loads(sys.argv[3])
except ValueError:
    print("not ok - %s: best-eval failed: %s | %s" % (name, sys.argv[2][-200:], sys.argv[3][-200:]))
    sys.exit(1)
rel = abs(a["ppl"] - b["ppl"]) / b["ppl"]
good = rel <= 1e-3 and a["tokens"] == b["tokens"] and a["windows"] == b["windows"] and a["device"] == gd
print("%s - %s: perplexity %s %.6f, cpu %.6f (rel %.1e, at most 1e-3), %d tokens in %d windows"
      % ("ok" if good else "not ok", name, gd, a["ppl"], b["ppl"], rel, a["tokens"], a["windows"]))
sys.exit(0 if good else 1)
PY
}

Q="--model tests/fixtures/model/qwen3 --data tests/fixtures/eval/qwen3_tokens.bin --seq 64"
# shellcheck disable=SC2086
same "qwen3 fixture, batch 1" $Q
# shellcheck disable=SC2086
same "qwen3 fixture, batch 3 (the last batch padded)" $Q --batch 3
if [ -d "$SHARED/models/stories260K" ]; then
    same "stories260K validation text, seq 256, batch 4" --model "$SHARED/models/stories260K" \
        --data "$SHARED/data/stories260K/valid.jsonl" --seq 256 --max-tokens 16384 --batch 4
    # greedy generation on the device (a decode cache of keys and values) against the CPU's:
    # bf16 products may flip a near-tie and the texts part from there, so this asks the
    # first 20 tokens to agree and prints how many do
    S="$SHARED/models/stories260K"
    a=$("$BIN/best-eval" --model "$S" --generate "Once upon a time" --max-new-tokens 200 --json --quiet --device "$GD" 2>&1)
    b=$("$BIN/best-eval" --model "$S" --generate "Once upon a time" --max-new-tokens 200 --json --quiet --device cpu 2>&1)
    python3 - "$a" "$b" "$GD" <<'PY' || FAILED=1
import json, sys
try:
    a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
except ValueError:
    print("not ok - stories260K greedy generation: best-eval failed: %s | %s" % (sys.argv[1][-200:], sys.argv[2][-200:]))
    sys.exit(1)
n = 0
while n < min(len(a["ids"]), len(b["ids"])) and a["ids"][n] == b["ids"][n]:
    n += 1
good = n >= min(20, len(b["ids"])) and a["device"] == sys.argv[3]
print("%s - stories260K greedy generation on %s: the first %d of %d tokens are the CPU's (at least 20); %.0f tokens/s "
      "decoding, cpu %.0f" % ("ok" if good else "not ok", sys.argv[3], n, len(b["ids"]), a["tokens_per_s"], b["tokens_per_s"]))
sys.exit(0 if good else 1)
PY
    # a pack on the device against its folder on the device: stories260K pruned to 70%
    # (magnitude), packed with bf16 values; 200 greedy tokens, every one the same
    T=${TMPDIR:-/tmp}/eval_check.$$
    if "$BIN/best-mask" --model "$S" --sparsity 0.7 --saliency magnitude --apply --out-model "$T/s70" --quiet &&
        "$BIN/best-pack" --model "$T/s70" --out "$T/s70.pack" --quant bf16 --quiet &&
        "$BIN/best-pack" --unpack "$T/s70.pack" --out "$T/s70.bf16" --quiet; then
        a=$("$BIN/best-eval" --model "$T/s70.pack" --generate "Once upon a time" --max-new-tokens 200 --json --quiet --device "$GD" 2>&1)
        b=$("$BIN/best-eval" --model "$T/s70.bf16" --generate "Once upon a time" --max-new-tokens 200 --json --quiet --device "$GD" 2>&1)
        python3 - "$a" "$b" "$GD" <<'PY' || FAILED=1
import json, sys
try:
    a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
except ValueError:
    print("not ok - stories260K 70%% pack generation: best-eval failed: %s | %s" % (sys.argv[1][-200:], sys.argv[2][-200:]))
    sys.exit(1)
good = a["ids"] == b["ids"] and len(a["ids"]) > 0 and a["device"] == sys.argv[3]
print("%s - stories260K at 70%%, greedy on %s: the pack's %d tokens are its folder's (%d); %.0f tokens/s from the pack, "
      "%.0f from the folder" % ("ok" if good else "not ok", sys.argv[3], len(a["ids"]), len(b["ids"]), a["tokens_per_s"],
                                b["tokens_per_s"]))
sys.exit(0 if good else 1)
PY
        # perplexity of the pack on the device against its folder's there
        P="--data $SHARED/data/stories260K/valid.jsonl --seq 256 --max-tokens 16384 --batch 4 --json --quiet --device $GD"
        # shellcheck disable=SC2086
        a=$("$BIN/best-eval" --model "$T/s70.pack" $P 2>&1)
        # shellcheck disable=SC2086
        b=$("$BIN/best-eval" --model "$T/s70.bf16" $P 2>&1)
        python3 - "$a" "$b" <<'PY' || FAILED=1
import json, sys
try:
    a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
except ValueError:
    print("not ok - stories260K 70%% pack perplexity: best-eval failed: %s | %s" % (sys.argv[1][-200:], sys.argv[2][-200:]))
    sys.exit(1)
rel = abs(a["ppl"] - b["ppl"]) / b["ppl"]
good = rel <= 1e-3
print("%s - stories260K at 70%%: the pack's perplexity %.6f, its folder's %.6f on the same device (rel %.1e, at most 1e-3)"
      % ("ok" if good else "not ok", a["ppl"], b["ppl"], rel))
sys.exit(0 if good else 1)
PY
    else
        echo "not ok - stories260K: best-mask / best-pack to 70% failed"
        FAILED=1
    fi
    rm -rf "$T"
else
    echo "skip - stories260K: $SHARED/models/stories260K not found"
fi
if [ -d "$SHARED/tasks" ] && [ -d "$SHARED/models/stories260K" ]; then
    Z=$(mktemp -d)
    ZT=arc_easy,arc_challenge,hellaswag,openbookqa,rte,winogrande
    "$BIN/best-eval" --model "$SHARED/models/stories260K" --tasks $ZT --task-dir "$SHARED/tasks" --limit 100 --json \
        --quiet --device "$GD" --log-samples "$Z/g.jsonl" >"$Z/g.json" 2>"$Z/g.err"
    "$BIN/best-eval" --model "$SHARED/models/stories260K" --tasks $ZT --task-dir "$SHARED/tasks" --limit 100 --json \
        --quiet --device cpu --log-samples "$Z/c.jsonl" >"$Z/c.json" 2>"$Z/c.err"
    python3 - "$Z" "$GD" <<'PY' || FAILED=1
import json, os, sys
z, gd = sys.argv[1], sys.argv[2]
try:
    g, c = json.load(open(os.path.join(z, "g.json"))), json.load(open(os.path.join(z, "c.json")))
    gs = {(x["task"], x["doc"]): x["lls"] for x in map(json.loads, open(os.path.join(z, "g.jsonl")))}
    cs = {(x["task"], x["doc"]): x["lls"] for x in map(json.loads, open(os.path.join(z, "c.jsonl")))}
except (ValueError, OSError) as e:
    print("not ok - zero-shot on %s: best-eval failed: %s %s" % (gd, e, open(os.path.join(z, "g.err")).read()[-300:]))
    sys.exit(1)
worst = max(abs(a - b) / max(0.05, 0.02 * abs(b)) for k in cs for a, b in zip(gs[k], cs[k]))
dacc = max(abs(g["tasks"][t]["acc"] - c["tasks"][t]["acc"]) for t in c["tasks"])
good = g["device"] == gd and set(gs) == set(cs) and worst <= 1 and dacc <= 0.05
print("%s - zero-shot on %s: %d documents, every loglikelihood within 2%% (0.05) of the cpu's (worst at %.2f of that), "
      "acc within %.3f (at most 0.05)" % ("ok" if good else "not ok", gd, len(cs), worst, dacc))
sys.exit(0 if good else 1)
PY
    rm -rf "$Z"
else
    echo "skip - zero-shot: $SHARED/tasks or stories260K not found"
fi
exit $FAILED
