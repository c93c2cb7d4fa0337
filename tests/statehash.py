# statehash.py: the content hash of best-train's state files (docs/formats.md), computed
# here from the format's description, with XXH64 from its published specification
# (shardio.py): the test's own reading of the rule, not the C code's.
#   python3 statehash.py hash FILE        prints the content hash of FILE
#   python3 statehash.py seal FILE        sets FILE's metadata content_hash to its hash
# seal lets a test edit a state (metadata, a tensor) and keep it self-consistent, so that
# what is checked is the edited value, not the hash.
import sys

from safetensors_py import metadata, raw
from shardio import xxh64


def content_hash(path):
    tensors, meta = raw(path), metadata(path)
    out = bytearray()
    for k in sorted(meta, key=lambda s: s.encode()):
        if k != "content_hash":
            out += k.encode() + b"\0" + meta[k].encode() + b"\0"
    for name in sorted(tensors, key=lambda s: s.encode()):
        dtype, shape, data = tensors[name]
        dims = ",".join(str(d) for d in shape)
        out += name.encode() + b"\0" + dtype.encode() + b"\0" + dims.encode() + b"\0" + data
    return "%016x" % xxh64(bytes(out))


def seal(path):
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file
    d, m = load_file(path), safe_open(path, "np").metadata()
    m["content_hash"] = content_hash(path)
    save_file(d, path, metadata=m)


if __name__ == "__main__":
    if sys.argv[1] == "hash":
        print(content_hash(sys.argv[2]))
    else:
        seal(sys.argv[2])
