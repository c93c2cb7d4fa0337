#!/bin/sh
# decode_gpu.sh: batch-1 decoding on a GPU, dense against packed, end to end, in one run
# (issue 14's table; docs/benchmarks.md):
#
#   1. a LLaMA-2-7B-shaped model with random weights in bf16 (build/bench/bench_decode
#      --init bench/configs/llama2-7b.json; LAYERS=n keeps n of its 32 layers so that the
#      whole run fits one call of the device tool: every row scales alike);
#   2. per sparsity: bin/best-mask --saliency magnitude --apply, then bin/best-pack
#      (values stay bf16; embeddings and lm_head dense bf16);
#   3. 100 greedy tokens after an 8-token prompt, best of REPS runs, each in its own
#      process: the dense folder with best-eval --device cuda (bf16 cuBLASLt products,
#      one CUDA graph a step), the same folder with PyTorch transformers generate() and a
#      static cache (bench/decode_gpu.py), and each pack with best-eval --device cuda
#      (products straight from the pack's encodings, lib/pack/spmv.cu). best-eval --json
#      gives decode tokens/s (the prompt not counted) and the device memory of the model,
#      its KV cache and activations; transformers' is torch.cuda.max_memory_allocated.
#      Each pruned folder also runs once through our dense path: its greedy ids must be
#      the pack's (the same weights). And per N:M pattern of PATTERNS (default 2:4; issue
#      39): the model pruned N:M (best-mask --method magnitude --pattern), packed nm
#      (best-pack --index nm: the device's nm kernel, lib/pack/spmv.cu), as the packs are.
#   4. the table: tokens/s, speed-up over our dense path, GPU memory and its ratio, and
#      whether the pack's greedy ids equal its folder's. Our runs decode after the prompt
#      "The capital of France is" (LLaMA-2's tokenizer, ../shared/tokenizers/llama2 or
#      TOK=), transformers after 8 fixed ids: the random model's folders hold no tokenizer.
#
# usage: sh bench/decode_gpu.sh   (after `make`, on a machine with a GPU and torch +
#        transformers; env: OUT=out/bench-decode-gpu, WORK=out/decode-gpu (models, kept
#        and reused), LAYERS=32, SPARSITIES="0.7 0.9 0.95 0.99", PATTERNS="2:4", TOKENS=100,
#        REPS=3, PY=python3). Results on an H200: docs/benchmarks.md.
set -e
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
BD=${BD:-build/bench/bench_decode}
OUT=${OUT:-out/bench-decode-gpu}
WORK=${WORK:-out/decode-gpu}
LAYERS=${LAYERS:-32}
SPARSITIES=${SPARSITIES:-"0.7 0.9 0.95 0.99"}
PATTERNS=${PATTERNS:-"2:4"}
TOKENS=${TOKENS:-100}
REPS=${REPS:-3}
PY=${PY:-python3}
PROMPT=1,450,7483,310,3444,338,263,1243 # 8 ids of LLaMA's vocabulary (transformers' prompt)
SH=../shared
[ -d "$SH" ] || SH=shared # tests/gpu/shared.sh's copy on a device machine
TOK=${TOK:-$SH/tokenizers/llama2/tokenizer.model}
for f in "$BD" "$BIN/best-mask" "$BIN/best-pack" "$BIN/best-eval"; do
    [ -x "$f" ] || { echo "decode_gpu.sh: $f is missing (run make)" >&2; exit 1; }
done
mkdir -p "$OUT" "$WORK"
M=$WORK/l$LAYERS
if [ ! -f "$M/dense/model.safetensors" ]; then
    mkdir -p "$M"
    sed "s/\"num_hidden_layers\": 32/\"num_hidden_layers\": $LAYERS/" bench/configs/llama2-7b.json >"$M/config.json"
    "$BD" --init "$M/config.json" --out "$M/dense"
fi
for s in $SPARSITIES; do
    [ -f "$M/s$s/model.safetensors" ] || "$BIN/best-mask" --model "$M/dense" --sparsity "$s" --saliency magnitude \
        --apply --out-model "$M/s$s" --quiet
    [ -f "$M/s$s.pack" ] || "$BIN/best-pack" --model "$M/s$s" --out "$M/s$s.pack" --quiet
done
for p in $PATTERNS; do # p2o4: 2:4
    t=p$(echo "$p" | tr : o)
    [ -f "$M/$t/model.safetensors" ] || "$BIN/best-mask" --model "$M/dense" --method magnitude --pattern "$p" \
        --apply --out-model "$M/$t" --quiet
    [ -f "$M/$t.pack" ] || "$BIN/best-pack" --model "$M/$t" --index nm --out "$M/$t.pack" --quiet
done
nm_sparsity() { echo "$1" | awk -F: '{ printf "%.17g", ($2 - $1) / $2 }'; }
R=$OUT/results.jsonl
: >"$R"
ours() { # KIND SPARSITY MODEL
    "$BIN/best-eval" --model "$3" --tokenizer "$TOK" --device cuda --generate "The capital of France is" \
        --max-new-tokens "$TOKENS" --json --quiet | sed "s/^{/{\"kind\": \"$1\", \"sparsity\": $2, /" >>"$R"
}
rep=0
while [ "$rep" -lt "$REPS" ]; do
    ours dense 0 "$M/dense"
    BEST_DECODE_GEMV=own ours dense-gemv 0 "$M/dense" # our bf16 GEMV instead of cuBLASLt (issue 35)
    for s in $SPARSITIES; do ours packed "$s" "$M/s$s.pack"; done
    for p in $PATTERNS; do ours "nm-$p" "$(nm_sparsity "$p")" "$M/p$(echo "$p" | tr : o).pack"; done
    rep=$((rep + 1))
done
for s in $SPARSITIES; do ours folder "$s" "$M/s$s"; done
for p in $PATTERNS; do ours "nm-folder-$p" "$(nm_sparsity "$p")" "$M/p$(echo "$p" | tr : o)"; done
# the packs again with BEST_SPMV_LAYOUT=auto: each weight in the faster of the pack's streams
# and the pairs layout, timed on the device at upload (issue 35; once, not REPS times)
for s in $SPARSITIES; do BEST_SPMV_LAYOUT=auto ours packed-auto "$s" "$M/s$s.pack"; done
# the products that share an input fused (BEST_DECODE_FUSE=on, nn/decode_fused.h: a folder's
# by our GEMV, a pack's in the pairs layout), alone and with every other decode switch
ALL="BEST_DECODE_FUSE=on BEST_DECODE_ATTN=split BEST_KV=bf16"
BEST_DECODE_FUSE=on ours dense-fused 0 "$M/dense"
env $ALL ours dense-all 0 "$M/dense"
for s in $SPARSITIES; do
    BEST_SPMV_LAYOUT=pairs BEST_DECODE_FUSE=on ours packed-fused "$s" "$M/s$s.pack"
    env BEST_SPMV_LAYOUT=auto $ALL ours packed-all "$s" "$M/s$s.pack"
done
"$PY" bench/decode_gpu.py --model "$M/dense" --prompt-ids "$PROMPT" --tokens "$TOKENS" --reps "$REPS" |
    sed 's/^{/{"sparsity": 0, /' >>"$R"

"$PY" - "$R" "$LAYERS" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def best(kind, s):
    rs = [r for r in rows if r["kind"] == kind and r["sparsity"] == s]
    return max(rs, key=lambda r: r["tokens_per_s"]) if rs else None
d, hf = best("dense", 0), best("transformers", 0)
print(f"LLaMA-2-7B shape, {sys.argv[2]} of 32 layers, random bf16 weights; batch 1, greedy")
print("| model | tokens/s | vs our dense | GPU memory GiB | memory vs our dense | weights GiB | measured GiB | same ids as its folder |")
print("|---|---:|---:|---:|---:|---:|---:|---|")
G = 2**30
def measured(r):  # cudaMemGetInfo's growth from before the model went up to after the last token
    m = r.get("device_mem_measured")
    return f"{(m['after_decode'] - m['before_load']) / G:.2f}" if m else "-"
print(f"| dense, transformers generate (static cache) | {hf['tokens_per_s']:.1f} | {hf['tokens_per_s'] / d['tokens_per_s']:.2f}x "
      f"| {hf['peak_bytes'] / G:.2f} | {hf['peak_bytes'] / d['device_bytes']:.2f}x | | {hf['peak_bytes'] / G:.2f} | |")
print(f"| dense, best-eval --device cuda | {d['tokens_per_s']:.1f} | 1.00x | {d['device_bytes'] / G:.2f} | 1.00x "
      f"| {d['device_weight_bytes'] / G:.2f} | {measured(d)} | |")
ALL = "BEST_DECODE_FUSE=on BEST_DECODE_ATTN=split BEST_KV=bf16"
for kind, label in [("dense-gemv", "BEST_DECODE_GEMV=own"), ("dense-fused", "BEST_DECODE_FUSE=on"),
                    ("dense-all", ALL)]:
    g = best(kind, 0)
    if g:
        print(f"| dense, best-eval --device cuda, {label} | {g['tokens_per_s']:.1f} | "
              f"{g['tokens_per_s'] / d['tokens_per_s']:.2f}x | {g['device_bytes'] / G:.2f} | | "
              f"{g['device_weight_bytes'] / G:.2f} | {measured(g)} | {'yes' if g['ids'] == d['ids'] else 'no'} |")
for s in sorted({r["sparsity"] for r in rows if r["kind"] == "packed"}):
    for kind, label in [("packed", ""), ("packed-auto", ", BEST_SPMV_LAYOUT=auto"),
                        ("packed-fused", ", BEST_SPMV_LAYOUT=pairs BEST_DECODE_FUSE=on"),
                        ("packed-all", ", BEST_SPMV_LAYOUT=auto " + ALL)]:
        p = best(kind, s)
        if p:
            print(f"| packed {s:g}{label} | {p['tokens_per_s']:.1f} | {p['tokens_per_s'] / d['tokens_per_s']:.2f}x "
                  f"| {p['device_bytes'] / G:.2f} | {d['device_bytes'] / p['device_bytes']:.2f}x less "
                  f"| {p['device_weight_bytes'] / G:.2f} | {measured(p)} | {'yes' if p['ids'] == best('folder', s)['ids'] else 'no'} |")
for kind in sorted({r["kind"] for r in rows if r["kind"].startswith("nm-") and not r["kind"].startswith("nm-folder")}):
    s = next(r["sparsity"] for r in rows if r["kind"] == kind)
    p, f = best(kind, s), best("nm-folder-" + kind[3:], s)
    print(f"| packed {kind[3:]} (nm) | {p['tokens_per_s']:.1f} | {p['tokens_per_s'] / d['tokens_per_s']:.2f}x "
          f"| {p['device_bytes'] / G:.2f} | {d['device_bytes'] / p['device_bytes']:.2f}x less "
          f"| {p['device_weight_bytes'] / G:.2f} | {measured(p)} | {'yes' if f and p['ids'] == f['ids'] else 'no'} |")
print("CUDA graphs:", "yes" if all(r.get("cuda_graph", True) for r in rows if r["kind"] != "transformers") else "not all runs")
PY
