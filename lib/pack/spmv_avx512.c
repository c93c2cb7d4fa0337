// spmv_avx512.c: the AVX-512 kernels of the packed products (F, BW, VL, DQ; VBMI2 where
// the CPU has it): dense and bitmap rows of F32, BF16 and I8, and tiles of the same
// types. spmv.c chooses among the sets and runs the product (spmv.h: the contract);
// F16, I4 and delta rows take the portable kernels there, sell the AVX2 ones
// (spmv_avx2.c); spmv_kernels.h is what the three files share.
//
// These exist because the sparse loops are bound by instructions, not by memory: the
// portable bitmap walk costs a ctz, a load of x and a multiply-add per stored element,
// ~2 ns each here, while memory delivers a BF16 element and its index in well under one.
// Measured with one thread on the 220M model of bench/decode.sh (CPU time, so that the
// VM's other jobs count less; a shared 2-core Xeon Ice Lake):
//   bitmap BF16  32 columns a step: the row's 32 bits place the next popcount values
//                at their columns (vpexpandw, AVX512-VBMI2), and the pair trick below
//                turns them into fp32 without a shuffle: 4.7 GB/s at 70% sparsity,
//                against 2.5-3.0 for the first version (16 columns a step, x
//                compressed to the stored columns with vcompressps, kept for CPUs
//                without VBMI2 and for F32/I8) and 1.1 for the portable walk;
//   tiles        (pack.h) exist for this: at 95% sparsity the AVX-512 BF16 kernel read
//                the delta model's 84 matrices, re-encoded as tiles (27.3 MB against
//                24.2), in 3.1-3.5 ms where spmv.c's delta loop took 6.9-9.7 (~8 GB/s,
//                about what one thread's memory gives: the kernel is no longer bound by
//                instructions; ~4 ns a slot when the tensor sits in cache). The
//                VBMI2 kernel expands a slot's 32 words and 32 column bytes at once;
//                without VBMI2 two 16-lane halves expand dwords (AVX-512 F).
// Every function carries its target attribute (AVX512, AVX512V), so this file builds
// with the flags of the rest of lib/ and runs only where spmv_avx512_probe said yes.
#include "pack/spmv_kernels.h" // defines: RowKernel, RowFn, PanelFn, DENSE_PF

#ifdef SPMV_X86
#include <immintrin.h>

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
// They pair with x reordered once per product (spmv.c's x_pairs): per block of 32
// columns, the 16 even ones, then the 16 odd ones.
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

static int have_vbmi2; // set by spmv_avx512_probe

static const PanelFn TILES512[5] = {tiles512_f32, tiles512_bf16, NULL, tiles512_i8, NULL};

// Nm, 16 elements a step. When n divides 16, m <= 2n and a position takes at most 4
// bits (1:2, 2:3, 2:4, 4:5..8, 8:9..16), a step's 16 elements fill 16/n whole groups, at
// most 32 columns, and their 16 positions lie in 64 bits of the row: x of those columns
// sits in two registers and each lane's x is picked by vpermt2ps (no gather); with 1- or
// 2-bit positions (2:4, 1:2, 2:3) a step's positions are one u32 shifted per lane, two
// steps at once into two sums. Other patterns, and each row's last elements, decode
// their columns in scalar code (NmWalk) and gather x. A 2:4 BF16 model (220M, 1 thread,
// AMD EPYC here, 2026-11-29) decodes in about tiles' time at 1.4x fewer bytes (docs/benchmarks.md).
#define DEF_NM512(NAME, LOAD)                                                              \
    AVX512 static float NAME(const PackTensor *t, size_t r, const float *x) {              \
        unsigned n = t->nm_n, m = t->nm_m, bits = pack_nm_bits(m);                         \
        size_t per = t->cols / m * n, o = r * per, e = 0, cols = t->cols;                  \
        size_t stride = pack_nm_row_bytes(cols, n, m);                                     \
        const uint8_t *ix = t->index + r * stride;                                         \
        __m512 a = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();                          \
        if (16 % n == 0 && m <= 2 * n && bits <= 4) {                                      \
            __m512i lanes = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0); \
            __m512i base = _mm512_mullo_epi32(_mm512_srli_epi32(lanes, (unsigned)__builtin_ctz(n)), \
                                              _mm512_set1_epi32((int)m));                  \
            __m512i pmask = _mm512_set1_epi32((1 << bits) - 1);                            \
            size_t span = 16 / n * m; /* columns a step, > 16 as m > n */                  \
            __mmask16 hi = low_mask(span - 16);                                            \
            if (bits <= 2) { /* 16 positions in a u32; two steps (32 elements) a u64 */    \
                __m512i sh = _mm512_mullo_epi32(lanes, _mm512_set1_epi32((int)bits));      \
                unsigned step_bytes = 2 * bits;                                            \
                for (; e + 32 <= per; e += 32) {                                           \
                    uint32_t w0 = nm_load_bytes(ix + e / 8 * bits, step_bytes);            \
                    uint32_t w1 = nm_load_bytes(ix + (e + 16) / 8 * bits, step_bytes);     \
                    __m512i p0 = _mm512_add_epi32(_mm512_and_si512(_mm512_srlv_epi32(_mm512_set1_epi32((int)w0), sh), pmask), base); \
                    __m512i p1 = _mm512_add_epi32(_mm512_and_si512(_mm512_srlv_epi32(_mm512_set1_epi32((int)w1), sh), pmask), base); \
                    const float *x0 = x + e / n * m, *x1 = x0 + span;                      \
                    __m512 v0 = _mm512_permutex2var_ps(_mm512_loadu_ps(x0), p0, _mm512_maskz_loadu_ps(hi, x0 + 16)); \
                    __m512 v1 = _mm512_permutex2var_ps(_mm512_loadu_ps(x1), p1, _mm512_maskz_loadu_ps(hi, x1 + 16)); \
                    a = _mm512_fmadd_ps(LOAD(t->values, o + e, 0xffff), v0, a);            \
                    a1 = _mm512_fmadd_ps(LOAD(t->values, o + e + 16, 0xffff), v1, a1);     \
                }                                                                          \
            } else {                                                                       \
                __m512i sh = _mm512_mullo_epi64(_mm512_cvtepu32_epi64(_mm512_castsi512_si256(lanes)), \
                                                _mm512_set1_epi64(bits));                  \
                __m512i sh8 = _mm512_add_epi64(sh, _mm512_set1_epi64(8 * bits));           \
                for (; e + 16 <= per && e / 8 * bits + 8 <= stride; e += 16) {             \
                    uint64_t w;                                                            \
                    memcpy(&w, ix + e / 8 * bits, 8);                                      \
                    __m512i wv = _mm512_set1_epi64((long long)w);                          \
                    __m256i p0 = _mm512_cvtepi64_epi32(_mm512_srlv_epi64(wv, sh));         \
                    __m256i p1 = _mm512_cvtepi64_epi32(_mm512_srlv_epi64(wv, sh8));        \
                    __m512i p = _mm512_inserti64x4(_mm512_castsi256_si512(p0), p1, 1);     \
                    p = _mm512_add_epi32(_mm512_and_si512(p, pmask), base);                \
                    const float *xs = x + e / n * m;                                       \
                    __m512 xv = _mm512_permutex2var_ps(_mm512_loadu_ps(xs), p, _mm512_maskz_loadu_ps(hi, xs + 16)); \
                    a = _mm512_fmadd_ps(LOAD(t->values, o + e, 0xffff), xv, a);            \
                }                                                                          \
            }                                                                              \
        }                                                                                  \
        NmWalk wk;                                                                         \
        nm_walk_init(&wk, t, r, e);                                                        \
        for (; e < per; e += 16) {                                                         \
            int32_t c[16];                                                                 \
            size_t k = per - e < 16 ? per - e : 16;                                        \
            __mmask16 mk = low_mask(k);                                                    \
            nm_walk_cols(c, &wk, k);                                                       \
            __m512 xv = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mk, _mm512_maskz_loadu_epi32(mk, c), x, 4); \
            a = _mm512_fmadd_ps(LOAD(t->values, o + e, mk), xv, a);                        \
        }                                                                                  \
        return _mm512_reduce_add_ps(_mm512_add_ps(a, a1));                                 \
    }
AVX512 static inline __m512 load16_f16(const void *v, size_t o, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)v + o));
}
DEF_NM512(nm512_f32, load16_f32)
DEF_NM512(nm512_bf16, load16_bf16)
DEF_NM512(nm512_f16, load16_f16)
DEF_NM512(nm512_i8, load16_i8)

static const RowFn ROWS512[PACK_N_ENC][5] = {
    {dense512_f32, dense512p_bf16, NULL, dense512_i8, NULL},
    {bitmap512_f32, bitmap512p_bf16, NULL, bitmap512_i8, NULL},
    {NULL, NULL, NULL, NULL, NULL}, // delta: the portable loop (spmv.c says why)
    [PACK_NM] = {nm512_f32, nm512_bf16, nm512_f16, nm512_i8, NULL},
};

int spmv_avx512_probe(void) {
    __builtin_cpu_init();
    have_vbmi2 = __builtin_cpu_supports("avx512vbmi2");
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

void spmv_avx512_pick_row(RowKernel *k, const PackTensor *t) {
    RowFn f = ROWS512[t->enc][t->val];
    if (f == bitmap512p_bf16 && !have_vbmi2) f = bitmap512_bf16;
    k->row = f;
    k->rows4 = f == dense512p_bf16 ? dense512p4_bf16 : NULL;
    k->pairs = f == dense512p_bf16 || f == bitmap512p_bf16;
}

PanelFn spmv_avx512_pick_tiles(const PackTensor *t) {
    PanelFn f = TILES512[t->val];
    return f == tiles512_bf16 && have_vbmi2 ? tiles512p_bf16 : f;
}
#else
int spmv_avx512_probe(void) { return 0; }
void spmv_avx512_pick_row(RowKernel *k, const PackTensor *t) {
    (void)t;
    *k = (RowKernel){0};
}
PanelFn spmv_avx512_pick_tiles(const PackTensor *t) {
    (void)t;
    return NULL;
}
#endif
