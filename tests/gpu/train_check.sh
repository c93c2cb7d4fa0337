#!/bin/sh
# tests/gpu/train_check.sh: best-train --device cuda against --device cpu through the tool
# itself, on a lent GPU (tests/gpu/run.sh runs it; it needs the full build: bin/best-train,
# bin/best-eval). Prints tests/lib.sh's "ok - " / "not ok - " lines.
#
# Data: a shard whose tokens follow a rule (next = 5 * this + 3 mod V, 10% noise), so the
# loss falls well below ln V within the run and the two curves say something. On the
# tiny LLaMA and Qwen3 fixtures, BEST to 60% (cubic, 4 updates, second-order saliency):
#   * every logged loss of the GPU run within 3e-2 relative of the CPU run's (bf16 products
#     against fp32; the masks may differ on near-ties, docs/cuda.md), the same sparsity at
#     every step, both curves falling (the last loss under 0.8 of the first);
#   * the perplexity best-eval gives the two trained models within 5% of each other;
#   * a GPU run stopped at step 10 (--stop-at) and resumed on the CPU ends within 3e-2 of
#     the uninterrupted GPU run's last loss, and a CPU state resumes on the GPU the same
#     way: states are the same files on both devices;
#   * under mpirun -np 1 (where there is an mpirun), the GPU run goes through the ranks'
#     path (NCCL, one rank) and is the run without mpirun bit for bit;
#   * a GPU run stopped at step 10 and resumed on the GPU is the uninterrupted run bit for
#     bit (every logged loss, gradient norm, learning rate and sparsity, and the final
#     model file), and so is a GPU run with --recompute (deterministic kernels,
#     docs/best-train.md).
#
# GD=cpu runs the "GPU" side on the CPU too: a check of this script on any machine
# (tests/t_gpu_script.sh), where the two sides must then agree exactly.
set -u
GD=${GD:-cuda}
BIN=${BIN:-bin}
OUT=${OUT:-out/gpu}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
FAILED=0
ok() { echo "ok - $*"; }
fail() { echo "not ok - $*"; FAILED=1; }

# shard PATH V N: the rule above, written with tests/shardio.py (python3 + numpy)
shard() {
    python3 -c "
import sys, random
sys.path.insert(0, 'tests')
from shardio import write_shard
V, n = int(sys.argv[2]), int(sys.argv[3])
random.seed(1)
t, out = 1, []
for _ in range(n):
    out.append(t)
    t = random.randrange(V) if random.random() < 0.1 else (5 * t + 3) % V
write_shard(sys.argv[1], out, V)" "$@"
}

# same_run A.jsonl B.jsonl NAME: the same numbers at every step (the log prints floats
# with 9 significant digits: equal text is equal bits), the same steps
same_run() {
    python3 - "$1" "$2" "$3" <<'EOF'
import json, sys
keys = ("step", "loss", "lr", "sparsity", "grad_norm")
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
diff = [x["step"] for x, y in zip(a, b) if any(x[k] != y[k] for k in keys)]
good = len(a) == len(b) and not diff
print("%s - %s: %d and %d steps, %s" % ("ok" if good else "not ok", sys.argv[3], len(a), len(b),
      "every loss, lr, sparsity and grad norm equal" if not diff else "steps %s differ" % diff[:5]))
sys.exit(0 if good else 1)
EOF
}

# compare A.jsonl B.jsonl NAME: loss within 3e-2 at every step, the same sparsity, falling
compare() {
    python3 - "$1" "$2" "$3" <<'EOF'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
name = sys.argv[3]
worst = max(abs(x["loss"] - y["loss"]) / abs(x["loss"]) for x, y in zip(a, b))
same_s = all(abs(x["sparsity"] - y["sparsity"]) < 1e-6 for x, y in zip(a, b))
fall = a[-1]["loss"] < 0.8 * a[0]["loss"] and b[-1]["loss"] < 0.8 * b[0]["loss"]
good = len(a) == len(b) and worst <= 3e-2 and same_s and fall
print("%s - %s: %d steps, largest loss difference %.2e relative (at most 3e-2), last losses %.4f and %.4f, "
      "sparsity %s at every step, both falling: %s" % ("ok" if good else "not ok", name, len(a), worst,
      a[-1]["loss"], b[-1]["loss"], "equal" if same_s else "DIFFERENT", fall))
sys.exit(0 if good else 1)
EOF
}

for m in llama qwen3; do
    V=$(python3 -c "import json; print(json.load(open('tests/fixtures/model/$m/config.json'))['vocab_size'])")
    shard "$W/$m.bin" "$V" 40000
    args="--model tests/fixtures/model/$m --data $W/$m.bin --steps 40 --batch 8 --seq 32 --lr 3e-3 --warmup 0.1
          --sparsity 0.6 --prune-end 0.5 --prune-updates 4 --quiet"
    # shellcheck disable=SC2086
    for side in "A $GD" "B cpu"; do
        set -- $side
        if ! "$BIN/best-train" $args --device "$2" --out "$W/$m-$1" 2>"$W/err"; then
            fail "$m: best-train --device $2: $(tail -n 1 "$W/err")"; continue 2
        fi
    done
    compare "$W/$m-A/log.jsonl" "$W/$m-B/log.jsonl" "$m: best-train --device $GD vs cpu" || FAILED=1
    cp "$W/$m-A/log.jsonl" "$OUT/train-$m-$GD.jsonl" 2>/dev/null
    p_cuda=$("$BIN/best-eval" --model "$W/$m-A/model" --data "$W/$m.bin" --seq 32 --json 2>/dev/null |
             python3 -c 'import json,sys; print(json.load(sys.stdin)["ppl"])')
    p_cpu=$("$BIN/best-eval" --model "$W/$m-B/model" --data "$W/$m.bin" --seq 32 --json 2>/dev/null |
            python3 -c 'import json,sys; print(json.load(sys.stdin)["ppl"])')
    if python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 0.05 * b)" \
        "$p_cuda" "$p_cpu" 2>/dev/null; then ok "$m: best-eval perplexity of the trained models: $GD $p_cuda, cpu $p_cpu"
    else fail "$m: best-eval perplexity of the trained models: $GD ${p_cuda:-?}, cpu ${p_cpu:-?} (more than 5% apart)"; fi
    # on the GPU alone: stopped and resumed, or with --recompute, the same run bit for bit
    # shellcheck disable=SC2086
    if "$BIN/best-train" $args --device "$GD" --out "$W/$m-s" --stop-at 10 2>"$W/err" &&
        "$BIN/best-train" --resume "$W/$m-s" --device "$GD" --quiet 2>>"$W/err"; then
        same_run "$W/$m-s/log.jsonl" "$W/$m-A/log.jsonl" "$m: stopped at 10 on $GD, resumed on $GD" || FAILED=1
        if cmp -s "$W/$m-s/model/model.safetensors" "$W/$m-A/model/model.safetensors"; then
            ok "$m: stopped and resumed on $GD: the model file is the uninterrupted run's, byte for byte"
        else fail "$m: stopped and resumed on $GD: the model file differs from the uninterrupted run's"; fi
    else fail "$m: stop and resume on $GD: $(tail -n 1 "$W/err")"; fi
    if [ "$GD" = cuda ]; then
        # shellcheck disable=SC2086
        if "$BIN/best-train" $args --device cuda --recompute --out "$W/$m-r" 2>"$W/err"; then
            same_run "$W/$m-r/log.jsonl" "$W/$m-A/log.jsonl" "$m: --recompute vs not, on the GPU" || FAILED=1
            if cmp -s "$W/$m-r/model/model.safetensors" "$W/$m-A/model/model.safetensors"; then
                ok "$m: --recompute: the model file is the run's without, byte for byte"
            else fail "$m: --recompute: the model file differs from the run's without"; fi
        else fail "$m: best-train --recompute: $(tail -n 1 "$W/err")"; fi
    fi
    # under mpirun, one rank: the ranks' path (on the GPU: NCCL, a communicator of one),
    # bit for bit the run without mpirun
    if command -v mpirun >/dev/null 2>&1; then
        # shellcheck disable=SC2086
        if OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 1 "$BIN/best-train" $args \
            --device "$GD" --out "$W/$m-mpi" 2>"$W/err"; then
            same_run "$W/$m-mpi/log.jsonl" "$W/$m-A/log.jsonl" "$m: mpirun -np 1 on $GD vs no mpirun" || FAILED=1
            if cmp -s "$W/$m-mpi/model/model.safetensors" "$W/$m-A/model/model.safetensors"; then
                ok "$m: mpirun -np 1 on $GD: the model file is the run's without mpirun, byte for byte"
            else fail "$m: mpirun -np 1 on $GD: the model file differs from the run's without mpirun"; fi
        else fail "$m: mpirun -np 1 best-train --device $GD: $(grep error "$W/err" | tail -n 1)"; fi
    else
        echo "skip - $m: mpirun -np 1 on $GD: no mpirun on this machine (test_step_gpu checks one NCCL rank)"
    fi
    # across devices: a state saved on one resumes on the other
    for pair in "A $GD cpu" "B cpu $GD"; do
        set -- $pair
        # shellcheck disable=SC2086
        "$BIN/best-train" $args --device "$2" --out "$W/$m-x$1" --stop-at 10 2>"$W/err" &&
            "$BIN/best-train" --resume "$W/$m-x$1" --device "$3" --quiet 2>>"$W/err"
        if [ $? != 0 ]; then fail "$m: stop on $2, resume on $3: $(tail -n 1 "$W/err")"; continue; fi
        python3 - "$W/$m-x$1/log.jsonl" "$W/$m-$1/log.jsonl" "$m: stopped at 10 on $2, resumed on $3" <<'EOF' || FAILED=1
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
e = abs(a[-1]["loss"] - b[-1]["loss"]) / abs(b[-1]["loss"])
good = len(a) == len(b) and e <= 3e-2
print("%s - %s: %d steps, last loss %.4f vs the uninterrupted run's %.4f (rel %.1e, at most 3e-2)"
      % ("ok" if good else "not ok", sys.argv[3], len(a), a[-1]["loss"], b[-1]["loss"], e))
sys.exit(0 if good else 1)
EOF
    done
done
exit $FAILED
