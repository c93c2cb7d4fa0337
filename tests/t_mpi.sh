#!/bin/sh
# t_mpi.sh: multi-rank best-train on CPU ranks, under mpirun (Open MPI, oversubscribed:
# up to 4 ranks on this machine's cores).
#   - dist.h's collectives on 1..4 ranks, in rounds of 4 KiB (many rounds): every sum the
#     rank-order sum, bit for bit (tests/dist_check collectives)
#   - the distributed selection on uneven slices with ties everywhere, 1..4 ranks: the
#     same masks as one process, byte for byte (dist_check select), N:M updates included
#     (slices that cut groups: nm.h's edges exchanged between the ranks)
#   - the GPU ranks' device step in the CUDA emulator (step_ranks), 1, 2, 3 and 9 ranks
#     (9: slices cutting the fp32 ranges every rank holds), against a one-model run that
#     sums its micro-batches' gradients as the emulated NCCL does: bit for bit
#   - the same run on 1 rank (no mpirun), mpirun -np 1, 2 and 3 with the same global
#     batch: -np 1 bitwise the one-rank run; 2 and 3 ranks: loss at every step within 1e-6
#     relative, the same mask at every update, final weights within 1e-6 (numpy)
#   - stop and --resume on 3 ranks: bitwise the run that never stopped; resumed on 2
#     ranks and without mpirun (re-sharded): within the same tolerances
#   - a missing, truncated or foreign shard, a bad manifest: one clear error (exit 1)
#   - kill -9 of one rank mid-run: mpirun ends non-zero within 60 s, nothing half-written,
#     and the resume from the last complete save ends bitwise equal to the uninterrupted run
#   - a rank that hangs (SIGSTOP): the others stop after BEST_DIST_TIMEOUT with a message
. tests/lib.sh
TR="$BIN/best-train"
DC="$TBIN/dist_check"
D=tests/fixtures/model/llama
if ! command -v mpirun >/dev/null 2>&1 || [ ! -x "$DC" ]; then
    skip "multi-rank: no mpirun, or built without MPI (run 'make deps': it installs openmpi-bin and libopenmpi-dev)"
    finish
fi
if ! have_py numpy || ! have_py safetensors; then skip "multi-rank: python3 numpy/safetensors missing"; finish; fi
# as root (CI's containers), more ranks than cores, shared memory only (no network probing)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
if [ "$SAN" = 1 ]; then # Open MPI's own allocations live until exit: tests/lsan_mpi.supp
    export ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0"
    export LSAN_OPTIONS="suppressions=$(pwd)/tests/lsan_mpi.supp:print_suppressions=0"
fi
MPI="mpirun --bind-to none"

# --- collectives and selection ------------------------------------------------------------
for n in 1 2 3 4; do
    check "collectives on $n ranks, 4 KiB rounds: rank-order sums bit for bit" \
        env BEST_DIST_ROUND_BYTES=4096 $MPI -np $n "$DC" collectives
done
check "collectives without mpirun (one rank, no MPI call)" "$DC" collectives
BEST_DIST_TIMEOUT=1 $MPI -x BEST_DIST_TIMEOUT -np 2 "$DC" watch >"$TMP/watch.out" 2>&1; rc=$?
if [ "$rc" != 0 ] && grep -q "waited 1 s in a marked wait" "$TMP/watch.out"; then
    ok "a wait marked by dist_watch (a collective inside it) is timed by the watchdog"
else fail "a wait marked by dist_watch: exit $rc, $(grep -m 1 error "$TMP/watch.out")"; fi
"$DC" select "$TMP/sel1.bin"
for n in 1 2 3 4; do
    $MPI -np $n "$DC" select "$TMP/sel-$n.bin" >/dev/null 2>&1
    check "selection on $n ranks (uneven slices, ties; N:M groups cut by slices): the one-process masks, byte for byte" \
        cmp "$TMP/sel1.bin" "$TMP/sel-$n.bin"
done

# --- GPU ranks in the CUDA emulator (tests/test_step.cpp built as step_ranks) ----------------
# the device step's ranks path (DevModel slices, dist_nccl.cu over tests/nccl_emu.h, the mask
# update on slices) on 1, 2, 3 and 9 ranks against a one-model run of the same global batch
# in another process whose micro-batches' gradients are summed as nccl_emu.h sums the ranks'
# (in double, in rank order): losses, gradients, masks, weights and moments bit for bit
# (3 fixtures, 8 steps, 4 mask updates, global and per layer). On 9 ranks the slices cut
# through the fp32 ranges every GPU rank holds (rep: embedding, norms, biases).
SR="$TBIN/step_ranks"
for n in 1 2 3 9; do
    "$SR" ref $n "$TMP" >"$TMP/sr-ref" 2>&1
    $MPI -np $n "$SR" check "$TMP" >"$TMP/sr-$n" 2>&1; rc=$?
    good=$(grep -c '^ok' "$TMP/sr-$n"); bad=$(grep '^not ok' "$TMP/sr-ref" "$TMP/sr-$n" | head -n 1)
    cuts=$(grep -c '^ok - .*: rank 0 of 9: its bf16 copy.*, [1-9][0-9]* cut between slices' "$TMP/sr-$n")
    if [ "$rc" = 0 ] && [ -z "$bad" ] && [ "$good" -ge $((42 * n)) ] && { [ $n != 9 ] || [ "$cuts" = 3 ]; }; then
        ok "GPU ranks in the emulator, $n rank(s): $(grep -m 1 'bitwise the one-model' "$TMP/sr-$n" | sed 's/^ok - //')"
    else fail "GPU ranks in the emulator, $n rank(s) (exit $rc, $good ok, $cuts fixtures cut): ${bad:-$(tail -n 3 "$TMP/sr-$n")}"; fi
done

# --- training: 1, 2, 3 ranks, the same global batch -----------------------------------------
python3 -c "
import sys; sys.path.insert(0, 'tests'); from shardio import write_shard
import numpy as np
write_shard('$TMP/rand.bin', np.random.default_rng(0).integers(0, 97, 6000), 97)"
RUN="--model $D --data $TMP/rand.bin --seq 16 --batch 6 --micro-batch 1 --threads 1 --steps 20 --sparsity 0.9
     --prune-end 0.6 --prune-updates 5 --save-masks --quiet"
"$TR" $RUN --out "$TMP/r1"
$MPI -np 1 "$TR" $RUN --out "$TMP/m1"
check "mpirun -np 1: bitwise the run without mpirun" cmp "$TMP/r1/state/state.safetensors" "$TMP/m1/state/state.safetensors"
cat >"$TMP/same.py" <<'PY'
# same.py A B: B's run against A's: loss at every step within 1e-6 relative, the same
# masks at every update, final weights within 1e-6.
import glob, json, os, sys
import numpy as np
from safetensors.numpy import load_file
a, b = sys.argv[1], sys.argv[2]
la = [json.loads(l) for l in open(a + "/log.jsonl")]
lb = [json.loads(l) for l in open(b + "/log.jsonl")]
rel = max(abs(x["loss"] - y["loss"]) / abs(x["loss"]) for x, y in zip(la, lb))
masks = sorted(glob.glob(a + "/masks/*.safetensors"))
same = all(all((load_file(f)[k] == load_file(b + "/masks/" + os.path.basename(f))[k]).all() for k in load_file(f))
           for f in masks)
wa, wb = load_file(a + "/model/model.safetensors"), load_file(b + "/model/model.safetensors")
dw = max(float(np.abs(wa[k].astype(np.float64) - wb[k]).max()) for k in wa)
ok = len(la) == len(lb) == 20 and rel <= 1e-6 and len(masks) == 5 and same and dw <= 1e-6
print("%s: %d steps, loss rel %.2g, %d masks %s, weights %.2g" % (b, len(lb), rel, len(masks),
      "equal" if same else "DIFFER", dw))
sys.exit(0 if ok else 1)
PY
for n in 2 3; do
    $MPI -np $n "$TR" $RUN --out "$TMP/r$n"
    check "$n ranks: loss within 1e-6 at every step, masks equal at every update, weights within 1e-6" \
        python3 "$TMP/same.py" "$TMP/r1" "$TMP/r$n"
done
python3 "$TMP/same.py" "$TMP/r1" "$TMP/r3"
check "3 ranks: the state is 3 shards and a manifest" \
    test -f "$TMP/r3/state/manifest.json" -a -f "$TMP/r3/state/step-20/rank-2-of-3.safetensors"
check "3 ranks: the log names the bytes of each mask update" grep -q '"mask_update_bytes":' "$TMP/r3/log.jsonl"

# --- resume: same ranks bitwise; other rank counts re-shard -----------------------------------
$MPI -np 3 "$TR" $RUN --out "$TMP/s3" --stop-at 7 && $MPI -np 3 "$TR" --resume "$TMP/s3" --quiet
ok3=1
for r in 0 1 2; do cmp -s "$TMP/r3/state/step-20/rank-$r-of-3.safetensors" "$TMP/s3/state/step-20/rank-$r-of-3.safetensors" || ok3=0; done
check "3 ranks stopped at 7, resumed on 3: shards bitwise" test $ok3 = 1
check "3 ranks stopped at 7, resumed on 3: model bitwise" cmp "$TMP/r3/model/model.safetensors" "$TMP/s3/model/model.safetensors"
check "the resumed run left only the last save" test ! -e "$TMP/s3/state/step-7"
$MPI -np 3 "$TR" $RUN --out "$TMP/x2" --stop-at 7 && $MPI -np 2 "$TR" --resume "$TMP/x2" --quiet
check "3 ranks stopped at 7, resumed on 2 (re-sharded): within the tolerances" python3 "$TMP/same.py" "$TMP/r1" "$TMP/x2"
$MPI -np 3 "$TR" $RUN --out "$TMP/x1" --stop-at 7 && "$TR" --resume "$TMP/x1" --quiet
check "3 ranks stopped at 7, resumed without mpirun: within the tolerances" python3 "$TMP/same.py" "$TMP/r1" "$TMP/x1"
check "... and saved as one file, the shards removed" \
    test -f "$TMP/x1/state/state.safetensors" -a ! -e "$TMP/x1/state/manifest.json" -a ! -e "$TMP/x1/state/step-7"
"$TR" $RUN --out "$TMP/y3" --stop-at 7 && $MPI -np 3 "$TR" --resume "$TMP/y3" --quiet
check "1 rank stopped at 7, resumed on 3: within the tolerances" python3 "$TMP/same.py" "$TMP/r1" "$TMP/y3"

# --- bad states and options: one clear error per rank, exit 1 --------------------------------
# mpirun_error NAME PATTERN ARGS...: mpirun ARGS exits non-zero, and every error line
# matches PATTERN (each rank says it, or "another rank failed")
mpirun_error() {
    name=$1 pat=$2; shift 2
    $MPI "$@" >"$TMP/out" 2>"$TMP/err"; rc=$?
    if [ "$rc" != 0 ] && grep 'error' "$TMP/err" | grep -q -- "$pat" &&
        ! grep 'error' "$TMP/err" | grep -v -e "$pat" -e 'another rank failed' | grep -q .; then ok "$name"
    else fail "$name (exit $rc; stderr: $(grep error "$TMP/err" | head -c 400))"; fi
}
mk() { rm -rf "$TMP/bad"; cp -r "$TMP/s3" "$TMP/bad"; }
mk; rm "$TMP/bad/state/step-20/rank-1-of-3.safetensors"
mpirun_error "a missing shard is named" "rank-1-of-3.safetensors: missing" -np 3 "$TR" --resume "$TMP/bad" --steps 20 --quiet
mk; head -c 1000 "$TMP/s3/state/step-20/rank-2-of-3.safetensors" >"$TMP/bad/state/step-20/rank-2-of-3.safetensors"
mpirun_error "a truncated shard is named" "rank-2-of-3.safetensors" -np 3 "$TR" --resume "$TMP/bad" --quiet
mk; cp "$TMP/r2/state/step-20/rank-1-of-2.safetensors" "$TMP/bad/state/step-20/rank-1-of-3.safetensors"
mpirun_error "a shard of another save: its content hash is not the manifest's" \
    "rank-1-of-3.safetensors: content hash [0-9a-f]*, the manifest says [0-9a-f]*" -np 3 "$TR" --resume "$TMP/bad" --quiet
# the same shard with the manifest's hash edited to match: its metadata gives it away
python3 -c "
import json, sys; sys.path.insert(0, 'tests'); from statehash import content_hash
p = '$TMP/bad/state/manifest.json'; m = json.load(open(p))
m['content_hashes'][1] = content_hash('$TMP/bad/state/step-20/rank-1-of-3.safetensors'); json.dump(m, open(p, 'w'))"
mpirun_error "a shard of another rank count is named" "metadata ranks is \"2\", the manifest says 3" \
    -np 3 "$TR" --resume "$TMP/bad" --quiet
# issue 33: a bit flipped in a rank shard resumed with exit 0 and another result
mk; python3 -c "
import sys; sys.path.insert(0, 'tests'); from safetensors_py import header
p = '$TMP/bad/state/step-20/rank-1-of-3.safetensors'; b = bytearray(open(p, 'rb').read())
b[header(p)[2] + 41] ^= 4; open(p, 'wb').write(b)"
mpirun_error "a bit flipped in a rank shard: refused, the shard named" \
    "rank-1-of-3.safetensors: the contents do not match their hash" -np 3 "$TR" --resume "$TMP/bad" --quiet
mpirun_error "... also on another rank count (each rank checks what it reads)" \
    "rank-1-of-3.safetensors: the contents do not match their hash" -np 2 "$TR" --resume "$TMP/bad" --quiet
check "the manifest lists each shard's content hash, as tests/statehash.py computes it from the format" python3 -c "
import json, sys; sys.path.insert(0, 'tests'); from statehash import content_hash
m = json.load(open('$TMP/s3/state/manifest.json'))
assert m['content_hashes'] == [content_hash('$TMP/s3/state/' + f) for f in m['shards']], m"
mk; echo '{"format": "best-train-state-shards", "version": "2", "step": 20, "ranks": 3}' >"$TMP/bad/state/manifest.json"
mpirun_error "a manifest without its shards list" "manifest.json: .* is not an integer\|manifest.json: \"shards\"" \
    -np 2 "$TR" --resume "$TMP/bad" --quiet
mpirun_error "--batch 6 on 4 ranks: does not split" "does not split over 4 ranks" -np 4 "$TR" $RUN --out "$TMP/b4"
check "... and nothing written" test ! -e "$TMP/b4"
mpirun_error "--device cuda on 2 ranks without a GPU: one error" "error: --device cuda: " -np 2 "$TR" $RUN --out "$TMP/bc" \
    --device cuda

# --- a rank dies; a rank hangs --------------------------------------------------------------
LONG="--model $D --data $TMP/rand.bin --seq 16 --batch 6 --micro-batch 1 --threads 1 --steps 4000 --sparsity 0.9
      --prune-end 0.05 --prune-updates 5 --save-every 50 --stop-at 300 --quiet"
$MPI -np 3 "$TR" $LONG --out "$TMP/kref"
# rank_pid MPIRUN_PID R: the pid of rank R among mpirun's children
rank_pid() {
    for p in $(pgrep -P "$1"); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && { echo "$p"; return; }
    done
}
# wait_step OUT N: until OUT's log reaches step N (at most 60 s)
wait_step() {
    i=0
    while [ $i -lt 1200 ]; do
        s=$(tail -n 1 "$1/log.jsonl" 2>/dev/null | sed -n 's/^{"step":\([0-9]*\),.*/\1/p')
        [ -n "$s" ] && [ "$s" -ge "$2" ] && return 0
        sleep 0.05; i=$((i + 1))
    done
    return 1
}
$MPI -np 3 "$TR" $LONG --out "$TMP/killed" 2>"$TMP/kill.err" &
mp=$!
wait_step "$TMP/killed" 70
victim=$(rank_pid $mp 1)
t0=$(date +%s)
[ -n "$victim" ] && kill -9 "$victim"
wait $mp; rc=$?
dt=$(( $(date +%s) - t0 ))
at=$(sed -n 's/.*"step": \([0-9]*\),.*/\1/p' "$TMP/killed/state/manifest.json")
check "kill -9 of rank 1 (pid ${victim:-none}) at step ~70: mpirun exits non-zero (rc $rc) within 60 s (${dt} s)" \
    test -n "$victim" -a "$rc" != 0 -a "$dt" -le 60
check "... the manifest names a complete save (step ${at:-none}) whose shards are all there" \
    test -n "$at" -a -f "$TMP/killed/state/step-$at/rank-0-of-3.safetensors" -a \
    -f "$TMP/killed/state/step-$at/rank-1-of-3.safetensors" -a -f "$TMP/killed/state/step-$at/rank-2-of-3.safetensors"
$MPI -np 3 "$TR" --resume "$TMP/killed" --stop-at 300 --quiet
okk=1
for r in 0 1 2; do cmp -s "$TMP/kref/state/step-300/rank-$r-of-3.safetensors" "$TMP/killed/state/step-300/rank-$r-of-3.safetensors" || okk=0; done
check "resumed from step ${at:-none}: the uninterrupted run's shards at step 300, bitwise" test $okk = 1
check "... and its model, bitwise" cmp "$TMP/kref/model/model.safetensors" "$TMP/killed/model/model.safetensors"

BEST_DIST_TIMEOUT=3 $MPI -np 3 "$TR" $LONG --out "$TMP/hung" 2>"$TMP/hang.err" &
mp=$!
wait_step "$TMP/hung" 70
victim=$(rank_pid $mp 2)
t0=$(date +%s)
[ -n "$victim" ] && kill -STOP "$victim"
wait $mp; rc=$?
dt=$(( $(date +%s) - t0 ))
[ -n "$victim" ] && kill -9 "$victim" 2>/dev/null
check "rank 2 stopped (SIGSTOP): the others exit non-zero (rc $rc) within 60 s (${dt} s)" \
    test -n "$victim" -a "$rc" != 0 -a "$dt" -le 60
check "... saying they waited BEST_DIST_TIMEOUT for the other ranks" grep -q "waited 3 s in .* for the other ranks" "$TMP/hang.err"
finish
