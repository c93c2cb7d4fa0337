#!/bin/sh
# t_examples.sh: the examples in the tools' manuals, run as written. Every ```sh block of
# docs/best-tokenize.md, best-train.md, best-mask.md, best-pack.md and best-eval.md (in
# that order: a page uses what the one before made) is cut into commands (a command is a
# line and its backslash continuations; comments and blank lines separate them), and each
# runs with `sh` in one scratch folder, with the tools first on PATH; it must exit 0.
# The ```python blocks run with python3 the same way. So an example that names a file no
# tool writes (run/moments.safetensors, when best-train writes run/moments/step-N...), an
# option that does not exist, or a default that changed, fails here.
#
# The examples name real models and data. Where ../shared has them, they are used
# (stories260K, its stories, the tokenizers); what no folder here holds is a small stand-in
# of the same kind, made below: the 7B folders are tokenizer folders (LLaMA-2's
# tokenizer.model, Qwen2's tokenizer.json: the same tokenizers) or, for out/llama2-95,
# stories260K pruned to 95%; SlimPajama and C4 files are C4's first documents in the same
# container (.jsonl.zst, .json.gz, Parquet); the tasks are the first 20 examples of each
# of ../shared/tasks, and BoolQ (which ../shared lacks) three examples written here in its
# format; WikiText-2 is its first 2000 lines. docs/pipelines.md (7B recipes) and
# docs/cuda.md (the device machine) are not run here.
. tests/lib.sh
if ! have_shared || [ ! -d "$SHARED/models/stories260K" ] || [ ! -d "$SHARED/tasks" ]; then
    skip "examples: $SHARED (stories260K, tokenizers, tasks) not found: the manuals' examples need real models"
    finish
fi
if ! have_py pyarrow || ! have_py safetensors; then skip "examples: python3 pyarrow/safetensors missing"; finish; fi
command -v zstd >/dev/null || { fail "examples: zstd is not installed (make deps installs it)"; finish; }
REPO=$(pwd)
SH=$(cd "$SHARED" && pwd)
export OMP_WAIT_POLICY=PASSIVE
BOX=$TMP/box W=$TMP/box/work S=$TMP/box/shared
mkdir -p "$W/models" "$W/data/slimpajama-6b" "$W/out" "$S/data/wikitext2" "$S/tasks"

# --- ../shared as the examples see it: the real one, WikiText-2 and the tasks shortened ---
ln -s "$SH/models" "$SH/tokenizers" "$S/"
ln -s "$SH/data/stories260K" "$SH/data/c4" "$S/data/"
head -n 2000 "$SH/data/wikitext2/wiki.test.joined.txt" >"$S/data/wikitext2/wiki.test.joined.txt"
for f in "$SH"/tasks/*.jsonl; do head -n 20 "$f" >"$S/tasks/$(basename "$f")"; done
for f in "$SH"/tasks/*.jsonl.gz; do [ -e "$f" ] && gzip -dc "$f" | head -n 20 | gzip >"$S/tasks/$(basename "$f")"; done
cat >"$S/tasks/boolq.jsonl" <<'EOF'
{"question": "is the sky blue on a clear day", "passage": "On a clear day the sky looks blue, because air scatters blue light more than red light.", "idx": 0, "label": 1}
{"question": "do cats lay eggs", "passage": "Cats are mammals; like almost all mammals, they give birth to live young.", "idx": 1, "label": 0}
{"question": "is water wet", "passage": "Water makes other things wet when it touches them.", "idx": 2, "label": 1}
EOF

# --- the stand-ins in the working folder --------------------------------------------------
cd "$W" || exit 1
ln -s ../../shared/models/stories260K models/stories260K
mkdir -p models/Llama-2-7b-hf models/Qwen3-4B
cp "$SH/tokenizers/llama2/tokenizer.model" models/Llama-2-7b-hf/
cp "$SH/tokenizers/llama2/tokenizer.model" tokenizer.model
cp "$SH"/tokenizers/qwen2/* models/Qwen3-4B/
C4=$SH/data/c4/c4-train.00000-of-01024.first1000.jsonl
head -n 40 "$C4" | zstd -q -o chunk0.jsonl.zst
sed -n 41,80p "$C4" | zstd -q -o chunk1.jsonl.zst
head -n 20 "$C4" | zstd -q -o x.jsonl.zst
head -n 200 "$C4" | gzip >c4-validation.00000-of-00008.json.gz
head -n 200 "$S/data/wikitext2/wiki.test.joined.txt" >wiki.test.joined.txt
python3 -c "
import json, pyarrow as pa, pyarrow.parquet as pq
rows = [json.loads(l) for l in open('$C4')][:60]
for i in range(2):
    t = pa.table({'text': [r['text'] for r in rows[30 * i:30 * i + 30]], 'meta': ['c4'] * 30})
    pq.write_table(t, 'data/slimpajama-6b/train-%05d-of-00002.parquet' % i)"
PATH="$BIN:$PATH" best-mask --model models/stories260K --sparsity 0.95 --saliency magnitude --apply \
    --out-model out/llama2-95 --quiet || fail "examples: the stand-in out/llama2-95 (best-mask --apply)"

# --- the examples -------------------------------------------------------------------------
# commands.awk (-v dir=D): each command of a page into its own file D/NNNN.sh or .py, and
# one line "FILE LINE" per command on stdout (LINE: where it starts in the page)
cat >"$TMP/commands.awk" <<'AWK'
/^```/ {
    if (lang == "") { lang = substr($0, 4); if (lang != "sh" && lang != "python") lang = "-"; next }
    flush(); lang = ""; next
}
lang == "" || lang == "-" { next }
lang == "python" { if (cmd == "") start = NR; cmd = cmd $0 "\n"; next }
/^[ \t]*(#|$)/ { flush(); next }
{ if (cmd == "") start = NR; cmd = cmd $0 "\n"; if ($0 !~ /\\$/) flush() }
function flush(  f) {
    if (cmd == "") return
    f = sprintf("%s/%04d.%s", dir, ++k, lang == "python" ? "py" : "sh")
    printf "%s", cmd >f
    close(f)
    print f, start
    cmd = ""
}
AWK
n=0
for page in best-tokenize best-train best-mask best-pack best-eval; do
    rm -rf "$TMP/cmds" && mkdir "$TMP/cmds"
    awk -v dir="$TMP/cmds" -f "$TMP/commands.awk" "$REPO/docs/$page.md" >"$TMP/cmds.list"
    while read -r f line; do
        first=$(head -n 1 "$f" | cut -c 1-90)
        case "$f" in *.py) set -- python3 "$f" ;; *) set -- sh "$f" ;; esac
        if PATH="$BIN:$PATH" "$@" >"$TMP/ex.out" 2>&1 </dev/null; then ok "docs/$page.md:$line: $first"
        else fail "docs/$page.md:$line: $first (exit $?: $(tail -n 3 "$TMP/ex.out" | tr '\n' ' ' | cut -c 1-300))"; fi
        n=$((n + 1))
    done <"$TMP/cmds.list"
done
[ "$n" -gt 30 ] && ok "$n examples found and run" || fail "only $n examples found in docs/: the extraction broke"
finish
