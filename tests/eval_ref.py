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
import json, math, os, sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import model_ref  # noqa: E402  (the reference modules: forward())
import safetensors_py  # noqa: E402
from shardio import write_shard  # noqa: E402

OUT = os.path.join(HERE, "fixtures", "eval")
SHARED = os.path.join(HERE, "..", "..", "shared")


def load_safetensors(path):
    """{name: float32 torch tensor}; a tensor of another dtype is an error (the fixtures are F32)."""
    return {k: torch.from_numpy(v) for k, v in safetensors_py.load(path, dtypes={"F32"}).items()}


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
