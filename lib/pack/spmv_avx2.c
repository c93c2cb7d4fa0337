// spmv_avx2.c: the AVX2 kernels of the packed products (+ FMA, F16C, POPCNT, BMI2), for
// the x86-64 CPUs without AVX-512 (AMD Zen 2-4, most Intel clients): dense, bitmap and
// tiles of every value type, and sell (8-row slices), which AVX-512 CPUs run too. spmv.c
// chooses among the sets and runs the product (spmv.h: the contract); delta rows take
// its portable kernels; spmv_kernels.h is what the three files share.
//
// AVX2 has no compress or expand: tables of lane permutations stand in (below). Forced on
// the Emerald Rapids Xeon of docs/benchmarks.md (BEST_ISA=avx2, one thread), per token of
// the 220M model: dense BF16 (the pair trick, 4 rows with prefetch) 28.4 ms against 58.5
// for the portable loop; bitmap BF16 25.1 ms at 70% against 72.6, by pshufb expanding two
// bytes' values into 16 columns; tiles 15.0 ms at 95% against 24.6, but the portable
// delta loop took 11.9 there: 8 lanes and a 4-register lookup of x cost ~20 instructions
// per 8 rows of a slot, where AVX-512 needs ~5 per 16. Hence sell (pack format 3): 8 rows
// a slot, their 8 columns as u16 and x gathered there by one vgatherdps, so a slot costs
// two 16-byte loads, three widenings, a gather and an FMA, with no lane permutes: 9.0 ms
// a token at 95% against 12.0 for delta (one thread, the same machine;
// bench/decode_encodings.sh). The gather is the bound (~9 cycles a slot here: in cache
// the kernel reads at ~10 GB/s where a plain read of the same bytes makes 25), not
// memory; software prefetch and pairs of slots in one 32-byte load (to spare the
// widenings) measured no better.
//
// The tables: 8 lanes and no compress or expand instructions, so a 256-entry table of
// lane permutations stands in for them: for a byte b of a bitmap, CMP8[b] lists the
// positions of its set bits (x of the stored columns gathered into the low lanes by
// vpermps, as the values lie), and EXP8[b] sends value j to the lane of the j-th set bit
// (tiles: values to their rows). A load of 8 values past the last stored one would leave
// the stream: such steps (the last few of a tensor) take the scalar loop. Every function
// carries the AVX2 target attribute, so this file builds with the flags of the rest of
// lib/ and runs only where spmv_avx2_probe said yes.
#include "pack/spmv_kernels.h" // defines: RowKernel, RowFn, PanelFn, VAL_*, DENSE_PF

#ifdef SPMV_X86
#include <cpuid.h>
#include <immintrin.h>

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

// Dense BF16 in pairs (the pair trick of spmv_avx512.c, x_pairs of spmv.c): 32
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
// and a prefetch DENSE_PF bytes ahead in each row (see spmv_avx512.c's dense512p4_bf16).
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
// Sell without the gather (PackTensor.variant 1, chosen by timing at load, pack_tune.h):
// the 8 columns read from the index as scalars and x loaded there lane by lane (8 loads and
// inserts), for CPUs whose vgatherdps is slow (the Ice Lake VM); padding lanes
// masked to x = 0 after the loads (column 0 is in bounds), so they add exactly 0 * 0.
#define SELL2_STEP_NG(LOADW, e, acc)                                                        \
    do {                                                                                    \
        const uint16_t *c_ = ix + (e);                                                      \
        __m256 w_, m_;                                                                      \
        LOADW(w_, m_, e);                                                                   \
        __m256 x_ = _mm256_setr_ps(x[c_[0]], x[c_[1]], x[c_[2]], x[c_[3]], x[c_[4]], x[c_[5]], x[c_[6]], x[c_[7]]); \
        acc = _mm256_fmadd_ps(w_, _mm256_and_ps(x_, m_), acc);                              \
    } while (0)
// The slice's walk, one slot a step (STEP: SELL2_STEP or SELL2_STEP_NG), four sums.
#define DEF_SELL2(NAME, STEP, LOADW)                                                       \
    AVX2 static void NAME(float *d, const PackTensor *t, size_t s, const float *x) {       \
        const uint16_t *ix = (const uint16_t *)t->index;                                   \
        const void *v = t->values;                                                         \
        size_t e = SELL * (size_t)t->ix_ptr[s], e1 = SELL * (size_t)t->ix_ptr[s + 1];      \
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();                         \
        __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();                         \
        for (; e + 4 * SELL <= e1; e += 4 * SELL) {                                        \
            STEP(LOADW, e, a0);                                                            \
            STEP(LOADW, e + SELL, a1);                                                     \
            STEP(LOADW, e + 2 * SELL, a2);                                                 \
            STEP(LOADW, e + 3 * SELL, a3);                                                 \
        }                                                                                  \
        for (; e < e1; e += SELL) STEP(LOADW, e, a0);                                      \
        _mm256_storeu_ps(d, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3))); \
    }
DEF_SELL2(sell2_f32, SELL2_STEP, SELL2_WF32)
DEF_SELL2(sell2_bf16, SELL2_STEP, SELL2_WBF16)
DEF_SELL2(sell2_f16, SELL2_STEP, SELL2_WF16)
DEF_SELL2(sell2ng_f32, SELL2_STEP_NG, SELL2_WF32)
DEF_SELL2(sell2ng_bf16, SELL2_STEP_NG, SELL2_WBF16)
DEF_SELL2(sell2ng_f16, SELL2_STEP_NG, SELL2_WF16)
// AVX-512 CPUs run the AVX2 sell kernels (best-pack plans tiles for them, which are faster there)
static const PanelFn AVX2_SELL[5] = {sell2_f32, sell2_bf16, sell2_f16, NULL, NULL};
static const PanelFn AVX2_SELL_NG[5] = {sell2ng_f32, sell2ng_bf16, sell2ng_f16, NULL, NULL};

static const PanelFn AVX2_TILES[5] = {tiles2_f32, tiles2_bf16, tiles2_f16, tiles2_i8, tiles2_i4};

// Nm: 8 elements a step. When n divides 8, m <= 2n and a position takes at most 4 bits
// (2:4, 4:8, 1:2, 2:3, 4:5..7, 8:9..16), a step's 8 elements fill 8/n whole groups of at
// most 16 columns and their positions lie in one u32: x of those columns in two registers,
// each lane's x picked from both by vpermps and a blend on the index's bit 3 (no gather);
// two steps a time into two sums. Other patterns decode their columns in scalar code
// (NmWalk) and gather x (vgatherdps); the row's last elements, and every step whose load
// of 8 values would pass the stream's end, one by one.
#define DEF_NM2(NAME, SFX, VAL)                                                            \
    AVX2 static float NAME(const PackTensor *t, size_t r, const float *x) {                \
        unsigned n = t->nm_n, m = t->nm_m, bits = pack_nm_bits(m);                         \
        size_t per = t->cols / m * n, o = r * per, e = 0;                                  \
        const uint8_t *ix = t->index + r * pack_nm_row_bytes(t->cols, n, m);               \
        __m256 a = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();                          \
        if (8 % n == 0 && m <= 2 * n && bits <= 4) {                                       \
            __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);                     \
            __m256i base = _mm256_mullo_epi32(_mm256_srli_epi32(lanes, (int)__builtin_ctz(n)), _mm256_set1_epi32((int)m)); \
            __m256i sh = _mm256_mullo_epi32(lanes, _mm256_set1_epi32((int)bits));          \
            __m256i pmask = _mm256_set1_epi32((1 << bits) - 1), eight = _mm256_set1_epi32(8); \
            size_t span = 8 / n * m, hi = span - 8; /* columns a step (> 8), past the first 8 */ \
            for (; e + 16 <= per && o + e + 8 + SPAN_##SFX <= t->nnz; e += 16) {           \
                __m256 v[2];                                                               \
                for (int h = 0; h < 2; h++) {                                              \
                    uint32_t w = nm_load_bytes(ix + (e + 8 * (size_t)h) / 8 * bits, bits); \
                    __m256i p = _mm256_add_epi32(_mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)w), sh), pmask), base); \
                    const float *xs = x + (e + 8 * (size_t)h) / n * m;                     \
                    __m256 x1 = hi == 8 ? _mm256_loadu_ps(xs + 8)                          \
                                        : _mm256_maskload_ps(xs + 8, _mm256_cmpgt_epi32(_mm256_set1_epi32((int)hi), lanes)); \
                    __m256 lo = _mm256_permutevar8x32_ps(_mm256_loadu_ps(xs), p);          \
                    __m256 up = _mm256_permutevar8x32_ps(x1, p);                           \
                    v[h] = _mm256_blendv_ps(lo, up, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(p, eight), 28))); \
                }                                                                          \
                a = _mm256_fmadd_ps(ld8_##SFX(t->values, o + e), v[0], a);                 \
                a1 = _mm256_fmadd_ps(ld8_##SFX(t->values, o + e + 8), v[1], a1);           \
            }                                                                              \
        }                                                                                  \
        NmWalk wk;                                                                         \
        nm_walk_init(&wk, t, r, e);                                                        \
        int32_t c[8];                                                                      \
        for (; e + 8 <= per && o + e + SPAN_##SFX <= t->nnz; e += 8) {                     \
            nm_walk_cols(c, &wk, 8);                                                       \
            __m256 xv = _mm256_i32gather_ps(x, _mm256_loadu_si256((const __m256i *)c), 4);  \
            a = _mm256_fmadd_ps(ld8_##SFX(t->values, o + e), xv, a);                       \
        }                                                                                  \
        float s = hsum8(_mm256_add_ps(a, a1));                                             \
        for (; e < per; e++) {                                                             \
            nm_walk_cols(c, &wk, 1);                                                       \
            s += VAL(t->values, o + e) * x[c[0]];                                          \
        }                                                                                  \
        return s;                                                                          \
    }
DEF_NM2(nm2_f32, f32, VAL_F32)
DEF_NM2(nm2_bf16, bf16, VAL_BF16)
DEF_NM2(nm2_f16, f16, VAL_F16)
DEF_NM2(nm2_i8, i8, VAL_I8)
DEF_NM2(nm2_i4, i4, VAL_I4)

static const RowFn AVX2_ROWS[PACK_N_ENC][5] = {
    {dense2_f32, dense2p_bf16, dense2_f16, dense2_i8, dense2_i4},
    {bitmap2_f32, bitmap2p_bf16, bitmap2_f16, bitmap2_i8, bitmap2_i4},
    {NULL, NULL, NULL, NULL, NULL}, // delta: the portable loop (spmv.c says why)
    [PACK_NM] = {nm2_f32, nm2_bf16, nm2_f16, nm2_i8, nm2_i4},
};

int spmv_avx2_probe(void) {
    tables8_init();
    __builtin_cpu_init();
    // F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports does not know "f16c"
    unsigned a, b, c, d;
    int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c &&
           __builtin_cpu_supports("popcnt") && __builtin_cpu_supports("bmi2");
}

void spmv_avx2_pick_row(RowKernel *k, const PackTensor *t) {
    RowFn f = AVX2_ROWS[t->enc][t->val];
    k->row = f;
    k->rows4 = f == dense2p_bf16 ? dense2p4_bf16 : NULL;
    k->pairs = f == dense2p_bf16 || f == bitmap2p_bf16;
}

PanelFn spmv_avx2_pick_tiles(const PackTensor *t) { return AVX2_TILES[t->val]; }
PanelFn spmv_avx2_pick_sell(const PackTensor *t) { return t->variant == 1 ? AVX2_SELL_NG[t->val] : AVX2_SELL[t->val]; }
#else
int spmv_avx2_probe(void) { return 0; }
void spmv_avx2_pick_row(RowKernel *k, const PackTensor *t) {
    (void)t;
    *k = (RowKernel){0};
}
PanelFn spmv_avx2_pick_tiles(const PackTensor *t) {
    (void)t;
    return NULL;
}
PanelFn spmv_avx2_pick_sell(const PackTensor *t) {
    (void)t;
    return NULL;
}
#endif
