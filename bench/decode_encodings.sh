#!/bin/sh
# decode_encodings.sh: one-thread decoding of bench/decode.sh's 220M model with every
# prunable tensor forced to one encoding (best-pack --index bitmap|delta|tiles|sell|dense), per
# sparsity and per kernel set (BEST_ISA), in one run: the measurements behind the costs
# best-pack's `--index speed` uses for each kernel set (lib/pack/pack_write.c), and a check
# that the encoding it picks is the fastest one on the set it was made for.
#
# usage: sh bench/decode_encodings.sh   (after `make` and bench/decode.sh, whose models it
#        reuses; env: OUT=out/bench-decode, SPARSITIES="0.7 0.9 0.95 0.99",
#        ISAS="avx512 avx2 portable" (those the CPU has), TOKENS=16, REPS=3)
set -e
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
BD=${BD:-build/bench/bench_decode}
OUT=${OUT:-out/bench-decode}
SPARSITIES=${SPARSITIES:-"0.7 0.9 0.95 0.99"}
ISAS=${ISAS:-"avx512 avx2 portable"}
TOKENS=${TOKENS:-16}
REPS=${REPS:-3}
R=$OUT/encodings.jsonl
: >"$R"
for s in $SPARSITIES; do
    [ -f "$OUT/s$s/model.safetensors" ] || { echo "decode_encodings.sh: run bench/decode.sh first ($OUT/s$s)" >&2; exit 1; }
    for e in dense bitmap delta tiles sell; do
        [ -f "$OUT/s$s-$e.pack" ] || "$BIN/best-pack" --model "$OUT/s$s" --index $e --out "$OUT/s$s-$e.pack" --quiet
    done
    for isa in $ISAS; do
        for e in speed dense bitmap delta tiles sell; do
            if [ $e = speed ]; then
                p="$OUT/s$s-speed-$isa.pack"
                [ -f "$p" ] || "$BIN/best-pack" --model "$OUT/s$s" --isa $isa --out "$p" --quiet
            else
                p="$OUT/s$s-$e.pack"
            fi
            rep=0
            while [ $rep -lt "$REPS" ]; do
                BEST_ISA=$isa "$BD" --model "$p" --tokens "$TOKENS" --threads 1 |
                    sed "s/^{/{\"kind\": \"index-$e\", \"sparsity\": $s, /" >>"$R" || exit 1
                rep=$((rep + 1))
            done
        done
    done
done
python3 - "$R" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
isas = sorted({r["isa"] for r in rows}, key=["avx512", "avx2", "portable"].index)
print("ms per token, one thread, best of the runs (kernels: the set each column names)")
print("| sparsity | kernels | dense | bitmap | delta | tiles | sell | speed (picked for this set) | fastest forced |")
print("|---:|---|---:|---:|---:|---:|---:|---:|---|")
for s in sorted({r["sparsity"] for r in rows}):
    for isa in isas:
        ms = {}
        for e in ["dense", "bitmap", "delta", "tiles", "sell", "speed"]:
            rs = [r for r in rows if r["sparsity"] == s and r["isa"] == isa and r["kind"] == "index-" + e]
            ms[e] = min(r["sec_median"] for r in rs) * 1e3 if rs else float("nan")
        fast = min(["dense", "bitmap", "delta", "tiles", "sell"], key=lambda e: ms[e])
        print(f"| {s:g} | {isa} | {ms['dense']:.1f} | {ms['bitmap']:.1f} | {ms['delta']:.1f} | {ms['tiles']:.1f} "
              f"| {ms['sell']:.1f} | {ms['speed']:.1f} | {fast} |")
PY
