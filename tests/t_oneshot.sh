#!/bin/sh
# t_oneshot.sh: the one-shot baselines of best-mask (--method magnitude|wanda|sparsegpt).
#   * one Linear layer against numpy implementations of Wanda and SparseGPT written from
#     the papers (tests/oneshot_ref.py: the same mask, weights within 1e-4, exact counts,
#     reconstruction error ordered SparseGPT <= Wanda <= magnitude at 50% and 70%, a
#     singular X^T X);
#   * best-mask on the Qwen3 fixture with its token shard: every tensor pruned alone, the
#     exact counts (magnitude per tensor, Wanda per row, SparseGPT per block of 128
#     columns), --apply writes exactly the masked weights (SparseGPT: and changes kept
#     ones); bad options and inputs give one error line;
#   * with ../shared: stories260K calibrated on 16 windows of its training text and
#     evaluated on its validation text, perplexity ordered SparseGPT < Wanda < magnitude
#     at 50% and 70% (the papers' order).
. tests/lib.sh
M="$BIN/best-mask"
: "${TBIN:=$(pwd)/build/tests}"
if ! have_py numpy || ! have_py safetensors; then skip "one-shot: python3 numpy/safetensors missing"; finish; fi
python3 tests/oneshot_ref.py "$TBIN/oneshot_layer" "$TMP" || FAILED=1

Q=tests/fixtures/model/qwen3 QS=tests/fixtures/eval/qwen3_tokens.bin
for m in magnitude wanda sparsegpt; do
    c=""
    [ "$m" = magnitude ] || c="--calib $QS --nsamples 4 --seq 16"
    # shellcheck disable=SC2086
    if "$M" --model "$Q" --sparsity 0.6 --method $m $c --out "$TMP/$m.mask" --apply --out-model "$TMP/$m" --quiet; then
        ok "best-mask --method $m on the Qwen3 fixture"
    else
        fail "best-mask --method $m on the Qwen3 fixture"
        continue
    fi
    python3 - "$Q" "$TMP/$m" "$TMP/$m.mask" "$m" 0.6 <<'PY' || FAILED=1
import math, sys
import numpy as np
from safetensors.numpy import load_file
src, out, mask, method, s = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
W, A, K = load_file(src + "/model.safetensors"), load_file(out + "/model.safetensors"), load_file(mask)
bad = []
for name, k in K.items():
    k = k.astype(bool)
    rows, cols = k.shape
    if method == "magnitude":
        good = (~k).sum() == math.floor(k.size * s)
    elif method == "wanda":
        good = ((~k).sum(1) == math.floor(cols * s)).all()
    else:
        good = all((~k[:, c0:c0 + 128]).sum() == math.floor(rows * min(128, cols - c0) * s) for c0 in range(0, cols, 128))
    w, a = W[name].astype(np.float32), A[name]
    good = good and (a[~k] == 0).all()
    if method != "sparsegpt":
        good = good and (a[k] == w[k]).all()
    if not good:
        bad.append(name)
same = [n for n in W if n not in K and not (W[n] == A[n]).all()]
changed = method != "sparsegpt" or any((A[n][K[n].astype(bool)] != W[n][K[n].astype(bool)]).any() for n in K)
print("%s - --method %s: exact counts in all %d tensors (%s), pruned weights 0 in the model, kept ones %s; other "
      "tensors unchanged%s" % ("ok" if not bad and not same and changed else "not ok", method, len(K),
      "per tensor" if method == "magnitude" else "per row" if method == "wanda" else "per block of 128 columns",
      "updated" if method == "sparsegpt" else "unchanged", (": bad " + ", ".join(bad + same)) if bad or same else ""))
sys.exit(0 if not bad and not same and changed else 1)
PY
done

expect_error "--method wanda without --calib" 2 "needs --calib" "$M" --model "$Q" --sparsity 0.5 --method wanda --out "$TMP/x"
expect_error "--method bogus" 2 "unknown --method bogus" "$M" --model "$Q" --sparsity 0.5 --method bogus --out "$TMP/x"
expect_error "--method with --group global" 2 "each tensor on its own" "$M" --model "$Q" --sparsity 0.5 --method wanda \
    --calib "$QS" --group global --out "$TMP/x"
expect_error "--calib that is not a shard" 1 "$Q/config.json" "$M" --model "$Q" --sparsity 0.5 --method sparsegpt \
    --calib "$Q/config.json" --seq 16 --out "$TMP/x"
# --device (issue 38): a usage error when unknown or without --method, and on a machine
# without a usable GPU (CI, this one) --device cuda is one line saying why
expect_error "--device tpu" 2 "unknown --device tpu (cuda, cpu)" "$M" --model "$Q" --sparsity 0.5 --method magnitude \
    --device tpu --out "$TMP/x"
expect_error "--device without --method" 2 "--device goes with --method" "$M" --model "$Q" --sparsity 0.5 \
    --device cpu --out "$TMP/x"
expect_error "--batch -1" 2 "--batch -1: at least 1" "$M" --model "$Q" --sparsity 0.5 --method wanda --calib "$QS" \
    --batch -1 --out "$TMP/x"
expect_error "--precision fp8" 2 "unknown --precision fp8 (bf16, fp32)" "$M" --model "$Q" --sparsity 0.5 \
    --method wanda --calib "$QS" --precision fp8 --out "$TMP/x"
if "$TBIN/test_cuda" 2>/dev/null | grep -q 'cuda_device_count() = 0,'; then
    expect_error "--device cuda without a GPU" 1 "--device cuda: " "$M" --model "$Q" --sparsity 0.5 --method magnitude \
        --device cuda --out "$TMP/x"
else
    skip "--device cuda without a GPU: this machine has one"
fi
"$M" --model "$Q" --sparsity 0.5 --method sparsegpt --calib "$QS" --nsamples 4 --seq 16 --out "$TMP/dc" --quiet
"$M" --model "$Q" --sparsity 0.5 --method sparsegpt --calib "$QS" --nsamples 4 --seq 16 --out "$TMP/dd" --quiet \
    --device cpu --batch 3 --precision bf16
check "--device cpu, --batch and --precision (the device's) leave the CPU's mask as it is" cmp "$TMP/dc" "$TMP/dd"
# N:M patterns (issue 39): exactly N kept in every group of M of every row, for each
# method; the pattern in the mask's metadata and the report; bad patterns are usage errors
for meth in magnitude wanda sparsegpt; do
    c=""
    [ "$meth" = magnitude ] || c="--calib $QS --nsamples 4 --seq 16"
    # shellcheck disable=SC2086
    "$M" --model "$Q" --method $meth $c --pattern 2:4 --out "$TMP/nm.$meth" --report "$TMP/nm.$meth.json" \
        --apply --out-model "$TMP/nm.$meth.model" --quiet --device cpu
    check "--method $meth --pattern 2:4: 2 kept in every group of 4, pruned weights 0, pattern recorded" \
        python3 -c "
import json, sys
sys.path.insert(0, 'tests')
from safetensors_py import load, load_folder
import numpy as np
m, meta = load('$TMP/nm.$meth', float32=True), json.load(open('$TMP/nm.$meth.json'))
w = load_folder('$TMP/nm.$meth.model', float32=True)
assert meta['pattern'] == '2:4' and meta['total']['sparsity'] == 0.5, meta['total']
for k, v in m.items():
    v = np.asarray(v).astype(bool)
    kept = v.reshape(v.shape[0], -1, 4).sum(2)
    assert (kept == 2).all(), k
    assert (w[k][~v] == 0).all(), k
"
done
check "the mask file's metadata says pattern 2:4" python3 -c "
import json, struct
f = open('$TMP/nm.wanda', 'rb'); n = struct.unpack('<Q', f.read(8))[0]
assert json.loads(f.read(n))['__metadata__']['pattern'] == '2:4'"
# "+": best-train under the fixed 2:4 mask keeps it 2:4 and says so in config.json's "best"
# block; a mask whose metadata claims a pattern it breaks is refused, naming the tensor
"$BIN/best-train" --model "$TMP/nm.sparsegpt.model" --mask "$TMP/nm.sparsegpt" --data "$QS" --steps 3 --batch 2 \
    --seq 16 --lr 1e-3 --out "$TMP/nm.plus" --quiet --device cpu
check "best-train --mask of a 2:4 mask: the trained model is 2:4 and config.json's best block says pattern 2:4" \
    python3 -c "
import json, sys
sys.path.insert(0, 'tests')
from safetensors_py import load, load_folder
import numpy as np
cfg = json.load(open('$TMP/nm.plus/model/config.json'))
assert cfg['best']['pattern'] == '2:4', cfg['best']
w = load_folder('$TMP/nm.plus/model', float32=True)
for k in load('$TMP/nm.sparsegpt', float32=True):
    nz = (np.asarray(w[k]) != 0).reshape(w[k].shape[0], -1, 4).sum(2)
    assert (nz <= 2).all(), k
"
python3 - "$TMP/nm.sparsegpt" "$TMP/nm.lie" <<'PY'
import json, struct, sys
b = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n])
h['__metadata__']['pattern'] = '1:4'
t = json.dumps(h).encode()
t += b' ' * (-len(t) % 8)
open(sys.argv[2], 'wb').write(struct.pack('<Q', len(t)) + t + b[8 + n:])
PY
expect_error "a mask whose metadata says 1:4 but keeps 2 of 4: refused, the tensor named" 1 "pattern 1:4, but model.layers.0.self_attn.q_proj.weight keeps more than 1 of 4" \
    "$BIN/best-train" --model "$TMP/nm.sparsegpt.model" --mask "$TMP/nm.lie" --data "$QS" --steps 3 --batch 2 --seq 16 \
    --lr 1e-3 --out "$TMP/nm.lie.out" --quiet --device cpu
expect_error "--pattern 4:24: a tensor whose columns 24 does not divide" 2 "q_proj.weight: 32 columns are not a multiple of 24" \
    "$M" --model "$Q" --method magnitude --pattern 4:24 --out "$TMP/x"
expect_error "--pattern 4:2" 2 "--pattern 4:2: N:M with 0 < N < M <= 32" "$M" --model "$Q" --method magnitude \
    --pattern 4:2 --out "$TMP/x"
expect_error "--pattern 2:4 with --sparsity 0.6" 2 "whose sparsity is 0.5" "$M" --model "$Q" --method magnitude \
    --pattern 2:4 --sparsity 0.6 --out "$TMP/x"
expect_error "--pattern without --method" 2 "--pattern goes with --method" "$M" --model "$Q" --pattern 2:4 --out "$TMP/x"
"$M" --model "$Q" --method wanda --calib "$QS" --nsamples 4 --seq 16 --pattern unstructured --sparsity 0.5 \
    --out "$TMP/nm.u" --quiet --device cpu
"$M" --model "$Q" --method wanda --calib "$QS" --nsamples 4 --seq 16 --sparsity 0.5 --out "$TMP/nm.v" --quiet --device cpu
check "--pattern unstructured is the default's mask" cmp "$TMP/nm.u" "$TMP/nm.v"
# The sparsity achieved beside the one asked for, when a rule gives a little less or more
# (issue 36: wanda at 0.9 gave 89.18% without a word), with the rule; none when exact. The
# figure is the mask's own count (its report's total).
for a in "wanda:--method wanda --calib $QS --nsamples 4 --seq 16:floor(S x columns) weights of each row" \
         "magnitude:--method magnitude:magnitude prunes floor(S x n) of each tensor" \
         "layer:--saliency magnitude --group layer:round((1 - S) x n) of each tensor"; do
    n=${a%%:*} r=${a#*:} args=${r%%:*} rule=${r#*:}
    "$M" --model tests/fixtures/model/llama --sparsity 0.9 $args --out "$TMP/ach.$n" --report "$TMP/ach.$n.json" \
        2>"$TMP/ach.$n.err" >/dev/null
    check "$n at 0.9: the achieved sparsity beside the requested, with its rule" python3 -c "
import json, re
got = json.load(open('$TMP/ach.$n.json'))['total']['sparsity']
m = re.search(r'achieved sparsity ([0-9.]+)%, requested 90.00%: .*' + re.escape('$rule'), open('$TMP/ach.$n.err').read())
assert m and abs(float(m[1]) - 100 * got) < 0.006 and abs(got - 0.9) >= 5e-5, (m, got)"
done
# Where a one-shot run's time went (issue 38): the report's "seconds" by phase and their
# total, the same figures on stderr; a mask without calibration has none
"$M" --model tests/fixtures/model/llama --sparsity 0.5 --method sparsegpt --calib "$QS" --nsamples 4 --seq 16 \
    --out "$TMP/ph.mask" --report "$TMP/ph.json" 2>"$TMP/ph.err" >/dev/null
check "sparsegpt --report: seconds of forward, statistics, factor and update, and their total (as on stderr)" python3 -c "
import json, re
j = json.load(open('$TMP/ph.json'))['seconds']
ph = ['forward', 'statistics', 'factor', 'update']
assert set(j) == set(ph + ['total']) and all(j[p] >= 0 for p in ph) and abs(sum(j[p] for p in ph) - j['total']) < 1e-9, j
assert j['forward'] > 0 and j['factor'] > 0, j
m = re.search(r'seconds: forward ([0-9.]+), Hessian ([0-9.]+), factor ([0-9.]+), prune and update ([0-9.]+)', open('$TMP/ph.err').read())
assert m and all(abs(float(m[i + 1]) - j[p]) <= 0.005 for i, p in enumerate(ph)), (m, j)"
check "magnitude --report: no seconds (no calibration)" python3 -c "
import json; assert 'seconds' not in json.load(open('$TMP/ach.magnitude.json'))"
"$M" --model tests/fixtures/model/llama --sparsity 0.9 --method wanda --calib "$QS" --nsamples 4 --seq 16 --out "$TMP/ach.w2" \
    --plot "$TMP/ach.w2.svg" --quiet
check "a wanda heatmap is titled 'wanda, layer, sparsity 0.9' (not 'wanda, wanda saliency')" python3 -c "
import xml.etree.ElementTree as ET
t = next(ET.parse('$TMP/ach.w2.svg').getroot().iter('{http://www.w3.org/2000/svg}text')).text
assert t == 'wanda, layer, sparsity 0.9', t"
"$M" --model tests/fixtures/model/llama --sparsity 0.9 --saliency magnitude --out "$TMP/ach.g" 2>"$TMP/ach.g.err" >/dev/null
check "global at 0.9: exact, and no such line" sh -c "! grep -q achieved '$TMP/ach.g.err'"
"$M" --model "$Q" --sparsity 0.5 --method wanda --calib "$QS" --seq 65 --out "$TMP/cap65" 2>"$TMP/cap65.err" >/dev/null
check "--seq longer than the model's context: capped, with a note" \
    grep -q "note: --seq 65 is longer than the model's 64 positions: windows of 64" "$TMP/cap65.err"
"$M" --model "$Q" --sparsity 0.5 --method wanda --calib "$QS" --seq 64 --out "$TMP/cap64" --quiet
check "--seq longer than the model's context: the mask is --seq 64's" cmp "$TMP/cap65" "$TMP/cap64"
check "a failed one-shot run writes no mask" test ! -e "$TMP/x"

if have_shared && [ -f "$SHARED/data/stories260K/train.jsonl.zst" ]; then
    S="$SHARED/models/stories260K" V="$SHARED/data/stories260K/valid.jsonl"
    zstd -dc "$SHARED/data/stories260K/train.jsonl.zst" | head -n 300 >"$TMP/train.jsonl"
    "$BIN/best-tokenize" --tokenizer "$S" --out "$TMP/calib.bin" "$TMP/train.jsonl" 2>/dev/null
    for s in 0.5 0.7; do
        line=""
        for m in magnitude wanda sparsegpt; do
            c=""
            [ "$m" = magnitude ] || c="--calib $TMP/calib.bin --nsamples 16 --seq 256"
            # shellcheck disable=SC2086
            "$M" --model "$S" --sparsity $s --method $m $c --apply --out-model "$TMP/s$m$s" --quiet &&
                p=$("$BIN/best-eval" --model "$TMP/s$m$s" --data "$V" --seq 256 --max-tokens 16384 --json --quiet \
                    --device cpu | python3 -c 'import json,sys; print(json.load(sys.stdin)["ppl"])') || p=nan
            line="$line $p"
        done
        # shellcheck disable=SC2086
        set -- $line
        if python3 -c "import sys; a, b, c = map(float, sys.argv[1:]); sys.exit(0 if c < b < a else 1)" "$1" "$2" "$3"; then
            ok "stories260K at $s: perplexity sparsegpt $3 < wanda $2 < magnitude $1"
        else
            fail "stories260K at $s: perplexity sparsegpt $3 < wanda $2 < magnitude $1"
        fi
    done
    # the device's walk (calib.cu, in the CPU emulator) against the CPU's: perplexity within 1%
    if [ "$SAN" = 1 ]; then
        skip "stories260K on the device (emulated): in the plain pass (test_calib_cuda runs the walk under ASan on the fixtures)"
    elif [ -x "$TBIN/test_calib_cuda" ]; then
        "$BIN/best-tokenize" --tokenizer "$S" --out "$TMP/valid.bin" "$V" 2>/dev/null
        "$TBIN/test_calib_cuda" --stories "$S" "$TMP/calib.bin" "$TMP/valid.bin" >"$TMP/stories.out" 2>&1
        while IFS= read -r l; do
            case "$l" in "ok - "*) ok "${l#ok - }" ;; "not ok - "*) fail "${l#not ok - }" ;; esac
        done <"$TMP/stories.out"
        grep -q '^ok - stories260K, sparsegpt at 0.7' "$TMP/stories.out" || fail "test_calib_cuda --stories: $(tail -n 3 "$TMP/stories.out")"
    else
        skip "stories260K on the device: no $TBIN/test_calib_cuda"
    fi
else
    skip "stories260K one-shot ordering: $SHARED/data/stories260K not found"
fi
finish
