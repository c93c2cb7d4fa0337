#!/bin/sh
# train_ranks.sh: best-train on N CPU ranks (mpirun) against one rank, the same machine,
# the same global batch, the same total threads (one rank x C threads against N ranks x
# C/N threads), in one script: tokens/s of each, their ratio, and what the ranks
# exchanged (the log's mask_update_bytes; the gradient and weight traffic per step from
# the parameter count). On one machine the ranks share its cores and memory bandwidth, so
# this measures the overhead of the collectives and of ZeRO-1's slices, not a speed-up.
#
#   sh bench/train_ranks.sh [OUT]     (env: CONFIG STEPS BATCH SEQ RANKS THREADS)
set -e
OUT=${1:-out/train_ranks}
CONFIG=${CONFIG:-bench/configs/llama-30m.json} STEPS=${STEPS:-12} BATCH=${BATCH:-4} SEQ=${SEQ:-256}
RANKS=${RANKS:-2} THREADS=${THREADS:-$(nproc)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
mkdir -p "$OUT"
V=$(python3 -c "import json; print(json.load(open('$CONFIG'))['vocab_size'])")
python3 -c "
import sys; sys.path.insert(0, 'tests'); from shardio import write_shard
import numpy as np
write_shard('$OUT/rand.bin', np.random.default_rng(0).integers(0, $V, 400000), $V)"
ARGS="--init random --config $CONFIG --data $OUT/rand.bin --steps $STEPS --batch $BATCH --micro-batch $((BATCH / RANKS))
      --seq $SEQ --sparsity 0.9 --prune-end 0.5 --prune-updates 3 --quiet"
per=$((THREADS / RANKS)); [ $per -ge 1 ] || per=1
rm -rf "$OUT/one" "$OUT/many"
bin/best-train $ARGS --threads "$THREADS" --out "$OUT/one"
mpirun -np "$RANKS" --bind-to none bin/best-train $ARGS --threads "$per" --out "$OUT/many"
python3 - "$OUT" "$RANKS" "$THREADS" "$per" <<'PY'
import json, statistics, struct, sys
out, N, T, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def rate(run):
    log = [json.loads(l) for l in open(f"{out}/{run}/log.jsonl")]
    steps = [l["tokens_per_s"] for l in log if "mask_update_s" not in l and l["step"] > 1]
    return statistics.median(steps), log
one, _ = rate("one")
many, log = rate("many")
mb = [l["mask_update_bytes"] for l in log if "mask_update_bytes" in l]
with open(f"{out}/many/state/manifest.json") as f:
    P = json.load(f)["n_params"]
grad = (N - 1) / N * 4 * P  # each rank sends the others' slices of its gradients
wts = 4 * P / N             # and its slice of the weights to each other rank (payload once)
print(f"{P / 1e6:.1f}M parameters; 1 rank x {T} threads: {one:.0f} tokens/s; {N} ranks x {per} threads: "
      f"{many:.0f} tokens/s: {many / one:.2f}x")
print(f"per step and rank: gradients {grad / 1e6:.1f} MB sent (reduce-scatter), weights {wts / 1e6:.1f} MB "
      f"(all-gather); per mask update: {statistics.mean(mb) / 1e6:.2f} MB of counts ({len(mb)} updates)")
PY
