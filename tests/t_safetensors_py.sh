#!/bin/sh
# t_safetensors_py.sh: our safetensors writer and reader against the Python
# `safetensors` package (the reference implementation, through numpy).
#   1. our writer's bytes == safetensors.numpy.save_file's bytes for the same tensors
#      (every numpy dtype, escapes in names, scalar and empty tensors), with no
#      metadata and with one metadata key;
#   2. with several metadata keys (Python's order is a Rust HashMap's, i.e. random)
#      the files agree once parsed: Python loads ours, and we read theirs the same;
#   3. our reader on a Python-written file of random tensors: names, dtypes, shapes,
#      byte hashes and float32 conversions agree with what numpy computes;
#   4. our float32 -> float16 rounding (through the writer's fill callback) is
#      bitwise numpy's astype(float16) on normals, subnormals, ties, overflow, NaN;
#   5. the tests' own Python reader (tests/safetensors_py.py) against the package: every
#      array, dtype, shape and metadata of the fixture, the random file and ours; a sharded
#      folder through its index.json (and a wrong index refused); truncated files refused
#      with ValueError; BF16 against torch's, with the venv's python (tests/hf_env.sh)
#      when it is there, and the same checks run by that python too.
# The C side is build/tests/test_safetensors --write-fixture / --dump.
. tests/lib.sh
: "${TBIN:=$(pwd)/build/tests}"
T="$TBIN/test_safetensors"
if [ ! -x "$T" ]; then fail "$T not built"; finish; fi
if ! have_py numpy || ! have_py safetensors; then
    skip "safetensors vs Python: needs python3 with numpy and safetensors (pip install safetensors numpy)"
    finish
fi

# The fixture of tests/test_safetensors.c, rebuilt in numpy. Keep the two in step.
cat >"$TMP/fixture.py" <<'EOF'
import json, struct, sys
import numpy as np
from safetensors.numpy import save_file, load_file
from safetensors import safe_open

SPECS = [
    ("z.bool", "BOOL", (3, 5)), ("a.u8", "U8", (7,)), ("m.i8", "I8", (2, 3)),
    ("b.i16", "I16", (4, 1)), ("c.u16", "U16", (5,)), ("weight", "F16", (3, 4)),
    ("model.layers.0.mlp.up_proj.weight", "F32", (4, 6)),
    ("model.layers.0.mlp.down_proj.weight", "F32", (6, 4)),
    ("i32", "I32", (2, 2, 2)), ("u32", "U32", (3,)), ("f64", "F64", (2, 3)),
    ("i64", "I64", ()), ("u64", "U64", (2,)), ("c64", "C64", (2,)), ("empty", "F32", (0, 4)),
    ("\u00fcn\u00efc\u00f6d\u00e9 \"q\" back\\slash\ttab\x01ctl\x7f/", "F32", (2,)),
    ("Zupper", "F32", (1,)), ("a", "F32", (1,)), ("a.b", "F32", (1,)),
]
NP = {"BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "I16": np.int16, "U16": np.uint16,
      "F16": np.float16, "F32": np.float32, "I32": np.int32, "U32": np.uint32,
      "F64": np.float64, "I64": np.int64, "U64": np.uint64, "C64": np.complex64}

def fixture():
    out = {}
    for k, (name, dt, shape) in enumerate(SPECS):
        n = int(np.prod(shape, dtype=np.int64)) * np.dtype(NP[dt]).itemsize
        if dt == "BOOL":
            b = bytes((j + k) & 1 for j in range(n))
        else:
            b = bytearray((j * 37 + k * 11 + 5) & 0xFF for j in range(n))
            if dt == "F16":
                for j in range(1, n, 2):
                    b[j] &= 0xBF
            b = bytes(b)
        out[name] = np.frombuffer(b, dtype=NP[dt]).reshape(shape)
    return out

def fnv(b):
    h = 1469598103934665603
    for c in b:
        h = ((h ^ c) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h

def hexs(s):
    return s.encode("utf-8").hex() or "-"

def dump(path):
    """What `test_safetensors --dump` prints, computed from the header with json + numpy."""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    arrays = load_file(path)
    lines = [f"meta {hexs(k)} {hexs(v)}" for k, v in header.get("__metadata__", {}).items()]
    entries = [(v["data_offsets"], k, v) for k, v in header.items() if k != "__metadata__"]
    for _, name, v in sorted(entries, key=lambda e: e[0]):
        a = arrays[name]
        shape = ",".join(str(d) for d in v["shape"]) or "-"
        line = f"tensor {hexs(name)} {v['dtype']} {shape} {a.nbytes} {fnv(a.tobytes()):016x}"
        if v["dtype"] in ("F16", "F32"):
            line += f" {fnv(a.astype(np.float32).tobytes()):016x}"
        lines.append(line)
    return "\n".join(lines) + "\n"

def same_arrays(a, b):
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and a[k].tobytes() == b[k].tobytes()
        for k in a)

cmd = sys.argv[1]
if cmd == "save":                      # save PATH [KEY=VALUE...]
    meta = dict(kv.split("=", 1) for kv in sys.argv[3:]) or None
    save_file(fixture(), sys.argv[2], metadata=meta)
elif cmd == "check":                   # check OURS KEY=VALUE...: Python reads ours
    meta = dict(kv.split("=", 1) for kv in sys.argv[3:])
    with safe_open(sys.argv[2], framework="np") as f:
        ok_meta = f.metadata() == meta
    ok = ok_meta and same_arrays(load_file(sys.argv[2]), fixture())
    sys.exit(0 if ok else 1)
elif cmd == "random":                  # random PATH: random tensors, then print the expected dump
    rng = np.random.default_rng(1234)
    t = {
        "model.embed_tokens.weight": rng.standard_normal((97, 64), dtype=np.float32),
        "model.layers.0.self_attn.q_proj.weight": rng.standard_normal((64, 64)).astype(np.float16),
        "model.norm.weight": np.ones(64, dtype=np.float32),
        "mask": rng.random((33, 17)) < 0.3,
        "packed": rng.integers(0, 256, (5, 13), dtype=np.uint8),
        "ids": rng.integers(-2**40, 2**40, (7,), dtype=np.int64),
        "idx32": rng.integers(0, 2**32, (9, 2), dtype=np.uint32),
        "d": rng.standard_normal((3, 3)),
        "scalar": np.array(3.5, dtype=np.float32),
        "nothing": np.zeros((2, 0, 3), dtype=np.int16),
    }
    save_file(t, sys.argv[2], metadata={"step": "40", "betas": "0.9,0.999", "format": "pt",
                                        "\u00e9t\u00e9": "\u2603 \"x\"\n"})
    sys.stdout.write(dump(sys.argv[2]))
elif cmd == "halfin":                  # halfin PATH: float32 values that stress rounding
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2**32, 200000, dtype=np.uint64).astype(np.uint32)
    ties = (bits & ~np.uint32(0x1FFF)) | np.uint32(0x1000)           # exact half-way cases
    small = rng.standard_normal(50000).astype(np.float32) * np.float32(2.0**-20)
    edge = np.array([0.0, -0.0, 65504, 65519.99, 65520, 65536, 1e-8, 2**-25, 2**-24, 1.5 * 2**-24,
                     6.1e-5, np.inf, -np.inf, np.nan], dtype=np.float32)
    save_file({"bits": bits.view(np.float32), "ties": ties.view(np.float32), "small": small,
               "edge": edge}, sys.argv[2])
elif cmd == "halfcheck":               # halfcheck IN OUT: OUT == IN.astype(float16), bitwise
    a, b = load_file(sys.argv[2]), load_file(sys.argv[3])
    bad = 0
    for k in a:
        with np.errstate(over="ignore", invalid="ignore"):
            want = a[k].astype(np.float16).view(np.uint16)
        got = b[k].view(np.uint16)
        nan = np.isnan(a[k])
        # NaN: numpy keeps payload bits; we promise only "still NaN"
        bad += int(np.sum((want != got) & ~nan)) + int(np.sum(~np.isnan(b[k][nan])))
    print(bad)
    sys.exit(0 if bad == 0 else 1)
elif cmd == "dump":
    sys.stdout.write(dump(sys.argv[2]))
elif cmd == "reader":                  # reader PATH...: safetensors_py reads as the package does
    sys.path.insert(0, "tests")
    import safetensors_py as sp
    for path in sys.argv[2:]:
        ref, ours, raw = load_file(path), sp.load(path), sp.raw(path)
        with safe_open(path, framework="np") as f:
            meta = f.metadata() or {}
        n = struct.unpack("<Q", open(path, "rb").read(8))[0]
        if not (same_arrays(ref, ours) and all(ours[k].flags.writeable for k in ours)
                and sp.metadata(path) == meta and sp.header(path)[2] == 8 + n
                and all(np.dtype(sp.NUMPY[raw[k][0]]) == v.dtype and raw[k][1] == list(v.shape)
                        and raw[k][2] == v.tobytes() for k, v in ref.items())):
            sys.exit(f"{path}: safetensors_py differs from the package")
elif cmd == "shards":                  # shards SRC DIR: SRC split in two shards with an index
    sys.path.insert(0, "tests")
    import os, safetensors_py as sp
    whole = load_file(sys.argv[2])
    names = list(whole)
    parts = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    d = sys.argv[3]
    os.makedirs(d)
    for f, ks in parts.items():
        save_file({k: whole[k] for k in ks}, os.path.join(d, f))
    index = {"metadata": {}, "weight_map": {k: f for f, ks in parts.items() for k in ks}}
    json.dump(index, open(os.path.join(d, "model.safetensors.index.json"), "w"))
    if not same_arrays(sp.load_folder(d), whole):
        sys.exit("load_folder: the shards differ from the whole file")
    index["weight_map"][names[0]] = "model-00002-of-00002.safetensors"
    json.dump(index, open(os.path.join(d, "model.safetensors.index.json"), "w"))
    try:
        sp.load_folder(d)
        sys.exit("load_folder: a wrong index was accepted")
    except ValueError:
        pass
elif cmd == "truncated":               # truncated PATH TMPFILE: every cut refused with ValueError
    sys.path.insert(0, "tests")
    import safetensors_py as sp
    b = open(sys.argv[2], "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    for cut in (0, 5, 8, 8 + n // 2, 8 + n, len(b) - 1):
        open(sys.argv[3], "wb").write(b[:cut])
        for f in (sp.load, sp.raw, sp.header):
            try:
                f(sys.argv[3])
                if f is not sp.header or cut < 8 + n:
                    sys.exit(f"{f.__name__} accepted a file cut at {cut} of {len(b)} bytes")
            except ValueError:
                pass
elif cmd == "bf16":                    # bf16 PATH: torch's BF16 file read as torch reads it
    sys.path.insert(0, "tests")
    import torch, safetensors_py as sp
    from safetensors.torch import save_file as save_torch
    g = torch.Generator().manual_seed(3)
    t = {"w": torch.randn(37, 11, generator=g).to(torch.bfloat16), "h": torch.randn(5, generator=g).to(torch.float16)}
    save_torch(t, sys.argv[2], metadata={"format": "pt"})
    wide, bits = sp.load(sys.argv[2]), sp.load(sys.argv[2], bf16="bits")
    f32 = sp.load(sys.argv[2], float32=True)
    ok = (np.array_equal(wide["w"], t["w"].float().numpy()) and
          np.array_equal(bits["w"], t["w"].view(torch.int16).numpy().view(np.uint16)) and
          np.array_equal(f32["h"], t["h"].float().numpy()) and f32["h"].dtype == np.float32 and
          wide["h"].dtype == np.float16 and sp.metadata(sys.argv[2]) == {"format": "pt"})
    try:
        sp.load(sys.argv[2], dtypes={"F32"})
        ok = False
    except ValueError:
        pass
    sys.exit(0 if ok else 1)
EOF
PY="python3 $TMP/fixture.py"

# 1. byte-identical writer output
for meta in "" "format=np"; do
    label=${meta:-no metadata}
    "$T" --write-fixture "$TMP/ours.st" $meta 2>"$TMP/err" || { fail "our writer ($label): $(cat "$TMP/err")"; continue; }
    $PY save "$TMP/theirs.st" $meta || { fail "Python save_file ($label)"; continue; }
    if cmp -s "$TMP/ours.st" "$TMP/theirs.st"; then ok "writer byte-identical to safetensors.numpy.save_file ($label)"
    else fail "writer differs from save_file ($label): $(cmp "$TMP/ours.st" "$TMP/theirs.st" | head -1)"; fi
done

# 2. several metadata keys: equal once parsed, both ways
set -- "format=pt" "step=40" "betas=0.9,0.999" "schedule=cubic" "note=caf$(printf '\303\251') \"q\""
"$T" --write-fixture "$TMP/ours.st" "$@" && check "Python loads our file: metadata and arrays equal" $PY check "$TMP/ours.st" "$@"
$PY save "$TMP/theirs.st" "$@"
"$T" --dump "$TMP/ours.st" | sort >"$TMP/d1"
"$T" --dump "$TMP/theirs.st" | sort >"$TMP/d2"
if [ -s "$TMP/d1" ] && cmp -s "$TMP/d1" "$TMP/d2"; then ok "with 5 metadata keys: same entries as Python's file (key order aside)"
else fail "5 metadata keys: our file and Python's differ after parsing"; fi
$PY dump "$TMP/theirs.st" >"$TMP/d3"
"$T" --dump "$TMP/theirs.st" >"$TMP/d4"
if cmp -s "$TMP/d3" "$TMP/d4"; then ok "our reader on Python's fixture: every entry as Python sees it"
else fail "reader disagrees on Python's fixture: $(diff "$TMP/d3" "$TMP/d4" | head -3)"; fi

# 3. our reader on Python-written random tensors
if $PY random "$TMP/rand.st" >"$TMP/want" && "$T" --dump "$TMP/rand.st" >"$TMP/got" 2>"$TMP/err"; then
    if cmp -s "$TMP/want" "$TMP/got"; then ok "reader on Python's random tensors (F32 F16 F64 BOOL U8 I64 U32 I16, scalar, empty): identical dump"
    else fail "reader on Python's random tensors: $(diff "$TMP/want" "$TMP/got" | head -3)"; fi
else
    fail "random tensors: $(cat "$TMP/err")"
fi

# 4. float32 -> float16 rounding against numpy
if $PY halfin "$TMP/f32.st" && "$T" --to-f16 "$TMP/f32.st" "$TMP/f16.st" 2>"$TMP/err"; then
    if n=$($PY halfcheck "$TMP/f32.st" "$TMP/f16.st"); then ok "float32 -> float16 bitwise as numpy on 450014 values (ties, subnormals, overflow)"
    else fail "float32 -> float16: $n values differ from numpy"; fi
else
    fail "float16 conversion: $(cat "$TMP/err")"
fi

# 5. the tests' Python reader (tests/safetensors_py.py) against the package
"$T" --write-fixture "$TMP/ours5.st" "format=np" 2>/dev/null
$PY save "$TMP/fix5.st" "format=pt" "step=3"
check "safetensors_py reads the fixture, the random file and ours as the package does" \
    $PY reader "$TMP/fix5.st" "$TMP/rand.st" "$TMP/ours5.st"
check "safetensors_py.load_folder: a sharded folder through its index.json; a wrong index refused" \
    $PY shards "$TMP/rand.st" "$TMP/sharded"
check "safetensors_py: a file cut anywhere is a ValueError" $PY truncated "$TMP/rand.st" "$TMP/cut.st"
. tests/hf_env.sh
if "$HF_PY" -c "import torch, numpy, safetensors" 2>/dev/null; then
    check "safetensors_py: BF16 and F16 as torch reads them (the venv's python)" \
        "$HF_PY" "$TMP/fixture.py" bf16 "$TMP/bf16.st"
    check "safetensors_py under the venv's python: the same files as the package" \
        "$HF_PY" "$TMP/fixture.py" reader "$TMP/fix5.st" "$TMP/rand.st" "$TMP/ours5.st"
else
    skip "safetensors_py on BF16: no venv with torch ($HF_PY; make deps makes it)"
fi
finish
