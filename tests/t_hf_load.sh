#!/bin/sh
# t_hf_load.sh: a folder our tools write loads in Hugging Face transformers, and
# transformers computes the same perplexity on it as best-eval. Needs torch and
# transformers for /usr/bin/python3 (Debian python3-torch 1.13 + pip transformers
# 4.46.3, the last that runs on torch 1.13; mlp_bias needs >= 4.41); skips and says so
# otherwise. Qwen3 needs transformers >= 4.51 and so torch 2: only the LLaMA fixtures
# and stories260K are checked here.
. tests/lib.sh
PY=/usr/bin/python3
if [ "$SAN" = 1 ]; then finish; fi
if ! $PY -c 'import torch, transformers' 2>/dev/null; then
    skip "transformers load test: /usr/bin/python3 has no torch + transformers"; finish
fi
# hf_ppl DIR SHARD SEQ: perplexity by transformers, same windows as best-eval
hf_ppl() {
    $PY - "$1" "$2" "$3" <<'PY'
import math, struct, sys
import numpy as np, torch
from transformers import AutoModelForCausalLM
folder, shard, seq = sys.argv[1], sys.argv[2], int(sys.argv[3])
raw = open(shard, "rb").read()
width = struct.unpack_from("<I", raw, 12)[0]
toks = np.frombuffer(raw[64:], dtype="<u2" if width == 2 else "<u4").astype(np.int64)
m = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32).eval()
nwin = len(toks) // seq
total = 0.0
with torch.no_grad():
    for i in range(nwin):
        x = torch.from_numpy(toks[i * seq:(i + 1) * seq].copy())[None]
        logits = m(x).logits[0].double()
        total += torch.nn.functional.cross_entropy(logits[:-1], x[0, 1:], reduction="sum").item()
print(math.exp(total / (nwin * (seq - 1))))
PY
}
compare_ppl() { # NAME DIR SHARD SEQ
    ours=$("$BIN/best-eval" --model "$2" --data "$3" --seq "$4" --json --quiet | python3 -c "import json,sys; print(json.load(sys.stdin)['ppl'])")
    theirs=$(hf_ppl "$2" "$3" "$4" 2>"$TMP/hf.err")
    if python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); sys.exit(abs(a-b)/b > 1e-4)" "$ours" "$theirs" 2>/dev/null; then
        ok "$1: transformers loads it; perplexity $theirs there, $ours in best-eval"
    else
        fail "$1: transformers perplexity '$theirs' vs best-eval '$ours' $(tail -1 "$TMP/hf.err")"
    fi
}
"$BIN/best-mask" --model tests/fixtures/model/llama --sparsity 0.7 --saliency magnitude --apply \
    --out-model "$TMP/llama70" --quiet
compare_ppl "tiny LLaMA pruned to 70% by best-mask --apply" "$TMP/llama70" tests/fixtures/eval/qwen3_tokens.bin 64
"$BIN/best-mask" --model tests/fixtures/model/llama_tied --sparsity 0.5 --saliency magnitude --apply \
    --out-model "$TMP/tied50" --quiet
python3 -c "
import random, sys; sys.path.insert(0, 'tests'); from shardio import write_shard
random.seed(5); write_shard(sys.argv[1], [random.randrange(89) for _ in range(640)], 89)" "$TMP/t89.bin"
compare_ppl "tiny tied LLaMA with biases pruned to 50%" "$TMP/tied50" "$TMP/t89.bin" 64
if have_shared; then
    S="$SHARED/models/stories260K"
    head -n 40 "$SHARED/data/stories260K/valid.jsonl" >"$TMP/v.jsonl"
    "$BIN/best-tokenize" --tokenizer "$S" --quiet --out "$TMP/v.bin" "$TMP/v.jsonl"
    "$BIN/best-mask" --model "$S" --sparsity 0.9 --saliency magnitude --apply --out-model "$TMP/s90" --quiet
    compare_ppl "stories260K pruned to 90%" "$TMP/s90" "$TMP/v.bin" 256
    check "the pruned folder keeps the tokenizer" test -f "$TMP/s90/tokenizer.model"
else
    skip "stories260K in transformers: $SHARED not found"
fi
finish
