// test_spmv.c: lib/pack/spmv.c against a dense reference, for every encoding x value type.
//
// The packed tensors are built here, by hand, from pack.h's byte description (not
// with lib/pack/pack.c: an independent reading of the spec), from a dense matrix with
// chosen rows: empty, full, a single element at the last column, gaps of 254, 255,
// 256, 510 and more (delta escapes), and random rows of 0-100% density; cols that are
// not multiples of 8, 16 or 64. The reference is y = W x summed in double over the
// dequantized matrix, and the kernels must agree to 2e-6 of sum |w x| per row (fp32
// sums of up to ~1000 terms in another order). Each product runs with every kernel set
// the CPU has (AVX-512, AVX2, portable; a set it lacks is named as skipped), with 1 and
// 3 threads (same bits required), with and without bias and accumulation. spmv_embed
// must give the reference rows exactly.
//
// Then in a model (pack_write from lib/pack/pack.c, model_load of the pack): each fixture
// (GQA LLaMA, Qwen3, tied LLaMA with biases) with 90% of its prunable weights zeroed,
// saved as a folder and packed. model_eval of the pack must give the folder's logits
// bit for bit; one-token decoding (spmv, another summation order than BLAS) must give
// its logits within 1e-5 (normwise) at every position of a 24-token greedy run, and
// the same greedy tokens. A packed model refuses training and saving.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"      // defines: xmalloc, err_msg
#include "nn/model.h"        // defines: Model, model_load, model_forward_token
#include "io/safetensors.h"  // defines: st_f32_to_bf16, st_bf16_to_f32, st_f16_to_f32
#include "pack/pack_model.h" // defines: model_open
#include "pack/pack_write.h" // defines: pack_write
#include "pack/spmv.h"       // defines: spmv_forward, spmv_embed
#include "test.h"            // defines: T_OK, T_DONE

static uint64_t rng = 0x1234567;
static uint64_t next_u64(void) {
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1Dull;
}
static double uniform(void) { return (double)(next_u64() >> 11) / 9007199254740992.0; }

// A hand-made packed tensor and the buffers behind it.
typedef struct {
    PackTensor t;
    float *ref;          // (rows, cols) the dequantized matrix the kernels must compute with
    uint32_t *nnz_ptr, *ix_ptr;
    uint8_t *index, *slots;
    void *values;
    float *scales;
} Packed;

static void packed_free(Packed *p) {
    free(p->ref);
    free(p->nnz_ptr);
    free(p->ix_ptr);
    free(p->index);
    free(p->slots);
    free(p->values);
    free(p->scales);
    memset(p, 0, sizeof *p);
}

// nm's N and M for encode (pack.h: every group of M columns of a row holds at most N).
static unsigned enc_n, enc_m;

// Encodes w (rows, cols) as pack.h describes: stored = bit pattern not all zero.
static void encode(Packed *p, const float *w, size_t rows, size_t cols, PackEnc enc, PackVal val) {
    memset(p, 0, sizeof *p);
    PackTensor *t = &p->t;
    snprintf(t->name, sizeof t->name, "w");
    t->ndim = 2;
    t->shape[0] = (int64_t)rows;
    t->shape[1] = (int64_t)cols;
    t->rows = rows;
    t->cols = cols;
    t->dtype = ST_F32;
    t->enc = enc;
    t->val = val;
    // which elements are stored, in row-major order
    size_t n = rows * cols, nnz = 0;
    uint8_t *keep = xmalloc(n);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &w[i], 4);
        keep[i] = enc == PACK_DENSE || u != 0;
        nnz += keep[i];
    }
    t->nnz = nnz;
    // the order the values are stored in: row-major, or for tiles (pack.h) per panel of
    // 32 rows, per block of 32 columns, slot j holding each row's j-th element there
    size_t *order = xmalloc((nnz + 1) * sizeof *order), no = 0;
    if (enc == PACK_TILES) {
        size_t panels = (rows + 31) / 32, nblocks = (cols + 31) / 32, cap = nnz + n / 32 / 255 + panels + 16;
        uint32_t *masks = xmalloc(cap * sizeof *masks);
        uint8_t *steps = xmalloc(cap);
        p->nnz_ptr = xcalloc(panels + 1, sizeof *p->nnz_ptr);
        p->ix_ptr = xcalloc(panels + 1, sizeof *p->ix_ptr);
        p->index = xmalloc(nnz + 1);
        size_t ns = 0;
        for (size_t pn = 0; pn < panels; pn++) {
            size_t gap = 0; // blocks since the panel's start or the last slot
            for (size_t b = 0; b < nblocks; b++, gap++) {
                size_t cnt[32] = {0}, most = 0;
                for (size_t i = 0; i < 32 && pn * 32 + i < rows; i++) {
                    for (size_t c = b * 32; c < cols && c < b * 32 + 32; c++) cnt[i] += keep[(pn * 32 + i) * cols + c];
                    most = cnt[i] > most ? cnt[i] : most;
                }
                for (size_t j = 0; j < most; j++) {
                    if (j == 0)
                        for (; gap > 255; gap -= 255) masks[ns] = 0, steps[ns++] = 255;
                    uint32_t m = 0;
                    for (size_t i = 0; i < 32; i++) m |= (uint32_t)(cnt[i] > j) << i;
                    masks[ns] = m;
                    steps[ns++] = (uint8_t)(j == 0 ? gap : 0);
                    for (size_t i = 0; i < 32; i++) {
                        if (cnt[i] <= j) continue;
                        size_t seen = 0, r = pn * 32 + i; // row r's j-th element in block b
                        for (size_t c = b * 32; c < cols && c < b * 32 + 32; c++)
                            if (keep[r * cols + c] && seen++ == j) {
                                p->index[no] = (uint8_t)(c - b * 32);
                                order[no++] = r * cols + c;
                            }
                    }
                }
                if (most) gap = 0;
            }
            p->nnz_ptr[pn + 1] = (uint32_t)no;
            p->ix_ptr[pn + 1] = (uint32_t)ns;
        }
        p->slots = xmalloc(5 * ns + 1);
        memcpy(p->slots, masks, 4 * ns);
        memcpy(p->slots + 4 * ns, steps, ns);
        free(masks);
        free(steps);
        t->slots = ns;
        t->masks = (const uint32_t *)p->slots;
        t->steps = p->slots + 4 * ns;
        t->nnz_ptr = p->nnz_ptr;
        t->ix_ptr = p->ix_ptr;
        t->index_bytes = nnz;
    } else if (enc == PACK_SELL) {
        // per slice of 8 rows, as many slots as its fullest row has elements, slot j
        // holding each row's j-th element or padding (order SIZE_MAX: column 0, value 0)
        size_t slices = (rows + 7) / 8, cap = 8 * (size_t)cols * slices + 8;
        free(order);
        order = xmalloc(cap * sizeof *order);
        p->nnz_ptr = xcalloc(rows + 1, sizeof *p->nnz_ptr);
        p->ix_ptr = xcalloc(slices + 1, sizeof *p->ix_ptr);
        uint16_t *ix = xcalloc(cap, sizeof *ix);
        for (size_t r = 0; r < rows; r++) {
            uint32_t c = 0;
            for (size_t j = 0; j < cols; j++) c += keep[r * cols + j];
            p->nnz_ptr[r + 1] = p->nnz_ptr[r] + c;
        }
        for (size_t sl = 0; sl < slices; sl++) {
            size_t width = 0;
            for (size_t r = sl * 8; r < sl * 8 + 8 && r < rows; r++)
                if (p->nnz_ptr[r + 1] - p->nnz_ptr[r] > width) width = p->nnz_ptr[r + 1] - p->nnz_ptr[r];
            for (size_t j = 0; j < width; j++)
                for (size_t i = 0; i < 8; i++, no++) {
                    size_t r = sl * 8 + i, seen = 0;
                    order[no] = SIZE_MAX;
                    for (size_t c = 0; r < rows && c < cols; c++)
                        if (keep[r * cols + c] && seen++ == j) {
                            order[no] = r * cols + c;
                            ix[no] = (uint16_t)c;
                        }
                }
            p->ix_ptr[sl + 1] = (uint32_t)(no / 8);
        }
        p->index = (uint8_t *)ix;
        t->nnz_ptr = p->nnz_ptr;
        t->ix_ptr = p->ix_ptr;
        t->slots = no / 8;
        t->index_bytes = 2 * no;
    } else if (enc == PACK_NM) {
        // per row, per group of enc_m columns: its stored columns, then its first unused
        // ones (order SIZE_MAX: value 0) to enc_n; positions in ceil(log2 M) bits LSB
        // first, each row padded to a byte
        unsigned bits = 1;
        while ((1u << bits) < enc_m) bits++;
        size_t groups = cols / enc_m, stride = (groups * enc_n * bits + 7) / 8;
        free(order);
        order = xmalloc((rows * groups * enc_n + 1) * sizeof *order);
        p->index = xcalloc(rows * stride + 1, 1);
        for (size_t r = 0; r < rows; r++) {
            size_t bit = 0;
            for (size_t g = 0; g < groups; g++) {
                unsigned have = 0, take[32] = {0};
                for (unsigned j = 0; j < enc_m; j++) take[j] = keep[r * cols + g * enc_m + j], have += take[j];
                CHECK(have <= enc_n, "test: row %zu group %zu has %u of %u", r, g, have, enc_m);
                for (unsigned j = 0; j < enc_m && have < enc_n; j++)
                    if (!take[j]) take[j] = 2, have++; // padding
                for (unsigned j = 0; j < enc_m; j++) {
                    if (!take[j]) continue;
                    order[no++] = take[j] == 1 ? r * cols + g * enc_m + j : SIZE_MAX;
                    for (unsigned b = 0; b < bits; b++, bit++)
                        p->index[r * stride + bit / 8] |= (uint8_t)((j >> b & 1) << (bit % 8));
                }
            }
        }
        t->nm_n = enc_n;
        t->nm_m = enc_m;
        t->nnz = no;
        t->index_bytes = rows * stride;
    } else {
        for (size_t i = 0; i < n; i++)
            if (keep[i]) order[no++] = i;
    }
    size_t nv = no; // values stored (sell: padding included)
    // per-row scales for I8/I4: max |w| / 127 or / 7 over the row's stored elements
    float qmax = val == PACK_I8 ? 127.0f : 7.0f;
    if (val == PACK_I8 || val == PACK_I4) {
        p->scales = xcalloc(rows, sizeof *p->scales);
        for (size_t r = 0; r < rows; r++) {
            float m = 0;
            for (size_t c = 0; c < cols; c++) m = fmaxf(m, fabsf(w[r * cols + c]));
            p->scales[r] = m > 0 ? m / qmax : 1.0f;
        }
        t->scales = p->scales;
    }
    // values, and the reference matrix they stand for
    size_t vb = val == PACK_F32 ? 4 * nv : val == PACK_BF16 || val == PACK_F16 ? 2 * nv
              : val == PACK_I8 ? nv : (nv + 1) / 2;
    p->values = xcalloc(vb + 1, 1);
    t->values = p->values;
    t->values_bytes = vb;
    p->ref = xcalloc(n, sizeof *p->ref);
    for (size_t k = 0; k < nv; k++) {
        size_t i = order[k];
        if (i == SIZE_MAX) continue; // sell's and nm's padding: zero bits
        float x = w[i], q;
        size_t r = i / cols;
        switch (val) {
        case PACK_F32: ((float *)p->values)[k] = x; p->ref[i] = x; break;
        case PACK_BF16: {
            uint16_t h = st_f32_to_bf16(x);
            memcpy((uint16_t *)p->values + k, &h, 2);
            p->ref[i] = st_bf16_to_f32(h);
            break;
        }
        case PACK_F16: {
            uint16_t h = st_f32_to_f16(x);
            memcpy((uint16_t *)p->values + k, &h, 2);
            p->ref[i] = st_f16_to_f32(h);
            break;
        }
        case PACK_I8:
            q = (float)(int)fminf(fmaxf(roundf(x / p->scales[r]), -127), 127); // -0 -> 0
            ((int8_t *)p->values)[k] = (int8_t)q;
            p->ref[i] = q * p->scales[r];
            break;
        case PACK_I4:
            q = (float)(int)fminf(fmaxf(roundf(x / p->scales[r]), -7), 7);
            ((uint8_t *)p->values)[k / 2] |= (uint8_t)(((int)q & 15) << (k % 2 * 4));
            p->ref[i] = q * p->scales[r];
            break;
        }
    }
    free(order);
    if (enc == PACK_BITMAP || enc == PACK_DELTA) {
        p->nnz_ptr = xcalloc(rows + 1, sizeof *p->nnz_ptr);
        for (size_t r = 0; r < rows; r++) {
            uint32_t c = 0;
            for (size_t j = 0; j < cols; j++) c += keep[r * cols + j];
            p->nnz_ptr[r + 1] = p->nnz_ptr[r] + c;
        }
        t->nnz_ptr = p->nnz_ptr;
    }
    if (enc == PACK_BITMAP) {
        size_t nb = (cols + 7) / 8;
        p->index = xcalloc(rows * nb + 1, 1);
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < cols; c++)
                if (keep[r * cols + c]) p->index[r * nb + c / 8] |= (uint8_t)(1u << (c % 8));
        t->index_bytes = rows * nb;
    } else if (enc == PACK_DELTA) {
        size_t cap = nnz + n / 255 + 16, used = 0;
        p->index = xmalloc(cap);
        p->ix_ptr = xcalloc(rows + 1, sizeof *p->ix_ptr);
        for (size_t r = 0; r < rows; r++) {
            size_t gap = 0;
            for (size_t c = 0; c < cols; c++) {
                if (!keep[r * cols + c]) { gap++; continue; }
                for (; gap >= 255; gap -= 255) p->index[used++] = 255;
                p->index[used++] = (uint8_t)gap;
                gap = 0;
            }
            p->ix_ptr[r + 1] = (uint32_t)used;
        }
        t->ix_ptr = p->ix_ptr;
        t->index_bytes = used;
    }
    t->index = p->index;
    free(keep);
}

// A matrix whose rows exercise the encodings' corner cases, then random densities.
static float *make_matrix(size_t rows, size_t cols) {
    float *w = xcalloc(rows * cols, sizeof *w);
    for (size_t r = 0; r < rows; r++) {
        float *row = w + r * cols;
        int kind = (int)(r % 9);
        double dens = uniform();
        for (size_t c = 0; c < cols; c++) {
            float v = (float)(uniform() * 2 - 1);
            int keep;
            switch (kind) {
            case 0: keep = 0; break;                           // empty row
            case 1: keep = 1; break;                           // full row
            case 2: keep = c + 1 == cols; break;               // last column only
            case 3: keep = c % 255 == 254 || c % 256 == 0; break;
            case 4: keep = c == 0 || c == 255 || c == 511 || c == 1021; break; // gaps 254, 255, 509
            case 5: keep = c == 255 || c == 510 + 256; break; // leading gap 255, gap 510
            case 6: keep = uniform() < 0.01; break;
            default: keep = uniform() < dens; break;
            }
            row[c] = keep ? v : 0.0f;
        }
        if (kind == 7 && cols > 3) row[1] = -0.0f; // stored (not all-zero bits), value 0
    }
    return w;
}

// y (rows) = ref x in double, and a scale for the tolerance: sum |w x| per row.
static void reference(double *y, double *mag, const float *ref, const float *x, size_t rows,
                      size_t cols) {
    for (size_t r = 0; r < rows; r++) {
        double s = 0, m = 0;
        for (size_t c = 0; c < cols; c++) {
            s += (double)ref[r * cols + c] * x[c];
            m += fabs((double)ref[r * cols + c] * x[c]);
        }
        y[r] = s;
        mag[r] = m;
    }
}

static const char *ENC[] = {"dense", "bitmap", "delta", "tiles", "sell", "nm"};
static const char *VAL[] = {"F32", "BF16", "F16", "I8", "I4"};

// Every (encoding, value type) of w (rows, cols), both kernel sets, 1 and 3 threads; nm
// alone (enc_n:enc_m) when nm is set, else every other encoding.
static void check_matrix_encs(float *w, size_t rows, size_t cols, int nm) {
    float *x = xmalloc(cols * sizeof *x), *b = xmalloc(rows * sizeof *b);
    for (size_t c = 0; c < cols; c++) x[c] = (float)(uniform() * 2 - 1);
    for (size_t r = 0; r < rows; r++) b[r] = (float)(uniform() - 0.5);
    float *y1 = xmalloc(rows * sizeof *y1), *y3 = xmalloc(rows * sizeof *y3);
    float *ya = xmalloc(rows * sizeof *ya), *row = xmalloc(cols * sizeof *row);
    double *yr = xmalloc(rows * sizeof *yr), *mag = xmalloc(rows * sizeof *mag);
    for (int e = 0; e < PACK_N_ENC; e++)
        for (int v = 0; v < 5; v++) {
            if (e == PACK_SELL && (v == PACK_I8 || v == PACK_I4 || cols > 65536)) continue; // (pack.h)
            if ((e == PACK_NM) != nm) continue;
            Packed p;
            encode(&p, w, rows, cols, (PackEnc)e, (PackVal)v);
            reference(yr, mag, p.ref, x, rows, cols);
            for (int run = 2 * SPMV_AVX512 + 1; run >= 2 * SPMV_PORTABLE; run--) { // (set, variant)
                int isa = run / 2;
                p.t.variant = run % 2;
                if (p.t.variant && !(e == PACK_SELL && isa >= SPMV_AVX2)) continue; // (sell's no-gather kernel)
                if (spmv_set_isa((SpmvIsa)isa) < 0) continue; // a set this CPU lacks (said once, in main)
                const char *on = spmv_isa_name((SpmvIsa)isa);
                omp_set_num_threads(1);
                spmv_forward(y1, x, &p.t, NULL, 0);
                omp_set_num_threads(3);
                spmv_forward(y3, x, &p.t, NULL, 0);
                double worst = 0;
                for (size_t r = 0; r < rows; r++) {
                    double err = fabs(y1[r] - yr[r]) / (mag[r] > 1e-30 ? mag[r] : 1.0);
                    if (err > worst || isnan(err)) worst = isnan(err) ? INFINITY : err;
                }
                T_OK(worst <= 2e-6, "%zux%zu %s: y = Wx within %.1e of sum|wx| (want 2e-6)", rows,
                     cols, spmv_kernel_name(&p.t), worst);
                if (p.t.variant) { // the no-gather kernel adds the same products in the same order
                    p.t.variant = 0;
                    spmv_forward(y3, x, &p.t, NULL, 0);
                    p.t.variant = 1;
                    T_OK(memcmp(y1, y3, rows * sizeof *y1) == 0, "%zux%zu %s: the bits of the gather kernel", rows, cols,
                         spmv_kernel_name(&p.t));
                }
                T_OK(memcmp(y1, y3, rows * sizeof *y1) == 0,
                     "%zux%zu %s/%s %s: 1 and 3 threads give the same bits", rows, cols, ENC[e],
                     VAL[v], on);
                // y += W x + b, from y = 1
                for (size_t r = 0; r < rows; r++) ya[r] = 1.0f;
                spmv_forward(ya, x, &p.t, b, 1);
                int same = 1;
                for (size_t r = 0; r < rows; r++) same &= ya[r] == (1.0f + y1[r]) + b[r];
                T_OK(same, "%zux%zu %s/%s %s: accumulate and bias", rows, cols, ENC[e], VAL[v], on);
            }
            p.t.variant = 0;
            // embedding rows: exactly the reference's
            int32_t ids[3] = {0, (int32_t)(rows / 2), (int32_t)(rows - 1)};
            int same = 1;
            for (int i = 0; i < 3; i++) {
                spmv_embed(row, &ids[i], &p.t, 1);
                same &= memcmp(row, p.ref + (size_t)ids[i] * cols, cols * sizeof *row) == 0;
            }
            T_OK(same, "%zux%zu %s/%s: spmv_embed rows equal the dequantized matrix", rows, cols,
                 ENC[e], VAL[v]);
            packed_free(&p);
        }
    free(w);
    free(x);
    free(b);
    free(y1);
    free(y3);
    free(ya);
    free(row);
    free(yr);
    free(mag);
}

static void check_matrix(float *w, size_t rows, size_t cols) { check_matrix_encs(w, rows, cols, 0); }
static void check_shape(size_t rows, size_t cols) { check_matrix(make_matrix(rows, cols), rows, cols); }

// An n:m matrix (rows, cols): most groups hold n elements at random positions, some fewer
// (nm's padding), row 0 none, row 1 n in every group at the group's last columns, a -0.0
// stored in row 2; then every (value type, kernel set) of nm against the reference.
static void check_nm(size_t rows, size_t cols, unsigned n, unsigned m) {
    float *w = xcalloc(rows * cols, sizeof *w);
    for (size_t r = 1; r < rows; r++)
        for (size_t g = 0; g < cols / m; g++) {
            unsigned k = r == 1 || uniform() < 0.8 ? n : (unsigned)(next_u64() % n);
            for (unsigned placed = 0; placed < k;) {
                unsigned j = r == 1 ? m - 1 - placed : (unsigned)(next_u64() % m);
                float *x = &w[r * cols + g * m + j];
                if (*x != 0) continue;
                *x = (float)(uniform() * 2 - 1);
                if (*x == 0) *x = 0.5f;
                placed++;
            }
        }
    if (rows > 2) w[2 * cols] = w[2 * cols] != 0 ? -0.0f : w[2 * cols]; // stored, value 0
    enc_n = n;
    enc_m = m;
    check_matrix_encs(w, rows, cols, 1);
}

// Tiles steps of more than 255 blocks: panel 0 holds (0, 0), (0, 8400), (1, 8499),
// panel 1 (row 32 of 33) one element at column 5000.
static void check_far(void) {
    size_t rows = 33, cols = 8500;
    float *w = xcalloc(rows * cols, sizeof *w);
    w[0] = 0.5f;
    w[8400] = -1.5f;
    w[cols + 8499] = 2.0f;
    w[32 * cols + 5000] = 0.25f;
    check_matrix(w, rows, cols);
}

// Sell's padding (column 0, value 0) is never read: with x[0] = inf, a row that stores
// nothing at column 0 stays finite on every kernel set (0 * inf would be NaN), and one
// that does is inf or NaN, as its product is.
static void check_sell_padding(void) {
    size_t rows = 11, cols = 40; // two slices, the second of 3 rows; widths 1..5
    float *w = xcalloc(rows * cols, sizeof *w), *x = xmalloc(cols * sizeof *x), y[11];
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j <= r % 5; j++) w[r * cols + 1 + 7 * j] = 0.5f + (float)j;
    w[3 * cols] = 1.0f; // row 3 stores column 0
    for (size_t c = 0; c < cols; c++) x[c] = c ? 1.0f : INFINITY;
    Packed p;
    for (int v = PACK_F32; v <= PACK_F16; v++) {
        encode(&p, w, rows, cols, PACK_SELL, (PackVal)v);
        for (int run = 2 * SPMV_AVX512 + 1; run >= 2 * SPMV_PORTABLE; run--) { // (set, variant)
            int isa = run / 2;
            p.t.variant = run % 2;
            if ((p.t.variant && isa < SPMV_AVX2) || spmv_set_isa((SpmvIsa)isa) < 0) continue;
            spmv_forward(y, x, &p.t, NULL, 0);
            int ok = 1;
            for (size_t r = 0; r < rows; r++) {
                double want = 0;
                for (size_t j = 0; j <= r % 5; j++) want += 0.5 + (double)j;
                ok &= r == 3 ? !isfinite(y[r]) : y[r] == (float)want;
            }
            T_OK(ok, "sell/%s %s%s: padding is not read (x[0] = inf reaches only the row that stores column 0)", VAL[v],
                 spmv_isa_name((SpmvIsa)isa), p.t.variant ? " (no gather)" : "");
        }
        packed_free(&p);
    }
    free(w);
    free(x);
}

// pack_tensor_bytes counts what the kernels read.
static void check_bytes(void) {
    float w[4 * 10] = {0};
    w[3] = 1;
    w[25] = 2;
    Packed p;
    encode(&p, w, 4, 10, PACK_DELTA, PACK_I8);
    // index: 2 gap bytes; values 2; nnz_ptr and ix_ptr 5 u32 each; scales 4 f32
    T_OK(pack_tensor_bytes(&p.t) == 2 + 2 + 20 + 20 + 16, "pack_tensor_bytes of a delta/I8 tensor (%zu)",
         pack_tensor_bytes(&p.t));
    packed_free(&p);
}

// p against d, its folder (the same weights): model_eval bitwise, one-token decoding within
// 1e-5 with the same greedy tokens for 24 steps. what names p in the messages.
static void compare_models(const char *fixture, const char *what, Model *d, Model *p) {
    int rc = 0;
    // evaluation: bitwise the folder's
    int B = 2, T = 16;
    size_t N = (size_t)B * T, V = d->V;
    int32_t *tok = xmalloc(N * sizeof *tok);
    for (size_t i = 0; i < N; i++) tok[i] = (int32_t)(next_u64() % V);
    float *ld = xmalloc(N * V * sizeof *ld), *lp = xmalloc(N * V * sizeof *lp);
    ModelActs ad, ap;
    rc = model_acts_init(&ad, d, B, T, 0);
    if (rc == 0) rc = model_acts_init(&ap, p, B, T, 0);
    if (rc == 0) rc = model_eval(ld, NULL, d, &ad, tok, NULL);
    if (rc == 0) rc = model_eval(lp, NULL, p, &ap, tok, NULL);
    T_OK(rc == 0 && memcmp(ld, lp, N * V * sizeof *ld) == 0,
         "%s: model_eval logits of %s = the folder's, bit for bit", fixture, what);
    model_acts_free(&ad);
    model_acts_free(&ap);

    // decoding: spmv against BLAS, greedy from the folder's choices
    int steps = 24;
    KVCache cd, cp;
    rc = kvcache_init(&cd, d, steps);
    if (rc == 0) rc = kvcache_init(&cp, p, steps);
    double worst = 0;
    int same = 0;
    int32_t t = 1;
    for (int i = 0; rc == 0 && i < steps; i++) {
        const float *zd = model_forward_token(d, &cd, t, i), *zp = model_forward_token(p, &cp, t, i);
        if (!zd || !zp) { rc = -1; break; }
        double e = rel_err(zp, zd, V);
        if (e > worst) worst = e;
        int32_t bd = 0, bp = 0;
        for (size_t v = 1; v < V; v++) {
            if (zd[v] > zd[bd]) bd = (int32_t)v;
            if (zp[v] > zp[bp]) bp = (int32_t)v;
        }
        same += bd == bp;
        t = bd;
    }
    T_OK(rc == 0 && worst <= 1e-5, "%s: decoding from %s: logits within %.1e of the folder's (want 1e-5)",
         fixture, what, worst);
    T_OK(same == steps, "%s: decoding from %s: %d of %d greedy tokens the folder's", fixture, what, same, steps);
    kvcache_free(&cd);
    kvcache_free(&cp);
    free(tok);
    free(ld);
    free(lp);
}

// Keeps the 2 of every 4 weights of each row largest in |w|, the others +0.0 (a 2:4
// model; the fixtures hold -0.0 weights, which a pack stores).
static void prune_2_4(float *w, size_t numel) {
    for (size_t i = 0; i + 4 <= numel; i += 4) {
        size_t a = i, b = i + 1; // the largest two, |w[a]| >= |w[b]|
        if (fabsf(w[b]) > fabsf(w[a])) a = i + 1, b = i;
        for (size_t j = i + 2; j < i + 4; j++)
            if (fabsf(w[j]) > fabsf(w[a])) b = a, a = j;
            else if (fabsf(w[j]) > fabsf(w[b])) b = j;
        for (size_t j = i; j < i + 4; j++)
            if (j != a && j != b) w[j] = 0.0f;
    }
}

// The model folder a check saved (its weights and config.json) and its pack, removed.
static void saved_remove(const char *dir, const char *pack) {
    const char *files[] = {"model.safetensors", "config.json"};
    for (int i = 0; i < 2; i++) {
        char f[300];
        snprintf(f, sizeof f, "%s/%s", dir, files[i]);
        unlink(f);
    }
    rmdir(dir);
    unlink(pack);
}

// src (256): the fixture's folder; dir (256) and pack (300): this process's copy of it
// under TMPDIR (tag after its name) and its pack.
static void model_paths(char *src, char *dir, char *pack, const char *fixture, const char *tag) {
    snprintf(src, 256, "tests/fixtures/model/%s", fixture);
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, 256, "%s/test_spmv.%d.%s%s", tmp && *tmp ? tmp : "/tmp", (int)getpid(), fixture, tag);
    snprintf(pack, 300, "%s.pack", dir);
}

// nm: the fixture pruned 2:4 and packed with --index speed planned for AVX-512 (nm, the
// smallest), against its folder as check_model's packs are, on every kernel set.
static void check_model_nm(const char *fixture) {
    char src[256], dir[256], pack[300];
    model_paths(src, dir, pack, fixture, ".nm");
    Model m, d, p;
    int rc = model_load(&m, src);
    if (!T_OK(rc == 0, "%s 2:4: load %s", fixture, rc ? err_msg() : "")) return;
    for (int i = 0; i < m.n_info; i++)
        if (m.info[i].prunable) prune_2_4(m.params + m.info[i].offset, m.info[i].numel);
    rc = model_save(&m, dir, -1);
    model_free(&m);
    if (rc == 0) rc = model_load(&d, dir);
    pack_plan_isa(SPMV_AVX512); // (AVX2 and portable plans take a bitmap or dense: pack_write.c)
    if (rc == 0 && (rc = pack_write(pack, &d, QUANT_NONE, INDEX_SPEED)) < 0) model_free(&d);
    pack_plan_isa(spmv_isa());
    Pack pk;
    if (rc == 0 && pack_open(&pk, pack) == 0) {
        int nm = 0, prunable = 0;
        for (int i = 0; i < pk.n; i++)
            if (pk.t[i].prunable) prunable++, nm += pk.t[i].enc == PACK_NM && pk.t[i].nm_n == 2 && pk.t[i].nm_m == 4;
        T_OK(nm == prunable && nm > 0, "%s 2:4: --index speed (AVX-512) packs all %d prunable tensors nm 2:4 (%d)", fixture,
             prunable, nm);
        pack_close(&pk);
    }
    if (rc == 0 && (rc = model_open(&p, pack)) < 0) model_free(&d);
    if (!T_OK(rc == 0, "%s 2:4: save, pack and load the pack %s", fixture, rc ? err_msg() : "")) return;
    compare_models(fixture, "the nm 2:4 pack", &d, &p);
    model_free(&d);
    model_free(&p);
    saved_remove(dir, pack);
}

static void check_model(const char *fixture) {
    char src[256], dir[256], pack[300];
    model_paths(src, dir, pack, fixture, "");
    Model m, d, p;
    int rc = model_load(&m, src);
    if (!T_OK(rc == 0, "%s: load %s", fixture, rc ? err_msg() : "")) return;
    for (int i = 0; i < m.n_info; i++) // 90% of the prunable weights to zero
        if (m.info[i].prunable)
            for (size_t j = 0; j < m.info[i].numel; j++)
                if (uniform() < 0.9) m.params[m.info[i].offset + j] = 0;
    rc = model_save(&m, dir, -1);
    model_free(&m);
    if (rc == 0) rc = model_load(&d, dir);
    if (rc == 0 && (rc = pack_write(pack, &d, QUANT_NONE, INDEX_SPEED)) < 0) model_free(&d);
    if (rc == 0 && (rc = model_open(&p, pack)) < 0) model_free(&d);
    if (!T_OK(rc == 0, "%s: save, pack and load the pack %s", fixture, rc ? err_msg() : "")) return;
    T_OK(p.ext && p.n_params < d.n_params && model_numel(&p) == model_numel(&d),
         "%s: the pack's 2-D weights stay in the map (%zu floats in the block, %zu parameters)",
         fixture, p.n_params, model_numel(&p));

    compare_models(fixture, "the pack", &d, &p);
    int32_t tok[4] = {1, 2, 3, 4};

    // the folder saved in bf16, and the same with its 2-D weights as a dense bf16 store
    char dir16[300];
    snprintf(dir16, sizeof dir16, "%s.bf16", dir);
    Model f, g;
    rc = model_save(&d, dir16, ST_BF16);
    if (rc == 0) rc = model_load(&f, dir16);
    if (rc == 0 && (rc = model_load(&g, dir16)) < 0) model_free(&f);
    if (T_OK(rc == 0, "%s: save and load in bf16 %s", fixture, rc ? err_msg() : "")) {
        size_t block = g.n_params;
        model_dense_store(&g);
        T_OK(g.ext && g.n_params < block && g.dtype == ST_BF16 && model_numel(&g) == model_numel(&f),
             "%s: model_dense_store keeps the 2-D weights in bf16 (%zu floats left in the block)", fixture, g.n_params);
        compare_models(fixture, "the dense bf16 store", &f, &g);
        model_free(&f);
        model_free(&g);
    }
    model_unlink_saved(dir16);
    rmdir(dir16);

    ModelActs at;
    rc = model_acts_init(&at, &p, 1, 4, 1);
    T_OK(rc == 0 && model_forward(&p, &at, tok, NULL) < 0 && strstr(err_msg(), "packed"),
         "%s: model_forward on a packed model is an error (%s)", fixture, err_msg());
    if (rc == 0) model_acts_free(&at);
    T_OK(model_save(&p, dir, -1) < 0, "%s: model_save of a packed model is an error (%s)", fixture,
         err_msg());
    model_free(&d);
    model_free(&p);
    saved_remove(dir, pack);
}

int main(void) {
    for (int isa = SPMV_AVX512; isa > SPMV_PORTABLE; isa--)
        if (!spmv_isa_supported((SpmvIsa)isa))
            printf("skip - the %s kernels: this CPU lacks them (the other sets are checked)\n", spmv_isa_name((SpmvIsa)isa));
    check_shape(37, 13);     // tiny: cols not a multiple of 8, 16
    check_shape(45, 1100);   // long rows: every delta escape case, 64-column words + tail
    check_shape(300, 701);   // enough work to split over threads, tail of 61 columns
    check_shape(64, 2048);   // multiples of 64
    check_nm(37, 12, 2, 4);    // 2:4, a row of 12 bits in 2 bytes (padded); fewer than 16 a row
    check_nm(45, 1100, 2, 4);  // 2:4, rows of 550 elements: 34 steps of 16 and a tail of 6
    check_nm(300, 704, 4, 8);  // 4:8, threads
    check_nm(64, 2048, 2, 4);
    check_nm(33, 99, 1, 3);    // 1:3, 2-bit positions of 3 columns
    check_nm(20, 96, 2, 3);    // 2:3 (the AVX-512 permute path)
    check_nm(19, 90, 5, 9);    // 5:9 (the gather path: 5 does not divide 16)
    check_nm(17, 160, 8, 16);  // 8:16, 4-bit positions
    check_nm(23, 320, 16, 32); // 16:32, 5-bit positions (gather)
    check_nm(9, 40, 4, 5);     // 4:5, 3-bit positions
    check_nm(11, 64, 1, 2);    // 1:2
    check_bytes();
    check_sell_padding();
    for (int isa = SPMV_AVX512; isa >= SPMV_PORTABLE; isa--) { // every set the CPU has
        if (spmv_set_isa((SpmvIsa)isa) < 0) continue;
        printf("# kernels: %s\n", spmv_isa_name((SpmvIsa)isa));
        omp_set_num_threads(1);
        check_far();             // tiles: a step of 262 blocks
        omp_set_num_threads(2);
        check_model("llama");
        check_model("qwen3");
        check_model("llama_tied");
        check_model_nm("llama");
        check_model_nm("qwen3");
    }
    T_DONE();
}
