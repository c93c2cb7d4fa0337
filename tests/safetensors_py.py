"""safetensors_py.py: the one safetensors reader of the Python tests and benchmarks, with
nothing but the standard library and numpy (load() alone; Debian's python3 with torch has no
`safetensors` module, and a test that checks our C reader should not lean on a second
reader it cannot see). The format (https://github.com/huggingface/safetensors): 8 bytes
little-endian N, N bytes of JSON {name: {dtype, shape, data_offsets}, "__metadata__":
{str: str}}, then the tensors' bytes, offsets relative to the end of the JSON.

  header(path)        -> (entries {name: {dtype, shape, data_offsets}} in file order,
                          metadata {str: str}, base: the file offset of the first data byte)
  raw(path)           -> {name: (dtype, shape, bytes)}: any dtype, BF16 included
  load(path, ...)     -> {name: numpy array}, writable, in file order
  load_folder(folder) -> load() over model.safetensors, or over the shards that
                          model.safetensors.index.json names
  folder_files(folder)-> the safetensors files of a model folder, in that order

The C reader is lib/io/safetensors.c; tests/t_safetensors_py.sh checks this module against
the `safetensors` package where python3 has it. Writers are not here: the tests that write
files either use the package's save_file or write the few lines they need.

Import it from a script in tests/ as `from safetensors_py import load` (a script's folder
is on sys.path), from elsewhere after sys.path.insert(0, "<repo>/tests").
"""
import json
import os
import struct

# dtype -> numpy dtype (little-endian); BF16 has none: load() widens it to float32 or
# gives its bits as uint16 (bf16="bits"). numpy is imported by load() alone, so that
# header(), raw() and metadata() need only the standard library.
NUMPY = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2", "BOOL": "?", "U8": "u1", "I8": "i1",
    "U16": "<u2", "I16": "<i2", "U32": "<u4", "I32": "<i4", "U64": "<u8", "I64": "<i8",
    "C64": "<c8",
}
SIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "BOOL": 1, "U8": 1, "I8": 1, "U16": 2, "I16": 2,
        "U32": 4, "I32": 4, "U64": 8, "I64": 8, "C64": 8}


def _parse(buf, path):
    """(entries, metadata, base) from the first bytes of a file, checked against its size."""
    if len(buf) < 8:
        raise ValueError(f"{path}: {len(buf)} bytes, shorter than the 8-byte header length")
    n = struct.unpack_from("<Q", buf, 0)[0]
    if 8 + n > len(buf):
        raise ValueError(f"{path}: header of {n} bytes, past the end of the file")
    head = json.loads(bytes(buf[8:8 + n]).decode("utf-8"))
    meta = head.pop("__metadata__", None) or {}
    return head, meta, 8 + n


def _check(entries, base, size, path):
    for name, t in entries.items():
        a, b = t["data_offsets"]
        count = 1
        for d in t["shape"]:
            count *= d
        if not 0 <= a <= b <= size - base:
            raise ValueError(f"{path}: tensor {name}: data_offsets {a}..{b} outside the {size - base} data bytes")
        if t["dtype"] in SIZE and b - a != count * SIZE[t["dtype"]]:
            raise ValueError(f"{path}: tensor {name}: {b - a} bytes for shape {t['shape']} of {t['dtype']}")


def header(path):
    """(entries, metadata, base) without reading the tensors: entries in the file's order,
    metadata {} when the file has none, base the offset of the first data byte."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        first = f.read(8)
        n = struct.unpack_from("<Q", first)[0] if len(first) == 8 else 0
        buf = first + f.read(n if 8 + n <= size else 0)
    entries, meta, base = _parse(buf, path)
    _check(entries, base, size, path)
    return entries, meta, base


def _read(path):
    with open(path, "rb") as f:
        buf = bytearray(f.read())
    entries, meta, base = _parse(buf, path)
    _check(entries, base, len(buf), path)
    return buf, entries, meta, base


def raw(path):
    """{name: (dtype, shape, bytes)} for every tensor, whatever its dtype."""
    buf, entries, _, base = _read(path)
    return {k: (t["dtype"], t["shape"], bytes(buf[base + t["data_offsets"][0]:base + t["data_offsets"][1]]))
            for k, t in entries.items()}


def metadata(path):
    return header(path)[1]


def load(path, dtypes=None, float32=False, bf16="float32"):
    """{name: numpy array} (writable; views of one buffer). dtypes: the dtype names
    accepted (a set), any other one is a ValueError naming the tensor; None accepts all.
    float32=True widens F16 and BF16 to float32 (exact), as the float reference models
    want. BF16 otherwise: bf16="float32" widens it, bf16="bits" gives its uint16 bits."""
    import numpy as np
    buf, entries, _, base = _read(path)
    out = {}
    for name, t in entries.items():
        dt = t["dtype"]
        if dtypes is not None and dt not in dtypes:
            raise ValueError(f"{path}: tensor {name}: dtype {dt} not handled here (only {', '.join(sorted(dtypes))})")
        a, b = t["data_offsets"]
        if dt == "BF16":
            bits = np.frombuffer(buf, "<u2", (b - a) // 2, base + a)
            arr = bits if bf16 == "bits" and not float32 else (bits.astype(np.uint32) << 16).view(np.float32)
        elif dt in NUMPY:
            arr = np.frombuffer(buf, NUMPY[dt], (b - a) // SIZE[dt], base + a)
            if float32 and dt == "F16":
                arr = arr.astype(np.float32)
        else:
            raise ValueError(f"{path}: tensor {name}: unknown dtype {dt}")
        out[name] = arr.reshape(t["shape"])
    return out


def folder_files(folder):
    """The safetensors files of a model folder: the shards named by
    model.safetensors.index.json (in the order of their first tensor), else model.safetensors."""
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        files = list(dict.fromkeys(weight_map.values()))
        return [os.path.join(folder, f) for f in files]
    return [os.path.join(folder, "model.safetensors")]


def load_folder(folder, **kw):
    """load() over a model folder's files (one, or the shards of an index), merged; a
    tensor in two shards, or not where the index says, is a ValueError."""
    out, index = {}, os.path.join(folder, "model.safetensors.index.json")
    weight_map = json.load(open(index))["weight_map"] if os.path.exists(index) else None
    for path in folder_files(folder):
        for name, arr in load(path, **kw).items():
            if name in out:
                raise ValueError(f"{folder}: tensor {name} in two files")
            if weight_map is not None and weight_map.get(name) != os.path.basename(path):
                raise ValueError(f"{folder}: tensor {name} in {os.path.basename(path)}, the index says {weight_map.get(name)}")
            out[name] = arr
    if weight_map is not None and set(weight_map) != set(out):
        raise ValueError(f"{folder}: the index names {len(weight_map)} tensors, the files hold {len(out)}")
    return out
