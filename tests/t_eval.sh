#!/bin/sh
# t_eval.sh: best-eval end to end. Perplexity equals the PyTorch reference of
# tests/eval_ref.py (fixtures/eval/expected.json) within 1e-4 relative, on the tiny
# Qwen3 fixture (always) and on stories260K's validation stories (with ../shared);
# greedy generation reproduces llama2.c's expected output; bad input fails cleanly; a shard
# of another tokenizer than the model's is refused (--any-tokenizer evaluates it), and the
# output names the protocol that produced the number.
. tests/lib.sh
E="$BIN/best-eval"
EXP=tests/fixtures/eval/expected.json

# compare NAME JSON_OUTPUT: ppl within 1e-4 relative, same token and window counts
compare() {
    python3 - "$EXP" "$1" "$2" <<'PY'
import json, sys
want = json.load(open(sys.argv[1]))[sys.argv[2]]
try:
    got = json.loads(sys.argv[3])
except ValueError:
    print(f"not ok - {sys.argv[2]}: best-eval --json printed no JSON: {sys.argv[3][:200]!r}"); sys.exit(0)
rel = abs(got["ppl"] - want["ppl"]) / want["ppl"]
same = got["tokens"] == want["tokens"] and got["windows"] == want["windows"] and got["seq"] == want["seq"]
print(("ok - " if rel <= 1e-4 and same else "not ok - ") +
      f"{sys.argv[2]} perplexity {got['ppl']:.6f} vs PyTorch {want['ppl']:.6f} (rel {rel:.1e}), "
      f"{got['tokens']} tokens in {got['windows']} windows")
PY
}

out=$("$E" --model tests/fixtures/model/qwen3 --data tests/fixtures/eval/qwen3_tokens.bin --seq 64 --json --quiet)
compare qwen3 "$out"

if have_shared; then
    S="$SHARED/models/stories260K"
    out=$("$E" --model "$S" --data "$SHARED/data/stories260K/valid.jsonl" --seq 256 --max-tokens 16384 --json --quiet)
    compare stories260K "$out"
    "$E" --model "$S" --generate "" --max-new-tokens 200 --quiet >"$TMP/gen.txt"
    { cat "$S/expected_greedy_200.txt"; printf '\n'; } >"$TMP/want.txt"
    check "greedy generation from BOS reproduces expected_greedy_200.txt" cmp "$TMP/gen.txt" "$TMP/want.txt"
    "$E" --model "$S" --generate "Once upon a time" --temperature 0.8 --top-p 0.9 --seed 3 --max-new-tokens 40 --json --quiet >"$TMP/s1.json"
    "$E" --model "$S" --generate "Once upon a time" --temperature 0.8 --top-p 0.9 --seed 3 --max-new-tokens 40 --json --quiet >"$TMP/s2.json"
    check "sampling with a seed is reproducible" python3 -c "
import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); assert a['ids'] == b['ids'] and a['text'] == b['text']" "$TMP/s1.json" "$TMP/s2.json"
    check "--generate --json has text and ids" python3 -c "
import json,sys; j=json.load(open(sys.argv[1])); assert j['text'] and len(j['ids']) == j['new_tokens'] <= 40" "$TMP/s1.json"
    # the continuation keeps the space its first piece starts with ("Onceupon" until
    # 2026-11-28): stdout is sentencepiece's decoding of the prompt's and the new tokens
    if have_py sentencepiece; then
        "$E" --model "$S" --generate "Once" --max-new-tokens 20 --json --quiet >"$TMP/once.json"
        "$E" --model "$S" --generate "Once" --max-new-tokens 20 --quiet >"$TMP/once.txt"
        check "--generate Once: stdout and --json's text are sentencepiece's decoding of prompt + continuation" python3 -c "
import json, sys, sentencepiece as spm
sp = spm.SentencePieceProcessor(model_file=sys.argv[1]); j = json.load(open(sys.argv[2]))
want = sp.decode(sp.encode('Once') + j['ids']); got = open(sys.argv[3]).read()
assert got == want + '\\n' and j['text'] == want[4:] and want[4] == ' ', (got, want, j['text'])" \
            "$S/tokenizer.model" "$TMP/once.json" "$TMP/once.txt"
    else
        skip "--generate's first space against sentencepiece: python3 sentencepiece missing"
    fi
    # A prompt of invalid UTF-8: a usage error before the model is read. sentencepiece
    # encodes the bytes, so until now it was generated (streamed without --json) and
    # --json failed only at the end (exit 1, "cannot encode the result").
    BADP=$(printf 'Once \377 upon')
    for j in --json ""; do
        expect_error "--generate \"Once <0xff> upon\" $j (sentencepiece): exit 2 at byte 5" 2 \
            "--generate: the prompt is not valid UTF-8 (byte 5)" "$E" --model "$S" --generate "$BADP" --max-new-tokens 200 $j --quiet
        check "... and nothing was generated (stdout empty)" test ! -s "$TMP/out"
    done
else
    skip "stories260K perplexity and generation: $SHARED not found"
fi

# A shard of another tokenizer than the model's: refused, naming both (its ids would mean
# other tokens); --any-tokenizer evaluates it anyway; the model's own shard is evaluated and
# the output names the protocol. A tiny model from random init with tokenizer A in its
# folder; shards by A and by B (two byte-level BPEs learned from different texts).
python3 -c "
import json, random
random.seed(3)
w = ['alpha', 'beta', 'gamma', 'delta', 'omega', 'kappa', 'sigma', 'theta', 'zeta', 'lambda']
for name, k in (('$TMP/da.jsonl', 0), ('$TMP/db.jsonl', 5)):
    with open(name, 'w') as f:
        for i in range(40): f.write(json.dumps({'text': ' '.join(random.choice(w[k:] + w[:k]) + str(i % (3 + k)) for _ in range(30))}) + '\n')
cfg = json.load(open('pipelines/demo-config.json')); cfg.update(vocab_size=320, num_hidden_layers=1, bos_token_id=0, eos_token_id=0)
json.dump(cfg, open('$TMP/tiny.json', 'w'))"
python3 pipelines/make_tokenizer.py "$TMP/ta" "$TMP/da.jsonl" 40 >/dev/null 2>&1
python3 pipelines/make_tokenizer.py "$TMP/tb" "$TMP/db.jsonl" 30 >/dev/null 2>&1
"$BIN/best-tokenize" --tokenizer "$TMP/ta" --quiet --out "$TMP/sa.bin" "$TMP/da.jsonl"
"$BIN/best-tokenize" --tokenizer "$TMP/tb" --quiet --out "$TMP/sb.bin" "$TMP/db.jsonl"
"$BIN/best-train" --init random --config "$TMP/tiny.json" --data "$TMP/sa.bin" --out "$TMP/tiny" --steps 1 --batch 1 \
    --seq 16 --quiet
cp "$TMP/ta/tokenizer.json" "$TMP/tiny/model/"
expect_error "a shard of another tokenizer: refused, both tokenizers named" 1 \
    "sb.bin: made by tokenizer [0-9a-f]*, but the model's tokenizer (.*tiny/model) is [0-9a-f]*: its ids would mean other tokens" \
    "$E" --model "$TMP/tiny/model" --data "$TMP/sb.bin" --seq 16
check "... evaluated anyway with --any-tokenizer" "$E" --model "$TMP/tiny/model" --data "$TMP/sb.bin" --seq 16 --any-tokenizer --quiet
out=$("$E" --model "$TMP/tiny/model" --data "$TMP/sa.bin" --seq 16 --quiet)
check "the model's own shard: the output names the protocol (40 documents, EOS after each, no BOS)" sh -c \
    "printf '%s' \"$out\" | grep -q '^protocol: a token shard of 40 documents, no BOS, EOS after each (tokenizer '"
"$E" --model "$TMP/tiny/model" --data "$TMP/sa.bin" --seq 300 2>"$TMP/cap.err" >/dev/null
check "--seq beyond the model's positions: capped, and a note says so" grep -q "note: --seq 300 is longer than the model's 256 positions: windows of 256" "$TMP/cap.err"
# generation stops at EOS and does not print it: the tiny model's first greedy token made its EOS
"$E" --model "$TMP/tiny/model" --generate "alpha beta" --max-new-tokens 5 --json --quiet >"$TMP/g0.json"
first=$(python3 -c "import json; print(json.load(open('$TMP/g0.json'))['ids'][0])")
python3 -c "
import json; c = json.load(open('$TMP/tiny/model/config.json')); c['eos_token_id'] = $first
json.dump(c, open('$TMP/tiny/model/config.json', 'w'))"
"$E" --model "$TMP/tiny/model" --generate "alpha beta" --max-new-tokens 5 --json --quiet >"$TMP/g1.json"
"$E" --model "$TMP/tiny/model" --generate "alpha beta" --max-new-tokens 5 --quiet >"$TMP/g1.txt"
check "generation stops at EOS (token $first) and prints nothing of it (JSON text empty, stdout the prompt)" sh -c \
    "python3 -c \"import json; j = json.load(open('$TMP/g1.json')); assert j['ids'] == [$first] and j['text'] == '', j\" &&
     [ \"\$(cat '$TMP/g1.txt')\" = 'alpha beta' ]"
check "--json: the protocol of a text input (documents, join, BOS, tokenizer)" sh -c "'$E' --model '$TMP/tiny/model' \
    --data '$TMP/da.jsonl' --seq 16 --json --quiet | python3 -c \"
import json, sys; p = json.load(sys.stdin)['protocol']
assert p['input'] == 'text' and p['documents'] == 40 and p['join'] == ' ' and p['bos'] == 'none' and len(p['tokenizer']) == 16, p\""

# Usage errors (2) and bad input (1, one line naming the file).
expect_error "--generate of invalid UTF-8 (byte-level BPE): a usage error naming the byte" 2 \
    "--generate: the prompt is not valid UTF-8 (byte 6)" "$E" --model "$TMP/tiny/model" --generate "$(printf 'alpha \300\200')" --json --quiet
check "... and no JSON on stdout" test ! -s "$TMP/out"
expect_error "no --model" 2 "usage error" "$E" --data x.bin
expect_error "neither --data nor --generate" 2 "exactly one" "$E" --model tests/fixtures/model/qwen3
expect_error "--tasks without --task-dir" 2 "needs the folder of the tasks' files: --task-dir DIR" \
    env -u BEST_TASK_DIR "$E" --model tests/fixtures/model/qwen3 --tasks arc_easy
expect_error "missing model folder" 1 "nowhere" "$E" --model "$TMP/nowhere" --data tests/fixtures/eval/qwen3_tokens.bin
expect_error "--device bogus" 2 "unknown --device bogus (cuda, cpu)" "$E" --model tests/fixtures/model/qwen3 \
    --data tests/fixtures/eval/qwen3_tokens.bin --device bogus
if nvidia-smi -L >/dev/null 2>&1; then
    skip "--device cuda without a GPU: this machine has one (tests/gpu/run.sh runs best-eval on it)"
else # a CUDA build without a driver or GPU, or a build without CUDA (the sanitizer pass)
    # what a user can act on (issue 36: it said "CUDA driver version is insufficient")
    expect_error "--device cuda without a GPU: one error line naming no GPU or driver (or no CUDA build), exit 1" 1 \
        "--device cuda: .*\(no usable NVIDIA GPU or driver found\|built without CUDA\).*; use --device cpu" \
        "$E" --model tests/fixtures/model/qwen3 --data tests/fixtures/eval/qwen3_tokens.bin --device cuda
    if have_shared; then
        expect_error "--device cuda --generate without a GPU: one error line, exit 1" 1 "--device cuda: .*; use --device cpu" \
            "$E" --model "$SHARED/models/stories260K" --generate "Once" --device cuda
    fi
    out=$("$E" --model tests/fixtures/model/qwen3 --data tests/fixtures/eval/qwen3_tokens.bin --seq 64 --json --quiet)
    check "without a GPU the default device is the CPU (the JSON says so)" python3 -c "
import json, sys; assert json.loads(sys.argv[1])['device'] == 'cpu'" "$out"
fi
mkdir -p "$TMP/trunc"
cp tests/fixtures/model/qwen3/config.json "$TMP/trunc/"
head -c 3000 tests/fixtures/model/qwen3/model.safetensors >"$TMP/trunc/model.safetensors"
expect_error "truncated safetensors" 1 "model.safetensors" "$E" --model "$TMP/trunc" --data tests/fixtures/eval/qwen3_tokens.bin
cp tests/fixtures/eval/qwen3_tokens.bin "$TMP/flip.bin"
printf 'X' | dd of="$TMP/flip.bin" bs=1 seek=200 conv=notrunc 2>/dev/null
expect_error "corrupt shard" 1 "checksum" "$E" --model tests/fixtures/model/qwen3 --data "$TMP/flip.bin"
if have_shared; then
    echo "Once upon a time there was a cat." >"$TMP/story.txt"
    "$BIN/best-tokenize" --tokenizer "$SHARED/models/stories260K" --quiet --out "$TMP/story.bin" "$TMP/story.txt"
    expect_error "shard from a larger vocabulary (512 > 97)" 1 "vocab 512" "$E" --model tests/fixtures/model/qwen3 \
        --data "$TMP/story.bin"
fi
# One parameter count in every tool (issue 36: 0.26M in best-train, 0.3M in best-eval, 0.0M
# for the Qwen3 fixture): each banner gives the fixture's 41,836 as 41.8K, its 24,768 as 24.8K
python3 -c "
import sys; sys.path.insert(0, 'tests'); from shardio import write_shard
write_shard('$TMP/story0.bin', [(7 * i) % 97 for i in range(400)], 97)"
for fx in llama:41.8K qwen3:24.8K; do
    m=tests/fixtures/model/${fx%%:*} want=${fx#*:}
    "$E" --model "$m" --data README.md --max-tokens 64 --seq 32 2>"$TMP/pc.eval" >/dev/null
    "$BIN/best-mask" --model "$m" --sparsity 0.5 --saliency magnitude --out "$TMP/pc.mask" 2>"$TMP/pc.mask.err" >/dev/null
    "$BIN/best-pack" --model "$m" --out "$TMP/pc.pack" 2>"$TMP/pc.pack.err" >/dev/null
    "$BIN/best-train" --model "$m" --data "$TMP/story0.bin" --seq 16 --batch 1 --steps 1 --out "$TMP/pc.train" \
        2>"$TMP/pc.train.err" >/dev/null
    check "${fx%%:*}: best-eval, best-mask, best-pack and best-train print its parameters as $want" sh -c "
        grep -q ' $want parameters), device' '$TMP/pc.eval' && grep -q ' of $want parameters)' '$TMP/pc.mask.err' &&
        grep -q ' of $want parameters)' '$TMP/pc.pack.err' && grep -q ', $want parameters, ' '$TMP/pc.train.err'"
    rm -rf "$TMP/pc.train"
done
# One meaning of the options the tools share (issue 36): --quiet is "nothing on stderr but
# warnings and errors" in all five, --seed defaults to 0 in all three that have one
for t in tokenize train mask eval pack; do
    check "best-$t --help: --quiet means nothing on stderr but warnings and errors" sh -c \
        "'$BIN/best-$t' --help 2>&1 | grep -q -- '--quiet  *nothing on stderr but warnings and errors'"
done
for t in train mask eval; do
    check "best-$t --help: --seed defaults to 0" sh -c "'$BIN/best-$t' --help 2>&1 | grep -q -- '--seed .*(default 0)'"
done
# --batch defaults to a number of windows chosen from the memory (issue 36: batch 1 took
# twice the time): the JSON says how many, and the perplexity is --batch 1's
"$E" --model tests/fixtures/model/qwen3 --data tests/fixtures/eval/qwen3_tokens.bin --seq 16 --json --quiet >"$TMP/b0.json"
"$E" --model tests/fixtures/model/qwen3 --data tests/fixtures/eval/qwen3_tokens.bin --seq 16 --batch 1 --json --quiet >"$TMP/b1.json"
check "no --batch: several windows a forward pass (at most 16), the perplexity of --batch 1 (within 1e-6)" python3 -c "
import json; a, b = json.load(open('$TMP/b0.json')), json.load(open('$TMP/b1.json'))
assert 1 < a['batch'] <= min(16, a['windows']) and b['batch'] == 1 and abs(a['nll'] - b['nll']) <= 1e-6 * abs(b['nll']), (a, b)"
# Several token shards in --data, as best-train takes them (issue 36): read in order, one
# perplexity over their tokens (the same as a shard of both); a text among them is an error
"$E" --model tests/fixtures/model/qwen3 --data tests/fixtures/eval/qwen3_tokens.bin --data tests/fixtures/eval/qwen3_tokens.bin \
    --seq 16 --batch 1 --json --quiet >"$TMP/two.json"
"$E" --model tests/fixtures/model/qwen3 --data tests/fixtures/eval/qwen3_tokens.bin --seq 16 --batch 1 --json --quiet >"$TMP/one.json"
check "--data A --data A: twice the windows and tokens, the same mean nll, data listing both" python3 -c "
import json; a, b = json.load(open('$TMP/two.json')), json.load(open('$TMP/one.json'))
assert a['tokens'] >= 2 * b['tokens'] and a['data'] == ['tests/fixtures/eval/qwen3_tokens.bin'] * 2, (a, b)
assert abs(a['nll'] / a['tokens'] - b['nll'] / b['tokens']) < 0.05 * b['nll'] / b['tokens'], (a, b)"
expect_error "--data SHARD --data TEXT: one error line naming the text" 1 "README.md: not a token shard" \
    "$E" --model tests/fixtures/model/qwen3 --data tests/fixtures/eval/qwen3_tokens.bin --data README.md --seq 16
finish
