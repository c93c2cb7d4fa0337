#!/usr/bin/python3
# eval_ref.py: the PyTorch reference for best-eval's perplexity. Writes
# tests/fixtures/eval/expected.json (and a token shard for the tiny Qwen3), which
# tests/t_eval.sh compares best-eval --json with (relative error 1e-4).
#
#   stories260K: ../shared/models/stories260K on ../shared/data/stories260K/valid.jsonl,
#     the documents joined with " " and tokenized once by sentencepiece with one BOS
#     (the C4 protocol of SparseGPT/Wanda), first MAX_TOKENS tokens, windows of SEQ.
#   qwen3: tests/fixtures/model/qwen3 (a tiny random Qwen3: GQA, q/k norm, tied) on
#     1280 seeded random tokens written as a shard, windows of 64.
#
# The protocol computed here independently of the C code: non-overlapping windows of
# seq tokens (the remainder dropped), each window's tokens 1..seq-1 predicted from
# the ones before, ppl = exp(sum of nll / predicted tokens).
#
# Run with Debian's python3-torch and python3-sentencepiece: /usr/bin/python3 tests/eval_ref.py
import json, math, os, struct, sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import model_ref  # noqa: E402  (the reference modules: forward())

OUT = os.path.join(HERE, "fixtures", "eval")
SHARED = os.path.join(HERE, "..", "..", "shared")


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", name
        a, b = t["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(data[a:b], dtype="<f4").reshape(t["shape"]).copy())
    return out


def perplexity(folder, tokens, seq):
    cfg = json.load(open(os.path.join(folder, "config.json")))
    cfg.setdefault("rope_theta", 10000.0)
    w = load_safetensors(os.path.join(folder, "model.safetensors"))
    nwin = len(tokens) // seq
    x = torch.tensor(tokens[: nwin * seq], dtype=torch.int64).view(nwin, seq)
    total = 0.0
    with torch.no_grad():
        for i in range(nwin):
            logits = model_ref.forward(w, cfg, x[i : i + 1]).double()
            total += F.cross_entropy(logits[0, :-1], x[i, 1:], reduction="sum").item()
    ntok = nwin * (seq - 1)
    return {"ppl": math.exp(total / ntok), "nll": total, "tokens": ntok, "windows": nwin, "seq": seq}


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


def write_shard(path, tokens, vocab):
    payload = np.asarray(tokens, dtype="<u2").tobytes()
    head = b"BESTSHRD" + struct.pack("<IIIIQQQQ", 1, 2, vocab, 0, len(tokens), 1, xxh64(payload), 0)
    head += struct.pack("<Q", xxh64(head))
    with open(path, "wb") as f:
        f.write(head + payload)


def main():
    os.makedirs(OUT, exist_ok=True)
    expected = {}
    # Tiny Qwen3 on random tokens.
    gen = torch.Generator().manual_seed(7)
    toks = torch.randint(0, 97, (1280,), generator=gen).tolist()
    write_shard(os.path.join(OUT, "qwen3_tokens.bin"), toks, 97)
    expected["qwen3"] = perplexity(os.path.join(HERE, "fixtures", "model", "qwen3"), toks, 64)
    # stories260K on its validation stories.
    s = os.path.join(SHARED, "models", "stories260K")
    if os.path.isdir(s):
        import sentencepiece as spm
        docs = [json.loads(l)["text"] for l in open(os.path.join(SHARED, "data/stories260K/valid.jsonl"), encoding="utf-8") if l.strip()]
        sp = spm.SentencePieceProcessor(model_file=os.path.join(s, "tokenizer.model"))
        ids = [1] + sp.encode(" ".join(docs))
        max_tokens, seq = 16384, 256
        r = perplexity(s, ids[:max_tokens], seq)
        r["max_tokens"] = max_tokens
        expected["stories260K"] = r
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
    print(json.dumps(expected, indent=1))


main()
