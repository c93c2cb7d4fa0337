# shardio.py: writes best's token shards from Python (docs/formats.md), for test
# fixtures: the format's XXH64 checksums computed from the published specification.
import struct

import numpy as np


def xxh64(data, seed=0):
    # XXH64 from its published specification, for the shard checksums.
    P1, P2, P3, P4, P5 = 11400714785074694791, 14029467366897019727, 1609587929392839161, 9650029242287828579, 2870177450012600261
    M = (1 << 64) - 1
    rotl = lambda x, r: ((x << r) | (x >> (64 - r))) & M
    def rnd(acc, lane):
        return (rotl((acc + lane * P2) & M, 31) * P1) & M
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + P1 + P2) & M, (seed + P2) & M, seed, (seed - P1) & M]
        while i + 32 <= n:
            for k in range(4):
                v[k] = rnd(v[k], struct.unpack_from("<Q", data, i + 8 * k)[0])
            i += 32
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M
        for k in range(4):
            h = ((h ^ rnd(0, v[k])) * P1 + P4) & M
    else:
        h = (seed + P5) & M
    h = (h + n) & M
    while i + 8 <= n:
        h = (rotl(h ^ rnd(0, struct.unpack_from("<Q", data, i)[0]), 27) * P1 + P4) & M
        i += 8
    if i + 4 <= n:
        h = (rotl(h ^ (struct.unpack_from("<I", data, i)[0] * P1 & M), 23) * P2 + P3) & M
        i += 4
    while i < n:
        h = (rotl(h ^ (data[i] * P5 & M), 11) * P1) & M
        i += 1
    h = ((h ^ (h >> 33)) * P2) & M
    h = ((h ^ (h >> 29)) * P3) & M
    return h ^ (h >> 32)


def write_shard(path, tokens, vocab, tokenizer_hash=0):
    payload = np.asarray(tokens, dtype="<u2").tobytes()
    head = b"BESTSHRD" + struct.pack("<IIIIQQQQ", 1, 2, vocab, 0, len(tokens), 1, xxh64(payload), tokenizer_hash)
    head += struct.pack("<Q", xxh64(head))
    with open(path, "wb") as f:
        f.write(head + payload)
