// pack_write.c: packed sparse checkpoints, writing: the per-tensor encoding choice,
// int8/int4 quantization, the manifest, the tar through libarchive; and unpacking a
// pack back into a Hugging Face folder. Both need a Model (nn/model.h), which the
// reader (pack.c) does not.
//
// The writer makes two passes over the tensors: the first encodes each one to learn
// its members' sizes and xxh64 (the manifest comes first in the tar and lists them),
// the second encodes again and writes. Encoding is deterministic, so the second pass
// reproduces the first; it costs one more pass over the weights instead of holding
// the whole pack in memory. The format: docs/formats.md ("Packed checkpoints").
#include "pack/pack_write.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/error.h"       // defines: ERR, TRY, xmalloc
#include "base/fileio.h"      // defines: AFile, path_join, file_read_all
#include "pack/pack_model.h"  // defines: pack_check_model
#include "pack/pack_format.h" // defines: pack_file_name, PACK_SUFFIX, pack_val_bytes, pack_name_ok

static int is_stored(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u != 0;
}

// --- writing: values ----------------------------------------------------------------------

// Writes stored values one by one, quantizing with the row's scale.
typedef struct {
    uint8_t *buf;
    PackVal val;
    size_t k;           // values written so far
} ValWriter;

static void val_put(ValWriter *vw, float x, float scale) {
    uint8_t *b = vw->buf;
    size_t k = vw->k++;
    switch (vw->val) {
    case PACK_F32: memcpy(b + 4 * k, &x, 4); break;
    case PACK_BF16: { uint16_t h = st_f32_to_bf16(x); memcpy(b + 2 * k, &h, 2); break; }
    case PACK_F16: { uint16_t h = st_f32_to_f16(x); memcpy(b + 2 * k, &h, 2); break; }
    case PACK_I8: case PACK_I4: {
        int qmax = vw->val == PACK_I8 ? 127 : 7;
        long q = scale > 0 ? lrintf(x / scale) : 0;
        if (q > qmax) q = qmax;
        if (q < -qmax) q = -qmax;
        if (vw->val == PACK_I8) b[k] = (uint8_t)(int8_t)q;
        else b[k / 2] |= (uint8_t)(((unsigned)q & 15u) << (4 * (k & 1)));
        break;
    }
    }
}

// --- writing: tiles ----------------------------------------------------------------------

// Where tiles_walk puts a tensor's tiles; with every pointer NULL it only counts.
typedef struct {
    uint32_t *pnnz, *pslots; // (panels+1) prefix counts of elements and slots
    uint32_t *masks;         // (slots)
    uint8_t *steps;          // (slots)
    uint8_t *cols;           // (nnz) column within the block
    ValWriter *vw;           // values, quantized with scales[row] when set
    const float *scales;
    size_t slots, nnz;       // so far
} TileOut;

static void tile_slot(TileOut *o, uint32_t mask, size_t step) {
    if (o->masks) {
        o->masks[o->slots] = mask;
        o->steps[o->slots] = (uint8_t)step;
    }
    o->slots++;
}

// The first stored column of row at or after c (cols when none).
static size_t next_stored(const float *row, size_t cols, size_t c) {
    while (c < cols && !is_stored(row[c])) c++;
    return c;
}

// w (rows, cols) as tiles (pack.h): per panel, the nonempty blocks in order, and in
// each as many slots as its fullest row has elements there, slot j holding every
// row's j-th element of the block. A step over more than 255 blocks goes in slots
// of step 255 and no element.
static void tiles_walk(TileOut *o, const float *w, size_t rows, size_t cols) {
    size_t pos[TILE]; // per row of the panel: its next stored column
    for (size_t r0 = 0; r0 < rows; r0 += TILE) {
        size_t n = rows - r0 < TILE ? rows - r0 : TILE, prev = 0;
        if (o->pnnz) {
            o->pnnz[r0 / TILE] = (uint32_t)o->nnz;
            o->pslots[r0 / TILE] = (uint32_t)o->slots;
        }
        for (size_t i = 0; i < n; i++) pos[i] = next_stored(w + (r0 + i) * cols, cols, 0);
        for (;;) {
            size_t c = cols;
            for (size_t i = 0; i < n; i++) c = pos[i] < c ? pos[i] : c;
            if (c == cols) break;
            size_t b = c / TILE, end = (b + 1) * TILE < cols ? (b + 1) * TILE : cols, step = b - prev;
            for (; step > 255; step -= 255) tile_slot(o, 0, 255);
            prev = b;
            for (;; step = 0) {
                uint32_t m = 0;
                for (size_t i = 0; i < n; i++) m |= (uint32_t)(pos[i] < end) << i;
                if (!m) break;
                tile_slot(o, m, step);
                for (size_t i = 0; i < n; i++) {
                    if (!(m >> i & 1)) continue;
                    const float *row = w + (r0 + i) * cols;
                    if (o->cols) {
                        o->cols[o->nnz] = (uint8_t)(pos[i] - b * TILE);
                        val_put(o->vw, row[pos[i]], o->scales ? o->scales[r0 + i] : 0);
                    }
                    o->nnz++;
                    pos[i] = next_stored(row, cols, pos[i] + 1);
                }
            }
        }
    }
    if (o->pnnz) {
        o->pnnz[(rows + TILE - 1) / TILE] = (uint32_t)o->nnz;
        o->pslots[(rows + TILE - 1) / TILE] = (uint32_t)o->slots;
    }
}

// --- writing: sell ------------------------------------------------------------------------

// w (rows, cols) as sell (pack.h): per slice of 8 rows, as many slots as its fullest row
// has elements, slot j holding each row's j-th element or padding. Fills ixptr
// (slices+1), nnz (rows+1), cols and the values when o is set; returns the slots.
typedef struct {
    uint32_t *ixptr, *nnz;
    uint16_t *cols;
    ValWriter *vw;
} SellOut;

static size_t sell_slots(SellOut *o, const float *w, size_t rows, size_t cols) {
    size_t slots = 0, stored = 0;
    for (size_t r0 = 0; r0 < rows; r0 += SELL) {
        size_t width = 0, n[SELL] = {0}, pos[SELL] = {0};
        for (size_t i = 0; i < SELL && r0 + i < rows; i++) {
            for (size_t c = 0; c < cols; c++) n[i] += (size_t)is_stored(w[(r0 + i) * cols + c]);
            if (n[i] > width) width = n[i];
        }
        if (o) {
            o->ixptr[r0 / SELL] = (uint32_t)slots;
            for (size_t i = 0; i < SELL && r0 + i < rows; i++) {
                o->nnz[r0 + i] = (uint32_t)stored;
                stored += n[i];
                pos[i] = next_stored(w + (r0 + i) * cols, cols, 0);
            }
            for (size_t j = 0; j < width; j++)
                for (size_t i = 0; i < SELL; i++) {
                    size_t e = SELL * (slots + j) + i;
                    if (r0 + i < rows && pos[i] < cols) { // a stored element; else padding (zeros)
                        const float *row = w + (r0 + i) * cols;
                        o->cols[e] = (uint16_t)pos[i];
                        o->vw->k = e;
                        val_put(o->vw, row[pos[i]], 0);
                        pos[i] = next_stored(row, cols, pos[i] + 1);
                    }
                }
        }
        slots += width;
    }
    if (o) {
        o->ixptr[(rows + SELL - 1) / SELL] = (uint32_t)slots;
        o->nnz[rows] = (uint32_t)stored;
    }
    return slots;
}

// --- writing: nm ---------------------------------------------------------------------------

// The most stored elements of any group of m columns of w (rows, cols), or m as soon as
// one group is full (then w is not N:M for this m).
static unsigned nm_most(const float *w, size_t rows, size_t cols, unsigned m) {
    unsigned most = 0;
    for (size_t i = 0; i < rows * cols; i += m) {
        unsigned k = 0;
        for (unsigned j = 0; j < m; j++) k += (unsigned)is_stored(w[i + j]);
        if (k == m) return m;
        if (k > most) most = k;
    }
    return most;
}

static size_t nm_bytes(PackVal val, size_t rows, size_t cols, unsigned n, unsigned m) {
    return pack_val_bytes(val, rows * (cols / m) * n) + rows * pack_nm_row_bytes(cols, n, m);
}

static unsigned nm_want_n, nm_want_m; // pack_plan_pattern's; 0: any pattern

void pack_plan_pattern(unsigned n, unsigned m) {
    nm_want_n = n;
    nm_want_m = m;
}

// The N:M pattern (pack.h's nm) w (rows, cols) follows in the fewest bytes, *m = 0 when
// none: each M from 2 to 32 that divides cols, N the most stored elements of its groups
// (none when the tensor stores nothing); only pack_plan_pattern's when it was given, N at
// most its N.
static void nm_pick(unsigned *n, unsigned *m, const float *w, size_t rows, size_t cols, PackVal val) {
    size_t best = SIZE_MAX;
    *n = *m = 0;
    for (unsigned mm = 2; mm <= NM_M_MAX; mm++) {
        if (cols % mm || (nm_want_m && mm != nm_want_m)) continue;
        unsigned nn = nm_most(w, rows, cols, mm);
        if (nn == 0) return; // no stored element: the other encodings store nothing
        if (nn >= mm || (nm_want_n && nn > nm_want_n)) continue;
        if (nm_want_n) nn = nm_want_n; // the pattern asked for, even where the weights hold fewer
        size_t b = nm_bytes(val, rows, cols, nn, mm);
        if (b < best) best = b, *n = nn, *m = mm;
    }
}

// w (rows, cols) as nm n:m: per row, per group its stored columns, then its first unused
// ones (value +0.0) to n; positions into ix (pack_nm_row_bytes a row, zeroed), values
// into vw, quantized with scales[row] when set.
static void nm_encode(uint8_t *ix, ValWriter *vw, const float *scales, const float *w, size_t rows, size_t cols,
                      unsigned n, unsigned m) {
    unsigned bits = pack_nm_bits(m);
    size_t stride = pack_nm_row_bytes(cols, n, m);
    for (size_t r = 0; r < rows; r++) {
        uint8_t *row = ix + r * stride;
        size_t at = 0; // bit offset in the row
        for (size_t g = 0; g < cols / m; g++) {
            const float *x = w + r * cols + g * m;
            uint32_t keep = 0;
            unsigned k = 0;
            for (unsigned j = 0; j < m; j++)
                if (is_stored(x[j])) keep |= 1u << j, k++;
            for (unsigned j = 0; j < m && k < n; j++)
                if (!(keep >> j & 1)) keep |= 1u << j, k++;
            for (unsigned j = 0; j < m; j++) {
                if (!(keep >> j & 1)) continue;
                for (unsigned b = 0; b < bits; b++, at++) row[at / 8] |= (uint8_t)((j >> b & 1) << (at % 8));
                val_put(vw, is_stored(x[j]) ? x[j] : 0.0f, scales ? scales[r] : 0);
            }
        }
    }
}

// --- writing: the plan of one tensor ---------------------------------------------------

typedef struct {
    PackEnc enc;
    PackVal val;
    size_t rows, cols;
    size_t nnz;          // stored elements (rows*cols when dense)
    size_t delta_bytes;  // of the delta stream, whichever encoding is chosen
    size_t slots;        // of the tiles, whichever encoding is chosen
    size_t sell_slots;   // of the sell, whichever encoding is chosen
    unsigned nm_n, nm_m; // the N:M pattern the tensor follows (nm_pick), nm_m 0 when none
    double bytes;        // prunable: the chosen encoding's bytes
    double min_bytes;    // prunable: the fewest bytes of any encoding (--index size's choice)
    unsigned char ok[PACK_N_ENC]; // prunable: the encodings that can hold the tensor
    size_t stored;       // prunable: its stored elements (nnz of the sparse encodings)
} Plan;

static void dims_of(size_t *rows, size_t *cols, const ParamInfo *pi) {
    *rows = pi->ndim == 2 ? (size_t)pi->shape[0] : 1;
    *cols = pi->ndim == 2 ? (size_t)pi->shape[1] : (size_t)pi->shape[0];
}

// The decoding work of each encoding beyond its bytes, in bytes memory delivers in the same
// time: a bitmap step (32 columns of a row), a delta element and a delta row, a tiles
// slot, a dense element (0 where dense rows read at memory speed), a sell slot (8 rows'
// elements). One set per kernel set (spmv.h), fitted to one-thread decode times of
// bench/decode.sh's 220M model with every prunable tensor forced to one encoding
// (bench/decode_encodings.sh, 2026-11-26, Xeon Emerald Rapids; docs/benchmarks.md has
// the table), so that the encoding picked is within 5% of the fastest of that set at
// 70, 90, 95 and 99% sparsity: AVX-512 tiles to 95% and sell at 99%; AVX2 bitmap at 70%
// and sell from 90% (its tiles need 4 lane permutes and 3 blends per 8 rows where AVX-512
// has one vpermt2ps per 16: 118 against 32 a slot); portable delta, sell at 99%. Any
// sell cost from 12 to 20 (AVX-512), 0 to 26 (AVX2) and 52 to 140 (portable) ranks them so.
// The nm element (per stored element, padding included) was measured apart, on this
// repository's 2026-11-29 host (AMD EPYC, AVX-512; bench_decode, 1 thread, the 220M model
// pruned 2:4 by best-mask --pattern, every prunable tensor forced to one encoding;
// docs/benchmarks.md): AVX-512 nm 20.3 ms a token, tiles 18.9, bitmap 20.5; AVX2 nm 31.5,
// bitmap 20.7, tiles 24.1; portable nm 100, bitmap 70. A line through tiles and bitmap
// fits 2.4 for AVX-512's nm, 10 for AVX2's and 14 for the portable loop. AVX-512's is set
// to 1.0, under the fit: within 7% of tiles' time at 0.71 of its bytes, nm is what an
// N:M model should get by default there (issue 39), and a pack planned so is the smallest
// too. AVX2 plans keep a bitmap or dense (its nm is 1.5x slower than its bitmap at the same
// bytes, 2:4), portable ones dense.
#define NM_COST_AVX512 1.0
#define NM_COST_AVX2 10.0
#define NM_COST_PORTABLE 14.0
typedef struct { double bitmap_step, delta_elem, delta_row, tiles_slot, dense_elem, sell_slot, nm_elem; } Costs;
static const Costs COSTS[3] = {
    [SPMV_AVX512] = {39, 6, 300, 32, 0, 16, NM_COST_AVX512},
    [SPMV_AVX2] = {32, 4.4, 90, 118, 0, 16, NM_COST_AVX2},
    [SPMV_PORTABLE] = {150, 6, 300, 150, 2, 96, NM_COST_PORTABLE},
};
static int plan_isa = -1; // -1: spmv_isa() at the first plan

void pack_plan_isa(SpmvIsa isa) { plan_isa = isa; }

// Chooses the encoding by pl's index rule (pack.h, PackIndex; ties: dense, bitmap,
// delta, tiles, sell). Sparse encodings need nnz to fit the u32 prefix counts, delta its
// stream to fit ixptr, tiles and sell their slots to fit theirs; sell F32/BF16/F16
// values and at most 65536 columns (a forced encoding that cannot hold the tensor
// falls back to the fewest bytes).
static int plan_tensor(Plan *pl, const ParamInfo *pi, const float *w, PackVal dval, PackQuant q,
                       PackIndex index, const char *path) {
    memset(pl, 0, sizeof *pl);
    dims_of(&pl->rows, &pl->cols, pi);
    size_t rows = pl->rows, cols = pl->cols, n = rows * cols;
    pl->enc = PACK_DENSE;
    pl->val = pi->prunable ? pack_val_of_quant(q, dval) : dval;
    pl->nnz = n;
    if (!pi->prunable) return 0;
    size_t nnz = 0, db = 0;
    for (size_t r = 0; r < rows; r++) {
        const float *row = w + r * cols;
        size_t next = 0; // first column after the previous stored element
        for (size_t c = 0; c < cols; c++) {
            if (!is_stored(row[c])) continue;
            if (pack_val_is_quant(pl->val) && !isfinite(row[c]))
                return ERR("%s: tensor %s row %zu column %zu is %g: cannot quantize", path, pi->name,
                           r, c, (double)row[c]);
            // a finite weight past bf16's largest (3.3895e38) would round to inf
            if (pl->val == PACK_BF16 && dval != PACK_BF16 && isfinite(row[c]) &&
                (st_f32_to_bf16(row[c]) & 0x7fff) == 0x7f80)
                return ERR("%s: tensor %s row %zu column %zu is %g, beyond bf16's range (3.39e38): --quant bf16 "
                           "would make it inf", path, pi->name, r, c, (double)row[c]);
            size_t g = c - next;
            db += g / 255 + 1;
            next = c + 1;
            nnz++;
        }
    }
    pl->bytes = pl->min_bytes = (double)pack_val_bytes(pl->val, n) + (pack_val_is_quant(pl->val) ? 4.0 * rows : 0);
    if (nnz > UINT32_MAX) return 0;
    TileOut count = {0};
    tiles_walk(&count, w, rows, cols);
    pl->delta_bytes = db;
    pl->slots = count.slots;
    pl->sell_slots = sell_slots(NULL, w, rows, cols);
    if (pi->ndim == 2) nm_pick(&pl->nm_n, &pl->nm_m, w, rows, cols, pl->val);
    size_t nm_nnz = pl->nm_m ? rows * (cols / pl->nm_m) * pl->nm_n : 0;
    size_t scales = pack_val_is_quant(pl->val) ? 4 * rows : 0;
    size_t vals = pack_val_bytes(pl->val, nnz) + scales, panels = (rows + TILE - 1) / TILE;
    size_t slices = (rows + SELL - 1) / SELL, ss = pl->sell_slots;
    // Per encoding: usable, bytes, and bytes plus decoding work.
    int ok[PACK_N_ENC] = {1, 1, db <= UINT32_MAX, count.slots <= UINT32_MAX,
                          ss <= UINT32_MAX && cols <= SELL_COLS_MAX && !pack_val_is_quant(pl->val),
                          pl->nm_m && nm_nnz <= UINT32_MAX};
    double bytes[PACK_N_ENC] = {
        (double)(pack_val_bytes(pl->val, n) + scales),
        (double)(4 * (rows + 1) + rows * ((cols + 7) / 8) + vals),
        (double)(8 * (rows + 1) + db + vals),
        (double)(8 * (panels + 1) + 5 * count.slots + nnz + vals),
        (double)(4 * (rows + 1) + 4 * (slices + 1) + SELL * ss * 2 + pack_val_bytes(pl->val, SELL * ss)),
        pl->nm_m ? (double)(nm_bytes(pl->val, rows, cols, pl->nm_n, pl->nm_m) + scales) : 0,
    };
    if (plan_isa < 0) plan_isa = spmv_isa();
    const Costs *k = &COSTS[plan_isa];
    double work[PACK_N_ENC] = {k->dense_elem * (double)n,
                               k->bitmap_step * (double)rows * (double)((cols + TILE - 1) / TILE),
                               k->delta_elem * (double)nnz + k->delta_row * (double)rows,
                               k->tiles_slot * (double)count.slots, k->sell_slot * (double)ss,
                               k->nm_elem * (double)nm_nnz};
    int best = 0;
    if (index == INDEX_DENSE) best = PACK_DENSE;
    else if (index == INDEX_BITMAP) best = PACK_BITMAP;
    else if (index == INDEX_DELTA && ok[PACK_DELTA]) best = PACK_DELTA;
    else if (index == INDEX_TILES && ok[PACK_TILES]) best = PACK_TILES;
    else if (index == INDEX_SELL && ok[PACK_SELL]) best = PACK_SELL;
    else if (index == INDEX_NM && ok[PACK_NM]) best = PACK_NM;
    else
        for (int e = 1; e < PACK_N_ENC; e++) {
            double ce = bytes[e] + (index == INDEX_SPEED ? work[e] : 0);
            double cb = bytes[best] + (index == INDEX_SPEED ? work[best] : 0);
            if (ok[e] && ce < cb) best = e;
        }
    pl->enc = (PackEnc)best;
    for (int e = 0; e < PACK_N_ENC; e++) pl->ok[e] = (unsigned char)ok[e];
    pl->stored = nnz;
    if (pl->enc != PACK_DENSE) pl->nnz = pl->enc == PACK_NM ? nm_nnz : nnz;
    pl->bytes = pl->min_bytes = bytes[best];
    for (int e = 0; e < PACK_N_ENC; e++)
        if (ok[e] && bytes[e] < pl->min_bytes) pl->min_bytes = bytes[e];
    return 0;
}

// --- writing: encoding one tensor into its members ------------------------------------

typedef struct {
    char name[MEMBER_NAME_MAX + 1];
    const uint8_t *data;
    size_t size;
    uint8_t *owned;      // freed by blobs_free (data == owned), or NULL when borrowed
    uint64_t xxh64;
} Blob;

static void blobs_free(Blob *b, int n) {
    for (int i = 0; i < n; i++) free(b[i].owned);
}

static Blob *blob_new(Blob *b, int *n, const char *tensor, int suffix, size_t size) {
    Blob *x = &b[(*n)++];
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s%s", tensor, PACK_SUFFIX[suffix]);
    x->owned = xcalloc(size ? size : 1, 1);
    x->data = x->owned;
    x->size = size;
    return x;
}

// scale[r] = max |w| of row r / 127 (I8) or / 7 (I4).
static void row_scales(float *scales, const float *w, size_t rows, size_t cols, PackVal val) {
    float qmax = val == PACK_I8 ? 127.0f : 7.0f;
    for (size_t r = 0; r < rows; r++) {
        float m = 0;
        for (size_t c = 0; c < cols; c++) m = fmaxf(m, fabsf(w[r * cols + c]));
        scales[r] = m / qmax;
    }
}

// The members of one tensor as planned (b holds up to 6). An F32 dense tensor is
// borrowed from the weights, everything else is a fresh buffer.
static void encode_tensor(Blob *b, int *nb, const Plan *pl, const ParamInfo *pi, const float *w) {
    size_t rows = pl->rows, cols = pl->cols;
    *nb = 0;
    float *scales = NULL;
    if (pack_val_is_quant(pl->val)) {
        scales = xmalloc(rows * sizeof *scales);
        row_scales(scales, w, rows, cols, pl->val);
    }
    if (pl->enc == PACK_DENSE) {
        if (pl->val == PACK_F32) {
            Blob *x = &b[(*nb)++];
            memset(x, 0, sizeof *x);
            snprintf(x->name, sizeof x->name, "%s", pi->name);
            x->data = (const uint8_t *)w;
            x->size = 4 * rows * cols;
        } else {
            ValWriter vw = {blob_new(b, nb, pi->name, S_DENSE, pack_val_bytes(pl->val, rows * cols))->owned, pl->val, 0};
            for (size_t r = 0; r < rows; r++)
                for (size_t c = 0; c < cols; c++) val_put(&vw, w[r * cols + c], scales ? scales[r] : 0);
        }
    } else if (pl->enc == PACK_NM) { // members in suffix order: index, values
        uint8_t *ix = blob_new(b, nb, pi->name, S_INDEX, rows * pack_nm_row_bytes(cols, pl->nm_n, pl->nm_m))->owned;
        ValWriter vw = {blob_new(b, nb, pi->name, S_VALUES, pack_val_bytes(pl->val, pl->nnz))->owned, pl->val, 0};
        nm_encode(ix, &vw, scales, w, rows, cols, pl->nm_n, pl->nm_m);
        CHECK(vw.k == pl->nnz, "pack: %s: plan and nm disagree", pi->name);
    } else if (pl->enc == PACK_SELL) { // members in suffix order: nnz, index, ixptr, values
        size_t entries = SELL * pl->sell_slots;
        SellOut o = {0};
        o.nnz = (uint32_t *)blob_new(b, nb, pi->name, S_NNZ, 4 * (rows + 1))->owned;
        o.cols = (uint16_t *)blob_new(b, nb, pi->name, S_INDEX, 2 * entries)->owned;
        o.ixptr = (uint32_t *)blob_new(b, nb, pi->name, S_IXPTR, 4 * ((rows + SELL - 1) / SELL + 1))->owned;
        ValWriter vw = {blob_new(b, nb, pi->name, S_VALUES, pack_val_bytes(pl->val, entries))->owned, pl->val, 0};
        o.vw = &vw;
        size_t slots = sell_slots(&o, w, rows, cols);
        CHECK(slots == pl->sell_slots && o.nnz[rows] == pl->nnz, "pack: %s: plan and sell disagree", pi->name);
    } else if (pl->enc == PACK_TILES) {
        size_t panels = (rows + TILE - 1) / TILE;
        TileOut o = {0};
        o.pnnz = (uint32_t *)blob_new(b, nb, pi->name, S_NNZ, 4 * (panels + 1))->owned;
        o.cols = blob_new(b, nb, pi->name, S_INDEX, pl->nnz)->owned;
        o.pslots = (uint32_t *)blob_new(b, nb, pi->name, S_IXPTR, 4 * (panels + 1))->owned;
        uint8_t *sl = blob_new(b, nb, pi->name, S_SLOTS, 5 * pl->slots)->owned;
        o.masks = (uint32_t *)sl;
        o.steps = sl + 4 * pl->slots;
        ValWriter vw = {blob_new(b, nb, pi->name, S_VALUES, pack_val_bytes(pl->val, pl->nnz))->owned, pl->val, 0};
        o.vw = &vw;
        o.scales = scales;
        tiles_walk(&o, w, rows, cols);
        CHECK(o.nnz == pl->nnz && o.slots == pl->slots && vw.k == pl->nnz, "pack: %s: plan and tiles disagree", pi->name);
    } else {
        uint32_t *nnz = (uint32_t *)blob_new(b, nb, pi->name, S_NNZ, 4 * (rows + 1))->owned;
        size_t stride = (cols + 7) / 8;
        Blob *ix = blob_new(b, nb, pi->name, S_INDEX, pl->enc == PACK_BITMAP ? rows * stride : pl->delta_bytes);
        uint32_t *ixptr = NULL;
        if (pl->enc == PACK_DELTA) ixptr = (uint32_t *)blob_new(b, nb, pi->name, S_IXPTR, 4 * (rows + 1))->owned;
        ValWriter vw = {blob_new(b, nb, pi->name, S_VALUES, pack_val_bytes(pl->val, pl->nnz))->owned, pl->val, 0};
        size_t db = 0;
        for (size_t r = 0; r < rows; r++) {
            const float *row = w + r * cols;
            nnz[r] = (uint32_t)vw.k;
            if (ixptr) ixptr[r] = (uint32_t)db;
            size_t next = 0;
            for (size_t c = 0; c < cols; c++) {
                if (!is_stored(row[c])) continue;
                if (pl->enc == PACK_BITMAP) {
                    ix->owned[r * stride + c / 8] |= (uint8_t)(1u << (c % 8));
                } else {
                    size_t g = c - next;
                    for (; g >= 255; g -= 255) ix->owned[db++] = 255;
                    ix->owned[db++] = (uint8_t)g;
                    next = c + 1;
                }
                val_put(&vw, row[c], scales ? scales[r] : 0);
            }
        }
        nnz[rows] = (uint32_t)vw.k;
        if (ixptr) ixptr[rows] = (uint32_t)db;
        CHECK(vw.k == pl->nnz && (!ixptr || db == pl->delta_bytes), "pack: %s: plan and encoding disagree", pi->name);
    }
    if (scales) {
        Blob *s = blob_new(b, nb, pi->name, S_SCALES, 4 * rows);
        memcpy(s->owned, scales, 4 * rows);
        free(scales);
    }
}

// --- in memory: one tensor again, in another encoding ----------------------------------

// *out = the members b (nb) of a tensor named like t, copied into one allocation (each
// stream at a multiple of 64 bytes), returned.
static void *tensor_of_blobs(PackTensor *out, const PackTensor *t, const Plan *pl, const Blob *b, int nb) {
    size_t total = 0, at[8], len = strlen(t->name);
    for (int i = 0; i < nb; i++) at[i] = total, total += (b[i].size + 63) / 64 * 64;
    uint8_t *buf = xcalloc(total ? total : 1, 1);
    *out = *t;
    out->enc = pl->enc;
    out->nnz = pl->nnz;
    out->nnz_ptr = out->ix_ptr = out->masks = NULL;
    out->index = out->steps = NULL;
    out->index_bytes = out->slots = 0;
    out->scales = NULL;
    out->nm_n = pl->enc == PACK_NM ? pl->nm_n : 0;
    out->nm_m = pl->enc == PACK_NM ? pl->nm_m : 0;
    for (int i = 0; i < nb; i++) {
        uint8_t *d = buf + at[i];
        memcpy(d, b[i].data, b[i].size);
        int sfx = 0;
        for (int s = 0; s < S_N; s++)
            if (strcmp(b[i].name + len, PACK_SUFFIX[s]) == 0) sfx = s;
        switch (sfx) {
        case S_DENSE: case S_VALUES: out->values = d, out->values_bytes = b[i].size; break;
        case S_NNZ: out->nnz_ptr = (const uint32_t *)d; break;
        case S_INDEX: out->index = d, out->index_bytes = b[i].size; break;
        case S_IXPTR: out->ix_ptr = (const uint32_t *)d; break;
        case S_SLOTS: out->slots = b[i].size / 5, out->masks = (const uint32_t *)d, out->steps = d + 4 * out->slots; break;
        case S_SCALES: out->scales = (const float *)d; break;
        }
    }
    if (pl->enc == PACK_SELL) out->slots = pl->sell_slots;
    return buf;
}

int pack_tensor_encodings(PackTensor *out, void **mem, const PackTensor *t, size_t rows, unsigned encs) {
    for (int e = 0; e < PACK_N_ENC; e++) mem[e] = NULL;
    if (t->ndim != 2 || pack_val_is_quant(t->val)) return 0;
    size_t cols = t->cols;
    if (rows == 0 || rows > t->rows) rows = t->rows;
    float *w = xmalloc(rows * cols * sizeof *w);
    pack_decode_rows(w, t, 0, rows);
    ParamInfo pi = {0};
    snprintf(pi.name, sizeof pi.name, "%s", t->name);
    pi.ndim = 2, pi.shape[0] = (int64_t)rows, pi.shape[1] = (int64_t)cols, pi.numel = rows * cols, pi.prunable = 1;
    unsigned want_n = nm_want_n, want_m = nm_want_m; // a tensor with its own pattern keeps it
    if (t->enc == PACK_NM) nm_want_n = t->nm_n, nm_want_m = t->nm_m;
    Plan pl;
    int rc = plan_tensor(&pl, &pi, w, t->val, QUANT_NONE, INDEX_SIZE, t->name); // (one plan: every encoding's counts)
    nm_want_n = want_n, nm_want_m = want_m;
    int made = 0;
    for (int e = 0; rc == 0 && e < PACK_N_ENC; e++) {
        if (!pl.ok[e] || pl.val != t->val || !(encs >> e & 1)) continue;
        Plan one = pl;
        one.enc = (PackEnc)e;
        one.nnz = e == PACK_DENSE ? rows * cols : e == PACK_NM ? rows * (cols / pl.nm_m) * pl.nm_n : pl.stored;
        Blob b[8];
        int nb = 0;
        encode_tensor(b, &nb, &one, &pi, w);
        mem[e] = tensor_of_blobs(&out[e], t, &one, b, nb);
        out[e].rows = rows, out[e].shape[0] = (int64_t)rows;
        blobs_free(b, nb);
        made++;
    }
    free(w);
    return rc < 0 ? -1 : made;
}

// --- writing: the tar -------------------------------------------------------------------

// libarchive's error with the reason it keeps in archive_errno ("Write error" alone
// does not say that the disk is full).
static const char *ar_err(struct archive *a) {
    static char s[256];
    const char *what = archive_error_string(a);
    int e = archive_errno(a);
    snprintf(s, sizeof s, "%s%s%s", what ? what : "libarchive error", e > 0 ? ": " : "", e > 0 ? strerror(e) : "");
    return s;
}

static int tar_add(struct archive *a, const char *path, const char *name, const uint8_t *data, size_t size) {
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, name);
    archive_entry_set_size(e, (la_int64_t)size);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_mtime(e, 0, 0); // same inputs, same bytes
    int rc = archive_write_header(a, e);
    archive_entry_free(e);
    if (rc != ARCHIVE_OK) return ERR("%s: member %s: %s", path, name, ar_err(a));
    for (size_t off = 0; off < size;) {
        size_t n = size - off < ((size_t)1 << 24) ? size - off : (size_t)1 << 24;
        la_ssize_t got = archive_write_data(a, data + off, n);
        if (got <= 0) return ERR("%s: member %s: %s", path, name, ar_err(a));
        off += (size_t)got;
    }
    return 0;
}

static json_t *json_hex64(uint64_t x) {
    char s[17];
    snprintf(s, sizeof s, "%016llx", (unsigned long long)x);
    return json_string(s);
}

typedef struct {
    char *name;
    char *data;
    size_t size;
} FileBlob;

// config.json (as loaded) and the tokenizer files of m->src_dir that exist.
static int files_collect(FileBlob *f, int *n, const Model *m) {
    *n = 0;
    f[0].name = xstrdup("config.json");
    f[0].data = xmalloc(m->config_len + 1);
    memcpy(f[0].data, m->config_json, m->config_len);
    f[0].size = m->config_len;
    *n = 1;
    for (int i = 1; m->src_dir && i < PACK_N_FILES; i++) {
        char *path = path_join(m->src_dir, pack_file_name(i));
        int rc = 0;
        if (access(path, R_OK) == 0) {
            rc = file_read_all(&f[*n].data, &f[*n].size, path);
            if (rc == 0) f[(*n)++].name = xstrdup(pack_file_name(i));
        }
        free(path);
        TRY(rc);
    }
    return 0;
}

static void files_free(FileBlob *f, int n) {
    for (int i = 0; i < n; i++) { free(f[i].name); free(f[i].data); }
}

// The manifest's JSON text (compact: no whitespace, so no byte of it is meaningless).
static char *manifest_build(const Model *m, PackQuant quant, StDtype dt, const Plan *plans,
                            const FileBlob *files, int nfiles, const Blob *members, int nm) {
    json_t *root = json_object();
    json_object_set_new(root, "format", json_string("best-pack"));
    int version = 2; // the lowest that holds the encodings (pack_format.h)
    for (int i = 0; i < m->n_info; i++) {
        if (plans[i].enc == PACK_SELL && version < 3) version = 3;
        if (plans[i].enc == PACK_NM) version = 4;
    }
    json_object_set_new(root, "version", json_integer(version));
    json_object_set_new(root, "quant", json_string(pack_quant_name(quant)));
    json_object_set_new(root, "dtype", json_string(st_dtype_name(dt)));
    json_t *mem = json_array();
    for (int i = 0; i < nfiles; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(files[i].name));
        json_object_set_new(o, "size", json_integer((json_int_t)files[i].size));
        json_object_set_new(o, "xxh64", json_hex64(XXH64(files[i].data, files[i].size, 0)));
        json_array_append_new(mem, o);
    }
    for (int i = 0; i < nm; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(members[i].name));
        json_object_set_new(o, "size", json_integer((json_int_t)members[i].size));
        json_object_set_new(o, "xxh64", json_hex64(members[i].xxh64));
        json_array_append_new(mem, o);
    }
    json_object_set_new(root, "members", mem);
    json_t *ts = json_array();
    for (int i = 0; i < m->n_info; i++) {
        const ParamInfo *pi = &m->info[i];
        json_t *o = json_object(), *shape = json_array();
        json_object_set_new(o, "name", json_string(pi->name));
        for (int d = 0; d < pi->ndim; d++) json_array_append_new(shape, json_integer(pi->shape[d]));
        json_object_set_new(o, "shape", shape);
        json_object_set_new(o, "dtype", json_string(st_dtype_name(dt)));
        json_object_set_new(o, "prunable", json_boolean(pi->prunable));
        json_object_set_new(o, "encoding", json_string(pack_enc_name(plans[i].enc)));
        json_object_set_new(o, "values", json_string(pack_val_name(plans[i].val)));
        json_object_set_new(o, "nnz", json_integer((json_int_t)plans[i].nnz));
        if (plans[i].enc == PACK_NM) {
            json_t *pat = json_array();
            json_array_append_new(pat, json_integer(plans[i].nm_n));
            json_array_append_new(pat, json_integer(plans[i].nm_m));
            json_object_set_new(o, "pattern", pat);
        }
        json_array_append_new(ts, o);
    }
    json_object_set_new(root, "tensors", ts);
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    CHECK(text, "pack: cannot serialise the manifest");
    // The manifest protects itself: its last key is the xxh64 of every byte before it.
    size_t n = strlen(text) - 1; // without the closing brace
    char *out = xmalloc(n + MANIFEST_TAIL + 1);
    memcpy(out, text, n);
    snprintf(out + n, MANIFEST_TAIL + 1, ",\"xxh64\":\"%016llx\"}", (unsigned long long)XXH64(text, n, 0));
    free(text);
    return out;
}

// Pass 2: the tar itself, into an open temp file.
static int tar_write(int fd, const char *path, const char *manifest, const FileBlob *files, int nfiles,
                     const Model *m, const Plan *plans, const Blob *members) {
    struct archive *a = archive_write_new();
    int rc = 0;
    // ustar with no filter and no padding after the end-of-archive blocks: the file
    // ends exactly 1024 zero bytes after the last member, so any truncation shows.
    if (archive_write_set_format_ustar(a) != ARCHIVE_OK || archive_write_add_filter_none(a) != ARCHIVE_OK ||
        archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK || archive_write_open_fd(a, fd) != ARCHIVE_OK)
        rc = ERR("%s: %s", path, ar_err(a));
    if (rc == 0) rc = tar_add(a, path, "manifest.json", (const uint8_t *)manifest, strlen(manifest));
    for (int i = 0; rc == 0 && i < nfiles; i++)
        rc = tar_add(a, path, files[i].name, (const uint8_t *)files[i].data, files[i].size);
    int k = 0; // index into members, the flat list of pass 1
    for (int i = 0; rc == 0 && i < m->n_info; i++) {
        Blob b[S_N];
        int nb;
        encode_tensor(b, &nb, &plans[i], &m->info[i], m->params + m->info[i].offset);
        for (int j = 0; rc == 0 && j < nb; j++, k++) {
            CHECK(strcmp(b[j].name, members[k].name) == 0 && b[j].size == members[k].size &&
                      XXH64(b[j].data, b[j].size, 0) == members[k].xxh64,
                  "pack: %s: the second encoding differs from the first", b[j].name);
            rc = tar_add(a, path, b[j].name, b[j].data, b[j].size);
        }
        blobs_free(b, nb);
    }
    if (rc == 0 && archive_write_close(a) != ARCHIVE_OK) rc = ERR("%s: %s", path, ar_err(a));
    archive_write_free(a);
    return rc;
}

int pack_write(const char *path, const Model *m, PackQuant quant, PackIndex index) {
    return pack_write_stats(NULL, path, m, quant, index);
}

int pack_write_stats(PackWriteStats *st, const char *path, const Model *m, PackQuant quant, PackIndex index) {
    TRY(model_need_folder(m, "packing"));
    PackVal dval;
    if (pack_val_of_dtype(&dval, m->dtype) < 0)
        return ERR("%s: cannot pack weights of dtype %s (F32, BF16 or F16)", path, st_dtype_name(m->dtype));
    if ((unsigned)quant > QUANT_INT4) return ERR("%s: unknown quantization %d", path, (int)quant);
    if ((unsigned)index > INDEX_NM) return ERR("%s: unknown index rule %d", path, (int)index);
    for (int i = 0; i < m->n_info; i++)
        if (!pack_name_ok(m->info[i].name, TENSOR_NAME_MAX))
            return ERR("%s: tensor name %s is not a plain name of at most %d characters", path,
                       m->info[i].name, TENSOR_NAME_MAX);
    Plan *plans = xcalloc((size_t)m->n_info + 1, sizeof *plans);
    if (st) memset(st, 0, sizeof *st);
    for (int i = 0; i < m->n_info; i++) {
        if (plan_tensor(&plans[i], &m->info[i], m->params + m->info[i].offset, dval, quant, index, path) < 0) {
            free(plans);
            return -1;
        }
        if (st && m->info[i].prunable) {
            st->prunable_bytes += plans[i].bytes;
            st->prunable_bytes_size += plans[i].min_bytes;
        }
    }
    FileBlob files[PACK_N_FILES];
    int nfiles, rc = files_collect(files, &nfiles, m);
    // Pass 1: every member's name, size and hash.
    Blob *members = xcalloc((size_t)m->n_info * S_N + 1, sizeof *members);
    int nm = 0;
    for (int i = 0; rc == 0 && i < m->n_info; i++) {
        Blob b[S_N];
        int nb;
        encode_tensor(b, &nb, &plans[i], &m->info[i], m->params + m->info[i].offset);
        for (int j = 0; j < nb; j++) {
            members[nm] = b[j];
            members[nm].xxh64 = XXH64(b[j].data, b[j].size, 0);
            members[nm].data = NULL;
            members[nm++].owned = NULL;
        }
        blobs_free(b, nb);
    }
    char *manifest = NULL;
    if (rc == 0) manifest = manifest_build(m, quant, m->dtype, plans, files, nfiles, members, nm);
    AFile f = {0};
    if (rc == 0) rc = afile_open(&f, path);
    if (rc == 0) {
        fflush(f.fp);
        rc = tar_write(fileno(f.fp), path, manifest, files, nfiles, m, plans, members);
        if (rc == 0) rc = afile_commit(&f);
        else afile_abort(&f);
    }
    free(manifest);
    free(members);
    files_free(files, nfiles);
    free(plans);
    return rc;
}

// --- unpacking ------------------------------------------------------------------------

static int write_file(const char *dir, const char *name, const void *data, size_t n) {
    char *path = path_join(dir, name);
    AFile f;
    int rc = afile_open(&f, path);
    if (rc == 0 && n && fwrite(data, 1, n, f.fp) != n) {
        rc = ERR("%s: write failed: %s", path, strerror(errno));
        afile_abort(&f);
    } else if (rc == 0) {
        rc = afile_commit(&f);
    }
    free(path);
    return rc;
}

// Every parameter of the model that config.json describes, from the pack.
static int unpack_params(Model *m, const Pack *p) {
    if (p->n != m->n_info)
        return ERR("%s: %d tensors, but its config.json describes a model of %d", p->path, p->n, m->n_info);
    for (int i = 0; i < m->n_info; i++) {
        const ParamInfo *pi = &m->info[i];
        const PackTensor *t = pack_find(p, pi->name);
        if (!t) return ERR("%s: no tensor %s, which its config.json implies", p->path, pi->name);
        if (t->ndim != pi->ndim || t->shape[0] != pi->shape[0] || (pi->ndim == 2 && t->shape[1] != pi->shape[1]))
            return ERR("%s: tensor %s has another shape than its config.json implies", p->path, pi->name);
        pack_decode_rows(m->params + pi->offset, t, 0, t->rows);
    }
    return 0;
}

int pack_unpack(const char *dir, const Pack *p) {
    if (!p->config_json) return ERR("%s: no config.json", p->path);
    TRY(pack_check_model(p)); // before a byte is written or a block allocated
    StDtype dt = p->n ? p->t[0].dtype : ST_F32;
    char *made; // the folders this unpack creates, removed again if it fails
    TRY(path_mkdir_made(&made, dir));
    // config.json goes to a temp file that shapes the model and is renamed into place
    // last, over the one model_save writes, so the folder gets the packed bytes verbatim.
    char *cfg = path_join(dir, "config.json");
    AFile f;
    int rc = afile_open(&f, cfg), opened = rc == 0;
    free(cfg);
    if (rc == 0 && (fwrite(p->config_json, 1, p->config_len, f.fp) != p->config_len || fflush(f.fp) != 0))
        rc = ERR("%s: cannot write config.json: %s", dir, strerror(errno));
    Model m = {0};
    if (rc == 0 && (rc = model_create(&m, f.tmp)) < 0) err_prefix("%s: config.json", p->path);
    if (rc == 0) rc = unpack_params(&m, p);
    if (rc == 0) {
        m.dtype = dt;
        rc = model_save(&m, dir, dt);
    }
    for (int i = 1; rc == 0 && i < p->n_members; i++) {
        const PackMember *mb = &p->members[i];
        if (pack_is_file_name(mb->name) && strcmp(mb->name, "config.json") != 0)
            rc = write_file(dir, mb->name, p->map.data + mb->offset, mb->size);
    }
    if (m.params) model_free(&m);
    if (rc == 0) rc = afile_commit(&f);
    if (rc == 0) { // the folder holds the pack's files and weights, nothing an earlier save left
        const char **written = xcalloc((size_t)p->n_members + 1, sizeof *written);
        int n = 0;
        written[n++] = "model.safetensors";
        for (int i = 0; i < p->n_members; i++)
            if (pack_is_file_name(p->members[i].name)) written[n++] = p->members[i].name;
        model_unlink_unsaved(dir, written, n);
        free(written);
    }
    else if (opened) afile_abort(&f);
    if (rc < 0 && made) { // a folder of our own: what is in it, we wrote
        model_unlink_saved(dir);
        for (int i = 1; i < p->n_members; i++)
            if (pack_is_file_name(p->members[i].name)) {
                char *path = path_join(dir, p->members[i].name);
                unlink(path);
                free(path);
            }
        path_unmake(made, dir);
    } else {
        free(made);
    }
    return rc;
}
