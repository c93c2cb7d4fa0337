#!/bin/sh
# decode.sh: batch-1 CPU decoding of a packed sparse model against the same model
# decoded dense in fp32 with OpenBLAS, at several sparsities, in one run.
#
#   1. a ~220M-parameter LLaMA (bench/configs/llama-200m.json: dim 1024, 12 layers,
#      MLP 2816, vocab 32000, untied) with random weights, saved in bf16
#      (build/bench/bench_decode --init), so that nothing of it fits in the caches;
#   2. per sparsity: bin/best-mask --saliency magnitude --apply (a dense bf16 folder
#      with zeros), bin/best-pack (default quant: values stay bf16; the embeddings and
#      lm_head stay dense bf16);
#   3. per thread count: memcpy bandwidth (bench_decode --copy-bw, 1 GiB; bytes
#      copied per second, as `b[:] = a` of a 1 GB numpy array would give it, the
#      STREAM figure (read + written) and a read-only pass printed beside), then per
#      sparsity, alternately and
#      REPS times each, in separate processes: the dense folder (fp32 block, OpenBLAS
#      sgemv slices), the same weights packed dense in bf16 (`best-pack --index dense`:
#      our dense bf16 kernels, the fair baseline: the bytes the model was made in), and
#      the pack (lib/pack/spmv.c: the best kernel set of the CPU, or BEST_ISA's; once more
#      with BEST_ISA=portable), each decoding TOKENS greedy tokens after an 8-token prompt;
#      every line of results.jsonl names the set that ran ("isa"). These run with
#      BEST_PACK_TUNE=0: the pack's own encodings. The pack once more as decoding opens it
#      by default ("tuned": each tensor's encoding timed at load on this CPU, pack_tune.h);
#      its load_s includes the tuning;
#   4. the table: tokens/s (best of the REPS runs' median token), speed-up, peak RSS,
#      the bytes one token reads (weights + KV cache; bench_decode prints them), the
#      bytes limit = bytes per token / copy bandwidth, and how close the pack comes
#      to it (time per token / limit time; 1.0 would be the copy speed).
#
# usage: sh bench/decode.sh   (after `make`; env: OUT=out/bench-decode,
#        SPARSITIES="0.7 0.9 0.95 0.99", THREADS="1 2", TOKENS=32, REPS=3, COPY_MB=1024,
#        RESULTS=$OUT/results.jsonl, BEST_ISA=avx512|avx2|portable: that kernel set for
#        every run, the packs planned for it, results-ISA.jsonl). OpenMP settings come from the environment: on a
#        machine whose cores are partly taken by other jobs, OMP_WAIT_POLICY=passive
#        keeps 2 threads from spinning against each other (docs/benchmarks.md).
# The models are kept in $OUT and reused by the next run (delete it to rebuild).
set -e
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
BD=${BD:-build/bench/bench_decode}
OUT=${OUT:-out/bench-decode}
SPARSITIES=${SPARSITIES:-"0.7 0.9 0.95 0.99"}
THREADS=${THREADS:-"1 2"}
TOKENS=${TOKENS:-32}
REPS=${REPS:-3}
COPY_MB=${COPY_MB:-1024}
CONFIG=bench/configs/llama-200m.json
for f in "$BD" "$BIN/best-mask" "$BIN/best-pack"; do
    [ -x "$f" ] || { echo "decode.sh: $f is missing (run make)" >&2; exit 1; }
done
mkdir -p "$OUT"
# BEST_ISA=avx2 (or avx512, portable): every run uses that kernel set, and the packs are
# planned for it (best-pack --isa); results go to results-avx2.jsonl
SFX="${BEST_ISA:+-$BEST_ISA}"
ISA_ARG="${BEST_ISA:+--isa $BEST_ISA}"

if [ ! -f "$OUT/dense/model.safetensors" ]; then
    "$BD" --init "$CONFIG" --out "$OUT/dense"
fi
for s in $SPARSITIES; do
    if [ ! -f "$OUT/s$s/model.safetensors" ]; then
        "$BIN/best-mask" --model "$OUT/dense" --sparsity "$s" --saliency magnitude --apply \
            --out-model "$OUT/s$s" --quiet
    fi
    # --index speed planned for the kernel set that will run (BEST_ISA's, else this CPU's best)
    if [ ! -f "$OUT/s$s$SFX.pack" ]; then
        "$BIN/best-pack" --model "$OUT/s$s" $ISA_ARG --out "$OUT/s$s$SFX.pack" --quiet
    fi
    # the fair dense baseline: the same bf16 weights, zeros stored, through our dense kernels
    if [ ! -f "$OUT/s$s-dense.pack" ]; then
        "$BIN/best-pack" --model "$OUT/s$s" --index dense --out "$OUT/s$s-dense.pack" --quiet
    fi
done

R=${RESULTS:-$OUT/results$SFX.jsonl}
: >"$R"
for t in $THREADS; do
    "$BD" --copy-bw "$COPY_MB" --threads "$t" | sed "s/^{/{\"kind\": \"copy\", /" >>"$R"
    for s in $SPARSITIES; do
        rep=0
        while [ "$rep" -lt "$REPS" ]; do
            "$BD" --model "$OUT/s$s" --tokens "$TOKENS" --threads "$t" |
                sed "s/^{/{\"kind\": \"dense\", \"sparsity\": $s, /" >>"$R"
            BEST_PACK_TUNE=0 "$BD" --model "$OUT/s$s-dense.pack" --tokens "$TOKENS" --threads "$t" |
                sed "s/^{/{\"kind\": \"dense-bf16\", \"sparsity\": $s, /" >>"$R"
            BEST_PACK_TUNE=0 "$BD" --model "$OUT/s$s$SFX.pack" --tokens "$TOKENS" --threads "$t" |
                sed "s/^{/{\"kind\": \"packed\", \"sparsity\": $s, /" >>"$R"
            "$BD" --model "$OUT/s$s$SFX.pack" --tokens "$TOKENS" --threads "$t" |
                sed "s/^{/{\"kind\": \"tuned\", \"sparsity\": $s, /" >>"$R"
            BEST_ISA=portable BEST_PACK_TUNE=0 "$BD" --model "$OUT/s$s$SFX.pack" --tokens "$TOKENS" --threads "$t" |
                sed "s/^{/{\"kind\": \"portable\", \"sparsity\": $s, /" >>"$R"
            rep=$((rep + 1))
        done
    done
done

python3 - "$R" "$OUT" "$SFX" <<'PY'
import json, os, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
out, sfx = sys.argv[2], sys.argv[3]
copy = {r["threads"]: r for r in rows if r["kind"] == "copy"}
def best(kind, s, t):
    rs = [r for r in rows if r["kind"] == kind and r["sparsity"] == s and r["threads"] == t]
    return max(rs, key=lambda r: r["tok_s"]) if rs else None
print(f"model: {rows[1]['params'] / 1e6:.1f}M parameters; per sparsity, the file sizes: " +
      ", ".join(f"{s:g}: {os.path.getsize(f'{out}/s{s:g}{sfx}.pack') / 2**20:.0f} MiB"
                for s in sorted({r['sparsity'] for r in rows if 'sparsity' in r})))
isa = sorted({r["isa"] for r in rows if r["kind"] == "packed"})
print(f"kernels (isa): {', '.join(isa)}; dense fp32 = OpenBLAS sgemv on the fp32 block; dense bf16 = the same "
      "bf16 weights (zeros stored) through our dense kernels")
print("| sparsity | threads | dense fp32 tok/s | dense bf16 tok/s | packed tok/s | vs fp32 | vs bf16 "
      "| tuned tok/s | tuned vs bf16 | tensors re-encoded (tuning s) | portable tok/s "
      "| dense RSS peak MiB | packed RSS peak MiB | packed MB/token | copy GB/s | limit tok/s "
      "| packed time / limit | achieved GB/s | same greedy ids |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
for t in sorted(copy):
    for s in sorted({r["sparsity"] for r in rows if r.get("threads") == t and "sparsity" in r}):
        d, h = best("dense", s, t), best("dense-bf16", s, t)
        p, q, u = best("packed", s, t), best("portable", s, t), best("tuned", s, t)
        bpt = p["weight_bytes"] + p["kv_bytes"]
        bw = copy[t]["copy_gbs"] * 1e9
        limit = bw / bpt
        same = d["ids"] == p["ids"] == h["ids"] == q["ids"] == u["ids"]
        print(f"| {s:g} | {t} | {d['tok_s']:.2f} | {h['tok_s']:.2f} | {p['tok_s']:.2f} | {p['tok_s'] / d['tok_s']:.2f}x "
              f"| {p['tok_s'] / h['tok_s']:.2f}x | {u['tok_s']:.2f} | {u['tok_s'] / h['tok_s']:.2f}x "
              f"| {u['tuned']} ({u['tune_s']:.1f}) | {q['tok_s']:.2f} | {d['rss_peak_mb']:.0f} | {p['rss_peak_mb']:.0f} "
              f"| {bpt / 1e6:.1f} | {bw / 1e9:.2f} | {limit:.1f} | {limit / p['tok_s']:.2f} "
              f"| {bpt * p['tok_s'] / 1e9:.2f} | {'yes' if same else 'no'} |")
dense = next(r for r in rows if r["kind"] == "dense")
print(f"dense fp32 reads {dense['weight_bytes'] / 1e6:.0f} MB of weights per token; bandwidth: " +
      "; ".join(f"{t} thread(s): copy {c['copy_gbs']:.2f} GB/s ({c['copy_traffic_gbs']:.2f} read + "
                f"written), read-only {c['read_gbs']:.2f} GB/s" for t, c in sorted(copy.items())))
PY
