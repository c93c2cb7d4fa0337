#!/bin/sh
# t_hf_load.sh: the model folders our tools write load in Hugging Face transformers and
# compute there what they compute in best-eval: the same logits (within 1e-5 of the
# largest), the same perplexity (1e-6 relative) and the same greedy tokens, fp32 on both
# sides (tests/hf_check.py does the comparing; tests/hf_logits.c gives libbest's logits).
# Folders: LLaMA and Qwen3, written by best-mask --apply (the tiny fixtures, F32 and
# BF16), by best-train (trained from random init with a byte-level tokenizer, pruned to
# 60% on the way) and by best-pack --unpack; with ../shared, stories260K pruned by
# best-mask and trained sparse by best-train. Two controls show that a difference fails:
# a copy with one weight negated, and one with another rope_theta.
# torch and transformers come from the venv of tests/hf_env.sh (`make deps` makes it;
# versions in tests/hf_requirements.txt); without it the test skips and says why.
. tests/lib.sh
. tests/hf_env.sh
BLAS_TORCH=$HF_PY # (a failed line names torch's BLAS beside ours: tests/lib.sh)
: "${TBIN:=$(pwd)/build/tests}"
if [ "$SAN" = 1 ]; then skip "transformers comparisons: in the plain pass (the tools run under ASan in the other tests)"; finish; fi
if [ ! -f "$HF_VENV/.complete" ] || ! "$HF_PY" -c 'import torch, transformers' 2>/dev/null; then
    if [ -f "$HF_LOG" ]; then why="make deps could not install it: $(tail -n 1 "$HF_LOG") (log: $HF_LOG)"
    else why="run make deps to install it"; fi
    skip "transformers load test: no torch + transformers environment at $HF_VENV; $why"; finish
fi
if [ ! -x "$TBIN/hf_logits" ]; then fail "no $TBIN/hf_logits: run make"; finish; fi

# add NAME DIR SHARD SEQ SPARSITY DTYPE [PROMPT [TOKENIZER [CORRUPT]]]: a case for hf_check.py
add() {
    python3 -c 'import json, sys
a = sys.argv[1:] + [None] * (9 - len(sys.argv[1:]))
print(json.dumps({"name": a[0], "dir": a[1], "data": a[2], "seq": int(a[3]), "sparsity": float(a[4]),
                  "dtype": a[5], "prompt": a[6], "tokenizer": a[7] or None, "corrupt": a[8]}))' "$@" >>"$TMP/cases.jsonl"
}
M="$BIN/best-mask"
Q=tests/fixtures/eval/qwen3_tokens.bin

# best-mask --apply on the tiny fixtures: LLaMA, tied LLaMA with biases, Qwen3 (F32)
"$M" --model tests/fixtures/model/llama --sparsity 0.7 --saliency magnitude --apply --out-model "$TMP/llama70" --quiet
add "tiny LLaMA pruned to 70% by best-mask --apply" "$TMP/llama70" $Q 64 0.7 F32
"$M" --model tests/fixtures/model/llama_tied --sparsity 0.5 --saliency magnitude --apply --out-model "$TMP/tied50" --quiet
"$HF_PY" -c "
import random, sys; sys.path.insert(0, 'tests'); from shardio import write_shard
random.seed(5); write_shard(sys.argv[1], [random.randrange(89) for _ in range(640)], 89)" "$TMP/t89.bin"
add "tiny tied LLaMA with biases pruned to 50% by best-mask --apply" "$TMP/tied50" "$TMP/t89.bin" 64 0.5 F32
"$M" --model tests/fixtures/model/qwen3 --sparsity 0.7 --saliency magnitude --apply --out-model "$TMP/qwen70" --quiet
add "tiny Qwen3 pruned to 70% by best-mask --apply" "$TMP/qwen70" $Q 64 0.7 F32

# ... and on the Qwen3 fixture in BF16 (as real checkpoints are): best-mask writes BF16
mkdir -p "$TMP/qwen_bf16"
cp tests/fixtures/model/qwen3/config.json "$TMP/qwen_bf16/"
"$HF_PY" -c '
import sys, torch
from safetensors.torch import load_file, save_file
d = {k: v.to(torch.bfloat16) for k, v in load_file(sys.argv[1]).items()}
save_file(d, sys.argv[2], metadata={"format": "pt"})' tests/fixtures/model/qwen3/model.safetensors "$TMP/qwen_bf16/model.safetensors"
"$M" --model "$TMP/qwen_bf16" --sparsity 0.8 --saliency magnitude --apply --out-model "$TMP/qwen_bf16_80" --quiet
add "tiny Qwen3 in BF16 pruned to 80% by best-mask --apply" "$TMP/qwen_bf16_80" $Q 64 0.8 BF16

# best-train: LLaMA and Qwen3 from random init on a synthetic corpus with a byte-level
# tokenizer (257 tokens), 150 steps, BEST to 60% on the way, then best-pack and back.
# 150 steps at lr 1e-2, so that attention depends on position: after 40 steps at 3e-3
# rope_theta / 100 moved the logits by only 5e-7 of the largest (the control failed).
python3 pipelines/make_corpus.py "$TMP/corpus.jsonl" 150 7
python3 pipelines/make_tokenizer.py "$TMP/tok" 2>/dev/null
"$BIN/best-tokenize" --tokenizer "$TMP/tok" --quiet --out "$TMP/corpus.bin" "$TMP/corpus.jsonl"
cat >"$TMP/qwen3.json" <<'EOF'
{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 64,
 "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 257, "max_position_embeddings": 128,
 "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "hidden_act": "silu", "attention_bias": false,
 "tie_word_embeddings": false, "torch_dtype": "float32"}
EOF
cat >"$TMP/llama.json" <<'EOF'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
 "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 257, "max_position_embeddings": 128,
 "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "hidden_act": "silu", "attention_bias": false,
 "mlp_bias": false, "tie_word_embeddings": false, "torch_dtype": "float32"}
EOF
for a in qwen3 llama; do
    python3 pipelines/make_tokenizer.py --config "$TMP/$a.json" "$TMP/$a-config.json" "$TMP/tok/tokenizer.json"
    "$BIN/best-train" --init random --config "$TMP/$a-config.json" --data "$TMP/corpus.bin" --out "$TMP/$a-run" \
        --steps 150 --batch 8 --seq 64 --lr 1e-2 --sparsity 0.6 --prune-updates 4 --seed 1 --quiet >/dev/null \
        || fail "best-train on the $a config"
done
add "Qwen3 trained and pruned to 60% by best-train" "$TMP/qwen3-run/model" "$TMP/corpus.bin" 128 0.6 F32 "Once upon a time" "$TMP/tok"
add "LLaMA trained and pruned to 60% by best-train" "$TMP/llama-run/model" "$TMP/corpus.bin" 128 0.6 F32 "Once upon a time" "$TMP/tok"
"$BIN/best-pack" --model "$TMP/qwen3-run/model" --out "$TMP/q.pack" --quiet
"$BIN/best-pack" --unpack "$TMP/q.pack" --out "$TMP/q-unpacked" --quiet
add "the best-train Qwen3 packed and unpacked by best-pack" "$TMP/q-unpacked" "$TMP/corpus.bin" 128 0.6 F32 "Once upon a time" "$TMP/tok"
# controls: transformers reads a changed copy, best-eval the folder: must fail
add "control: one weight negated" "$TMP/qwen3-run/model" "$TMP/corpus.bin" 128 0.6 F32 "Once upon a time" "$TMP/tok" weight
add "control: rope_theta / 100" "$TMP/llama-run/model" "$TMP/corpus.bin" 128 0.6 F32 "Once upon a time" "$TMP/tok" rope_theta

if have_shared; then
    S="$SHARED/models/stories260K"
    head -n 40 "$SHARED/data/stories260K/valid.jsonl" >"$TMP/v.jsonl"
    "$BIN/best-tokenize" --tokenizer "$S" --quiet --out "$TMP/v.bin" "$TMP/v.jsonl"
    "$M" --model "$S" --sparsity 0.9 --saliency magnitude --apply --out-model "$TMP/s90" --quiet
    check "the pruned stories260K keeps the tokenizer" test -f "$TMP/s90/tokenizer.model"
    add "stories260K pruned to 90% by best-mask --apply" "$TMP/s90" "$TMP/v.bin" 256 0.9 F32 ""
    "$BIN/best-train" --model "$S" --data "$TMP/v.bin" --out "$TMP/s-run" --steps 10 --batch 4 --seq 256 \
        --lr 1e-4 --sparsity 0.5 --prune-updates 2 --seed 1 --quiet >/dev/null || fail "best-train on stories260K"
    add "stories260K trained and pruned to 50% by best-train" "$TMP/s-run/model" "$TMP/v.bin" 256 0.5 F32 ""
else
    skip "stories260K in transformers: $SHARED not found"
fi

BIN="$BIN" TBIN="$TBIN" "$HF_PY" tests/hf_check.py "$TMP/cases.jsonl" || FAILED=1
finish
