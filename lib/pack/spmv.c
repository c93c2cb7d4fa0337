// spmv.c: y = W x for one packed tensor, read in place (see spmv.h for the contract): the
// portable kernels, the choice of a kernel set (the instruction set), and the product.
// The x86 sets' kernels are apart, one file each: spmv_avx512.c and spmv_avx2.c, with
// what was measured for them; spmv_kernels.h is what the three files share.
//
// Layout of the work: spmv_forward cuts the rows into chunks of about equal nonzero
// count and OpenMP hands the chunks out; a chunk calls one row kernel per row. A row
// kernel is chosen once per call from (encoding, value type) and from the kernel set in
// use (spmv_isa). Each returns the row's dot product; scales, the bias and the
// accumulation are applied by the caller, in matmul_forward's order (y = [y +] W x,
// then + b).
//
// The portable kernels are plain C: the compiler's vector lanes for dense rows, a ctz
// walk for bitmaps, a byte walk for deltas (four sums when a row has no escape byte).
// They are the reference the other sets are tested against (tests/test_spmv.c) and run
// where a set has no kernel for an (encoding, value type). Delta stays portable on every
// set: an AVX-512 version took 16 escape-free gap bytes a step (their columns by a 4-step
// prefix sum across lanes, x gathered there); on the Ice Lake host of spmv_avx512.c a
// 16-lane gather costs ~50 cycles (microcode), and on the idle machine the portable loop
// (four sums, no escape test in rows without escapes) read the 90% model's delta tensors
// at 3.6-3.7 GB/s against 3.1-3.3 for the gather; it was removed. Its first version also
// kept its scalar state in a vector register between steps, which halved the speed at
// 99% sparsity, where rows hold only 10-30 elements: such rows want plain scalar code.
// So best-pack plans packs for AVX2 with bitmap at 70% and sell above, and for AVX-512
// tiles, sell at 99% (pack_write.c's per-set costs). bench/decode.sh measures every set
// (BEST_ISA=avx512|avx2|portable picks one, spmv.h).
#include "pack/spmv.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/args.h"         // defines: args_choice
#include "base/error.h"        // defines: xmalloc
#include "pack/spmv_kernels.h" // defines: RowKernel, RowFn, PanelFn, VAL_*, the x86 sets' picks

// A product smaller than this (stored elements + rows) runs on the calling thread: a
// fork-join costs a few microseconds, as much as a 64x64 product.
#define PAR_MIN_WORK 32768

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

// Nm: row r's groups in turn, each its n values times x at the group's positions; the
// positions come from a 64-bit window of the row's bit stream, refilled a byte at a time
// (never past the row's last byte).
#define DEF_NM(NAME, VAL)                                                                  \
    static float NAME(const PackTensor *t, size_t r, const float *x) {                     \
        unsigned n = t->nm_n, m = t->nm_m, bits = pack_nm_bits(m), mask = (1u << bits) - 1; \
        size_t groups = t->cols / m, stride = pack_nm_row_bytes(t->cols, n, m);            \
        const uint8_t *ix = t->index + r * stride, *end = ix + stride;                     \
        const void *v = t->values;                                                         \
        size_t k = r * groups * n;                                                         \
        uint64_t win = 0;                                                                  \
        unsigned have = 0;                                                                 \
        float s = 0;                                                                       \
        for (size_t g = 0; g < groups; g++, x += m)                                        \
            for (unsigned j = 0; j < n; j++, k++) {                                        \
                while (have < bits && ix < end) win |= (uint64_t)*ix++ << have, have += 8; \
                s += VAL(v, k) * x[win & mask];                                            \
                win >>= bits;                                                              \
                have -= bits;                                                              \
            }                                                                              \
        return s;                                                                          \
    }
DEF_NM(nm_f32, VAL_F32)
DEF_NM(nm_bf16, VAL_BF16)
DEF_NM(nm_f16, VAL_F16)
DEF_NM(nm_i8, VAL_I8)
DEF_NM(nm_i4, VAL_I4)

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

static const PanelFn GENERIC_TILES[5] = {tiles_f32, tiles_bf16, tiles_f16, tiles_i8, tiles_i4};
static const PanelFn GENERIC_SELL[5] = {sell_f32, sell_bf16, sell_f16, NULL, NULL}; // (no I8/I4 sell)

// (encoding, value type) -> portable kernel (the row encodings; nm's last).
static const RowFn GENERIC[PACK_N_ENC][5] = {
    {dense_f32, dense_bf16, dense_f16, dense_i8, dense_i4},
    {bitmap_f32, bitmap_bf16, bitmap_f16, bitmap_i8, bitmap_i4},
    {delta_f32, delta_bf16, delta_f16, delta_i8, delta_i4},
    [PACK_NM] = {nm_f32, nm_bf16, nm_f16, nm_i8, nm_i4},
};

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
    if (have[0] < 0) have[0] = 1, have[1] = spmv_avx2_probe(), have[2] = spmv_avx512_probe();
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

// k = the row kernel for t (dense, bitmap, delta, nm) and whether it is a SIMD one.
static void kernel(RowKernel *k, const PackTensor *t, int *is_simd) {
    SpmvIsa i = spmv_isa();
    *k = (RowKernel){0};
    if (i == SPMV_AVX512) spmv_avx512_pick_row(k, t);
    else if (i == SPMV_AVX2) spmv_avx2_pick_row(k, t);
    *is_simd = k->row != NULL;
    if (!k->row) k->row = GENERIC[t->enc][t->val];
}

// The tiles or sell kernel for t and whether it is a SIMD one (a tiles one then reads x
// padded).
static PanelFn panel_kernel(const PackTensor *t, int *is_simd) {
    SpmvIsa i = spmv_isa();
    if (t->enc == PACK_SELL) {
        PanelFn f = i >= SPMV_AVX2 ? spmv_avx2_pick_sell(t) : NULL;
        *is_simd = f != NULL;
        return f ? f : GENERIC_SELL[t->val];
    }
    PanelFn f = i == SPMV_AVX512 ? spmv_avx512_pick_tiles(t) : i == SPMV_AVX2 ? spmv_avx2_pick_tiles(t) : NULL;
    *is_simd = f != NULL;
    return f ? f : GENERIC_TILES[t->val];
}

const char *spmv_kernel_name(const PackTensor *t) {
    // (pack.h's pack_enc_name would do, but then every user of spmv.o links pack.o.)
    static const char *enc[] = {"dense", "bitmap", "delta", "tiles", "sell", "nm"}, *val[] = {"F32", "BF16", "F16", "I8", "I4"};
    static __thread char buf[48];
    int s;
    RowKernel k;
    if (t->enc == PACK_TILES || t->enc == PACK_SELL) panel_kernel(t, &s);
    else kernel(&k, t, &s);
    // (sell's SIMD kernels are AVX2's on both sets)
    snprintf(buf, sizeof buf, "%s/%s %s%s", enc[t->enc], val[t->val],
             !s ? "portable" : t->enc == PACK_SELL ? "avx2" : spmv_isa_name(spmv_isa()),
             s && t->enc == PACK_SELL && t->variant == 1 ? " (no gather)" : "");
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
    if (t->enc == PACK_NM) return u * (t->cols / t->nm_m * t->nm_n) + u;
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
    RowKernel k = {0};
    PanelFn pf = NULL;
    if (t->enc == PACK_TILES || t->enc == PACK_SELL) {
        pf = panel_kernel(t, &simd);
        if (simd && t->enc == PACK_TILES) x = x_for(x, t->cols, 0);
    } else {
        kernel(&k, t, &simd);
        if (k.pairs) x = x_for(x, t->cols, 1);
    }
    size_t nu = units(t), total = work_before(t, nu);
    size_t nt = (size_t)omp_get_max_threads();
    size_t nchunks = total < PAR_MIN_WORK || nt < 2 ? 1 : 4 * nt;
    if (nchunks > nu) nchunks = nu ? nu : 1;
    const float *scales = t->scales;
    RowFn f = k.row;
    Rows4Fn f4 = k.rows4;
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
    if (t->enc == PACK_NM) { // the row's groups' positions and values in turn
        size_t per_row = cols / t->nm_m * t->nm_n;
        const uint8_t *ix = t->index + r * pack_nm_row_bytes(cols, t->nm_n, t->nm_m);
        for (size_t e = 0; e < per_row; e++)
            out[e / t->nm_n * t->nm_m + pack_nm_pos(ix, e, pack_nm_bits(t->nm_m))] = value_at(t, r * per_row + e);
        if (t->scales)
            for (size_t c = 0; c < cols; c++) out[c] *= sc;
        return;
    }
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
