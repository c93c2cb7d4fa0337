// spmv.c: y = W x for one packed tensor, read in place (see spmv.h for the contract).
//
// Layout of the work: spmv_forward cuts the rows into chunks of about equal nonzero
// count and OpenMP hands the chunks out; a chunk calls one row kernel per row. A row
// kernel is chosen once per call from (encoding, value type) and from whether the
// AVX-512 kernels are on. Each returns the row's dot product; scales, the bias and
// the accumulation are applied by the caller, in matmul_forward's order
// (y = [y +] W x, then + b).
//
// The portable kernels are plain C: the compiler's vector lanes for dense rows, a ctz
// walk for bitmaps, a byte walk for deltas (four sums when a row has no escape byte).
// The AVX-512 ones exist because the sparse loops are bound by instructions, not by
// memory: the portable bitmap walk costs a ctz, a load of x and a multiply-add per
// stored element, ~2 ns each here, while memory delivers a BF16 element and its index
// in well under one. Measured with one thread on the 220M model of bench/decode.sh
// (CPU time, so that the VM's other jobs count less; a shared 2-core Xeon Ice Lake):
//   bitmap BF16  32 columns a step: the row's 32 bits place the next popcount values
//                at their columns (vpexpandw, AVX512-VBMI2), and the pair trick below
//                turns them into fp32 without a shuffle: 4.7 GB/s at 70% sparsity,
//                against 2.5-3.0 for the first version (16 columns a step, x
//                compressed to the stored columns with vcompressps, kept for CPUs
//                without VBMI2 and for F32/I8) and 1.1 for the portable walk;
//   tiles        (pack.h) exist for this: at 95% sparsity the AVX-512 BF16 kernel read
//                the delta model's 84 matrices, re-encoded as tiles (27.3 MB against
//                24.2), in 3.1-3.5 ms where the delta loop below took 6.9-9.7 (~8 GB/s,
//                about what one thread's memory gives: the kernel is no longer bound by
//                instructions; ~4 ns a slot when the tensor sits in cache). The
//                VBMI2 kernel expands a slot's 32 words and 32 column bytes at once;
//                without VBMI2 two 16-lane halves expand dwords (AVX-512 F);
//   delta        stays portable. An AVX-512 version took 16 escape-free gap bytes a
//                step (their columns by a 4-step prefix sum across lanes, x gathered
//                there); on this host a 16-lane gather costs ~50 cycles (microcode),
//                and on the idle machine the portable loop (four sums, no escape
//                test in rows without escapes) read the 90% model's delta tensors at
//                3.6-3.7 GB/s against 3.1-3.3 for the gather; it was removed. Its
//                first version also kept its scalar state in a vector register between
//                steps, which halved the speed at 99% sparsity, where rows hold only
//                10-30 elements: such rows want plain scalar code.
// The AVX2 kernels (CPUs without AVX-512: AMD Zen 2-4, most Intel clients) have no
// compress or expand: tables of lane permutations stand in (below). Forced on the
// Emerald Rapids Xeon of docs/benchmarks.md (BEST_ISA=avx2, one thread), per token of the
// 220M model: dense BF16 (the pair trick, 4 rows with prefetch) 28.4 ms against 58.5 for
// the portable loop; bitmap BF16 25.1 ms at 70% against 72.6, by pshufb expanding two
// bytes' values into 16 columns; tiles 15.0 ms at 95% against 24.6, but the portable
// delta loop took 11.9 there: 8 lanes and a 4-register lookup of x cost ~20 instructions
// per 8 rows of a slot, where AVX-512 needs ~5 per 16. Hence sell (pack format 3):
// 8 rows a slot, their 8 columns as u16 and x gathered there by one vgatherdps, so a
// slot costs two 16-byte loads, three widenings, a gather and an FMA, with no lane
// permutes: 9.0 ms a token at 95% against 12.0 for delta (one thread, the same
// machine; bench/decode_encodings.sh). The gather is the bound (~9 cycles a slot here:
// in cache the kernel reads at ~10 GB/s where a plain read of the same bytes makes 25),
// not memory; software prefetch and pairs of slots in one 32-byte load (to spare the
// widenings) measured no better. So best-pack plans packs for AVX2 with bitmap at 70%
// and sell above, and for AVX-512 tiles, sell at 99% (pack_write.c's per-set costs).
// bench/decode.sh measures every set (BEST_ISA=avx512|avx2|portable picks one, spmv.h).
#include "pack/spmv.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define SPMV_X86 1
#endif

#include "base/args.h"      // defines: args_choice
#include "base/error.h"     // defines: xmalloc
#include "io/safetensors.h" // defines: st_f16_to_f32

// A product smaller than this (stored elements + rows) runs on the calling thread: a
// fork-join costs a few microseconds, as much as a 64x64 product.
#define PAR_MIN_WORK 32768

typedef float (*RowFn)(const PackTensor *t, size_t r, const float *x);

static inline float f_of(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }
static inline float bf16_f(uint16_t h) { return f_of((uint32_t)h << 16); }
// I4 element i: low nibble of byte i/2 when i is even, high nibble when odd, 4-bit two's
// complement (pack.h: signed, [-7, 7]).
static inline float i4_f(const uint8_t *v, size_t i) {
    int q = (v[i >> 1] >> ((i & 1) * 4)) & 15;
    return (float)((q ^ 8) - 8);
}

#define VAL_F32(v, i) (((const float *)(v))[i])
#define VAL_BF16(v, i) bf16_f(((const uint16_t *)(v))[i])
#define VAL_F16(v, i) st_f16_to_f32(((const uint16_t *)(v))[i])
#define VAL_I8(v, i) ((float)((const int8_t *)(v))[i])
#define VAL_I4(v, i) i4_f((const uint8_t *)(v), (i))

// --- portable kernels -----------------------------------------------------------------

#ifdef __clang__
// clang reports an `omp simd` loop it did not vectorise (at -O1 under the sanitizers, as
// the fuzz build compiles lib/) as a warning, an error with -Werror: it is only slower.
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

// Dense: row r is values[r*cols, (r+1)*cols). Vector lanes sum the row (one order per
// vector width, like layers.c's kernels).
#define DEF_DENSE(NAME, VAL)                                                               \
    static float NAME(const PackTensor *t, size_t r, const float *x) {                     \
        const void *v = t->values;                                                         \
        size_t n = t->cols, o = r * n;                                                     \
        float s = 0;                                                                       \
        _Pragma("omp simd reduction(+ : s)") for (size_t c = 0; c < n; c++) s +=          \
            VAL(v, o + c) * x[c];                                                          \
        return s;                                                                          \
    }

// Bitmap: row r's bits are index[r*ceil(cols/8), ...), its values start at nnz_ptr[r].
// Whole 64-bit words first (little-endian hosts: bit c%64 of a word is column c), then
// the row's last bytes.
#define DEF_BITMAP(NAME, VAL)                                                              \
    static float NAME(const PackTensor *t, size_t r, const float *x) {                     \
        size_t nb = (t->cols + 7) / 8, k = t->nnz_ptr[r], j = 0;                           \
        const uint8_t *bm = t->index + r * nb;                                             \
        const void *v = t->values;                                                         \
        float s = 0;                                                                       \
        for (; j + 8 <= nb; j += 8) {                                                      \
            uint64_t w;                                                                    \
            memcpy(&w, bm + j, 8);                                                         \
            for (; w; w &= w - 1) s += VAL(v, k++) * x[j * 8 + (size_t)__builtin_ctzll(w)]; \
        }                                                                                  \
        for (; j < nb; j++)                                                                \
            for (unsigned w = bm[j]; w; w &= w - 1)                                        \
                s += VAL(v, k++) * x[j * 8 + (size_t)__builtin_ctz(w)];                    \
        return s;                                                                          \
    }

// Delta: each stored element is its gap g (zeros since the previous one) as g/255
// bytes 255 then g%255; the column is the previous column + 1 + g. A row with as many
// index bytes as elements has no escape: its loop needs no test and keeps four sums
// going (one sum's add latency bound the loop).
#define DEF_DELTA(NAME, VAL)                                                               \
    static float NAME(const PackTensor *t, size_t r, const float *x) {                     \
        const uint8_t *p = t->index + t->ix_ptr[r];                                        \
        size_t k = t->nnz_ptr[r], k1 = t->nnz_ptr[r + 1], col = 0;                         \
        const void *v = t->values;                                                         \
        float s0 = 0, s1 = 0, s2 = 0, s3 = 0;                                              \
        if (t->ix_ptr[r + 1] - t->ix_ptr[r] == k1 - k) {                                   \
            for (; k + 4 <= k1; k += 4, p += 4) {                                          \
                col += p[0];                                                               \
                s0 += VAL(v, k) * x[col++];                                                \
                col += p[1];                                                               \
                s1 += VAL(v, k + 1) * x[col++];                                            \
                col += p[2];                                                               \
                s2 += VAL(v, k + 2) * x[col++];                                            \
                col += p[3];                                                               \
                s3 += VAL(v, k + 3) * x[col++];                                            \
            }                                                                              \
        }                                                                                  \
        for (; k < k1; k++) {                                                              \
            while (*p == 255) { col += 255; p++; }                                         \
            col += *p++;                                                                   \
            s0 += VAL(v, k) * x[col++];                                                    \
        }                                                                                  \
        return (s0 + s1) + (s2 + s3);                                                      \
    }

// Tiles: d (32) = the rows of panel p; slot by slot, each stored element added to
// its row (x is read where the index says; pack_open checked every column).
#define DEF_TILES(NAME, VAL)                                                               \
    static void NAME(float *d, const PackTensor *t, size_t p, const float *x) {            \
        const void *v = t->values;                                                         \
        size_t k = t->nnz_ptr[p], blk = 0;                                                 \
        memset(d, 0, TILE * sizeof *d);                                                    \
        for (size_t s = t->ix_ptr[p]; s < t->ix_ptr[p + 1]; s++) {                         \
            blk += t->steps[s];                                                            \
            const float *xb = x + blk * TILE;                                              \
            for (uint32_t m = t->masks[s]; m; m &= m - 1, k++)                             \
                d[__builtin_ctz(m)] += VAL(v, k) * xb[t->index[k]];                        \
        }                                                                                  \
    }

// Sell: d (8) = the rows of slice s; each row walks its own elements (lane i of each
// of the slice's first n slots), so padding is never read.
#define DEF_SELL(NAME, VAL)                                                                \
    static void NAME(float *d, const PackTensor *t, size_t s, const float *x) {            \
        const uint16_t *ix = (const uint16_t *)t->index;                                   \
        const void *v = t->values;                                                         \
        size_t e0 = SELL * (size_t)t->ix_ptr[s];                                           \
        for (size_t i = 0; i < SELL; i++) {                                                \
            size_t r = s * SELL + i, n = r < t->rows ? t->nnz_ptr[r + 1] - t->nnz_ptr[r] : 0; \
            float a = 0;                                                                   \
            for (size_t j = 0, e = e0 + i; j < n; j++, e += SELL) a += VAL(v, e) * x[ix[e]];  \
            d[i] = a;                                                                      \
        }                                                                                  \
    }
DEF_SELL(sell_f32, VAL_F32)
DEF_SELL(sell_bf16, VAL_BF16)
DEF_SELL(sell_f16, VAL_F16)

#define DEF_ALL(SUFFIX, VAL)              \
    DEF_DENSE(dense_##SUFFIX, VAL)        \
    DEF_BITMAP(bitmap_##SUFFIX, VAL)      \
    DEF_DELTA(delta_##SUFFIX, VAL)        \
    DEF_TILES(tiles_##SUFFIX, VAL)
DEF_ALL(f32, VAL_F32)
DEF_ALL(bf16, VAL_BF16)
DEF_ALL(f16, VAL_F16)
DEF_ALL(i8, VAL_I8)
DEF_ALL(i4, VAL_I4)

typedef void (*PanelFn)(float *d, const PackTensor *t, size_t p, const float *x);
static const PanelFn GENERIC_TILES[5] = {tiles_f32, tiles_bf16, tiles_f16, tiles_i8, tiles_i4};
static const PanelFn GENERIC_SELL[5] = {sell_f32, sell_bf16, sell_f16, NULL, NULL}; // (no I8/I4 sell)

// (encoding, value type) -> portable kernel.
static const RowFn GENERIC[3][5] = {
    {dense_f32, dense_bf16, dense_f16, dense_i8, dense_i4},
    {bitmap_f32, bitmap_bf16, bitmap_f16, bitmap_i8, bitmap_i4},
    {delta_f32, delta_bf16, delta_f16, delta_i8, delta_i4},
};

// --- AVX-512 kernels --------------------------------------------------------------------

#ifdef SPMV_X86
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,popcnt,bmi")))

// The 16 values v[o .. o+16) as fp32, lanes outside m zero (and not read).
AVX512 static inline __m512 load16_f32(const void *v, size_t o, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, (const float *)v + o);
}
AVX512 static inline __m512 load16_bf16(const void *v, size_t o, __mmask16 m) {
    __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)v + o);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
AVX512 static inline __m512 load16_i8(const void *v, size_t o, __mmask16 m) {
    __m128i b = _mm_maskz_loadu_epi8(m, (const int8_t *)v + o);
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b));
}

static inline __mmask16 low_mask(size_t n) { return (__mmask16)(n >= 16 ? 0xffff : (1u << n) - 1); }

// Dense: two accumulators over 32 columns a step, then a masked tail.
#define DEF_DENSE512(NAME, LOAD)                                                           \
    AVX512 static float NAME(const PackTensor *t, size_t r, const float *x) {              \
        size_t n = t->cols, o = r * n, c = 0;                                              \
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();                         \
        for (; c + 32 <= n; c += 32) {                                                     \
            a0 = _mm512_fmadd_ps(LOAD(t->values, o + c, 0xffff), _mm512_loadu_ps(x + c), a0); \
            a1 = _mm512_fmadd_ps(LOAD(t->values, o + c + 16, 0xffff),                       \
                                 _mm512_loadu_ps(x + c + 16), a1);                         \
        }                                                                                  \
        for (; c < n; c += 16) {                                                           \
            __mmask16 m = low_mask(n - c);                                                 \
            a0 = _mm512_fmadd_ps(LOAD(t->values, o + c, m), _mm512_maskz_loadu_ps(m, x + c), a0); \
        }                                                                                  \
        return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));                                \
    }

// Bitmap: 64 columns (one word) a step in four groups of 16, two accumulators; the
// row's last columns (fewer than 64) in groups of 16 read byte by byte.
#define DEF_BITMAP512(NAME, LOAD)                                                          \
    AVX512 static float NAME(const PackTensor *t, size_t r, const float *x) {              \
        size_t cols = t->cols, nb = (cols + 7) / 8, k = t->nnz_ptr[r], c = 0;              \
        const uint8_t *bm = t->index + r * nb;                                             \
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();                         \
        for (; c + 64 <= cols; c += 64) {                                                  \
            uint64_t w;                                                                    \
            memcpy(&w, bm + c / 8, 8);                                                     \
            if (!w) continue;                                                              \
            for (int q = 0; q < 4; q += 2) {                                               \
                __mmask16 m0 = (__mmask16)(w >> (16 * q)), m1 = (__mmask16)(w >> (16 * q + 16)); \
                size_t n0 = (size_t)__builtin_popcount(m0), n1 = (size_t)__builtin_popcount(m1); \
                __m512 x0 = _mm512_maskz_compress_ps(m0, _mm512_loadu_ps(x + c + 16 * q));  \
                __m512 x1 = _mm512_maskz_compress_ps(m1, _mm512_loadu_ps(x + c + 16 * q + 16)); \
                a0 = _mm512_fmadd_ps(LOAD(t->values, k, low_mask(n0)), x0, a0);            \
                a1 = _mm512_fmadd_ps(LOAD(t->values, k + n0, low_mask(n1)), x1, a1);       \
                k += n0 + n1;                                                              \
            }                                                                              \
        }                                                                                  \
        for (; c < cols; c += 16) {                                                        \
            __mmask16 m = (__mmask16)(bm[c / 8] | (cols - c > 8 ? bm[c / 8 + 1] << 8 : 0)); \
            size_t n = (size_t)__builtin_popcount(m);                                      \
            __m512 xs = _mm512_maskz_compress_ps(m, _mm512_maskz_loadu_ps(m, x + c));      \
            a0 = _mm512_fmadd_ps(LOAD(t->values, k, low_mask(n)), xs, a0);                 \
            k += n;                                                                        \
        }                                                                                  \
        return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));                                \
    }

#define DEF_ALL512(SUFFIX, LOAD)                 \
    DEF_DENSE512(dense512_##SUFFIX, LOAD)        \
    DEF_BITMAP512(bitmap512_##SUFFIX, LOAD)
DEF_ALL512(f32, load16_f32)
DEF_BITMAP512(bitmap512_bf16, load16_bf16) // without VBMI2; else bitmap512p_bf16 below
DEF_ALL512(i8, load16_i8)

// BF16 in pairs. A 32-bit lane holding the bf16 elements 2i and 2i+1 gives element 2i as
// fp32 by a left shift of 16 and element 2i+1 by clearing the low half: 32 columns
// become two fp32 vectors without a shuffle (port 5 was the bound of the kernels above).
// They pair with x reordered once per product (x_pairs): per block of 32 columns, the
// 16 even ones, then the 16 odd ones.
#define HI16 _mm512_set1_epi32((int)0xffff0000u)

AVX512 static float dense512p_bf16(const PackTensor *t, size_t r, const float *xp) {
    size_t n = t->cols, c = 0;
    const uint16_t *v = (const uint16_t *)t->values + r * n;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    for (; c + 32 <= n; c += 32) {
        __m512i w = _mm512_loadu_si512(v + c);
        a0 = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(w, 16)), _mm512_loadu_ps(xp + c), a0);
        a1 = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(w, HI16)), _mm512_loadu_ps(xp + c + 16), a1);
    }
    if (c < n) { // xp is padded with zeros to a multiple of 32
        __m512i w = _mm512_maskz_loadu_epi16((__mmask32)((1u << (n - c)) - 1), v + c);
        a0 = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(w, 16)), _mm512_loadu_ps(xp + c), a0);
        a1 = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(w, HI16)), _mm512_loadu_ps(xp + c + 16), a1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

#ifndef DENSE_PF
#define DENSE_PF 8192 // bytes: four rows of 1024 bf16 ahead
#endif

// Four rows of dense512p_bf16 at once, each with exactly its operations (so a row's
// bits do not depend on whether it was done alone or in a group), the loads of x
// shared, and a software prefetch DENSE_PF bytes ahead in each row. The prefetch is
// what counts: one thread read the lm_head of bench/decode.sh's model (65.5 MB, in the
// file's map) at 7.0-7.8 GB/s one row or four rows at a time without it, 10.2-11.9
// GB/s with it at 8 KiB (4 KiB: ~8.2, 16 KiB: ~10.3), where OpenBLAS's sgemv reads an
// fp32 matrix at 11.3-12.0.
AVX512 static void dense512p4_bf16(float *d, const PackTensor *t, size_t r, const float *xp) {
    size_t n = t->cols, c = 0;
    const uint16_t *v0 = (const uint16_t *)t->values + r * n, *v1 = v0 + n, *v2 = v1 + n, *v3 = v2 + n;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, b0 = a0, b1 = a0, c0 = a0, c1 = a0, e0 = a0, e1 = a0;
#define PAIR_FMA(V, A0, A1, M)                                                                         \
    do {                                                                                               \
        __m512i w = _mm512_maskz_loadu_epi16(M, (V) + c);                                              \
        A0 = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(w, 16)), xe, A0);                   \
        A1 = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(w, HI16)), xo, A1);                  \
    } while (0)
    for (; c < n; c += 32) {
        __mmask32 m = c + 32 <= n ? 0xffffffffu : (__mmask32)((1u << (n - c)) - 1);
        __m512 xe = _mm512_loadu_ps(xp + c), xo = _mm512_loadu_ps(xp + c + 16);
        _mm_prefetch((const char *)(v0 + c) + DENSE_PF, _MM_HINT_T0);
        _mm_prefetch((const char *)(v1 + c) + DENSE_PF, _MM_HINT_T0);
        _mm_prefetch((const char *)(v2 + c) + DENSE_PF, _MM_HINT_T0);
        _mm_prefetch((const char *)(v3 + c) + DENSE_PF, _MM_HINT_T0);
        PAIR_FMA(v0, a0, a1, m);
        PAIR_FMA(v1, b0, b1, m);
        PAIR_FMA(v2, c0, c1, m);
        PAIR_FMA(v3, e0, e1, m);
    }
#undef PAIR_FMA
    d[0] = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
    d[1] = _mm512_reduce_add_ps(_mm512_add_ps(b0, b1));
    d[2] = _mm512_reduce_add_ps(_mm512_add_ps(c0, c1));
    d[3] = _mm512_reduce_add_ps(_mm512_add_ps(e0, e1));
}

// Bitmap: 32 bits of the row select where the next popcount values go (vpexpandw,
// AVX512-VBMI2): the stored values land at their columns, zeros elsewhere, and the
// product is then a dense one.
#define AVX512V __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi2,popcnt,bmi")))
AVX512V static float bitmap512p_bf16(const PackTensor *t, size_t r, const float *xp) {
    size_t cols = t->cols, nb = (cols + 7) / 8, k = t->nnz_ptr[r];
    const uint8_t *bm = t->index + r * nb;
    const uint16_t *v = t->values;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    for (size_t c = 0; c < cols; c += 32) {
        uint32_t m = 0;
        if (c + 32 <= cols) memcpy(&m, bm + c / 8, 4);
        else
            for (size_t j = c / 8; j < nb; j++) m |= (uint32_t)bm[j] << (8 * (j - c / 8));
        if (!m) continue;
        __m512i w = _mm512_maskz_expandloadu_epi16((__mmask32)m, v + k);
        k += (size_t)__builtin_popcount(m);
        a0 = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(w, 16)), _mm512_loadu_ps(xp + c), a0);
        a1 = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(w, HI16)), _mm512_loadu_ps(xp + c + 16), a1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

// Tiles, 16 rows a vector: per slot, the low 16 bits of the mask place the next values
// of rows 0-15 in their lanes (vexpand), the high 16 those of rows 16-31; x of the
// slot's block lies in two registers, and each lane's column picks its x from them
// (vpermt2ps): no gather. xp is x padded with zeros to a multiple of 32 columns.
#define DEF_TILES512(NAME, LOAD)                                                           \
    AVX512 static void NAME(float *d, const PackTensor *t, size_t p, const float *xp) {    \
        const uint8_t *ix = t->index;                                                      \
        size_t k = t->nnz_ptr[p], blk = 0;                                                 \
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();                         \
        for (size_t s = t->ix_ptr[p]; s < t->ix_ptr[p + 1]; s++) {                         \
            blk += t->steps[s];                                                            \
            uint32_t m = t->masks[s];                                                      \
            __mmask16 m0 = (__mmask16)m, m1 = (__mmask16)(m >> 16);                        \
            size_t n0 = (size_t)__builtin_popcount(m & 0xffffu), n1 = (size_t)__builtin_popcount(m >> 16); \
            const float *xb = xp + blk * TILE;                                             \
            __m512 xlo = _mm512_loadu_ps(xb), xhi = _mm512_loadu_ps(xb + 16);              \
            __m512i c0 = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(low_mask(n0), ix + k));  \
            __m512i c1 = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(low_mask(n1), ix + k + n0)); \
            __m512 x0 = _mm512_permutex2var_ps(xlo, _mm512_maskz_expand_epi32(m0, c0), xhi); \
            __m512 x1 = _mm512_permutex2var_ps(xlo, _mm512_maskz_expand_epi32(m1, c1), xhi); \
            a0 = _mm512_fmadd_ps(_mm512_maskz_expand_ps(m0, LOAD(t->values, k, low_mask(n0))), x0, a0); \
            a1 = _mm512_fmadd_ps(_mm512_maskz_expand_ps(m1, LOAD(t->values, k + n0, low_mask(n1))), x1, a1); \
            k += n0 + n1;                                                                  \
        }                                                                                  \
        _mm512_storeu_ps(d, a0);                                                           \
        _mm512_storeu_ps(d + 16, a1);                                                      \
    }
DEF_TILES512(tiles512_f32, load16_f32)
DEF_TILES512(tiles512_bf16, load16_bf16)
DEF_TILES512(tiles512_i8, load16_i8)

// Tiles of BF16 with VBMI2, 32 rows a step: the mask expands the 32 rows' values as
// words (vpexpandw) and their columns as bytes (vpexpandb) in one go; the pair trick
// (above) splits the words into the even rows' and the odd rows' fp32, and the column
// bytes, read as 16-bit lanes, give the even rows' columns in their low byte and the
// odd rows' in their high one.
AVX512V static void tiles512p_bf16(float *d, const PackTensor *t, size_t p, const float *xp) {
    const uint16_t *v = t->values;
    size_t k = t->nnz_ptr[p], blk = 0;
    __m512 ae = _mm512_setzero_ps(), ao = _mm512_setzero_ps();
    for (size_t s = t->ix_ptr[p]; s < t->ix_ptr[p + 1]; s++) {
        blk += t->steps[s];
        uint32_t m = t->masks[s];
        const float *xb = xp + blk * TILE;
        __m512i w = _mm512_maskz_expandloadu_epi16((__mmask32)m, v + k);
        __m512i c = _mm512_cvtepu16_epi32(_mm256_maskz_expandloadu_epi8((__mmask32)m, t->index + k));
        k += (size_t)__builtin_popcount(m);
        __m512 xlo = _mm512_loadu_ps(xb), xhi = _mm512_loadu_ps(xb + 16);
        __m512 xe = _mm512_permutex2var_ps(xlo, c, xhi);
        __m512 xo = _mm512_permutex2var_ps(xlo, _mm512_srli_epi32(c, 8), xhi);
        ae = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(w, 16)), xe, ae);
        ao = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(w, HI16)), xo, ao);
    }
    float e[16], o[16];
    _mm512_storeu_ps(e, ae);
    _mm512_storeu_ps(o, ao);
    for (int i = 0; i < 16; i++) {
        d[2 * i] = e[i];
        d[2 * i + 1] = o[i];
    }
}

// --- AVX2 kernels (+ FMA, F16C) ------------------------------------------------------
//
// For the x86-64 CPUs without AVX-512 (AMD Zen 2-4, most Intel clients): 8 lanes, and no
// compress or expand instructions, so a 256-entry table of lane permutations stands in
// for them: for a byte b of a bitmap, CMP8[b] lists the positions of its set bits (x of
// the stored columns gathered into the low lanes by vpermps, as the values lie), and
// EXP8[b] sends value j to the lane of the j-th set bit (tiles: values to their rows).
// A load of 8 values past the last stored one would leave the stream: such steps (the
// last few of a tensor) take the scalar loop.
#define AVX2 __attribute__((target("avx2,fma,f16c,popcnt,bmi,bmi2")))

static int32_t CMP8[256][8], EXP8[256][8], LANES8[9][8], ON8[256][8];
static uint8_t EXPW[256][16]; // pshufb: 16-bit element j to the lane of the j-th set bit, else 0

static void tables8_init(void) {
    for (int b = 0; b < 256; b++) {
        int j = 0;
        for (int i = 0; i < 8; i++) {
            ON8[b][i] = b >> i & 1 ? -1 : 0;
            EXP8[b][i] = b >> i & 1 ? j : 0;
            EXPW[b][2 * i] = b >> i & 1 ? (uint8_t)(2 * j) : 0x80;
            EXPW[b][2 * i + 1] = b >> i & 1 ? (uint8_t)(2 * j + 1) : 0x80;
            if (b >> i & 1) CMP8[b][j++] = i;
        }
        for (; j < 8; j++) CMP8[b][j] = 0;
    }
    for (int p = 0; p <= 8; p++)
        for (int i = 0; i < 8; i++) LANES8[p][i] = i < p ? -1 : 0;
}

// The 8 values v[o .. o+8) as fp32 (all 8 are read).
AVX2 static inline __m256 ld8_f32(const void *v, size_t o) { return _mm256_loadu_ps((const float *)v + o); }
AVX2 static inline __m256 ld8_bf16(const void *v, size_t o) {
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)v + o));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
AVX2 static inline __m256 ld8_f16(const void *v, size_t o) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)v + o)));
}
AVX2 static inline __m256 ld8_i8(const void *v, size_t o) {
    __m128i b = _mm_loadl_epi64((const __m128i *)((const int8_t *)v + o));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
}
// I4: the 8 nibbles from element o on (8 bytes read from byte o/2, the first nibble
// skipped when o is odd), each sign-extended from 4 bits.
AVX2 static inline __m256 ld8_i4(const void *v, size_t o) {
    uint64_t w;
    memcpy(&w, (const uint8_t *)v + o / 2, 8);
    w >>= 4 * (o & 1);
    __m256i q = _mm256_srlv_epi32(_mm256_set1_epi32((int)(uint32_t)w), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    q = _mm256_and_si256(q, _mm256_set1_epi32(15));
    q = _mm256_sub_epi32(_mm256_xor_si256(q, _mm256_set1_epi32(8)), _mm256_set1_epi32(8));
    return _mm256_cvtepi32_ps(q);
}
// Elements a load of 8 from element o reads, as the stream's element count (I4: the
// 8 bytes from o/2 hold 16 elements).
#define SPAN_f32 8
#define SPAN_bf16 8
#define SPAN_f16 8
#define SPAN_i8 8
#define SPAN_i4 16

AVX2 static inline float hsum8(__m256 a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// Dense: 16 columns a step in two sums, then the row's last columns one by one (and
// all of it one by one where a load of 8 would pass the tensor's last element).
#define DEF_DENSE2(NAME, SFX, VAL)                                                         \
    AVX2 static float NAME(const PackTensor *t, size_t r, const float *x) {                \
        size_t n = t->cols, o = r * n, c = 0, total = t->rows * t->cols;                   \
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();                         \
        for (; c + 16 <= n && o + c + 8 + SPAN_##SFX <= total; c += 16) {                  \
            a0 = _mm256_fmadd_ps(ld8_##SFX(t->values, o + c), _mm256_loadu_ps(x + c), a0);   \
            a1 = _mm256_fmadd_ps(ld8_##SFX(t->values, o + c + 8), _mm256_loadu_ps(x + c + 8), a1); \
        }                                                                                  \
        float s = hsum8(_mm256_add_ps(a0, a1));                                            \
        for (; c < n; c++) s += VAL(t->values, o + c) * x[c];                              \
        return s;                                                                          \
    }

// Bitmap: a byte of the row (8 columns) a step: CMP8 gathers x of its stored columns
// into the low lanes, the next popcount values meet them there (lanes past the count
// zeroed), two sums alternating; a zero word of 64 columns is skipped whole. (The sums
// are named variables, never an array indexed in the loop: that put them in memory,
// and the loop ran at the speed of store forwarding. bench/decode.sh's 95% model went
// from 8.8 to 14 tokens/s with that, and BF16's pair kernel below to 48.6.)
#define BM_BYTE(A, SFX, q)                                                                 \
    do { /* no test of a zero byte: at these densities the predictor loses that bet */    \
        unsigned b_ = (unsigned)(w >> (8 * (q))) & 255;                                    \
        __m256 xs_ = _mm256_permutevar8x32_ps(_mm256_loadu_ps(xr + 8 * (q)),               \
                                              _mm256_loadu_si256((const __m256i *)CMP8[b_])); \
        int pc_ = __builtin_popcount(b_);                                                  \
        __m256 vs_ = _mm256_and_ps(ld8_##SFX(v, k), _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)LANES8[pc_]))); \
        A = _mm256_fmadd_ps(vs_, xs_, A);                                                  \
        k += (size_t)pc_;                                                                  \
    } while (0)
#define DEF_BITMAP2(NAME, SFX, VAL)                                                        \
    AVX2 static float NAME(const PackTensor *t, size_t r, const float *x) {                \
        size_t cols = t->cols, nb = (cols + 7) / 8, k = t->nnz_ptr[r], j = 0, nnz = t->nnz; \
        const uint8_t *bm = t->index + r * nb;                                             \
        const void *v = t->values;                                                         \
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();                         \
        for (; j + 8 <= cols / 8; j += 8) {                                                \
            uint64_t w;                                                                    \
            memcpy(&w, bm + j, 8);                                                         \
            if (!w) continue;                                                              \
            if (k + 64 + SPAN_##SFX > nnz) break; /* near the stream's end: scalar */      \
            const float *xr = x + 8 * j;                                                   \
            BM_BYTE(a0, SFX, 0); BM_BYTE(a1, SFX, 1); BM_BYTE(a0, SFX, 2); BM_BYTE(a1, SFX, 3); \
            BM_BYTE(a0, SFX, 4); BM_BYTE(a1, SFX, 5); BM_BYTE(a0, SFX, 6); BM_BYTE(a1, SFX, 7); \
        }                                                                                  \
        float s = hsum8(_mm256_add_ps(a0, a1));                                            \
        for (; j < nb; j++) /* the rest (and the stream's end), as the portable walk */    \
            for (unsigned w = bm[j]; w; w &= w - 1) s += VAL(v, k++) * x[j * 8 + (size_t)__builtin_ctz(w)]; \
        return s;                                                                          \
    }

// Tiles, 8 rows a vector: per slot the 32 rows' mask in four bytes; EXP8 sends the
// values of a byte's rows to their lanes, and their column bytes too (ON8: the lanes
// of rows that have one); the slot's block of x (32 floats) lies in four registers, and
// each lane's column picks its x by vpermps in each and two blends on the column's bits
// 3 and 4: no gather. Four named sums, one per group of 8 rows.
#define TL_GROUP(A, SFX, g)                                                                \
    do {                                                                                   \
        unsigned b_ = m >> (8 * (g)) & 255;                                                \
        if (b_) {                                                                          \
            __m256i e_ = _mm256_loadu_si256((const __m256i *)EXP8[b_]);                    \
            __m256 on_ = _mm256_castsi256_ps(_mm256_loadu_si256((const __m256i *)ON8[b_])); \
            __m256 v_ = _mm256_and_ps(_mm256_permutevar8x32_ps(ld8_##SFX(v, k), e_), on_); \
            __m256i c_ = _mm256_permutevar8x32_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(ix + k))), e_); \
            __m256 b3_ = _mm256_castsi256_ps(_mm256_slli_epi32(c_, 28));                   \
            __m256 lo_ = _mm256_blendv_ps(_mm256_permutevar8x32_ps(x0, c_), _mm256_permutevar8x32_ps(x1, c_), b3_); \
            __m256 hi_ = _mm256_blendv_ps(_mm256_permutevar8x32_ps(x2, c_), _mm256_permutevar8x32_ps(x3, c_), b3_); \
            A = _mm256_fmadd_ps(v_, _mm256_blendv_ps(lo_, hi_, _mm256_castsi256_ps(_mm256_slli_epi32(c_, 27))), A); \
            k += (size_t)__builtin_popcount(b_);                                           \
        }                                                                                  \
    } while (0)
#define DEF_TILES2(NAME, SFX, VAL)                                                         \
    AVX2 static void NAME(float *d, const PackTensor *t, size_t p, const float *xp) {      \
        const uint8_t *ix = t->index;                                                      \
        const void *v = t->values;                                                         \
        size_t k = t->nnz_ptr[p], blk = 0, nnz = t->nnz, s = t->ix_ptr[p], s1 = t->ix_ptr[p + 1]; \
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                        \
        for (; s < s1 && k + 32 + SPAN_##SFX <= nnz; s++) {                                \
            blk += t->steps[s];                                                            \
            uint32_t m = t->masks[s];                                                      \
            const float *xb = xp + blk * TILE;                                             \
            __m256 x0 = _mm256_loadu_ps(xb), x1 = _mm256_loadu_ps(xb + 8), x2 = _mm256_loadu_ps(xb + 16), \
                   x3 = _mm256_loadu_ps(xb + 24);                                          \
            TL_GROUP(a0, SFX, 0); TL_GROUP(a1, SFX, 1); TL_GROUP(a2, SFX, 2); TL_GROUP(a3, SFX, 3); \
        }                                                                                  \
        _mm256_storeu_ps(d, a0), _mm256_storeu_ps(d + 8, a1), _mm256_storeu_ps(d + 16, a2), _mm256_storeu_ps(d + 24, a3); \
        for (; s < s1; s++) { /* the stream's last slots: the portable walk */             \
            blk += t->steps[s];                                                            \
            const float *xb = xp + blk * TILE;                                             \
            for (uint32_t m = t->masks[s]; m; m &= m - 1, k++) d[__builtin_ctz(m)] += VAL(v, k) * xb[ix[k]]; \
        }                                                                                  \
    }

#define DEF_ALL2(SFX, VAL)                    \
    DEF_DENSE2(dense2_##SFX, SFX, VAL)        \
    DEF_BITMAP2(bitmap2_##SFX, SFX, VAL)      \
    DEF_TILES2(tiles2_##SFX, SFX, VAL)
DEF_ALL2(f32, VAL_F32)
// BF16: dense2p_bf16 and bitmap2p_bf16 below
DEF_TILES2(tiles2_bf16, bf16, VAL_BF16)
DEF_ALL2(f16, VAL_F16)
DEF_ALL2(i8, VAL_I8)
DEF_ALL2(i4, VAL_I4)

// Dense BF16 in pairs (the pair trick and x_pairs of the AVX-512 kernels above): 32
// columns a step as two 16-element loads, each giving its even and odd columns' fp32 by
// a shift and a mask; with x_pairs' layout, w0's even columns meet xp[c, c+8), its odd
// ones xp[c+16, c+24), w1's xp[c+8, c+16) and xp[c+24, c+32). The row's last (< 32)
// columns from a copy padded with zeros.
#define HI16_2 _mm256_set1_epi32((int)0xffff0000u)
#define PAIR2(W, XE, XO, AE, AO)                                                            \
    do {                                                                                    \
        AE = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(W, 16)), XE, AE);        \
        AO = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(W, HI16_2)), XO, AO);     \
    } while (0)
AVX2 static inline void pairs32_2(__m256 *a, const uint16_t *v, const float *xp) {
    __m256i w0 = _mm256_loadu_si256((const __m256i *)v), w1 = _mm256_loadu_si256((const __m256i *)(v + 16));
    PAIR2(w0, _mm256_loadu_ps(xp), _mm256_loadu_ps(xp + 16), a[0], a[1]);
    PAIR2(w1, _mm256_loadu_ps(xp + 8), _mm256_loadu_ps(xp + 24), a[2], a[3]);
}
AVX2 static float dense2p_bf16(const PackTensor *t, size_t r, const float *xp) {
    size_t n = t->cols, c = 0;
    const uint16_t *v = (const uint16_t *)t->values + r * n;
    __m256 a[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (; c + 32 <= n; c += 32) pairs32_2(a, v + c, xp + c);
    if (c < n) {
        uint16_t tail[32] = {0};
        memcpy(tail, v + c, (n - c) * sizeof *tail);
        pairs32_2(a, tail, xp + c);
    }
    return hsum8(_mm256_add_ps(_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2], a[3])));
}

// Four rows of dense2p_bf16 at once, each with exactly its operations, x's loads shared
// and a prefetch DENSE_PF bytes ahead in each row (see dense512p4_bf16).
AVX2 static void dense2p4_bf16(float *d, const PackTensor *t, size_t r, const float *xp) {
    size_t n = t->cols, c = 0;
    const uint16_t *v = (const uint16_t *)t->values + r * n;
    __m256 a[4][4];
    for (int i = 0; i < 4; i++) a[i][0] = a[i][1] = a[i][2] = a[i][3] = _mm256_setzero_ps();
    for (; c + 32 <= n; c += 32)
        for (int i = 0; i < 4; i++) {
            _mm_prefetch((const char *)(v + i * n + c) + DENSE_PF, _MM_HINT_T0);
            pairs32_2(a[i], v + i * n + c, xp + c);
        }
    for (int i = 0; i < 4; i++) {
        if (c < n) {
            uint16_t tail[32] = {0};
            memcpy(tail, v + i * n + c, (n - c) * sizeof *tail);
            pairs32_2(a[i], tail, xp + c);
        }
        d[i] = hsum8(_mm256_add_ps(_mm256_add_ps(a[i][0], a[i][1]), _mm256_add_ps(a[i][2], a[i][3])));
    }
}

// Bitmap BF16 in pairs: 16 columns (two bytes of the row) a step. Each byte's next
// popcount values (8 words loaded) go to their columns by one pshufb in their 128-bit
// half (EXPW: AVX2's stand-in for vpexpandw), zeros elsewhere; the pair trick then
// gives the even and odd columns' fp32, which meet x_pairs' layout without a shuffle of
// x (columns c..c+16 of the 32-column block B, h = (c - B) / 16: evens at xp[B + 8h],
// odds at xp[B + 16 + 8h]).
#define BM_PAIR2(B0, B1, XE, XO, AE, AO)                                                    \
    do {                                                                                    \
        size_t p0_ = (size_t)__builtin_popcount(B0);                                        \
        __m256i w_ = _mm256_loadu2_m128i((const __m128i *)(v + k + p0_), (const __m128i *)(v + k)); \
        w_ = _mm256_shuffle_epi8(w_, _mm256_loadu2_m128i((const __m128i *)EXPW[B1], (const __m128i *)EXPW[B0])); \
        k += p0_ + (size_t)__builtin_popcount(B1);                                          \
        PAIR2(w_, XE, XO, AE, AO);                                                          \
    } while (0)
AVX2 static float bitmap2p_bf16(const PackTensor *t, size_t r, const float *xp) {
    size_t cols = t->cols, nb = (cols + 7) / 8, k = t->nnz_ptr[r], j = 0, nnz = t->nnz;
    const uint8_t *bm = t->index + r * nb;
    const uint16_t *v = t->values;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    // a block of 32 columns (4 bytes) a step, no test of zero bytes: at these
    // densities a branch on them is a coin toss the predictor loses
    for (; j + 4 <= cols / 8 && k + 32 + 8 <= nnz; j += 4) {
        const float *xb = xp + j * 8;
        unsigned b0 = bm[j], b1 = bm[j + 1], b2 = bm[j + 2], b3 = bm[j + 3];
        BM_PAIR2(b0, b1, _mm256_loadu_ps(xb), _mm256_loadu_ps(xb + 16), a0, a1);
        BM_PAIR2(b2, b3, _mm256_loadu_ps(xb + 8), _mm256_loadu_ps(xb + 24), a2, a3);
    }
    float s = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; j < nb; j++) // the row's last columns (and the stream's end): x_pairs' place of column c
        for (unsigned w = bm[j]; w; w &= w - 1) {
            size_t c = j * 8 + (size_t)__builtin_ctz(w), B = c & ~(size_t)31, i = (c - B) / 2;
            s += VAL_BF16(v, k++) * xp[B + (c & 1) * 16 + i];
        }
    return s;
}

// Sell with AVX2: one slot a step, its 8 lanes the slice's 8 rows: 8 columns widened
// from u16, x gathered there (vgatherdps), 8 values, one FMA; four sums for the latency.
// The gather's mask leaves out padding (value bits 0), so x there is never read: a row's
// sum has exactly its own elements, as the portable loop's (in another order).
#define SELL2_STEP(LOADW, e, acc)                                                          \
    do {                                                                                   \
        __m256i c_ = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(ix + (e)))); \
        __m256 w_, m_;                                                                     \
        LOADW(w_, m_, e);                                                                  \
        acc = _mm256_fmadd_ps(w_, _mm256_mask_i32gather_ps(_mm256_setzero_ps(), x, c_, m_, 4), acc); \
    } while (0)
// w (8 fp32) and m (lanes whose value bits are not 0) of slot entries e .. e+8
#define SELL2_W16(w, m, e, TO_F32)                                                         \
    do {                                                                                   \
        __m128i h_ = _mm_loadu_si128((const __m128i *)((const uint16_t *)v + (e)));        \
        m = _mm256_castsi256_ps(_mm256_cvtepi16_epi32(_mm_xor_si128(_mm_cmpeq_epi16(h_, _mm_setzero_si128()), \
                                                                    _mm_set1_epi32(-1)))); \
        w = TO_F32(h_);                                                                    \
    } while (0)
#define BF16_TO_F32(h) _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))
#define SELL2_WBF16(w, m, e) SELL2_W16(w, m, e, BF16_TO_F32)
#define SELL2_WF16(w, m, e) SELL2_W16(w, m, e, _mm256_cvtph_ps)
#define SELL2_WF32(w, m, e)                                                                \
    do {                                                                                   \
        w = _mm256_loadu_ps((const float *)v + (e));                                       \
        m = _mm256_castsi256_ps(_mm256_xor_si256(                                          \
            _mm256_cmpeq_epi32(_mm256_castps_si256(w), _mm256_setzero_si256()), _mm256_set1_epi32(-1))); \
    } while (0)
#define DEF_SELL2(NAME, LOADW)                                                             \
    AVX2 static void NAME(float *d, const PackTensor *t, size_t s, const float *x) {       \
        const uint16_t *ix = (const uint16_t *)t->index;                                   \
        const void *v = t->values;                                                         \
        size_t e = SELL * (size_t)t->ix_ptr[s], e1 = SELL * (size_t)t->ix_ptr[s + 1];      \
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();                         \
        __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();                         \
        for (; e + 4 * SELL <= e1; e += 4 * SELL) {                                        \
            SELL2_STEP(LOADW, e, a0);                                                      \
            SELL2_STEP(LOADW, e + SELL, a1);                                               \
            SELL2_STEP(LOADW, e + 2 * SELL, a2);                                           \
            SELL2_STEP(LOADW, e + 3 * SELL, a3);                                           \
        }                                                                                  \
        for (; e < e1; e += SELL) SELL2_STEP(LOADW, e, a0);                                \
        _mm256_storeu_ps(d, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3))); \
    }
DEF_SELL2(sell2_f32, SELL2_WF32)
DEF_SELL2(sell2_bf16, SELL2_WBF16)
DEF_SELL2(sell2_f16, SELL2_WF16)
// AVX-512 CPUs run the AVX2 sell kernels (best-pack plans tiles for them, which are faster there)
static const PanelFn AVX2_SELL[5] = {sell2_f32, sell2_bf16, sell2_f16, NULL, NULL};

static const PanelFn AVX2_TILES[5] = {tiles2_f32, tiles2_bf16, tiles2_f16, tiles2_i8, tiles2_i4};

static const RowFn AVX2_ROWS[3][5] = {
    {dense2_f32, dense2p_bf16, dense2_f16, dense2_i8, dense2_i4},
    {bitmap2_f32, bitmap2p_bf16, bitmap2_f16, bitmap2_i8, bitmap2_i4},
    {NULL, NULL, NULL, NULL, NULL}, // delta: the portable loop (see the top of the file)
};

static int avx2_have(void) {
    __builtin_cpu_init();
    // F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports does not know "f16c"
    unsigned a, b, c, d;
    int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c &&
           __builtin_cpu_supports("popcnt") && __builtin_cpu_supports("bmi2");
}

static int have_vbmi2;

static const PanelFn SIMD_TILES[5] = {tiles512_f32, tiles512_bf16, NULL, tiles512_i8, NULL};

static const RowFn SIMD[3][5] = {
    {dense512_f32, dense512p_bf16, NULL, dense512_i8, NULL},
    {bitmap512_f32, bitmap512p_bf16, NULL, bitmap512_i8, NULL},
    {NULL, NULL, NULL, NULL, NULL}, // delta: the portable loop (see the top of the file)
};

static int simd_have(void) {
    __builtin_cpu_init();
    have_vbmi2 = __builtin_cpu_supports("avx512vbmi2");
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}
#else
static const RowFn SIMD[3][5], AVX2_ROWS[3][5];
static const PanelFn SIMD_TILES[5], AVX2_TILES[5], AVX2_SELL[5];
static int have_vbmi2;
static int simd_have(void) { return 0; }
static int avx2_have(void) { return 0; }
static void tables8_init(void) {}
#endif

typedef void (*Rows4Fn)(float *d, const PackTensor *t, size_t r, const float *x);

// The four-row kernel that goes with f, or NULL.
static Rows4Fn rows4(RowFn f) {
#ifdef SPMV_X86
    if (f == dense512p_bf16) return dense512p4_bf16;
    if (f == dense2p_bf16) return dense2p4_bf16;
#endif
    (void)f;
    return NULL;
}

// The kernels that take x in pairs (x_pairs), not as it is.
static int takes_pairs(RowFn f) {
#ifdef SPMV_X86
    return f == dense512p_bf16 || f == bitmap512p_bf16 || f == dense2p_bf16 || f == bitmap2p_bf16;
#else
    (void)f;
    return 0;
#endif
}

// xp (cols rounded up to 32): per block of 32 columns, x's 16 even then 16 odd ones;
// zeros past cols.
static void x_pairs(float *xp, const float *x, size_t cols) {
    size_t n = (cols + 31) & ~(size_t)31;
    for (size_t c = 0; c < n; c += 32)
        for (size_t i = 0; i < 16; i++) {
            xp[c + i] = c + 2 * i < cols ? x[c + 2 * i] : 0.0f;
            xp[c + 16 + i] = c + 2 * i + 1 < cols ? x[c + 2 * i + 1] : 0.0f;
        }
}

// --- which kernels: the instruction set -------------------------------------------------------

static const char *const ISA_NAMES[3] = {"portable", "avx2", "avx512"};
static int isa_now = -1; // -1 until the first product decides

const char *spmv_isa_name(SpmvIsa i) { return i >= 0 && i <= SPMV_AVX512 ? ISA_NAMES[i] : "?"; }

int spmv_isa_parse(SpmvIsa *out, const char *name) {
    for (int i = 0; i <= SPMV_AVX512; i++)
        if (strcmp(name, ISA_NAMES[i]) == 0) {
            *out = (SpmvIsa)i;
            return 0;
        }
    return -1;
}

int spmv_isa_supported(SpmvIsa i) {
    static int have[3] = {-1, -1, -1};
    if (have[0] < 0) {
        tables8_init();
        have[0] = 1, have[1] = avx2_have(), have[2] = simd_have();
    }
    return i >= 0 && i <= SPMV_AVX512 && have[i];
}

int spmv_set_isa(SpmvIsa i) {
    if (!spmv_isa_supported(i))
        return ERR("the %s kernels need a CPU with %s; this one has: portable%s%s", spmv_isa_name(i),
                   i == SPMV_AVX512 ? "AVX-512 F, BW, VL and DQ" : "AVX2, FMA, F16C, POPCNT and BMI2",
                   spmv_isa_supported(SPMV_AVX2) ? ", avx2" : "", spmv_isa_supported(SPMV_AVX512) ? ", avx512" : "");
    isa_now = i;
    return 0;
}

SpmvIsa spmv_isa(void) {
    if (isa_now >= 0) return (SpmvIsa)isa_now;
    const char *e = getenv("BEST_ISA");
    SpmvIsa want;
    if (e && *e) {
        CHECK(spmv_isa_parse(&want, e) == 0, "BEST_ISA=%s: want avx512, avx2 or portable", e);
        if (spmv_set_isa(want) < 0) CHECK(0, "BEST_ISA=%s: %s", e, err_msg());
    } else {
        isa_now = spmv_isa_supported(SPMV_AVX512) ? SPMV_AVX512 : spmv_isa_supported(SPMV_AVX2) ? SPMV_AVX2 : SPMV_PORTABLE;
    }
    return (SpmvIsa)isa_now;
}

static RowFn kernel(const PackTensor *t, int *is_simd) {
    SpmvIsa i = spmv_isa();
    RowFn f = i == SPMV_AVX512 ? SIMD[t->enc][t->val] : i == SPMV_AVX2 ? AVX2_ROWS[t->enc][t->val] : NULL;
#ifdef SPMV_X86
    if (f == bitmap512p_bf16 && !have_vbmi2) f = bitmap512_bf16;
#endif
    *is_simd = f != NULL;
    return f ? f : GENERIC[t->enc][t->val];
}

// The tiles or sell kernel for t and whether it is a SIMD one (a tiles one then reads x
// padded).
static PanelFn panel_kernel(const PackTensor *t, int *is_simd) {
    SpmvIsa i = spmv_isa();
    if (t->enc == PACK_SELL) {
        PanelFn f = i >= SPMV_AVX2 ? AVX2_SELL[t->val] : NULL;
        *is_simd = f != NULL;
        return f ? f : GENERIC_SELL[t->val];
    }
    PanelFn f = i == SPMV_AVX512 ? SIMD_TILES[t->val] : i == SPMV_AVX2 ? AVX2_TILES[t->val] : NULL;
#ifdef SPMV_X86
    if (f == tiles512_bf16 && have_vbmi2) f = tiles512p_bf16;
#endif
    *is_simd = f != NULL;
    return f ? f : GENERIC_TILES[t->val];
}

const char *spmv_kernel_name(const PackTensor *t) {
    // (pack.h's pack_enc_name would do, but then every user of spmv.o links pack.o.)
    static const char *enc[] = {"dense", "bitmap", "delta", "tiles", "sell"}, *val[] = {"F32", "BF16", "F16", "I8", "I4"};
    static __thread char buf[48];
    int s;
    if (t->enc == PACK_TILES || t->enc == PACK_SELL) panel_kernel(t, &s);
    else kernel(t, &s);
    // (sell's SIMD kernels are AVX2's on both sets)
    snprintf(buf, sizeof buf, "%s/%s %s", enc[t->enc], val[t->val],
             !s ? "portable" : t->enc == PACK_SELL ? "avx2" : spmv_isa_name(spmv_isa()));
    return buf;
}

// --- the product ------------------------------------------------------------------------

// The rows of one unit a product is cut into: a row, a panel of TILE rows (tiles) or a
// slice of SELL rows (sell).
static size_t unit_rows(const PackTensor *t) { return t->enc == PACK_TILES ? TILE : t->enc == PACK_SELL ? SELL : 1; }
static size_t units(const PackTensor *t) { return (t->rows + unit_rows(t) - 1) / unit_rows(t); }

// Work before unit u: its stored elements (sell: its slots' entries) plus one per unit (a
// row's or panel's fixed cost), so that chunks of equal work have about equal time.
// Strictly increasing.
static size_t work_before(const PackTensor *t, size_t u) {
    if (t->enc == PACK_SELL) return SELL * (size_t)t->ix_ptr[u] + u;
    return (t->nnz_ptr ? t->nnz_ptr[u] : u * t->cols) + u;
}

// The first unit u with work_before(u) >= w (units when none).
static size_t unit_at(const PackTensor *t, size_t w) {
    size_t lo = 0, hi = units(t);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (work_before(t, mid) < w) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

// x rearranged for the kernel that reads it: in pairs (x_pairs) or padded with zeros
// to a multiple of 32 columns (tiles); the calling thread's buffer, grown as needed,
// read by the team.
static const float *x_for(const float *x, size_t cols, int pairs) {
    static __thread float *xp;
    static __thread size_t cap;
    size_t n = (cols + 31) & ~(size_t)31;
    if (n > cap) {
        free(xp);
        xp = xmalloc(n * sizeof *xp);
        cap = n;
    }
    if (pairs) {
        x_pairs(xp, x, cols);
    } else {
        memcpy(xp, x, cols * sizeof *xp);
        memset(xp + cols, 0, (n - cols) * sizeof *xp);
    }
    return xp;
}

// Row r's result v as y[r]: scaled (I8/I4), added to y[r] (acc), plus the bias.
static inline void y_put(float *y, size_t r, float v, const float *scales, const float *b, int acc) {
    if (scales) v *= scales[r];
    if (acc) v = y[r] + v;
    if (b) v += b[r];
    y[r] = v;
}

void spmv_forward(float *y, const float *x, const PackTensor *t, const float *b, int acc) {
    int simd;
    RowFn f = NULL;
    PanelFn pf = NULL;
    if (t->enc == PACK_TILES || t->enc == PACK_SELL) {
        pf = panel_kernel(t, &simd);
        if (simd && t->enc == PACK_TILES) x = x_for(x, t->cols, 0);
    } else {
        f = kernel(t, &simd);
        if (takes_pairs(f)) x = x_for(x, t->cols, 1);
    }
    size_t nu = units(t), total = work_before(t, nu);
    size_t nt = (size_t)omp_get_max_threads();
    size_t nchunks = total < PAR_MIN_WORK || nt < 2 ? 1 : 4 * nt;
    if (nchunks > nu) nchunks = nu ? nu : 1;
    const float *scales = t->scales;
    Rows4Fn f4 = f ? rows4(f) : NULL;
#pragma omp parallel for schedule(dynamic, 1) if (nchunks > 1)
    for (size_t ch = 0; ch < nchunks; ch++) {
        size_t u0 = unit_at(t, total / nchunks * ch + total % nchunks * ch / nchunks);
        size_t u1 = ch + 1 == nchunks ? nu
                                      : unit_at(t, total / nchunks * (ch + 1) + total % nchunks * (ch + 1) / nchunks);
        if (pf) {
            float d[TILE];
            size_t ur = unit_rows(t);
            for (size_t p = u0; p < u1; p++) {
                pf(d, t, p, x);
                for (size_t r = p * ur; r < (p + 1) * ur && r < t->rows; r++) y_put(y, r, d[r - p * ur], scales, b, acc);
            }
            continue;
        }
        float d[4];
        for (size_t r = u0; r < u1; r++) {
            size_t j = (r - u0) % 4;
            if (f4 && j == 0 && r + 4 <= u1) f4(d, t, r, x);
            y_put(y, r, f4 && u0 + (r - u0) / 4 * 4 + 4 <= u1 ? d[j] : f(t, r, x), scales, b, acc);
        }
    }
}

// --- rows as fp32 -----------------------------------------------------------------------

static float value_at(const PackTensor *t, size_t i) {
    switch (t->val) {
    case PACK_F32: return VAL_F32(t->values, i);
    case PACK_BF16: return VAL_BF16(t->values, i);
    case PACK_F16: return VAL_F16(t->values, i);
    case PACK_I8: return VAL_I8(t->values, i);
    case PACK_I4: return VAL_I4(t->values, i);
    }
    return 0;
}

// out (cols) = row r of t, dequantized (q * scale in fp32), zeros where not stored.
static void row_decode(float *out, const PackTensor *t, size_t r) {
    size_t cols = t->cols;
    float sc = t->scales ? t->scales[r] : 1.0f;
    if (t->enc == PACK_DENSE) {
        if (t->val == PACK_F32) memcpy(out, (const float *)t->values + r * cols, cols * sizeof *out);
        else if (t->val == PACK_BF16)
            for (size_t c = 0; c < cols; c++) out[c] = VAL_BF16(t->values, r * cols + c);
        else
            for (size_t c = 0; c < cols; c++)
                out[c] = t->scales ? value_at(t, r * cols + c) * sc : value_at(t, r * cols + c);
        return;
    }
    memset(out, 0, cols * sizeof *out);
    size_t k = t->nnz_ptr[t->enc == PACK_TILES ? r / TILE : r];
    if (t->enc == PACK_SELL) { // lane r%8 of the slice's first n slots
        const uint16_t *ix = (const uint16_t *)t->index;
        size_t e = SELL * (size_t)t->ix_ptr[r / SELL] + r % SELL;
        for (; k < t->nnz_ptr[r + 1]; k++, e += SELL) out[ix[e]] = value_at(t, e);
    } else if (t->enc == PACK_TILES) {
        size_t p = r / TILE, blk = 0;
        for (size_t s = t->ix_ptr[p]; s < t->ix_ptr[p + 1]; s++) {
            blk += t->steps[s];
            uint32_t m = t->masks[s];
            // this row's element, if the slot has one, comes after the rows below it
            size_t j = k + (size_t)__builtin_popcount(m & ((1u << (r % TILE)) - 1));
            if (m >> (r % TILE) & 1) out[blk * TILE + t->index[j]] = value_at(t, j);
            k += (size_t)__builtin_popcount(m);
        }
    } else if (t->enc == PACK_BITMAP) {
        const uint8_t *bm = t->index + r * ((cols + 7) / 8);
        for (size_t c = 0; c < cols; c++)
            if (bm[c / 8] >> (c % 8) & 1) out[c] = value_at(t, k++);
    } else {
        const uint8_t *p = t->index + t->ix_ptr[r];
        for (size_t col = 0; k < t->nnz_ptr[r + 1]; k++) {
            while (*p == 255) { col += 255; p++; }
            col += *p++;
            out[col++] = value_at(t, k);
        }
    }
    if (t->scales)
        for (size_t c = 0; c < cols; c++) out[c] *= sc;
}

void spmv_embed(float *x, const int32_t *tokens, const PackTensor *t, size_t N) {
#pragma omp parallel for schedule(static) if (N * t->cols > PAR_MIN_WORK)
    for (size_t n = 0; n < N; n++) row_decode(x + n * t->cols, t, (size_t)tokens[n]);
}

// --- the device's pairs layout (spmv.h: DEVPACK_PAIRS), built here on the host -------------

size_t devpack_pairs_build(uint32_t *pair_off, uint32_t *pairs, const PackTensor *t) {
    if (t->val != PACK_BF16 || t->enc == PACK_DENSE || t->cols > 65536 || t->rows == 0) return 0;
    float *row = xmalloc(t->cols * sizeof *row);
    size_t groups = 0;
    pair_off[0] = 0;
    for (size_t r = 0; r < t->rows; r++) {
        pack_decode_rows(row, t, r, r + 1); // a stored element has nonzero bits: so has its fp32
        uint32_t *w = pairs + 4 * groups;
        size_t k = 0;
        for (size_t c = 0; c < t->cols; c++) {
            uint32_t bits;
            memcpy(&bits, &row[c], sizeof bits);
            if (bits) w[k++] = (uint32_t)c | (bits & 0xffff0000u); // a bf16 value's fp32 has 16 zero low bits
        }
        for (; k % 4; k++) w[k] = 0; // padding: skipped by the kernel
        groups += (k + 3) / 4;
        if (groups > 0xffffffffu) { // (offsets are u32: 16 GiB of pairs in one tensor)
            free(row);
            return 0;
        }
        pair_off[r + 1] = (uint32_t)groups;
    }
    free(row);
    return 4 * groups;
}

int devpack_layout_env(void) {
    static const char *const names[] = {"streams", "pairs", "auto"};
    return args_choice(getenv("BEST_SPMV_LAYOUT"), names, 3);
}
