#!/bin/sh
# t_tokenize_cli.sh: best-tokenize as a user drives it: shards vs --ids, stdin and
# compressed inputs, thread-count independence, decode round trips, inputs read as
# their names say (a tar only by name or --format tar; a NUL byte is an error), and
# every kind of bad input (clear one-line error, exit 1 or 2, no output file left behind).
# Runs without ../shared on a small byte-level BPE tokenizer made by pipelines/make_tokenizer.py.
. tests/lib.sh
T="$BIN/best-tokenize"
# A corpus with long and short documents, unicode, blank lines.
python3 - "$TMP/docs.jsonl" <<'PY'
import json, random, sys
random.seed(1)
words = "the cat and the hat sat on a mat in the sun while it was raining outside ünïcödé 日本語 😀".split()
with open(sys.argv[1], "w", encoding="utf-8") as f:
    for i in range(3000):
        n = random.choice([0, 1, 5, 50, 500])
        text = " ".join(random.choice(words) for _ in range(n)) + ("\n\n" if i % 7 == 0 else "")
        f.write(json.dumps({"text": text, "id": i}, ensure_ascii=i % 2 == 0) + "\n")
        if i % 100 == 0: f.write("\n")
PY
# a byte-level BPE tokenizer with 40 merges learned from that corpus (the demo's maker)
python3 pipelines/make_tokenizer.py "$TMP/tok" "$TMP/docs.jsonl" 40 || { fail "make the tokenizer"; finish; }
TOK="$TMP/tok/tokenizer.json"

check "shard with 1 thread" "$T" --tokenizer "$TOK" --threads 1 --quiet --out "$TMP/a.bin" "$TMP/docs.jsonl"
check "shard with 4 threads" "$T" --tokenizer "$TOK" --threads 4 --batch-docs 64 --quiet --out "$TMP/b.bin" "$TMP/docs.jsonl"
check "shards identical for 1 and 4 threads" cmp "$TMP/a.bin" "$TMP/b.bin"
"$T" --tokenizer "$TOK" --ids --threads 1 --quiet "$TMP/docs.jsonl" >"$TMP/ids1.txt" 2>/dev/null
"$T" --tokenizer "$TOK" --ids --threads 3 --batch-docs 7 --quiet "$TMP/docs.jsonl" >"$TMP/ids3.txt" 2>/dev/null
check "--ids identical for 1 and 3 threads" cmp "$TMP/ids1.txt" "$TMP/ids3.txt"
n=$(wc -l <"$TMP/ids1.txt")
check "--ids prints one line per document (3000, got $n)" test "$n" = 3000
EOT=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['added_tokens'][0]['id'])" "$TOK")
check "documents end with <|endoftext|> ($EOT) by default (Qwen/GPT-2 convention)" \
    sh -c "test \"\$(awk '{print \$NF}' '$TMP/ids1.txt' | sort -u)\" = $EOT"

gzip -c "$TMP/docs.jsonl" >"$TMP/docs.jsonl.gz"
zstd -q -c "$TMP/docs.jsonl" >"$TMP/docs.jsonl.zst"
"$T" --tokenizer "$TOK" --ids --quiet "$TMP/docs.jsonl.gz" >"$TMP/idsgz.txt"
check ".jsonl.gz gives the same ids" cmp "$TMP/ids1.txt" "$TMP/idsgz.txt"
zstdcat "$TMP/docs.jsonl.zst" | "$T" --tokenizer "$TMP/tok" --ids --quiet - >"$TMP/idsstdin.txt"
check "zstdcat | best-tokenize - (tokenizer given as a folder) gives the same ids" cmp "$TMP/ids1.txt" "$TMP/idsstdin.txt"
(cd "$TMP" && tar cf docs.tar docs.jsonl.zst)
"$T" --tokenizer "$TOK" --ids --quiet "$TMP/docs.tar" >"$TMP/idstar.txt"
check ".tar of .jsonl.zst gives the same ids" cmp "$TMP/ids1.txt" "$TMP/idstar.txt"

# Decoding: ids lines and shards back to the documents.
python3 -c "
import json,sys
for l in open(sys.argv[1], encoding='utf-8'):
    if l.strip(): print(json.dumps({'text': json.loads(l)['text']}, ensure_ascii=False))" "$TMP/docs.jsonl" >"$TMP/want.jsonl"
same_texts() { # same documents in two JSON-lines files (compared as strings, not bytes)
    python3 -c "
import json,sys
a=[json.loads(l)['text'] for l in open(sys.argv[1], encoding='utf-8')]
b=[json.loads(l)['text'] for l in open(sys.argv[2], encoding='utf-8')]
sys.exit(0 if a == b else 1)" "$1" "$2"
}
# Decoding a shard cuts at EOS; the EOS itself is not part of the text.
"$T" --tokenizer "$TOK" --decode --jsonl --quiet "$TMP/a.bin" >"$TMP/back.jsonl"
check "decode(shard) gives back every document" same_texts "$TMP/want.jsonl" "$TMP/back.jsonl"
"$T" --tokenizer "$TOK" --ids --no-eos --quiet "$TMP/docs.jsonl" >"$TMP/ids_noeos.txt"
"$T" --tokenizer "$TOK" --decode --jsonl --quiet "$TMP/ids_noeos.txt" >"$TMP/back2.jsonl"
check "decode(--ids) gives back every document" same_texts "$TMP/want.jsonl" "$TMP/back2.jsonl"
if have_py tokenizers; then
    python3 - "$TOK" "$TMP/docs.jsonl" "$TMP/ids_noeos.txt" <<'PY'
import json, sys
from tokenizers import Tokenizer
t = Tokenizer.from_file(sys.argv[1])
docs = [json.loads(l)["text"] for l in open(sys.argv[2], encoding="utf-8") if l.strip()]
ours = [[int(x) for x in l.split()] for l in open(sys.argv[3])]
want = [e.ids for e in t.encode_batch(docs, add_special_tokens=False)]
print("ok - tiny tokenizer ids equal HF tokenizers" if ours == want else "not ok - tiny tokenizer ids differ from HF tokenizers")
PY
else
    skip "tiny tokenizer vs HF tokenizers: python3 tokenizers not installed"
fi

# Streaming: peak memory must not grow with the input. 4 MB and 32 MB of JSON lines
# are piped in (never a file), and the peak RSS of the two runs is compared.
rss_for() { # MB of input -> peak RSS of best-tokenize in KB
    python3 - "$T" "$TOK" "$1" "$TMP/stream.bin" <<'PY'
import json, resource, subprocess, sys
tool, tok, mb, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
p = subprocess.Popen([tool, "--tokenizer", tok, "--quiet", "--threads", "2", "--out", out, "-"], stdin=subprocess.PIPE)
line = (json.dumps({"text": "the cat and the hat sat on a mat " * 30}) + "\n").encode()
for _ in range(mb * 1000000 // len(line)):
    p.stdin.write(line)
p.stdin.close()
p.wait()
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss if p.returncode == 0 else -1)
PY
}
small=0 large=0
[ "$SAN" = 1 ] || { small=$(rss_for 4); large=$(rss_for 32); }
if [ "$SAN" = 1 ]; then
    skip "memory does not grow with the input: ASan's quarantine keeps freed memory, RSS means nothing here"
elif [ "$small" -gt 0 ] && [ "$large" -gt 0 ] && [ "$large" -lt $((small + 16384)) ]; then
    ok "memory does not grow with the input (peak RSS ${small} KB for 4 MB, ${large} KB for 32 MB)"
else
    fail "memory does not grow with the input (peak RSS ${small} KB for 4 MB, ${large} KB for 32 MB)"
fi

# Usage errors: exit 2.
expect_error "no --tokenizer is a usage error" 2 "usage error" "$T" --ids "$TMP/docs.jsonl"
expect_error "unknown option is a usage error" 2 "unknown option" "$T" --tokenizer "$TOK" --bogus --ids "$TMP/docs.jsonl"
expect_error "--ids with --decode is a usage error" 2 "exclude" "$T" --tokenizer "$TOK" --ids --decode x
expect_error "no --out and no --ids is a usage error" 2 "--out" "$T" --tokenizer "$TOK" "$TMP/docs.jsonl"
expect_error "bad --threads value" 2 "integer" "$T" --tokenizer "$TOK" --threads x --ids "$TMP/docs.jsonl"
check "--help exits 0" "$T" --help

# Bad input: exit 1, one line naming the file, no output left behind.
expect_error "missing tokenizer" 1 "nope.json" "$T" --tokenizer "$TMP/nope.json" --ids "$TMP/docs.jsonl"
head -c 2000 "$TOK" >"$TMP/trunc.json"
expect_error "truncated tokenizer.json" 1 "trunc.json" "$T" --tokenizer "$TMP/trunc.json" --ids "$TMP/docs.jsonl"
printf '{"text": "fine"}\n{"text": broken\n' >"$TMP/bad.jsonl"
expect_error "malformed JSON line names file:line" 1 "bad.jsonl:2: malformed JSON" \
    "$T" --tokenizer "$TOK" --quiet --out "$TMP/bad.bin" "$TMP/bad.jsonl"
check "no shard left after the failure" test ! -e "$TMP/bad.bin"
check "no temp file left after the failure" sh -c "! ls -a '$TMP' | grep -q 'bad.bin.tmp'"
printf 'ok \377 not utf8' >"$TMP/bad.txt"
expect_error "invalid UTF-8 names the file" 1 "bad.txt: invalid UTF-8" "$T" --tokenizer "$TOK" --quiet --out "$TMP/bad2.bin" "$TMP/bad.txt"
check "no shard left after invalid UTF-8" test ! -e "$TMP/bad2.bin"
head -c 3000 "$TMP/docs.jsonl.gz" >"$TMP/bad.jsonl.gz"
expect_error "truncated gzip" 1 "bad.jsonl.gz" "$T" --tokenizer "$TOK" --ids "$TMP/bad.jsonl.gz"
# Names that promise what the bytes do not keep: refused, not read as text.
printf 'plain text, not gzip\n' >"$TMP/fake.txt.gz"
expect_error "a .txt.gz that is not gzip" 1 "fake.txt.gz: not gzip data" \
    "$T" --tokenizer "$TOK" --quiet --out "$TMP/fake.bin" "$TMP/fake.txt.gz"
check "no shard left after a fake .gz" test ! -e "$TMP/fake.bin"
cp "$TMP/docs.jsonl" "$TMP/fake.jsonl.zst"
expect_error "a .jsonl.zst that is not zstd" 1 "fake.jsonl.zst: not zstd data" \
    "$T" --tokenizer "$TOK" --quiet --out "$TMP/fake.bin" "$TMP/fake.jsonl.zst"
cp "$TMP/docs.jsonl" "$TMP/notar.tar"
expect_error "a .tar that is not an archive" 1 "notar.tar: not a tar archive" \
    "$T" --tokenizer "$TOK" --quiet --out "$TMP/fake.bin" "$TMP/notar.tar"
(cd "$TMP" && tar cf outer.tar docs.tar)
expect_error "a tar inside a tar names the member" 1 "outer.tar:docs.tar: a tar inside a tar" \
    "$T" --tokenizer "$TOK" --quiet --out "$TMP/fake.bin" "$TMP/outer.tar"
check "no shard left after the refused inputs" test ! -e "$TMP/fake.bin"
# Inputs are read as their names say, not as their bytes look (issue 33): a tar only by
# its name or --format tar, and a NUL byte is no text. Before, a .jsonl whose first 8 KB
# were zeros was an empty tar (0 documents, exit 0) and a tar named .txt was walked.
{ head -c 8192 /dev/zero; tail -c +8193 "$TMP/docs.jsonl"; } >"$TMP/zeroed.jsonl"
expect_error "a .jsonl whose first 8 KB are zeros: the file and offset 0, not 0 documents" 1 \
    "zeroed.jsonl: a NUL byte at offset 0 (not text" "$T" --tokenizer "$TOK" --quiet --out "$TMP/z.bin" "$TMP/zeroed.jsonl"
expect_error "... among other inputs the run fails, naming it" 1 "zeroed.jsonl: a NUL byte at offset 0" \
    "$T" --tokenizer "$TOK" --quiet --out "$TMP/z.bin" "$TMP/docs.jsonl" "$TMP/zeroed.jsonl" "$TMP/docs.jsonl.gz"
check "... and no shard is left" test ! -e "$TMP/z.bin"
printf 'hello\000world' >"$TMP/nul.txt"
expect_error "a NUL in a .txt: its offset" 1 "nul.txt: a NUL byte at offset 5 " "$T" --tokenizer "$TOK" --ids "$TMP/nul.txt"
cp "$TMP/docs.tar" "$TMP/tar.txt"
expect_error "a tar named .txt is text (refused for its NUL bytes), its members not read" 1 \
    "tar.txt: a NUL byte at offset [0-9]* (not text; a tar archive?" "$T" --tokenizer "$TOK" --ids "$TMP/tar.txt"
expect_error "a tar on stdin is text (refused)" 1 "<stdin>: a NUL byte at offset" \
    sh -c "'$T' --tokenizer '$TOK' --ids --quiet - <'$TMP/docs.tar'"
"$T" --tokenizer "$TOK" --ids --quiet --format tar - <"$TMP/docs.tar" >"$TMP/idstarin.txt"
check "--format tar reads a tar from stdin: the same ids" cmp "$TMP/ids1.txt" "$TMP/idstarin.txt"
expect_error "--format tar of text: refused" 1 "<stdin>: not a tar archive, as --format tar says" \
    sh -c "'$T' --tokenizer '$TOK' --ids --quiet --format tar - <'$TMP/docs.jsonl'"
expect_error "--format bogus: a usage error" 2 "auto, text, jsonl or tar" "$T" --tokenizer "$TOK" --ids --format zip "$TMP/docs.jsonl"
cp "$TMP/a.bin" "$TMP/flip.bin"
printf 'X' | dd of="$TMP/flip.bin" bs=1 seek=100 conv=notrunc 2>/dev/null
expect_error "shard with a flipped byte" 1 "checksum" "$T" --tokenizer "$TOK" --decode "$TMP/flip.bin"
printf 'NOTSHARD' | dd of="$TMP/flip.bin" bs=1 seek=0 conv=notrunc 2>/dev/null
expect_error "shard with a wrong magic is read as bad ids" 1 "flip.bin:1" "$T" --tokenizer "$TOK" --decode "$TMP/flip.bin"
printf '1 2 999999\n' >"$TMP/badids.txt"
expect_error "out-of-vocab id in --decode" 1 "badids.txt:1" "$T" --tokenizer "$TOK" --decode "$TMP/badids.txt"
finish
