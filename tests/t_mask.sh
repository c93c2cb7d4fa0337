#!/bin/sh
# t_mask.sh: best-mask end to end on the tiny LLaMA fixture (and stories260K with
# ../shared). Masks are checked by the Python below with numpy alone: exactly k kept,
# the same set as numpy's own top-k (ties by lowest index in block order); --apply
# zeroes exactly the masked weights and leaves other tensors byte-identical; reports
# and heatmaps agree with the mask; bad input fails with one error line and writes nothing.
. tests/lib.sh
M="$BIN/best-mask"
if ! have_py numpy || ! have_py safetensors; then skip "best-mask: python3 numpy/safetensors missing"; finish; fi
cat >"$TMP/mask_ref.py" <<'PY'
# The independent numpy reference (written to $TMP/mask_ref.py by t_mask.sh).
#
#   mask_ref.py check MODEL MASK S SALIENCY [MOMENTS] [GROUP]   mask == numpy's top-k
#   mask_ref.py apply MODEL MASK OUTMODEL                        --apply wrote the right model
#   mask_ref.py report MASK REPORT.json                          report counts == mask counts
#   mask_ref.py svg PLOT.svg MODEL                               one cell per (layer, module)
#   mask_ref.py moments MODEL OUT [bad-name|bad-shape]           writes an Adam-moment dump
#   mask_ref.py subset NEW OLD                                   NEW keeps nothing OLD pruned
# Prints one "ok - ..." or "not ok - ..." line per check.
import json, math, sys
import xml.etree.ElementTree as ET
import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

MODS = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
        "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]


def report(ok, what):
    print(("ok - " if ok else "not ok - ") + what)


def weights(model):
    return load_file(model + "/model.safetensors")


def prunable(w):
    # the parameter block's order: family by family, layer by layer inside a family
    L = 1 + max(int(k.split(".")[2]) for k in w if k.startswith("model.layers."))
    return [f"model.layers.{l}.{m}.weight" for m in MODS for l in range(L)]


def read_mask(path, w):
    d = load_file(path)
    with safe_open(path, "np") as f:
        meta = f.metadata()
    out = {}
    for name in prunable(w):
        t = d[name]
        if meta.get("packing") == "bits":
            n = w[name].size
            t = np.unpackbits(t, bitorder="little")[:n].reshape(w[name].shape)
        out[name] = t.astype(bool)
    return out, meta


def keep(S, n):
    return int(math.floor((1.0 - S) * n + 0.5))


def topk(score, k):
    # descending score, ties by lowest index
    order = np.lexsort((np.arange(score.size), -score.astype(np.float64)))
    m = np.zeros(score.size, bool)
    m[order[:k]] = True
    return m


def check(model, mask, S, sal, moments=None, group="global"):
    w = weights(model)
    names = prunable(w)
    got, meta = read_mask(mask, w)
    mo = load_file(moments) if moments else {}
    def score(n):
        x = w[n].astype(np.float32).ravel()
        if sal == "magnitude":
            return np.abs(x)
        if sal == "first":
            return np.where(x == 0, np.float32(0), np.abs(mo[n + ".exp_avg"].ravel() * x))
        v = mo[n + ".exp_avg_sq"].ravel()
        return np.where(x == 0, np.float32(0), (np.float32(0.5) * v) * (x * x))
    S = float(S)
    if group == "global":
        s = np.concatenate([score(n) for n in names])
        want = topk(s, keep(S, s.size))
        have = np.concatenate([got[n].ravel() for n in names])
        report(have.sum() == keep(S, s.size) and (have == want).all(),
               f"{mask}: {sal} S={S}: {have.sum()} of {s.size} kept == numpy top-k ({keep(S, s.size)})")
    else:
        ok = all((got[n].ravel() == topk(score(n), keep(S, w[n].size))).all() for n in names)
        report(ok, f"{mask}: {sal} group layer S={S}: every tensor == its own numpy top-k")


def apply(model, mask, outmodel):
    w, o = weights(model), weights(outmodel)
    got, _ = read_mask(mask, w)
    ok = set(w) == set(o)
    for n in w:
        if n in got:
            ok = ok and (o[n] == np.where(got[n], w[n], 0)).all() and ((o[n] == 0) | got[n]).all()
        else:
            ok = ok and o[n].dtype == w[n].dtype and o[n].tobytes() == w[n].tobytes()
    report(ok, "--apply: zeros exactly where the mask is 0, other tensors byte-identical")


def report_check(mask, rep, model):
    w = weights(model)
    got, _ = read_mask(mask, w)
    r = json.load(open(rep))
    ok = r["total"]["kept"] == sum(int(m.sum()) for m in got.values())
    ok = ok and r["total"]["numel"] == sum(m.size for m in got.values())
    for t in r["tensors"]:
        ok = ok and t["kept"] == int(got[t["name"]].sum()) and t["numel"] == got[t["name"]].size
        ok = ok and abs(t["sparsity"] - (1 - t["kept"] / t["numel"])) < 1e-9
    ok = ok and sum(l["kept"] for l in r["layers"]) == r["total"]["kept"]
    ok = ok and sum(m["kept"] for m in r["modules"].values()) == r["total"]["kept"]
    for l in r["layers"]:
        ok = ok and l["kept"] == sum(int(got[f"model.layers.{l['layer']}.{m}.weight"].sum()) for m in MODS)
    report(ok, f"report: totals, {len(r['tensors'])} tensors, {len(r['layers'])} layers, modules agree with the mask")


def svg(path, model):
    w = weights(model)
    L = len(prunable(w)) // 7
    root = ET.parse(path).getroot()
    cells = [e for e in root.iter() if e.get("class") == "cell"]
    keys = {(c.get("data-layer"), c.get("data-module")) for c in cells}
    report(root.tag.endswith("svg") and len(cells) == 7 * L and len(keys) == 7 * L,
           f"SVG parses, {len(cells)} cells for {L} layers x 7 modules")


def moments(model, out, bad=""):
    w = weights(model)
    rng = np.random.default_rng(5)
    d = {}
    for n, x in w.items():
        d[n + ".exp_avg"] = rng.standard_normal(x.shape).astype(np.float32) * 1e-3
        # few distinct values: ties in 0.5 v w^2 are then exercised only through w
        d[n + ".exp_avg_sq"] = rng.random(x.shape).astype(np.float32) * 1e-5
    if bad == "bad-name":
        d["model.layers.0.self_attn.qq_proj.weight.exp_avg"] = d.pop("model.layers.0.self_attn.q_proj.weight.exp_avg")
    if bad == "bad-shape":
        n = "model.layers.1.mlp.up_proj.weight.exp_avg_sq"
        d[n] = d[n].T.copy()
    save_file(d, out, metadata={"step": "40"})


def subset(new, old, model):
    w = weights(model)
    a, _ = read_mask(new, w)
    b, _ = read_mask(old, w)
    back = sum(int((a[n] & ~b[n]).sum()) for n in a)
    report(back == 0, f"--from-mask: {back} weights the old mask pruned came back")


cmd, args = sys.argv[1], sys.argv[2:]
{"check": check, "apply": apply, "report": report_check, "svg": svg, "moments": moments,
 "subset": subset}[cmd](*args)
PY
REF="python3 $TMP/mask_ref.py"

models="tests/fixtures/model/llama"
have_shared && [ -d "$SHARED/models/stories260K" ] && models="$models $SHARED/models/stories260K"
for D in $models; do
    n=$(basename "$D")
    for S in 0.5 0.9; do
        "$M" --model "$D" --sparsity $S --saliency magnitude --out "$TMP/$n.$S.mask" --quiet
        $REF check "$D" "$TMP/$n.$S.mask" $S magnitude
    done
    # (--method magnitude: per tensor, floor(n S) pruned: at S = 0.5 and even n, group layer's count)
    "$M" --model "$D" --sparsity 0.5 --method magnitude --pack-bits --out "$TMP/$n.bits.mask" --quiet
    $REF check "$D" "$TMP/$n.bits.mask" 0.5 magnitude "" layer
    "$M" --model "$D" --sparsity 0.7 --saliency magnitude --group layer --out "$TMP/$n.layer.mask" --quiet
    $REF check "$D" "$TMP/$n.layer.mask" 0.7 magnitude "" layer
    "$M" --model "$D" --sparsity 0.5 --saliency magnitude --apply --out-model "$TMP/$n.pruned" \
        --out "$TMP/$n.a.mask" --report "$TMP/$n.json" --plot "$TMP/$n.svg" 2>"$TMP/$n.err"
    $REF apply "$D" "$TMP/$n.a.mask" "$TMP/$n.pruned"
    $REF report "$TMP/$n.a.mask" "$TMP/$n.json" "$D"
    $REF svg "$TMP/$n.svg" "$D"
    L=$(python3 -c "import json; print(json.load(open('$D/config.json'))['num_hidden_layers'])")
    python3 tests/svgcheck.py heatmap "$TMP/$n.svg" "$L" 0.5 | sed "s/^\(\(not \)*ok - \)/\1$n: /"
    check "$n: per-layer table on stderr" grep -q "prunable weights kept" "$TMP/$n.err"
    $REF moments "$D" "$TMP/$n.moments"
    for sal in second first; do
        "$M" --model "$D" --sparsity 0.6 --saliency $sal --moments "$TMP/$n.moments" --out "$TMP/$n.$sal.mask" --quiet
        $REF check "$D" "$TMP/$n.$sal.mask" 0.6 $sal "$TMP/$n.moments"
    done
    "$M" --model "$D" --sparsity 0.8 --moments "$TMP/$n.moments" --from-mask "$TMP/$n.0.5.mask" \
        --out "$TMP/$n.shrunk.mask" --quiet
    $REF subset "$TMP/$n.shrunk.mask" "$TMP/$n.0.5.mask" "$D"
done

D=tests/fixtures/model/llama
check "metadata of a second-order mask (step from the moments)" python3 -c "
from safetensors import safe_open
m = safe_open('$TMP/llama.second.mask', 'np').metadata()
assert m['format'] == 'best-mask' and m['saliency'] == 'second' and m['step'] == '40' and m['group'] == 'global', m
assert int(m['kept']) == int(round(0.4 * int(m['prunable']))), m"

# --mask FILE: an existing mask reported, drawn and applied as it is. The same mask's
# outputs are byte for byte those of the run that computed it (title included), and the
# title comes from the file's metadata (here a copy that says best-train made it).
"$M" --model $D --mask "$TMP/llama.a.mask" --report "$TMP/given.json" --plot "$TMP/given.svg" \
    --apply --out-model "$TMP/given.pruned" --quiet
check "--mask: report, heatmap and masked model identical to those of the run that made the mask" sh -c \
    "cmp '$TMP/given.json' '$TMP/llama.json' && cmp '$TMP/given.svg' '$TMP/llama.svg' && cmp '$TMP/given.pruned/model.safetensors' '$TMP/llama.pruned/model.safetensors'"
python3 -c "
from safetensors import safe_open
from safetensors.numpy import load_file, save_file
m = safe_open('$TMP/llama.bits.mask', 'np').metadata()
m.update(method='BEST', schedule='cubic', saliency='second', group='global', step='100', steps='200', sparsity='0.5')
save_file(load_file('$TMP/llama.bits.mask'), '$TMP/best.mask', metadata=m)
m['sparsity'] = 'half'
save_file(load_file('$TMP/llama.bits.mask'), '$TMP/badmeta.mask', metadata=m)"
"$M" --model $D --mask "$TMP/best.mask" --plot "$TMP/best.svg" --report "$TMP/best.json" --quiet
# (the long title fits: the picture widens for it)
python3 tests/svgcheck.py heatmap "$TMP/best.svg" 2 0.5 | sed "s/^\(\(not \)*ok - \)/\1--mask: /"
check "--mask: the heatmap's title and the report say what made the mask (method, schedule, saliency, step)" python3 -c "
import json, xml.etree.ElementTree as ET
t = [e.text for e in ET.parse('$TMP/best.svg').getroot().iter('{http://www.w3.org/2000/svg}text')]
assert t[0] == 'BEST, cubic schedule, second-order saliency, global, sparsity 0.5, mask set at step 100 of 200', t[0]
r = json.load(open('$TMP/best.json'))
assert (r['method'], r['schedule'], r['saliency'], r['step'], r['steps'], r['sparsity_requested']) == ('BEST', 'cubic', 'second', 100, 200, 0.5), r"

# Bad input: one error line, the right exit code, and no output file left behind.
$REF moments $D "$TMP/badname.moments" bad-name
$REF moments $D "$TMP/badshape.moments" bad-shape
O="$TMP/never"
expect_error "--mask with --sparsity" 2 "takes the mask as it is" "$M" --model $D --mask "$TMP/best.mask" --sparsity 0.5 --plot "$O"
expect_error "--mask with --out" 2 "takes the mask as it is" "$M" --model $D --mask "$TMP/best.mask" --out "$O"
expect_error "--mask with nothing to write" 2 "nothing to write" "$M" --model $D --mask "$TMP/best.mask"
expect_error "--mask of another shape" 1 "best.mask: tensor .* want bit-packed U8" "$M" --model tests/fixtures/model/qwen3 \
    --mask "$TMP/best.mask" --plot "$O"
expect_error "--mask with a sparsity that is not a number" 1 "badmeta.mask: metadata sparsity = \"half\" is not a number" \
    "$M" --model $D --mask "$TMP/badmeta.mask" --plot "$O"
expect_error "--mask that is not there" 1 "nowhere.mask" "$M" --model $D --mask "$TMP/nowhere.mask" --plot "$O"
expect_error "moments with an unknown name" 1 "qq_proj" "$M" --model $D --sparsity 0.5 --moments "$TMP/badname.moments" --out "$O"
expect_error "moments of the wrong shape" 1 "up_proj.weight.exp_avg_sq is F32 \[48,64\], want F32 \[64,48\]" \
    "$M" --model $D --sparsity 0.5 --moments "$TMP/badshape.moments" --out "$O"
if [ -f "$TMP/stories260K.0.5.mask" ]; then
    expect_error "--from-mask of another model" 1 "q_proj.weight is BOOL" "$M" --model $D --sparsity 0.5 \
        --saliency magnitude --from-mask "$TMP/stories260K.0.5.mask" --out "$O"
else
    skip "--from-mask of another model: stories260K not found"
fi
python3 -c "
import numpy as np; from safetensors.numpy import load_file, save_file
d = load_file('$TMP/llama.0.5.mask'); n = 'model.layers.0.mlp.down_proj.weight'; d[n] = d[n].T.copy()
save_file(d, '$TMP/transposed.mask')"
expect_error "--from-mask of the wrong shape" 1 "down_proj.weight is BOOL \[64,48\], want BOOL \[48,64\]" \
    "$M" --model $D --sparsity 0.6 --saliency magnitude --from-mask "$TMP/transposed.mask" --out "$O"
expect_error "--from-mask with a lower sparsity" 1 "only shrinks" "$M" --model $D --sparsity 0.3 \
    --saliency magnitude --from-mask "$TMP/llama.0.5.mask" --out "$O"
expect_error "sparsity 1.0" 2 "outside \[0, 1)" "$M" --model $D --sparsity 1.0 --saliency magnitude --out "$O"
expect_error "sparsity -0.1" 2 "outside \[0, 1)" "$M" --model $D --sparsity -0.1 --saliency magnitude --out "$O"
expect_error "second order without --moments" 2 "needs --moments" "$M" --model $D --sparsity 0.5 --out "$O"
expect_error "--method wanda without --calib" 2 "needs --calib SHARD" "$M" --model $D --sparsity 0.5 --method wanda --out "$O"
expect_error "--apply without --out-model" 2 "go together" "$M" --model $D --sparsity 0.5 --saliency magnitude --apply
expect_error "missing model" 1 "nowhere" "$M" --model "$TMP/nowhere" --sparsity 0.5 --saliency magnitude --out "$O"
check "no output file after the failures" test ! -e "$O"
check "--out inside the --out-model folder (the folder is written first)" sh -c \
    "'$M' --model $D --sparsity 0.5 --saliency magnitude --apply --out-model '$TMP/inside' --out '$TMP/inside/mask' --quiet && test -f '$TMP/inside/mask' && test -f '$TMP/inside/model.safetensors'"
check "no temp files left in $TMP" sh -c "! ls -a '$TMP' | grep -q '\.tmp\.'"
finish
