#!/bin/sh
# t_parquet.sh: Parquet input (io/parquet.h through io/docs.h) against pyarrow.
#   - committed files (tests/fixtures/parquet, written once by pyarrow: snappy, zstd, gzip,
#     uncompressed; dictionary and plain; pages v1 and v2; nullable and required; several
#     row groups and pages): the strings read equal the .jsonl beside each, and
#     best-tokenize gives the same shard from the .parquet as from the .jsonl
#   - with pyarrow (the oracle; tests/parquet_fixtures.py): 38 files of every compression x
#     encoding x page version x nullable or not, a dictionary that falls back to plain, nulls
#     only, empty strings only, binary columns, another field, the text column after a
#     struct: the strings equal read_table(...).column(...).to_pylist() without the nulls,
#     with 1 and 3 threads, and the nulls counted; 8 files the reader must refuse (invalid
#     UTF-8 naming the row, a missing, nested, integer or list column, BROTLI, LZ4,
#     DELTA_BYTE_ARRAY) each with one clear error
#   - pipelines/best.mk with DATA='*.parquet' tokenizes them
#   - best-tokenize: --threads 1 and 3 give the same shard; stdin, a .parquet.gz and a
#     .parquet in a tar are refused with one line; every truncation of a file is exit 1
#     with one line, never a crash
. tests/lib.sh
T="$BIN/best-tokenize"
DUMP="$TBIN/parquet_dump"
F=tests/fixtures/parquet
cat >"$TMP/check.py" <<'PY'
# check.py DUMP DIR THREADS: every case of DIR/cases.json through DUMP (parquet_dump)
import json, re, struct, subprocess, sys
dump, d, threads = sys.argv[1], sys.argv[2], sys.argv[3]
for c in json.load(open(d + "/cases.json")):
    r = subprocess.run([dump, f"{d}/{c['name']}.parquet", c["field"], threads], capture_output=True)
    err = r.stderr.decode(errors="replace")
    if "error" in c:
        ok = r.returncode == 1 and re.search(c["error"], err) and err.count("\n") == 1
        print(("ok - " if ok else "not ok - ") + f"{c['name']} refused: {err.strip()[:160]}")
        continue
    out, got, i = r.stdout, [], 0
    while i < len(out):
        n = struct.unpack("<Q", out[i:i + 8])[0]
        got.append(out[i + 8:i + 8 + n].decode())
        i += 8 + n
    ok = r.returncode == 0 and got == c["expect"] and err.strip() == f"nulls {c['nulls']}"
    print(("ok - " if ok else "not ok - ") + f"{c['name']} ({threads} threads): {len(got)} strings as pyarrow's, "
          f"{c['nulls']} nulls skipped" + ("" if ok else f" (exit {r.returncode}: {err[:200]})"))
PY

# --- committed files: no oracle needed -------------------------------------------------------
for p in "$F"/*.parquet; do
    b=$(basename "$p" .parquet)
    field=text; case $b in content*) field=content ;; esac
    "$DUMP" "$p" $field 2 >"$TMP/$b.out" 2>"$TMP/$b.err"
    check "$b: the strings of the .jsonl beside it" python3 -c "
import json, struct, sys
want = [json.loads(l)['$field'] for l in open('$F/$b.jsonl', encoding='utf-8')]
out, got, i = open('$TMP/$b.out', 'rb').read(), [], 0
while i < len(out):
    n = struct.unpack('<Q', out[i:i + 8])[0]; got.append(out[i + 8:i + 8 + n].decode()); i += 8 + n
sys.exit(0 if got == want else 1)"
done
# a tokenizer made from the committed texts (byte-level BPE, the demo's maker)
cat "$F"/*.jsonl | sed 's/"content":/"text":/' >"$TMP/all.jsonl"
python3 pipelines/make_tokenizer.py "$TMP/tok" "$TMP/all.jsonl" 40 >/dev/null || { fail "make the tokenizer"; finish; }
TOK="$TMP/tok/tokenizer.json"
for b in snappy-dict-v1-null zstd-plain-v2-req content-snappy-dict-v2; do
    field=text; case $b in content*) field=content ;; esac
    "$T" --tokenizer "$TOK" --field $field --quiet --out "$TMP/$b.p.bin" "$F/$b.parquet"
    "$T" --tokenizer "$TOK" --field $field --quiet --out "$TMP/$b.j.bin" "$F/$b.jsonl"
    check "$b: best-tokenize's shard equals the .jsonl's" cmp "$TMP/$b.p.bin" "$TMP/$b.j.bin"
done
"$T" --tokenizer "$TOK" --out "$TMP/n.bin" "$F/snappy-dict-v1-null.parquet" 2>"$TMP/n.err"
check "best-tokenize says how many null rows it skipped" grep -q "snappy-dict-v1-null.parquet: 8 null rows of column text skipped" "$TMP/n.err"

# pipelines/best.mk: DATA as a glob of .parquet files
make --no-print-directory -f pipelines/best.mk MODEL=tests/fixtures/model/llama TOKENIZER="$TMP/tok" BIN="$BIN" \
    DATA="$F/*-null.parquet" OUT="$TMP/pipe" EVAL_WIKI= EVAL_C4= THREADS=2 tokenize >/dev/null 2>&1
"$T" --tokenizer "$TOK" --quiet --out "$TMP/pipe-ref.bin" $(ls "$F"/*-null.parquet)
check "pipelines/best.mk DATA='*.parquet': the shard of those files" cmp "$TMP/pipe/data/train.bin" "$TMP/pipe-ref.bin"

# --- refused inputs ---------------------------------------------------------------------------
expect_error "Parquet on stdin: one clear line" 1 "Parquet data: give the .parquet file's path" \
    sh -c "cat $F/zstd-plain-v2-req.parquet | '$T' --tokenizer '$TOK' --out '$TMP/s.bin' -"
gzip -c "$F/zstd-plain-v2-req.parquet" >"$TMP/z.parquet.gz"
expect_error "a .parquet.gz: one clear line" 1 "not compressed or from stdin\|Parquet is read from its own file" \
    "$T" --tokenizer "$TOK" --out "$TMP/s.bin" "$TMP/z.parquet.gz"
tar -cf "$TMP/a.tar" -C "$F" zstd-plain-v2-req.parquet
expect_error "a .parquet in a tar: one clear line" 1 "not inside an archive\|inside an archive" \
    "$T" --tokenizer "$TOK" --out "$TMP/s.bin" "$TMP/a.tar"
expect_error "--field of a column the file lacks: the columns named" 1 "no column body (top-level columns: id, text)" \
    "$T" --tokenizer "$TOK" --field body --out "$TMP/s.bin" "$F/zstd-plain-v2-req.parquet"
check "... and no shard written" test ! -e "$TMP/s.bin"
# every truncation and a few corruptions: exit 1 with one error line, never a crash
bad=""
P="$F/gzip-dict-v2-null.parquet"
size=$(wc -c <"$P")
for cut in 0 3 4 11 12 100 1000 2000 $((size - 9)) $((size - 8)) $((size - 5)) $((size - 1)); do
    head -c $cut "$P" >"$TMP/cut.parquet"
    "$DUMP" "$TMP/cut.parquet" >/dev/null 2>"$TMP/cut.err"; rc=$?
    [ $rc = 1 ] && [ "$(grep -c . "$TMP/cut.err")" = 1 ] || bad="$bad cut$cut:$rc"
done
for at in 8 40 200 600 1200 1800 $((size - 100)) $((size - 30)); do
    python3 -c "
d = bytearray(open('$P', 'rb').read()); d[$at] ^= 0x5a; open('$TMP/flip.parquet', 'wb').write(d)"
    "$DUMP" "$TMP/flip.parquet" >/dev/null 2>"$TMP/flip.err"; rc=$?
    # a flipped byte inside a string can still be a valid file: exit 0 or one error line
    { [ $rc = 0 ] || { [ $rc = 1 ] && [ "$(grep -c . "$TMP/flip.err")" = 1 ]; }; } || bad="$bad flip$at:$rc"
done
if [ -z "$bad" ]; then ok "12 truncations and 8 flipped bytes: exit 1 with one error line (or a valid file), no crash"
else fail "truncated or corrupted Parquet:$bad"; fi

# --- against pyarrow ------------------------------------------------------------------------
if ! have_py pyarrow; then
    skip "Parquet against pyarrow: python3 cannot import pyarrow (make deps installs it)"
    finish
fi
python3 tests/parquet_fixtures.py "$TMP/pa" >/dev/null || { fail "pyarrow could not write the fixtures"; finish; }
python3 "$TMP/check.py" "$DUMP" "$TMP/pa" 1
python3 "$TMP/check.py" "$DUMP" "$TMP/pa" 3 | grep -v refused
"$T" --tokenizer "$TOK" --threads 1 --quiet --out "$TMP/t1.bin" "$TMP/pa/dict-fallback.parquet" "$TMP/pa/snappy-dict-v2-null.parquet"
"$T" --tokenizer "$TOK" --threads 3 --quiet --out "$TMP/t3.bin" "$TMP/pa/dict-fallback.parquet" "$TMP/pa/snappy-dict-v2-null.parquet"
check "best-tokenize --threads 1 and 3 (row groups decoded in parallel): the same shard" cmp "$TMP/t1.bin" "$TMP/t3.bin"
python3 -c "
import json, pyarrow.parquet as pq
with open('$TMP/pa.jsonl', 'w') as f:
    for p in ['dict-fallback', 'snappy-dict-v2-null']:
        for x in pq.read_table('$TMP/pa/' + p + '.parquet').column('text').to_pylist():
            if x is not None: f.write(json.dumps({'text': x}) + '\n')"
"$T" --tokenizer "$TOK" --quiet --out "$TMP/tj.bin" "$TMP/pa.jsonl"
check "pyarrow's texts as .jsonl: the same shard as from the .parquet files" cmp "$TMP/t1.bin" "$TMP/tj.bin"
finish
