#!/usr/bin/env python3
"""parquet_speed.py: our Parquet reader against pyarrow, and best-tokenize on Parquet against
the same text as .jsonl.zst, in one script on the same files.

The file: the C4 sample of ../shared, its documents made distinct (a copy number in front)
and repeated to about 100 MB of text, written by pyarrow with Snappy, its default dictionary
attempt (which falls back to PLAIN for such text, as on the Hub's corpora) and row groups of
4096 rows. Timed, best of REPEAT runs:
  - ours: tests/parquet_dump ... count (io/docs.h over io/parquet.h: map, decompress,
    decode, check UTF-8, hand every string out, as best-tokenize gets them) with 1 and all
    threads, the process included;
  - pyarrow: read_table(columns=["text"]) single- and multi-threaded (Arrow arrays, no Python
    objects), and the same followed by .to_pylist() (Python strings, what a Python
    tokenizing loop gets).
Text MB/s = the strings' UTF-8 bytes / seconds. Then best-tokenize (stories260K's tokenizer,
all threads) on the first TOKENIZE_MB of it as .parquet and as .jsonl.zst: tokens/s of each
(the shards are compared: identical), to show whether Parquet decoding is the bottleneck.

usage: python3 bench/parquet_speed.py [BIN] [TBIN] [SHARED] [MB]
"""
import json, os, subprocess, sys, tempfile, time

BIN = sys.argv[1] if len(sys.argv) > 1 else "bin"
TBIN = sys.argv[2] if len(sys.argv) > 2 else "build/tests"
SHARED = sys.argv[3] if len(sys.argv) > 3 else "../shared"
MB = float(sys.argv[4]) if len(sys.argv) > 4 else 100
TOKENIZE_MB = float(os.environ.get("TOKENIZE_MB", 20))
REPEAT = int(os.environ.get("REPEAT", 3))
NCPU = os.cpu_count()

import pyarrow as pa
import pyarrow.parquet as pq

src = os.path.join(SHARED, "data/c4/c4-train.00000-of-01024.first1000.jsonl")
base = [json.loads(l)["text"] for l in open(src, encoding="utf-8")]
tmp = tempfile.mkdtemp()
docs, size, k = [], 0, 0
while size < MB * 1e6:
    for d in base:
        s = f"{k}: {d}"
        docs.append(s)
        size += len(s.encode())
    k += 1
path = os.path.join(tmp, "c4.parquet")
pq.write_table(pa.table({"text": pa.array(docs)}), path, compression="snappy", row_group_size=4096)
text_mb = size / 1e6
meta = pq.ParquetFile(path).metadata
print(f"file: {os.path.getsize(path) / 1e6:.1f} MB Snappy Parquet, {meta.num_row_groups} row groups, "
      f"{len(docs)} rows, {text_mb:.1f} MB of text; CPU: {NCPU} threads")


def best(f):
    ts = []
    for _ in range(REPEAT):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return min(ts)


def ours(threads):
    with open(os.devnull, "wb") as null:
        subprocess.run([os.path.join(TBIN, "parquet_dump"), path, "text", str(threads), "count"], stdout=null,
                       stderr=subprocess.DEVNULL, check=True)


rows = []
for th in sorted({1, NCPU}):
    rows.append((f"ours, {th} thread{'s' if th > 1 else ''}", best(lambda: ours(th))))
for mt in (False, True):
    rows.append((f"pyarrow read_table, {'all threads' if mt else '1 thread'}",
                 best(lambda: pq.read_table(path, columns=["text"], use_threads=mt))))
rows.append(("pyarrow read_table + to_pylist, all threads",
             best(lambda: pq.read_table(path, columns=["text"]).column("text").to_pylist())))
ref = {name: t for name, t in rows}
for name, t in rows:
    print(f"  {name:45s} {t:7.3f} s  {text_mb / t:8.1f} MB/s")
o1 = ref["ours, 1 thread"]
p1 = ref["pyarrow read_table, 1 thread"]
print(f"ratio, 1 thread: ours {text_mb / o1:.0f} MB/s vs pyarrow {text_mb / p1:.0f} MB/s = {p1 / o1:.2f}x")

# best-tokenize: the same documents as .parquet and as .jsonl.zst
part, n = [], 0
for d in docs:
    if n > TOKENIZE_MB * 1e6:
        break
    part.append(d)
    n += len(d.encode())
pp, jp = os.path.join(tmp, "part.parquet"), os.path.join(tmp, "part.jsonl")
pq.write_table(pa.table({"text": pa.array(part)}), pp, compression="snappy", row_group_size=4096)
with open(jp, "w", encoding="utf-8") as f:
    for d in part:
        f.write(json.dumps({"text": d}) + "\n")
subprocess.run(["zstd", "-q", "-f", "--rm", jp], check=True)
tok = os.path.join(SHARED, "models/stories260K")
res = {}
for name, inp in (("parquet", pp), ("jsonl.zst", jp + ".zst")):
    out = os.path.join(tmp, name + ".bin")
    t = best(lambda: subprocess.run([os.path.join(BIN, "best-tokenize"), "--tokenizer", tok, "--quiet", "--out", out,
                                      inp], check=True))
    res[name] = (t, out)
same = open(res["parquet"][1], "rb").read() == open(res["jsonl.zst"][1], "rb").read()
out = subprocess.run([os.path.join(BIN, "best-tokenize"), "--tokenizer", tok, "--out", os.path.join(tmp, "x.bin"), pp],
                     capture_output=True, text=True).stderr
tokens = int(out.split(" tokens")[0].rsplit(" ", 1)[1]) if " tokens" in out else 0
tp, tj = res["parquet"][0], res["jsonl.zst"][0]
print(f"best-tokenize, {n / 1e6:.1f} MB, {len(part)} docs, {tokens} tokens, {NCPU} threads: parquet {tp:.2f} s "
      f"({tokens / tp / 1e6:.2f} M tokens/s), jsonl.zst {tj:.2f} s ({tokens / tj / 1e6:.2f} M tokens/s): "
      f"parquet/jsonl.zst time {tp / tj:.2f}; shards identical: {same}")
