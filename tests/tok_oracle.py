#!/usr/bin/env python3
"""tok_oracle.py: best-tokenize against the reference tokenizers, document by document.

For each (tokenizer, data file) pair it runs `best-tokenize --ids --no-bos --no-eos`
and the reference (sentencepiece for tokenizer.model, HF `tokenizers` for the rest),
and requires identical ids on every document; then `--decode --jsonl` on our ids
must give back the original text (every tokenizer here is lossless on this data).
Prints one "ok - ..." / "not ok - ..." / "skip - ..." line per check.

usage: tok_oracle.py BIN SHARED
"""
import json, os, subprocess, sys, tempfile

BIN, SHARED = sys.argv[1], sys.argv[2]
failed = False


def report(ok, what):
    global failed
    print(("ok - " if ok else "not ok - ") + what, flush=True)
    failed |= not ok


def load_docs(path):
    if path.endswith(".txt"):
        with open(path, encoding="utf-8", newline="") as f:
            return [f.read()]
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f if line.strip()]


def reference(kind, path):
    if kind == "spm":
        import sentencepiece as spm
        sp = spm.SentencePieceProcessor(model_file=path)
        return lambda texts: [sp.encode(t) for t in texts]
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders
    if kind == "hf":
        tk = Tokenizer.from_file(path)
    else:  # gpt2: vocab.json + merges.txt, as GPT2TokenizerFast builds it (no specials)
        tk = Tokenizer(models.BPE.from_file(os.path.join(path, "vocab.json"), os.path.join(path, "merges.txt")))
        tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tk.decoder = decoders.ByteLevel()
    return lambda texts: [e.ids for e in tk.encode_batch(texts, add_special_tokens=False)]


def ours(tok, data, tmp):
    out = os.path.join(tmp, "ids.txt")
    cmd = [os.path.join(BIN, "best-tokenize"), "--tokenizer", tok, "--ids", "--no-bos", "--no-eos",
           "--quiet", "--out", out, data]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    with open(out) as f:
        ids = [[int(x) for x in line.split()] for line in f]
    return ids, out


def roundtrip(tok, idsfile, docs):
    r = subprocess.run([os.path.join(BIN, "best-tokenize"), "--tokenizer", tok, "--decode", "--jsonl", "--quiet",
                        idsfile], capture_output=True)
    if r.returncode != 0:
        return False, r.stderr.decode(errors="replace").strip()
    back = [json.loads(line)["text"] for line in r.stdout.decode("utf-8").splitlines()]
    bad = [i for i, (a, b) in enumerate(zip(back, docs)) if a != b]
    if len(back) != len(docs) or bad:
        i = bad[0] if bad else -1
        return False, f"{len(bad)} documents differ (first {i}: {back[i][:60]!r} vs {docs[i][:60]!r})"
    return True, ""


def main():
    c4 = os.path.join(SHARED, "data/c4/c4-train.00000-of-01024.first1000.jsonl")
    wiki = os.path.join(SHARED, "data/wikitext2/wiki.test.joined.txt")
    T = os.path.join(SHARED, "tokenizers")
    cases = [
        ("llama2 tokenizer.model", "spm", f"{T}/llama2/tokenizer.model", f"{T}/llama2/tokenizer.model"),
        ("qwen2 tokenizer.json", "hf", f"{T}/qwen2/tokenizer.json", f"{T}/qwen2/tokenizer.json"),
        ("qwen2 vocab.json+merges.txt", "hf", f"{T}/qwen2/tokenizer.json", f"{T}/qwen2/vocab.json"),
        ("gpt2 vocab.json+merges.txt", "gpt2", f"{T}/gpt2", f"{T}/gpt2/vocab.json"),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for name, kind, refpath, ourpath in cases:
            try:
                ref = reference(kind, refpath)
            except ImportError as e:
                print(f"skip - {name}: reference library missing ({e})")
                continue
            for data in (c4, wiki):
                docs = load_docs(data)
                want = ref(docs)
                got, info = ours(ourpath, data, tmp)
                what = f"{name} on {os.path.basename(data)} ({len(docs)} docs, {sum(map(len, want))} tokens)"
                if got is None:
                    report(False, f"{what}: best-tokenize failed: {info}")
                    continue
                bad = [i for i in range(len(want)) if i >= len(got) or got[i] != want[i]]
                if bad or len(got) != len(want):
                    i = bad[0] if bad else len(want)
                    k = next((j for j, (a, b) in enumerate(zip(got[i], want[i])) if a != b), None) if i < len(got) else None
                    report(False, f"{what}: {len(bad)} documents differ; first doc {i} at token {k}: "
                                  f"ours {got[i][k:k+8] if k is not None and i < len(got) else '-'} "
                                  f"ref {want[i][k:k+8] if k is not None else '-'}")
                else:
                    report(True, f"{what}: identical ids")
                ok, why = roundtrip(ourpath, info, docs)
                report(ok, f"{name} on {os.path.basename(data)}: decode(encode(x)) == x {why}")
    sys.exit(1 if failed else 0)


main()
