// pack.c: packed sparse checkpoints: the writer (per-tensor encoding choice, int8/int4
// quantization, the manifest, the tar through libarchive), the strict reader (our own
// ustar parser over the memory map, the manifest, every stream checked at open), the
// row decoder, checksum verification and unpacking to a Hugging Face folder.
//
// The writer makes two passes over the tensors: the first encodes each one to learn
// its members' sizes and xxh64 (the manifest comes first in the tar and lists them),
// the second encodes again and writes. Encoding is deterministic, so the second pass
// reproduces the first; it costs one more pass over the weights instead of holding
// the whole pack in memory. The format itself is documented byte by byte in
// docs/formats.md ("Packed checkpoints"); pack.h has the summary.
//
// Not here: arithmetic on packed tensors (spmv.h), the command line (tools/best-pack).
#include "pack/pack.h"

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

#include "base/error.h" // defines: ERR, TRY, xmalloc

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "pack.c reads and writes little-endian streams in place"
#endif

#define TAR_BLOCK 512
#define MEMBER_NAME_MAX 99        // ustar name field without a prefix, NUL included
#define TENSOR_NAME_MAX 92        // + ".values" still fits MEMBER_NAME_MAX
#define DIM_MAX ((int64_t)INT32_MAX)
#define NUMEL_MAX ((size_t)1 << 40)
#define MANIFEST_TAIL 28          // ,"xxh64":"<16 hex digits>"} ending the manifest

// Files besides tensors that a pack may hold; nothing else is ever unpacked.
static const char *const FILES[] = {
    "config.json", "generation_config.json", "tokenizer.model", "tokenizer.json",
    "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "vocab.json",
    "merges.txt",
};
#define N_FILES (int)(sizeof FILES / sizeof *FILES)

// The members of one tensor, in the order they are written.
enum { S_DENSE, S_NNZ, S_INDEX, S_IXPTR, S_SLOTS, S_VALUES, S_SCALES, S_N };
static const char *const SUFFIX[S_N] = {"", ".nnz", ".index", ".ixptr", ".slots", ".values", ".scales"};

static const char *const QUANT_NAMES[] = {"none", "bf16", "int8", "int4"};
static const char *const ENC_NAMES[] = {"dense", "bitmap", "delta", "tiles"};
static const char *const INDEX_NAMES[] = {"speed", "size", "bitmap", "delta", "tiles"};
static const char *const VAL_NAMES[] = {"F32", "BF16", "F16", "I8", "I4"};

int pack_quant_parse(PackQuant *out, const char *name) {
    for (int i = 0; i < 4; i++)
        if (strcmp(name, QUANT_NAMES[i]) == 0) { *out = (PackQuant)i; return 0; }
    return -1;
}
const char *pack_enc_name(PackEnc e) { return (unsigned)e < 4 ? ENC_NAMES[e] : "?"; }
const char *pack_val_name(PackVal v) { return (unsigned)v < 5 ? VAL_NAMES[v] : "?"; }

static int name_index(const char *const *names, int n, const char *s);

int pack_index_parse(PackIndex *out, const char *name) {
    int i = name_index(INDEX_NAMES, 5, name);
    if (i < 0) return -1;
    *out = (PackIndex)i;
    return 0;
}

static int name_index(const char *const *names, int n, const char *s) {
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0) return i;
    return -1;
}

static int is_file_name(const char *s) { return name_index(FILES, N_FILES, s) >= 0; }

// Bytes of n stored values of type v.
static size_t val_bytes(PackVal v, size_t n) {
    switch (v) {
    case PACK_F32: return 4 * n;
    case PACK_BF16: case PACK_F16: return 2 * n;
    case PACK_I8: return n;
    case PACK_I4: return (n + 1) / 2;
    }
    return 0;
}

static int val_is_quant(PackVal v) { return v == PACK_I8 || v == PACK_I4; }

static int val_of_dtype(PackVal *v, StDtype d) {
    if (d == ST_F32) *v = PACK_F32;
    else if (d == ST_BF16) *v = PACK_BF16;
    else if (d == ST_F16) *v = PACK_F16;
    else return -1;
    return 0;
}

// The value type of a prunable tensor under quant (non-prunable ones keep dval).
static PackVal val_of_quant(PackQuant q, PackVal dval) {
    return q == QUANT_BF16 ? PACK_BF16 : q == QUANT_INT8 ? PACK_I8 : q == QUANT_INT4 ? PACK_I4 : dval;
}

// Plain names only: [A-Za-z0-9._-], not starting with '.', no "..".
static int plain_name_ok(const char *s, size_t max) {
    size_t n = strlen(s);
    if (n == 0 || n > max || s[0] == '.' || strstr(s, "..")) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

size_t pack_tensor_bytes(const PackTensor *t) {
    size_t ptrs = (t->nnz_ptr ? 1 : 0) + (t->ix_ptr ? 1 : 0);
    size_t units = t->enc == PACK_TILES ? (t->rows + TILE - 1) / TILE : t->rows;
    return ptrs * 4 * (units + 1) + 5 * t->slots + t->index_bytes + t->values_bytes + (t->scales ? 4 * t->rows : 0);
}

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

// --- writing: the plan of one tensor ---------------------------------------------------

typedef struct {
    PackEnc enc;
    PackVal val;
    size_t rows, cols;
    size_t nnz;          // stored elements (rows*cols when dense)
    size_t delta_bytes;  // of the delta stream, whichever encoding is chosen
    size_t slots;        // of the tiles, whichever encoding is chosen
} Plan;

static void dims_of(size_t *rows, size_t *cols, const ParamInfo *pi) {
    *rows = pi->ndim == 2 ? (size_t)pi->shape[0] : 1;
    *cols = pi->ndim == 2 ? (size_t)pi->shape[1] : (size_t)pi->shape[0];
}

// The decoding work of each sparse encoding, as the bytes memory delivers in the same
// time (~9 GB/s): a bitmap step (32 columns of a row), a delta element and a delta
// row, a tiles slot; dense rows read at memory speed. Fitted to one-thread decode
// times of bench/decode.sh's 220M model with every prunable tensor forced to one
// encoding (AVX-512 BF16 kernels, the Ice Lake of docs/benchmarks.md): ms per token
// at 70 / 90 / 99% sparsity, bitmap 28.9 / 28.8 / 28.1, delta - / 21.7 / 12.8,
// tiles 25.3 / 14.9 / 8.5 (~7.5 of them the dense lm_head, attention and norms).
#define COST_BITMAP_STEP 39
#define COST_DELTA_ELEM 6
#define COST_DELTA_ROW 300
#define COST_TILES_SLOT 32

// Chooses the encoding by pl's index rule (pack.h, PackIndex; ties: dense, bitmap,
// delta, tiles). Sparse encodings need nnz to fit the u32 prefix counts, delta its
// stream to fit ixptr, tiles their slots to fit theirs.
static int plan_tensor(Plan *pl, const ParamInfo *pi, const float *w, PackVal dval, PackQuant q,
                       PackIndex index, const char *path) {
    memset(pl, 0, sizeof *pl);
    dims_of(&pl->rows, &pl->cols, pi);
    size_t rows = pl->rows, cols = pl->cols, n = rows * cols;
    pl->enc = PACK_DENSE;
    pl->val = pi->prunable ? val_of_quant(q, dval) : dval;
    pl->nnz = n;
    if (!pi->prunable) return 0;
    size_t nnz = 0, db = 0;
    for (size_t r = 0; r < rows; r++) {
        const float *row = w + r * cols;
        size_t next = 0; // first column after the previous stored element
        for (size_t c = 0; c < cols; c++) {
            if (!is_stored(row[c])) continue;
            if (val_is_quant(pl->val) && !isfinite(row[c]))
                return ERR("%s: tensor %s row %zu column %zu is %g: cannot quantize", path, pi->name,
                           r, c, (double)row[c]);
            size_t g = c - next;
            db += g / 255 + 1;
            next = c + 1;
            nnz++;
        }
    }
    if (nnz > UINT32_MAX) return 0;
    TileOut count = {0};
    tiles_walk(&count, w, rows, cols);
    pl->delta_bytes = db;
    pl->slots = count.slots;
    size_t scales = val_is_quant(pl->val) ? 4 * rows : 0;
    size_t vals = val_bytes(pl->val, nnz) + scales, panels = (rows + TILE - 1) / TILE;
    // Per encoding: usable, bytes, and bytes plus decoding work.
    int ok[4] = {1, 1, db <= UINT32_MAX, count.slots <= UINT32_MAX};
    double bytes[4] = {
        (double)(val_bytes(pl->val, n) + scales),
        (double)(4 * (rows + 1) + rows * ((cols + 7) / 8) + vals),
        (double)(8 * (rows + 1) + db + vals),
        (double)(8 * (panels + 1) + 5 * count.slots + nnz + vals),
    };
    double work[4] = {0, (double)COST_BITMAP_STEP * (double)rows * (double)((cols + TILE - 1) / TILE),
                      (double)COST_DELTA_ELEM * (double)nnz + (double)COST_DELTA_ROW * (double)rows,
                      (double)COST_TILES_SLOT * (double)count.slots};
    int best = 0;
    if (index == INDEX_BITMAP) best = PACK_BITMAP;
    else if (index == INDEX_DELTA && ok[PACK_DELTA]) best = PACK_DELTA;
    else if (index == INDEX_TILES && ok[PACK_TILES]) best = PACK_TILES;
    else
        for (int e = 1; e < 4; e++) {
            double ce = bytes[e] + (index == INDEX_SPEED ? work[e] : 0);
            double cb = bytes[best] + (index == INDEX_SPEED ? work[best] : 0);
            if (ok[e] && ce < cb) best = e;
        }
    pl->enc = (PackEnc)best;
    if (pl->enc != PACK_DENSE) pl->nnz = nnz;
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
    snprintf(x->name, sizeof x->name, "%s%s", tensor, SUFFIX[suffix]);
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
    if (val_is_quant(pl->val)) {
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
            ValWriter vw = {blob_new(b, nb, pi->name, S_DENSE, val_bytes(pl->val, rows * cols))->owned, pl->val, 0};
            for (size_t r = 0; r < rows; r++)
                for (size_t c = 0; c < cols; c++) val_put(&vw, w[r * cols + c], scales ? scales[r] : 0);
        }
    } else if (pl->enc == PACK_TILES) {
        size_t panels = (rows + TILE - 1) / TILE;
        TileOut o = {0};
        o.pnnz = (uint32_t *)blob_new(b, nb, pi->name, S_NNZ, 4 * (panels + 1))->owned;
        o.cols = blob_new(b, nb, pi->name, S_INDEX, pl->nnz)->owned;
        o.pslots = (uint32_t *)blob_new(b, nb, pi->name, S_IXPTR, 4 * (panels + 1))->owned;
        uint8_t *sl = blob_new(b, nb, pi->name, S_SLOTS, 5 * pl->slots)->owned;
        o.masks = (uint32_t *)sl;
        o.steps = sl + 4 * pl->slots;
        ValWriter vw = {blob_new(b, nb, pi->name, S_VALUES, val_bytes(pl->val, pl->nnz))->owned, pl->val, 0};
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
        ValWriter vw = {blob_new(b, nb, pi->name, S_VALUES, val_bytes(pl->val, pl->nnz))->owned, pl->val, 0};
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

// --- writing: the tar -------------------------------------------------------------------

static int tar_add(struct archive *a, const char *path, const char *name, const uint8_t *data, size_t size) {
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, name);
    archive_entry_set_size(e, (la_int64_t)size);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_mtime(e, 0, 0); // same inputs, same bytes
    int rc = archive_write_header(a, e);
    archive_entry_free(e);
    if (rc != ARCHIVE_OK) return ERR("%s: member %s: %s", path, name, archive_error_string(a));
    for (size_t off = 0; off < size;) {
        size_t n = size - off < ((size_t)1 << 24) ? size - off : (size_t)1 << 24;
        la_ssize_t got = archive_write_data(a, data + off, n);
        if (got <= 0) return ERR("%s: member %s: %s", path, name, archive_error_string(a));
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
    for (int i = 1; m->src_dir && i < N_FILES; i++) {
        char *path = path_join(m->src_dir, FILES[i]);
        int rc = 0;
        if (access(path, R_OK) == 0) {
            rc = file_read_all(&f[*n].data, &f[*n].size, path);
            if (rc == 0) f[(*n)++].name = xstrdup(FILES[i]);
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
    json_object_set_new(root, "version", json_integer(PACK_VERSION));
    json_object_set_new(root, "quant", json_string(QUANT_NAMES[quant]));
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
        json_object_set_new(o, "encoding", json_string(ENC_NAMES[plans[i].enc]));
        json_object_set_new(o, "values", json_string(VAL_NAMES[plans[i].val]));
        json_object_set_new(o, "nnz", json_integer((json_int_t)plans[i].nnz));
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
        rc = ERR("%s: %s", path, archive_error_string(a));
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
    if (rc == 0 && archive_write_close(a) != ARCHIVE_OK) rc = ERR("%s: %s", path, archive_error_string(a));
    archive_write_free(a);
    return rc;
}

int pack_write(const char *path, const Model *m, PackQuant quant, PackIndex index) {
    TRY(model_need_folder(m, "packing"));
    PackVal dval;
    if (val_of_dtype(&dval, m->dtype) < 0)
        return ERR("%s: cannot pack weights of dtype %s (F32, BF16 or F16)", path, st_dtype_name(m->dtype));
    if ((unsigned)quant > QUANT_INT4) return ERR("%s: unknown quantization %d", path, (int)quant);
    if ((unsigned)index > INDEX_TILES) return ERR("%s: unknown index rule %d", path, (int)index);
    for (int i = 0; i < m->n_info; i++)
        if (!plain_name_ok(m->info[i].name, TENSOR_NAME_MAX))
            return ERR("%s: tensor name %s is not a plain name of at most %d characters", path,
                       m->info[i].name, TENSOR_NAME_MAX);
    Plan *plans = xcalloc((size_t)m->n_info + 1, sizeof *plans);
    for (int i = 0; i < m->n_info; i++)
        if (plan_tensor(&plans[i], &m->info[i], m->params + m->info[i].offset, dval, quant, index, path) < 0) {
            free(plans);
            return -1;
        }
    FileBlob files[N_FILES];
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

// --- reading: the tar -------------------------------------------------------------------

// An octal field: digits, then NUL or space to the end (at least one).
static int octal_field(uint64_t *out, const uint8_t *f, size_t n) {
    uint64_t x = 0;
    size_t i = 0;
    for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) x = x * 8 + (uint64_t)(f[i] - '0');
    if (i == 0 || i == n) return -1;
    for (; i < n; i++)
        if (f[i] != 0 && f[i] != ' ') return -1;
    *out = x;
    return 0;
}

static int all_zero(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

// One ustar header at off: a regular file with a plain name, the checksum right.
static int tar_header(PackMember *mb, const Pack *p, size_t off) {
    const uint8_t *h = p->map.data + off;
    const char *path = p->path;
    unsigned sum = 0;
    for (int i = 0; i < TAR_BLOCK; i++) sum += i >= 148 && i < 156 ? ' ' : h[i];
    // libarchive writes six octal digits, NUL, space; we accept exactly that.
    uint64_t want;
    if (octal_field(&want, h + 148, 7) < 0 || h[154] != 0 || h[155] != ' ')
        return ERR("%s: tar header at offset %zu: malformed checksum field (truncated or not a pack?)", path, off);
    if (want != sum) return ERR("%s: tar header at offset %zu: checksum mismatch", path, off);
    if (memcmp(h + 257, "ustar\0" "00", 8) != 0)
        return ERR("%s: tar header at offset %zu: not a ustar header", path, off);
    if (memchr(h, 0, 100) == NULL) return ERR("%s: tar header at offset %zu: name not terminated", path, off);
    memset(mb, 0, sizeof *mb);
    memcpy(mb->name, h, 100);
    if (!plain_name_ok(mb->name, MEMBER_NAME_MAX) || h[345] != 0)
        return ERR("%s: member \"%.100s\": not a plain file name (no folders, no \"..\")", path, mb->name);
    if (h[156] != '0' || h[157] != 0)
        return ERR("%s: member %s: not a regular file (type '%c')", path, mb->name, h[156] ? h[156] : '0');
    uint64_t size;
    if (octal_field(&size, h + 124, 12) < 0) return ERR("%s: member %s: malformed size field", path, mb->name);
    mb->offset = off + TAR_BLOCK;
    if (size > p->map.size - mb->offset)
        return ERR("%s: member %s: %llu bytes run past the end of the file (truncated?)", path, mb->name,
                   (unsigned long long)size);
    mb->size = (size_t)size;
    return 0;
}

// The members in file order, the padding and the end-of-archive blocks checked.
static int tar_parse(Pack *p) {
    const char *path = p->path;
    size_t size = p->map.size, off = 0;
    int cap = 16;
    p->members = xcalloc((size_t)cap, sizeof *p->members);
    for (;;) {
        if (size - off < TAR_BLOCK) return ERR("%s: truncated at offset %zu (no end-of-archive blocks)", path, off);
        if (all_zero(p->map.data + off, TAR_BLOCK)) break;
        if (p->n_members == cap) {
            cap *= 2;
            p->members = xrealloc(p->members, (size_t)cap * sizeof *p->members);
        }
        PackMember *mb = &p->members[p->n_members];
        TRY(tar_header(mb, p, off));
        for (int i = 0; i < p->n_members; i++)
            if (strcmp(p->members[i].name, mb->name) == 0) return ERR("%s: member %s appears twice", path, mb->name);
        p->n_members++;
        size_t padded = (mb->size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
        if (padded > size - mb->offset) return ERR("%s: member %s: truncated padding", path, mb->name);
        if (!all_zero(p->map.data + mb->offset + mb->size, padded - mb->size))
            return ERR("%s: member %s: padding is not zero", path, mb->name);
        off = mb->offset + padded;
    }
    if (size - off != 2 * TAR_BLOCK || !all_zero(p->map.data + off, 2 * TAR_BLOCK))
        return ERR("%s: %zu bytes after the last member, want exactly 1024 zero bytes (truncated or appended to?)",
                   path, size - off);
    if (p->n_members == 0 || strcmp(p->members[0].name, "manifest.json") != 0)
        return ERR("%s: the first member is not manifest.json (not a best-pack file?)", path);
    return 0;
}

// --- reading: the manifest --------------------------------------------------------------

// obj has exactly these keys (so no byte of a compact manifest is without meaning).
static int keys_exact(const json_t *obj, const char *const *keys, size_t n, const char *path, const char *what) {
    if (!json_is_object(obj)) return ERR("%s: manifest.json: %s is not an object", path, what);
    for (size_t i = 0; i < n; i++)
        if (!json_object_get(obj, keys[i])) return ERR("%s: manifest.json: %s has no \"%s\"", path, what, keys[i]);
    if (json_object_size(obj) != n) return ERR("%s: manifest.json: %s has unknown keys", path, what);
    return 0;
}

static int json_size(size_t *out, const json_t *v) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) return -1;
    *out = (size_t)json_integer_value(v);
    return 0;
}

static int hex64_parse(uint64_t *out, const char *s) {
    if (strlen(s) != 16) return -1;
    uint64_t x = 0;
    for (int i = 0; i < 16; i++) {
        int c = s[i], d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        x = x << 4 | (uint64_t)d;
    }
    *out = x;
    return 0;
}

static int manifest_members(Pack *p, const json_t *arr) {
    static const char *const keys[] = {"name", "size", "xxh64"};
    const char *path = p->path;
    if (!json_is_array(arr) || json_array_size(arr) != (size_t)p->n_members - 1)
        return ERR("%s: manifest.json lists %zu members, the tar holds %d besides it", path,
                   json_is_array(arr) ? json_array_size(arr) : 0, p->n_members - 1);
    for (int i = 1; i < p->n_members; i++) {
        PackMember *mb = &p->members[i];
        const json_t *o = json_array_get(arr, (size_t)i - 1);
        TRY(keys_exact(o, keys, 3, path, "a member entry"));
        const char *name = json_string_value(json_object_get(o, "name"));
        const char *hex = json_string_value(json_object_get(o, "xxh64"));
        size_t size;
        if (!name || strcmp(name, mb->name) != 0)
            return ERR("%s: manifest.json: member %d is %s, the tar has %s there", path, i, name ? name : "?", mb->name);
        if (json_size(&size, json_object_get(o, "size")) < 0 || size != mb->size)
            return ERR("%s: member %s: size in the manifest differs from the tar's %zu", path, mb->name, mb->size);
        if (!hex || hex64_parse(&mb->xxh64, hex) < 0)
            return ERR("%s: member %s: xxh64 in the manifest is not 16 lowercase hex digits", path, mb->name);
    }
    return 0;
}

// The member tensor+suffix, checked for its size and marked as used.
static const uint8_t *tensor_member(const Pack *p, uint8_t *used, const PackTensor *t, int suffix, size_t want,
                                    size_t *size) {
    char name[MEMBER_NAME_MAX + 2];
    snprintf(name, sizeof name, "%s%s", t->name, SUFFIX[suffix]);
    for (int i = 1; i < p->n_members; i++) {
        const PackMember *mb = &p->members[i];
        if (strcmp(mb->name, name) != 0) continue;
        if (used[i]) { ERR("%s: member %s is used twice", p->path, name); return NULL; }
        if (want != SIZE_MAX && mb->size != want) {
            ERR("%s: member %s has %zu bytes, want %zu (%zu x %zu, %s, %s values)", p->path, name, mb->size, want,
                t->rows, t->cols, ENC_NAMES[t->enc], VAL_NAMES[t->val]);
            return NULL;
        }
        used[i] = 1;
        if (size) *size = mb->size;
        return p->map.data + mb->offset;
    }
    ERR("%s: tensor %s: member %s is missing", p->path, t->name, name);
    return NULL;
}

// Prefix counts: start at 0, never decrease, at most `cols` per row, end at total.
static int check_prefix(const uint32_t *ptr, size_t rows, size_t cols, size_t total, const char *path,
                        const char *name, const char *what) {
    if (ptr[0] != 0) return ERR("%s: tensor %s: %s does not start at 0", path, name, what);
    for (size_t r = 0; r < rows; r++)
        if (ptr[r + 1] < ptr[r] || (cols != SIZE_MAX && ptr[r + 1] - ptr[r] > cols))
            return ERR("%s: tensor %s: %s of row %zu is out of range", path, name, what, r);
    if (ptr[rows] != total)
        return ERR("%s: tensor %s: %s ends at %u, want %zu", path, name, what, ptr[rows], total);
    return 0;
}

static int check_bitmap(const PackTensor *t, const char *path) {
    size_t stride = (t->cols + 7) / 8;
    uint8_t last_mask = t->cols % 8 ? (uint8_t)(0xFFu << (t->cols % 8)) : 0;
    for (size_t r = 0; r < t->rows; r++) {
        const uint8_t *row = t->index + r * stride;
        size_t count = 0;
        for (size_t j = 0; j < stride; j++) count += (size_t)__builtin_popcount(row[j]);
        if (row[stride - 1] & last_mask)
            return ERR("%s: tensor %s: bitmap row %zu has bits past column %zu", path, t->name, r, t->cols);
        if (count != t->nnz_ptr[r + 1] - t->nnz_ptr[r])
            return ERR("%s: tensor %s: bitmap row %zu has %zu bits, nnz says %u", path, t->name, r, count,
                       t->nnz_ptr[r + 1] - t->nnz_ptr[r]);
    }
    return 0;
}

static int check_delta(const PackTensor *t, const char *path) {
    for (size_t r = 0; r < t->rows; r++) {
        size_t next = 0, count = 0, g = 0;
        for (size_t i = t->ix_ptr[r]; i < t->ix_ptr[r + 1]; i++) {
            uint8_t x = t->index[i];
            if (x == 255) {
                g += 255;
                if (g >= t->cols) return ERR("%s: tensor %s: delta row %zu runs past its end", path, t->name, r);
                continue;
            }
            size_t c = next + g + x;
            if (c >= t->cols)
                return ERR("%s: tensor %s: delta row %zu runs past its end (column %zu of %zu)", path, t->name,
                           r, c, t->cols);
            next = c + 1;
            g = 0;
            count++;
        }
        if (g) return ERR("%s: tensor %s: delta row %zu ends inside an escape", path, t->name, r);
        if (count != t->nnz_ptr[r + 1] - t->nnz_ptr[r])
            return ERR("%s: tensor %s: delta row %zu has %zu elements, nnz says %u", path, t->name, r, count,
                       t->nnz_ptr[r + 1] - t->nnz_ptr[r]);
    }
    return 0;
}

// Tiles: every slot's block inside the tensor, masks only on the panel's rows, each
// row's columns increasing (so no element twice), element counts as nnz says.
static int check_tiles(const PackTensor *t, const char *path) {
    size_t panels = (t->rows + TILE - 1) / TILE, nblocks = (t->cols + TILE - 1) / TILE;
    for (size_t p = 0; p < panels; p++) {
        size_t n = t->rows - p * TILE < TILE ? t->rows - p * TILE : TILE, blk = 0, k = t->nnz_ptr[p];
        size_t next[TILE] = {0}; // per row: the least column its next element may have
        for (size_t s = t->ix_ptr[p]; s < t->ix_ptr[p + 1]; s++) {
            blk += t->steps[s];
            uint32_t m = t->masks[s];
            if (blk >= nblocks)
                return ERR("%s: tensor %s: tiles panel %zu runs past its last block (slot %zu)", path, t->name, p, s);
            if (n < TILE && m >> n)
                return ERR("%s: tensor %s: tiles panel %zu has a slot for a row past the tensor's end", path, t->name, p);
            for (; m; m &= m - 1, k++) {
                size_t i = (size_t)__builtin_ctz(m);
                if (k >= t->nnz_ptr[p + 1])
                    return ERR("%s: tensor %s: tiles panel %zu has more elements than nnz says", path, t->name, p);
                size_t c = blk * TILE + t->index[k];
                if (t->index[k] >= TILE || c >= t->cols || c < next[i])
                    return ERR("%s: tensor %s: tiles panel %zu row %zu: column %zu out of order or range", path,
                               t->name, p, p * TILE + i, c);
                next[i] = c + 1;
            }
        }
        if (k != t->nnz_ptr[p + 1])
            return ERR("%s: tensor %s: tiles panel %zu has %zu elements, nnz says %u", path, t->name, p,
                       k - t->nnz_ptr[p], t->nnz_ptr[p + 1] - t->nnz_ptr[p]);
    }
    return 0;
}

// The members of a tiles tensor and their checks.
static int tiles_members(PackTensor *t, const Pack *p, uint8_t *used) {
    size_t panels = (t->rows + TILE - 1) / TILE, size;
    const char *path = p->path;
    if (!(t->nnz_ptr = (const uint32_t *)tensor_member(p, used, t, S_NNZ, 4 * (panels + 1), NULL))) return -1;
    TRY(check_prefix(t->nnz_ptr, panels, TILE * t->cols, t->nnz, path, t->name, "nnz"));
    const uint8_t *sl = tensor_member(p, used, t, S_SLOTS, SIZE_MAX, &size);
    if (!sl) return -1;
    if (size % 5) return ERR("%s: member %s.slots has %zu bytes, not a multiple of 5", path, t->name, size);
    t->slots = size / 5;
    t->masks = (const uint32_t *)sl;
    t->steps = sl + 4 * t->slots;
    if (!(t->ix_ptr = (const uint32_t *)tensor_member(p, used, t, S_IXPTR, 4 * (panels + 1), NULL))) return -1;
    TRY(check_prefix(t->ix_ptr, panels, SIZE_MAX, t->slots, path, t->name, "ixptr"));
    if (!(t->index = tensor_member(p, used, t, S_INDEX, t->nnz, &t->index_bytes))) return -1;
    if (!(t->values = tensor_member(p, used, t, S_VALUES, val_bytes(t->val, t->nnz), &t->values_bytes))) return -1;
    return check_tiles(t, path);
}

// One manifest tensor entry: its fields, its members, its streams.
static int manifest_tensor(PackTensor *t, const Pack *p, uint8_t *used, const json_t *o, StDtype dt) {
    static const char *const keys[] = {"name", "shape", "dtype", "prunable", "encoding", "values", "nnz"};
    const char *path = p->path;
    TRY(keys_exact(o, keys, 7, path, "a tensor entry"));
    const char *name = json_string_value(json_object_get(o, "name"));
    if (!name || !plain_name_ok(name, TENSOR_NAME_MAX))
        return ERR("%s: manifest.json: tensor name \"%.100s\" is not a plain name", path, name ? name : "?");
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    const json_t *shape = json_object_get(o, "shape");
    size_t nd = json_array_size(shape);
    if (!json_is_array(shape) || nd < 1 || nd > 2) return ERR("%s: tensor %s: shape is not 1-D or 2-D", path, name);
    t->ndim = (int)nd;
    for (size_t d = 0; d < nd; d++) {
        const json_t *v = json_array_get(shape, d);
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > DIM_MAX)
            return ERR("%s: tensor %s: bad dimension in shape", path, name);
        t->shape[d] = json_integer_value(v);
    }
    t->rows = nd == 2 ? (size_t)t->shape[0] : 1;
    t->cols = nd == 2 ? (size_t)t->shape[1] : (size_t)t->shape[0];
    size_t numel = t->rows * t->cols; // < 2^62: no overflow
    if (numel > NUMEL_MAX) return ERR("%s: tensor %s: more than 2^40 elements", path, name);
    const char *s = json_string_value(json_object_get(o, "dtype"));
    if (!s || st_dtype_parse(&t->dtype, s) < 0 || t->dtype != dt)
        return ERR("%s: tensor %s: dtype %s differs from the pack's %s", path, name, s ? s : "?", st_dtype_name(dt));
    const json_t *pr = json_object_get(o, "prunable");
    if (!json_is_boolean(pr)) return ERR("%s: tensor %s: prunable is not true or false", path, name);
    t->prunable = json_is_true(pr);
    s = json_string_value(json_object_get(o, "encoding"));
    int e = s ? name_index(ENC_NAMES, p->version < 2 ? 3 : 4, s) : -1;
    if (e < 0) return ERR("%s: tensor %s: unknown encoding %s (format version %d)", path, name, s ? s : "?", p->version);
    t->enc = (PackEnc)e;
    s = json_string_value(json_object_get(o, "values"));
    int v = s ? name_index(VAL_NAMES, 5, s) : -1;
    if (v < 0) return ERR("%s: tensor %s: unknown value type %s", path, name, s ? s : "?");
    t->val = (PackVal)v;
    // The value type follows from the pack's quant and dtype: a tensor must agree.
    PackVal dval = PACK_F32;
    val_of_dtype(&dval, dt);
    PackVal want = t->prunable ? val_of_quant(p->quant, dval) : dval;
    if (t->val != want)
        return ERR("%s: tensor %s: values %s, but a %s tensor of this pack (quant %s, dtype %s) has %s", path, name,
                   VAL_NAMES[t->val], t->prunable ? "prunable" : "dense", QUANT_NAMES[p->quant], st_dtype_name(dt),
                   VAL_NAMES[want]);
    if (!t->prunable && t->enc != PACK_DENSE) return ERR("%s: tensor %s: not prunable but %s", path, name, s);
    if (json_size(&t->nnz, json_object_get(o, "nnz")) < 0) return ERR("%s: tensor %s: bad nnz", path, name);
    if (t->enc == PACK_DENSE ? t->nnz != numel : t->nnz > numel || t->nnz > UINT32_MAX)
        return ERR("%s: tensor %s: nnz %zu does not fit %s (%zu elements)", path, name, t->nnz, ENC_NAMES[t->enc], numel);
    if (t->enc == PACK_DENSE) {
        if (!(t->values = tensor_member(p, used, t, S_DENSE, val_bytes(t->val, numel), &t->values_bytes))) return -1;
    } else if (t->enc == PACK_TILES) {
        TRY(tiles_members(t, p, used));
    } else {
        if (!(t->nnz_ptr = (const uint32_t *)tensor_member(p, used, t, S_NNZ, 4 * (t->rows + 1), NULL))) return -1;
        TRY(check_prefix(t->nnz_ptr, t->rows, t->cols, t->nnz, path, name, "nnz"));
        size_t want_ix = t->enc == PACK_BITMAP ? t->rows * ((t->cols + 7) / 8) : SIZE_MAX;
        if (!(t->index = tensor_member(p, used, t, S_INDEX, want_ix, &t->index_bytes))) return -1;
        if (t->enc == PACK_DELTA) {
            if (!(t->ix_ptr = (const uint32_t *)tensor_member(p, used, t, S_IXPTR, 4 * (t->rows + 1), NULL))) return -1;
            TRY(check_prefix(t->ix_ptr, t->rows, SIZE_MAX, t->index_bytes, path, name, "ixptr"));
        }
        if (!(t->values = tensor_member(p, used, t, S_VALUES, val_bytes(t->val, t->nnz), &t->values_bytes))) return -1;
        TRY(t->enc == PACK_BITMAP ? check_bitmap(t, path) : check_delta(t, path));
    }
    if (val_is_quant(t->val) && !(t->scales = (const float *)tensor_member(p, used, t, S_SCALES, 4 * t->rows, NULL)))
        return -1;
    return 0;
}

static int manifest_parse(Pack *p) {
    static const char *const keys[] = {"format", "version", "quant", "dtype", "members", "tensors", "xxh64"};
    const char *path = p->path;
    PackMember *mf = &p->members[0];
    if (mf->size < MANIFEST_TAIL) return ERR("%s: manifest.json is too short", path);
    const char *tail = (const char *)p->map.data + mf->offset + mf->size - MANIFEST_TAIL;
    char hex[17];
    memcpy(hex, tail + 10, 16);
    hex[16] = 0;
    if (memcmp(tail, ",\"xxh64\":\"", 10) != 0 || memcmp(tail + 26, "\"}", 2) != 0 || hex64_parse(&mf->xxh64, hex) < 0)
        return ERR("%s: manifest.json does not end with its own xxh64", path);
    json_error_t je;
    json_t *root = json_loadb((const char *)p->map.data + mf->offset, mf->size, JSON_REJECT_DUPLICATES, &je);
    if (!root) return ERR("%s: manifest.json: line %d: %s", path, je.line, je.text);
    int rc = 0;
    uint8_t *used = xcalloc((size_t)p->n_members, 1);
    const char *fmt = json_string_value(json_object_get(root, "format"));
    const json_t *ver = json_object_get(root, "version");
    if (!json_is_object(root) || !fmt || strcmp(fmt, "best-pack") != 0) {
        rc = ERR("%s: manifest.json: format is not \"best-pack\"", path);
    } else if (!json_is_integer(ver) || json_integer_value(ver) < 1 || json_integer_value(ver) > PACK_VERSION) {
        rc = ERR("%s: unknown format version %lld (this program reads versions 1 to %d)", path,
                 json_is_integer(ver) ? (long long)json_integer_value(ver) : -1LL, PACK_VERSION);
    } else {
        rc = keys_exact(root, keys, 7, path, "the top level");
    }
    p->version = rc == 0 ? (int)json_integer_value(ver) : PACK_VERSION;
    const char *q = json_string_value(json_object_get(root, "quant"));
    const char *d = json_string_value(json_object_get(root, "dtype"));
    StDtype dt = ST_F32;
    PackVal dval = PACK_F32;
    if (rc == 0 && (!q || pack_quant_parse(&p->quant, q) < 0))
        rc = ERR("%s: manifest.json: unknown quant %s", path, q ? q : "?");
    if (rc == 0 && (!d || st_dtype_parse(&dt, d) < 0 || val_of_dtype(&dval, dt) < 0))
        rc = ERR("%s: manifest.json: dtype %s is not F32, BF16 or F16", path, d ? d : "?");
    if (rc == 0) rc = manifest_members(p, json_object_get(root, "members"));
    const json_t *ts = json_object_get(root, "tensors");
    if (rc == 0 && !json_is_array(ts)) rc = ERR("%s: manifest.json: tensors is not an array", path);
    if (rc == 0) {
        p->n = 0;
        p->t = xcalloc(json_array_size(ts) + 1, sizeof *p->t);
        for (size_t i = 0; rc == 0 && i < json_array_size(ts); i++) {
            rc = manifest_tensor(&p->t[i], p, used, json_array_get(ts, i), dt);
            for (int j = 0; rc == 0 && j < p->n; j++)
                if (strcmp(p->t[j].name, p->t[i].name) == 0) rc = ERR("%s: tensor %s appears twice", path, p->t[i].name);
            if (rc == 0) p->n++;
        }
    }
    for (int i = 1; rc == 0 && i < p->n_members; i++) {
        const PackMember *mb = &p->members[i];
        if (used[i]) continue;
        if (!is_file_name(mb->name))
            rc = ERR("%s: member %s is neither a stream of a listed tensor nor an allowed file", path, mb->name);
        if (strcmp(mb->name, "config.json") == 0) {
            p->config_json = (const char *)p->map.data + mb->offset;
            p->config_len = mb->size;
        }
    }
    if (rc == 0 && !p->config_json) rc = ERR("%s: no config.json member", path);
    free(used);
    json_decref(root);
    return rc;
}

// --- reading: open, close, verify, decode ----------------------------------------------

static int pack_parse(Pack *p) {
    if (tar_parse(p) < 0 || manifest_parse(p) < 0) {
        pack_close(p);
        return -1;
    }
    return 0;
}

int pack_open(Pack *p, const char *path) {
    memset(p, 0, sizeof *p);
    TRY(mapped_open(&p->map, path));
    p->path = xstrdup(path);
    return pack_parse(p);
}

int pack_open_mem(Pack *p, const void *buf, size_t size, const char *name) {
    memset(p, 0, sizeof *p);
    if ((uintptr_t)buf % 8) return ERR("%s: buffer not 8-byte aligned", name);
    p->map.data = buf;
    p->map.size = size;
    p->path = xstrdup(name);
    return pack_parse(p);
}

void pack_close(Pack *p) {
    mapped_close(&p->map);
    free(p->members);
    free(p->t);
    free(p->path);
    memset(p, 0, sizeof *p);
}

int pack_verify(const Pack *p) {
    for (int i = 0; i < p->n_members; i++) {
        const PackMember *mb = &p->members[i];
        uint64_t h = XXH64(p->map.data + mb->offset, mb->size - (i ? 0 : MANIFEST_TAIL), 0);
        if (h != mb->xxh64)
            return ERR("%s: member %s: checksum mismatch (xxh64 %016llx, manifest says %016llx)", p->path, mb->name,
                       (unsigned long long)h, (unsigned long long)mb->xxh64);
    }
    return 0;
}

const PackTensor *pack_find(const Pack *p, const char *name) {
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->t[i].name, name) == 0) return &p->t[i];
    return NULL;
}

const PackMember *pack_member(const Pack *p, const char *name) {
    for (int i = 0; i < p->n_members; i++)
        if (strcmp(p->members[i].name, name) == 0) return &p->members[i];
    return NULL;
}

// Stored value k of t (in row r, for the scale), as fp32.
static inline float val_get(const PackTensor *t, size_t k, size_t r) {
    switch (t->val) {
    case PACK_F32: return ((const float *)t->values)[k];
    case PACK_BF16: return st_bf16_to_f32(((const uint16_t *)t->values)[k]);
    case PACK_F16: return st_f16_to_f32(((const uint16_t *)t->values)[k]);
    case PACK_I8: return (float)((const int8_t *)t->values)[k] * t->scales[r];
    case PACK_I4: {
        int nib = (((const uint8_t *)t->values)[k / 2] >> (4 * (k & 1))) & 15;
        return (float)(nib >= 8 ? nib - 16 : nib) * t->scales[r];
    }
    }
    return 0;
}

// Rows [r0, r1) of a tiles tensor: every panel they touch is walked whole.
static void tiles_decode_rows(float *out, const PackTensor *t, size_t r0, size_t r1) {
    memset(out, 0, (r1 - r0) * t->cols * sizeof *out);
    for (size_t p = r0 / TILE; p * TILE < r1; p++) {
        size_t k = t->nnz_ptr[p], blk = 0;
        for (size_t s = t->ix_ptr[p]; s < t->ix_ptr[p + 1]; s++) {
            blk += t->steps[s];
            for (uint32_t m = t->masks[s]; m; m &= m - 1, k++) {
                size_t r = p * TILE + (size_t)__builtin_ctz(m);
                if (r >= r0 && r < r1) out[(r - r0) * t->cols + blk * TILE + t->index[k]] = val_get(t, k, r);
            }
        }
    }
}

void pack_decode_rows(float *out, const PackTensor *t, size_t r0, size_t r1) {
    size_t cols = t->cols;
    if (t->enc == PACK_TILES) {
        tiles_decode_rows(out, t, r0, r1);
        return;
    }
    for (size_t r = r0; r < r1; r++, out += cols) {
        if (t->enc == PACK_DENSE) {
            for (size_t c = 0; c < cols; c++) out[c] = val_get(t, r * cols + c, r);
            continue;
        }
        memset(out, 0, cols * sizeof *out);
        size_t k = t->nnz_ptr[r];
        if (t->enc == PACK_BITMAP) {
            const uint8_t *row = t->index + r * ((cols + 7) / 8);
            for (size_t j = 0; j < (cols + 7) / 8; j++)
                for (unsigned bits = row[j]; bits; bits &= bits - 1)
                    out[8 * j + (size_t)__builtin_ctz(bits)] = val_get(t, k++, r);
        } else {
            size_t next = 0, g = 0;
            for (size_t i = t->ix_ptr[r]; i < t->ix_ptr[r + 1]; i++) {
                uint8_t x = t->index[i];
                if (x == 255) { g += 255; continue; }
                size_t c = next + g + x;
                out[c] = val_get(t, k++, r);
                next = c + 1;
                g = 0;
            }
        }
    }
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
    StDtype dt = p->n ? p->t[0].dtype : ST_F32;
    TRY(path_mkdir_p(dir));
    // config.json goes to a temp file that shapes the model and is renamed into place
    // last, over the one model_save writes, so the folder gets the packed bytes verbatim.
    char *cfg = path_join(dir, "config.json");
    AFile f;
    int rc = afile_open(&f, cfg);
    free(cfg);
    TRY(rc);
    if (fwrite(p->config_json, 1, p->config_len, f.fp) != p->config_len || fflush(f.fp) != 0) {
        afile_abort(&f);
        return ERR("%s: cannot write config.json: %s", dir, strerror(errno));
    }
    Model m;
    rc = model_create(&m, f.tmp);
    if (rc < 0) {
        err_prefix("%s: config.json", p->path);
        afile_abort(&f);
        return -1;
    }
    rc = unpack_params(&m, p);
    if (rc == 0) {
        m.dtype = dt;
        rc = model_save(&m, dir, dt);
    }
    for (int i = 1; rc == 0 && i < p->n_members; i++) {
        const PackMember *mb = &p->members[i];
        if (is_file_name(mb->name) && strcmp(mb->name, "config.json") != 0)
            rc = write_file(dir, mb->name, p->map.data + mb->offset, mb->size);
    }
    model_free(&m);
    if (rc == 0) rc = afile_commit(&f);
    else afile_abort(&f);
    return rc;
}
