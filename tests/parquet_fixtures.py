"""parquet_fixtures.py DIR: Parquet files written by pyarrow (the oracle) for tests/t_parquet.sh.

Writes DIR/NAME.parquet for every compression x dictionary or plain x data page version 1 or
2 x nullable or required string column, each with several row groups and several pages per
column chunk, the text column after an integer and a struct column (so its chunk is not the
first); plus files for the corner cases and for the errors the reader must give. DIR/cases.json
lists {name, field, expect} where expect is pyarrow's read_table(...).column(field).to_pylist()
with the nulls left out (what best-tokenize reads), or {"error": PATTERN} for a file the reader
must refuse with a message matching PATTERN.
"""
import json
import os
import random
import sys

import pyarrow as pa
import pyarrow.parquet as pq

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
cases = []
rng = random.Random(0)
WORDS = ["the", "cat", "sat", "on", "a", "mat", "naïve", "café", "日本語", "テキスト", "😀", "Ωmega", ""]


def text(i):
    n = rng.randrange(0, 40)
    return " ".join(rng.choice(WORDS) for _ in range(n)) + (f" doc {i}" if i % 3 else "")


def rows(n, nullable):
    v = [text(i) for i in range(n)]
    v[5] = ""                         # empty strings are documents too
    v[7] = "x" * 5000                 # a long one: several pages
    if nullable:
        for i in range(0, n, 4):
            v[i] = None
        v[10:30] = [None] * 20        # a run of nulls
    return v


def write(name, table, field="text", **kw):
    path = os.path.join(out, name + ".parquet")
    pq.write_table(table, path, **kw)
    col = pq.read_table(path).column(field).to_pylist()
    expect = [x if isinstance(x, str) else x.decode("utf-8") for x in col if x is not None]
    cases.append({"name": name, "field": field, "expect": expect, "nulls": sum(x is None for x in col)})


def table(n, nullable, dtype=pa.string()):
    v = rows(n, nullable)
    return pa.table({
        "id": pa.array(range(n), pa.int64()),
        "meta": pa.array([{"a": i, "b": str(i)} for i in range(n)]),
        "text": pa.array(v, dtype),
        "url": pa.array([f"https://example.org/{i}" for i in range(n)]),
    }, schema=pa.schema([("id", pa.int64()), ("meta", pa.struct([("a", pa.int64()), ("b", pa.string())])),
                         pa.field("text", dtype, nullable=nullable), ("url", pa.string())]))


for comp in ["none", "snappy", "gzip", "zstd"]:
    for dict_ in [True, False]:
        for ver in ["1.0", "2.0"]:
            for nullable in [True, False]:
                name = f"{comp}-{'dict' if dict_ else 'plain'}-v{ver[0]}-{'null' if nullable else 'req'}"
                write(name, table(300, nullable), compression=comp, use_dictionary=dict_, data_page_version=ver,
                      row_group_size=70, data_page_size=512, write_batch_size=16)

# a dictionary that fills up: the chunk falls back to PLAIN pages after dictionary ones
many = pa.table({"text": pa.array([f"distinct string number {i} " * 3 for i in range(2000)])})
write("dict-fallback", many, compression="snappy", use_dictionary=True, dictionary_pagesize_limit=2000,
      data_page_size=1000, row_group_size=700)
# a column of nulls only, and one of empty strings only
write("all-null", pa.table({"text": pa.array([None] * 100, pa.string())}), row_group_size=30)
write("all-empty", pa.table({"text": pa.array([""] * 100)}), row_group_size=30, compression="gzip")
# BYTE_ARRAY without the string annotation (binary), valid UTF-8: read as text
write("binary-utf8", pa.table({"text": pa.array([w.encode() for w in WORDS] * 5, pa.binary())}))
# another field name
write("content-field", pa.table({"content": pa.array(["a", "b", None, "c"])}), field="content")
# one row group of many rows
write("one-group", pa.table({"text": pa.array([text(i) for i in range(3000)])}), compression="zstd")


def bad(name, tbl, pattern, field="text", **kw):
    pq.write_table(tbl, os.path.join(out, name + ".parquet"), **kw)
    cases.append({"name": name, "field": field, "error": pattern})


bad("bad-utf8", pa.table({"text": pa.array([b"fine", b"also fine", b"bad \xff\xfe here"], pa.binary())}),
    r"row 2: invalid UTF-8")
bad("bad-missing", table(60, True), r"no column body \(top-level columns: id, meta, text, url\)", field="body")
bad("bad-nested", table(60, True), r"column meta is nested", field="meta")
bad("bad-int", table(60, True), r"column id is INT64, not a string column", field="id")
bad("bad-list", pa.table({"text": pa.array([["a"], ["b", "c"]])}), r"column text is nested|repeated")
bad("bad-brotli", table(60, True), r"compressed with BROTLI: not supported", compression="brotli")
bad("bad-lz4", table(60, True), r"compressed with LZ4_RAW: not supported|compressed with LZ4: not supported",
    compression="lz4")
bad("bad-delta", pa.table({"text": pa.array(["a", "b", "c"])}), r"values encoded DELTA_BYTE_ARRAY: not supported",
    use_dictionary=False, column_encoding={"text": "DELTA_BYTE_ARRAY"})

json.dump(cases, open(os.path.join(out, "cases.json"), "w"))
print(f"{len(cases)} files")
