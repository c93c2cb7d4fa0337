#!/usr/bin/env python3
"""make_tokenizer.py DIR [CORPUS.jsonl [MERGES]]: writes DIR/tokenizer.json, a GPT-2 style
byte-level BPE tokenizer (the 256 byte tokens, MERGES merges learned from CORPUS, then
<|endoftext|>) in the Hugging Face layout that best-tokenize and `tokenizers` read.

Without a corpus (or with MERGES 0) it is pure byte-level: 256 byte tokens and
<|endoftext|>. With one, merges are learned the textbook way (Sennrich et al.): split the
text into words as GPT-2's pre-tokenizer does, count the words, then repeatedly merge the
most frequent adjacent pair, ties broken by the pair's text so that the result does not
depend on dict order. Only the first 4 MB of the corpus are read: the demo's grammar has
a few hundred distinct words, so more text would not change the merges.

Byte-level with the GPT-2 conventions means no BOS, and best-tokenize appends
<|endoftext|> after each document, so a model trained on it learns where stories end.
The words are split here with an ASCII approximation of GPT-2's regex (\\p{L} -> [A-Za-z]);
that only decides which merges are learned: best-tokenize applies the real regex.
make_tokenizer.py --config TEMPLATE.json OUT.json TOKENIZER.json: writes a model config
for that tokenizer: TEMPLATE with bos_token_id and eos_token_id set to <|endoftext|>'s id,
after checking that vocab_size is exactly the tokenizer's size (pipelines/demo.mk uses it
so that the committed pipelines/demo-config.json cannot drift from the tokenizer). Exactly:
a model row without a token would be an id that sampling can draw and nobody can decode.

Not here: the corpus (make_corpus.py) and the model's config (pipelines/demo-config.json).
"""
import collections
import json
import os
import re
import sys


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


WORD = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")


def word_counts(path, b2u, limit=4 << 20):
    counts = collections.Counter()
    with open(path, encoding="utf-8") as f:
        text = f.read(limit)
    for line in text.splitlines()[:-1]:  # the last line may be cut by the limit
        if not line.strip():
            continue
        for w in WORD.findall(json.loads(line)["text"]):
            counts["".join(b2u[b] for b in w.encode("utf-8"))] += 1
    return counts


def learn_merges(counts, n_merges):
    words = [(list(w), c) for w, c in counts.items()]
    merges = []
    for _ in range(n_merges):
        pairs = collections.Counter()
        for sym, c in words:
            for a, b in zip(sym, sym[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        if pairs[best] < 2:
            break
        merges.append(best)
        joined = best[0] + best[1]
        for sym, _ in words:
            i = 0
            while i < len(sym) - 1:
                if sym[i] == best[0] and sym[i + 1] == best[1]:
                    sym[i:i + 2] = [joined]
                i += 1
    return merges


def write_config(template, out, tokenizer):
    with open(template, encoding="utf-8") as f:
        cfg = json.load(f)
    with open(tokenizer, encoding="utf-8") as f:
        tok = json.load(f)
    eot = [t["id"] for t in tok["added_tokens"] if t["content"] == "<|endoftext|>"][0]
    n = max(len(tok["model"]["vocab"]), eot + 1)
    if cfg["vocab_size"] != n:
        sys.exit(f"make_tokenizer: {template}: vocab_size {cfg['vocab_size']} but {tokenizer} has {n} tokens "
                 f"(change MERGES or vocab_size)")
    cfg["bos_token_id"] = cfg["eos_token_id"] = eot
    with open(out + ".tmp", "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    os.replace(out + ".tmp", out)


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--config":
        write_config(*sys.argv[2:])
        return
    if len(sys.argv) < 2:
        sys.exit("usage: make_tokenizer.py DIR [CORPUS.jsonl [MERGES]]")
    out = sys.argv[1]
    corpus = sys.argv[2] if len(sys.argv) > 2 else None
    n_merges = int(sys.argv[3]) if len(sys.argv) > 3 else 255
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    merges = learn_merges(word_counts(corpus, b2u), n_merges) if corpus and n_merges > 0 else []
    for a, b in merges:
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
                  "vocab": vocab, "merges": [a + " " + b for a, b in merges]},
    }
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "tokenizer.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    os.replace(path + ".tmp", path)
    print(f"make_tokenizer: {path}: {len(vocab)} tokens + <|endoftext|> = {eot + 1} ({len(merges)} merges)",
          file=sys.stderr)


if __name__ == "__main__":
    main()
