#!/usr/bin/env python3
"""make_tiny_tokenizer.py DIR: writes a small byte-level BPE tokenizer.json (GPT-2 style:
256 byte tokens, a few dozen merges, <|endoftext|>) so the tokenizer tests can run
without ../shared. The merges are chosen by hand from common English pairs; only
the format matters here, not their quality."""
import json, os, sys


def bytes_to_unicode():
    # The GPT-2 byte <-> printable character table (a published, fixed mapping).
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


b2u = bytes_to_unicode()
vocab = {b2u[b]: i for i, b in enumerate(range(256))}
merges = []
for pair in ["t h", "h e", "th e", "Ġ t", "Ġt he", "i n", "a n", "e r", "o n", "Ġ a", "r e", "a t", "e n", "Ġ s",
             "o u", "i s", "Ġ w", "a r", "e d", "Ġ c", "o r", "in g", "Ġ b", "an d", "n d", "Ġa nd", "Ġ o", "Ġ f"]:
    a, b = pair.split()
    merges.append(pair)
    vocab.setdefault(a + b, len(vocab))
eot = len(vocab)
tok = {
    "version": "1.0",
    "truncation": None, "padding": None,
    "added_tokens": [{"id": eot, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True}],
    "normalizer": None,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
    "post_processor": None,
    "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
              "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
              "vocab": vocab, "merges": merges},
}
os.makedirs(sys.argv[1], exist_ok=True)
with open(os.path.join(sys.argv[1], "tokenizer.json"), "w", encoding="utf-8") as f:
    json.dump(tok, f, ensure_ascii=False)
