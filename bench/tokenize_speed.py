#!/usr/bin/env python3
"""tokenize_speed.py: best-tokenize throughput against sentencepiece and HF tokenizers.

Same text for everybody: the C4 sample of ../shared plus WikiText-2's test split cut
into paragraphs, all distinct text (repeating text would flatter our word caches),
about 4,400 documents and 3.6 MB; REPEAT > 1 repeats it for longer runs. The peers are timed on encode alone, their
loading excluded. best-tokenize is timed as a whole process (load, read the
.jsonl, encode, write a shard) and, for an encode-only figure, minus a run on an
empty input (its loading time). Ids are checked identical before any number is
printed. Ratios = our tokens/s over the faster peer's tokens/s, in this run.

usage: python3 bench/tokenize_speed.py [BIN] [SHARED] [REPEAT]
"""
import json, os, subprocess, sys, tempfile, time

BIN = sys.argv[1] if len(sys.argv) > 1 else "bin"
SHARED = sys.argv[2] if len(sys.argv) > 2 else "../shared"
REPEAT = int(sys.argv[3]) if len(sys.argv) > 3 else 1
NCPU = os.cpu_count()

if os.environ.get("BENCH_WORKER"):
    # A child that times one peer with a given thread count (RAYON_NUM_THREADS must
    # be set before tokenizers starts its pool, hence a separate process).
    kind, path, data, threads = sys.argv[4:8]
    threads = int(threads)
    docs = [json.loads(l)["text"] for l in open(data, encoding="utf-8") if l.strip()]
    if kind == "spm":
        import sentencepiece as spm
        sp = spm.SentencePieceProcessor(model_file=path)
        t = time.perf_counter()
        ids = sp.encode(docs, num_threads=threads)
    else:
        from tokenizers import Tokenizer
        tk = Tokenizer.from_file(path)
        t = time.perf_counter()
        ids = [e.ids for e in tk.encode_batch(docs, add_special_tokens=False)]
    dt = time.perf_counter() - t
    print(json.dumps({"seconds": dt, "tokens": sum(map(len, ids)), "first": ids[0][:20], "last": ids[-1][-20:]}))
    sys.exit(0)


def peer(kind, path, data, threads):
    env = dict(os.environ, BENCH_WORKER="1", RAYON_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="true")
    r = subprocess.run([sys.executable, __file__, BIN, SHARED, str(REPEAT), kind, path, data, str(threads)],
                       env=env, capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def ours(tok, data, threads, tmp):
    cmd = [os.path.join(BIN, "best-tokenize"), "--tokenizer", tok, "--threads", str(threads), "--quiet",
           "--no-bos", "--no-eos", "--out", os.path.join(tmp, "x.bin")]
    empty = os.path.join(tmp, "empty.jsonl")
    open(empty, "w").close()
    best_load = min(_timed(cmd + [empty]) for _ in range(3))
    best_all = min(_timed(cmd + [data]) for _ in range(3))
    ids = subprocess.run([os.path.join(BIN, "best-tokenize"), "--tokenizer", tok, "--ids", "--quiet", "--no-bos",
                          "--no-eos", data], capture_output=True, text=True, check=True).stdout.splitlines()
    return best_all, best_load, [int(x) for x in ids[0].split()][:20], [int(x) for x in ids[-1].split()][-20:]


def _timed(cmd):
    t = time.perf_counter()
    subprocess.run(cmd, check=True)
    return time.perf_counter() - t


def main():
    c4 = os.path.join(SHARED, "data/c4/c4-train.00000-of-01024.first1000.jsonl")
    wiki = os.path.join(SHARED, "data/wikitext2/wiki.test.joined.txt")
    if not os.path.exists(c4):
        print(f"bench/tokenize_speed.py: {c4} not found; this benchmark needs ../shared")
        sys.exit(1)
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "c4wiki.jsonl")
        lines = [l for l in open(c4, encoding="utf-8") if l.strip()]
        paras = [p for p in open(wiki, encoding="utf-8").read().split("\n\n") if p.strip()]
        lines += [json.dumps({"text": p}) + "\n" for p in paras]
        with open(data, "w", encoding="utf-8") as f:
            for _ in range(REPEAT):
                f.writelines(lines)
        mb = os.path.getsize(data) / 1e6
        print(f"input: C4 sample + WikiText-2 paragraphs x{REPEAT} = {len(lines) * REPEAT} documents, {mb:.1f} MB; {NCPU} cores")
        print(f"{'tokenizer':<8} {'threads':>7} {'tokens':>10} {'best-tokenize tok/s':>20} {'(encode only)':>14} "
              f"{'sentencepiece':>14} {'HF tokenizers':>14} {'ratio':>6} {'ratio enc':>9}")
        for name, kind, path in [("llama2", "spm", f"{SHARED}/tokenizers/llama2/tokenizer.model"),
                                 ("qwen2", "hf", f"{SHARED}/tokenizers/qwen2/tokenizer.json")]:
            for threads in sorted({1, NCPU}):
                p = peer(kind, path, data, threads)
                rates = {kind: p["tokens"] / p["seconds"]}
                if kind == "spm":  # HF tokenizers can run LLaMA too only from a tokenizer.json; not shipped here
                    pass
                t_all, t_load, first, last = ours(path, data, threads, tmp)
                if first != p["first"] or last != p["last"]:
                    print(f"{name}: ids differ from the reference; no numbers printed")
                    sys.exit(1)
                r_all = p["tokens"] / t_all
                r_enc = p["tokens"] / max(t_all - t_load, 1e-9)
                peer_best = max(rates.values())
                sp = f"{rates['spm']:.3g}" if "spm" in rates else "-"
                hf = f"{rates['hf']:.3g}" if "hf" in rates else "-"
                print(f"{name:<8} {threads:>7} {p['tokens']:>10} {r_all:>20.3g} {r_enc:>14.3g} {sp:>14} {hf:>14} "
                      f"{r_all / peer_best:>6.2f} {r_enc / peer_best:>9.2f}")


main()
