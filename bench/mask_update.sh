#!/bin/sh
# mask_update.sh: the time of one mask update (scores for every prunable weight, the
# global select, applying the mask) as a fraction of the training time between two
# updates, measured in the same best-train run (its log's mask_update_s and
# tokens_per_s).
#
# The paper's schedule updates every 40 steps (T 4000, 50 updates over the first
# half) at 64 x 2048 tokens a step; the fraction is printed for 40 steps at the batch
# this script runs and, scaled by the measured tokens/s, at the paper's batch.
#
#   sh bench/mask_update.sh [OUT]     (env: STEPS BATCH SEQ THREADS)
set -e
OUT=${1:-out/mask_update}
STEPS=${STEPS:-8} BATCH=${BATCH:-4} SEQ=${SEQ:-256} THREADS=${THREADS:-0}
mkdir -p "$OUT"
python3 -c "
import sys; sys.path.insert(0, 'tests'); from shardio import write_shard
import numpy as np
write_shard('$OUT/rand.bin', np.random.default_rng(0).integers(0, 32000, 400000), 32000)"
run() {  # name, model options
    name=$1; shift
    rm -rf "$OUT/$name"
    bin/best-train "$@" --data "$OUT/rand.bin" --out "$OUT/$name" --steps "$STEPS" --batch "$BATCH" --seq "$SEQ" \
        --sparsity 0.9 --prune-updates $((STEPS / 2)) --prune-end 1 --threads "$THREADS" --quiet
    python3 - "$OUT/$name/log.jsonl" "$name" <<'PY'
import json, sys
log = [json.loads(l) for l in open(sys.argv[1])]
ups = [l["mask_update_s"] for l in log if "mask_update_s" in l]
steps = [l for l in log if "mask_update_s" not in l and l["step"] > 1]
tps = sum(l["tokens_per_s"] for l in steps) / len(steps)
tokens = None
with open(sys.argv[1].replace("log.jsonl", "state/state.safetensors"), "rb") as f:
    import struct
    n = struct.unpack("<Q", f.read(8))[0]; meta = json.loads(f.read(n))["__metadata__"]
    tokens = int(meta["batch"]) * int(meta["seq"])
upd = sum(ups) / len(ups)
step = tokens / tps
paper = 64 * 2048 / tps
print(f"{sys.argv[2]}: {len(ups)} updates, {upd * 1e3:.1f} ms each; a step of {tokens} tokens {step * 1e3:.0f} ms "
      f"({tps:.0f} tokens/s); fraction of 40 steps: {upd / (40 * step) * 100:.2f}% at this batch, "
      f"{upd / (40 * paper) * 100:.3f}% at 64 x 2048 tokens")
PY
}
run llama-30m --init random --config bench/configs/llama-30m.json
