// pack.c: packed sparse checkpoints, reading: names of the format's enums, the strict
// reader (our own ustar parser over the memory map, the manifest, every stream checked
// at open), checksum verification and the row decoder. The format is documented byte by
// byte in docs/formats.md ("Packed checkpoints"); pack.h has the summary.
//
// Not here: writing and unpacking (pack_write.c), arithmetic on packed tensors
// (spmv.h), a model backed by a pack (pack_model.h), the command line (tools/best-pack).
#include "pack/pack.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/error.h"       // defines: ERR, TRY, xmalloc
#include "tok/tokenizer.h"      // defines: TOKENIZER_FILES
#include "pack/pack_format.h" // defines: pack_file_name, PACK_SUFFIX, pack_val_bytes, pack_name_ok

#define TAR_BLOCK 512
#define DIM_MAX ((int64_t)INT32_MAX)
#define NUMEL_MAX ((size_t)1 << 40)

_Static_assert(PACK_N_FILES == 2 + TOKENIZER_N_FILES, "pack_format.h's PACK_N_FILES");
const char *pack_file_name(int i) {
    return i == 0 ? "config.json" : i == 1 ? "generation_config.json" : TOKENIZER_FILES[i - 2];
}
const char *const PACK_SUFFIX[S_N] = {"", ".nnz", ".index", ".ixptr", ".slots", ".values", ".scales"};

static const char *const QUANT_NAMES[] = {"none", "bf16", "int8", "int4"};
static const char *const ENC_NAMES[PACK_N_ENC] = {"dense", "bitmap", "delta", "tiles", "sell", "nm"};
static const char *const INDEX_NAMES[] = {"speed", "size", "bitmap", "delta", "tiles", "dense", "sell", "nm"};
static const char *const VAL_NAMES[] = {"F32", "BF16", "F16", "I8", "I4"};

static int name_index(const char *const *names, int n, const char *s) {
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0) return i;
    return -1;
}

int pack_quant_parse(PackQuant *out, const char *name) {
    int i = name_index(QUANT_NAMES, 4, name);
    if (i < 0) return -1;
    *out = (PackQuant)i;
    return 0;
}

int pack_index_parse(PackIndex *out, const char *name) {
    int i = name_index(INDEX_NAMES, 8, name);
    if (i < 0) return -1;
    *out = (PackIndex)i;
    return 0;
}

const char *pack_quant_name(PackQuant q) { return (unsigned)q < 4 ? QUANT_NAMES[q] : "?"; }
const char *pack_enc_name(PackEnc e) { return (unsigned)e < PACK_N_ENC ? ENC_NAMES[e] : "?"; }
const char *pack_val_name(PackVal v) { return (unsigned)v < 5 ? VAL_NAMES[v] : "?"; }

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
    if (!pack_name_ok(mb->name, MEMBER_NAME_MAX) || h[345] != 0)
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

// Where a member belongs in the documented order (docs/formats.md, "Members, in this
// order"): the manifest, the allowed files in PACK_FILES order, then per tensor, in
// the manifest's order, its streams in suffix order. 0: not claimed (yet).
static size_t file_rank(int f) { return 1 + (size_t)f; }
static size_t stream_rank(const Pack *p, const PackTensor *t, int suffix) {
    return 1 + PACK_N_FILES + (size_t)(t - p->t) * S_N + (size_t)suffix;
}

// The member tensor+suffix, checked for its size and given its rank (used once).
static const uint8_t *tensor_member(const Pack *p, size_t *rank, const PackTensor *t, int suffix, size_t want,
                                    size_t *size) {
    char name[MEMBER_NAME_MAX + 2];
    snprintf(name, sizeof name, "%s%s", t->name, PACK_SUFFIX[suffix]);
    for (int i = 1; i < p->n_members; i++) {
        const PackMember *mb = &p->members[i];
        if (strcmp(mb->name, name) != 0) continue;
        if (rank[i]) { ERR("%s: member %s is used twice", p->path, name); return NULL; }
        if (want != SIZE_MAX && mb->size != want) {
            ERR("%s: member %s has %zu bytes, want %zu (%zu x %zu, %s, %s values)", p->path, name, mb->size, want,
                t->rows, t->cols, ENC_NAMES[t->enc], VAL_NAMES[t->val]);
            return NULL;
        }
        rank[i] = stream_rank(p, t, suffix);
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
static int tiles_members(PackTensor *t, const Pack *p, size_t *rank) {
    size_t panels = (t->rows + TILE - 1) / TILE, size;
    const char *path = p->path;
    if (!(t->nnz_ptr = (const uint32_t *)tensor_member(p, rank, t, S_NNZ, 4 * (panels + 1), NULL))) return -1;
    TRY(check_prefix(t->nnz_ptr, panels, TILE * t->cols, t->nnz, path, t->name, "nnz"));
    const uint8_t *sl = tensor_member(p, rank, t, S_SLOTS, SIZE_MAX, &size);
    if (!sl) return -1;
    if (size % 5) return ERR("%s: member %s.slots has %zu bytes, not a multiple of 5", path, t->name, size);
    t->slots = size / 5;
    t->masks = (const uint32_t *)sl;
    t->steps = sl + 4 * t->slots;
    if (!(t->ix_ptr = (const uint32_t *)tensor_member(p, rank, t, S_IXPTR, 4 * (panels + 1), NULL))) return -1;
    TRY(check_prefix(t->ix_ptr, panels, SIZE_MAX, t->slots, path, t->name, "ixptr"));
    if (!(t->index = tensor_member(p, rank, t, S_INDEX, t->nnz, &t->index_bytes))) return -1;
    if (!(t->values = tensor_member(p, rank, t, S_VALUES, pack_val_bytes(t->val, t->nnz), &t->values_bytes))) return -1;
    return check_tiles(t, path);
}

// Sell: each slice's slots as many as its fullest row's elements; lane i of slot j is
// row 8s+i's j-th element (columns increasing, inside the tensor, a value not all zero
// bits) while the row has one, else padding (column 0, value all zero bits).
static int check_sell(const PackTensor *t, const char *path) {
    size_t slices = (t->rows + SELL - 1) / SELL, wide = t->val == PACK_F32;
    const uint16_t *cols = (const uint16_t *)t->index;
    for (size_t s = 0; s < slices; s++) {
        size_t width = 0, n[SELL] = {0};
        for (size_t i = 0; i < SELL && s * SELL + i < t->rows; i++) {
            n[i] = t->nnz_ptr[s * SELL + i + 1] - t->nnz_ptr[s * SELL + i];
            if (n[i] > width) width = n[i];
        }
        if (t->ix_ptr[s + 1] - t->ix_ptr[s] != width)
            return ERR("%s: tensor %s: sell slice %zu has %u slots, its fullest row %zu elements", path, t->name, s,
                       t->ix_ptr[s + 1] - t->ix_ptr[s], width);
        for (size_t i = 0; i < SELL; i++) {
            size_t next = 0;
            for (size_t j = 0; j < width; j++) {
                size_t e = SELL * ((size_t)t->ix_ptr[s] + j) + i, c = cols[e];
                int pad = wide ? ((const uint32_t *)t->values)[e] == 0 : ((const uint16_t *)t->values)[e] == 0;
                if (j < n[i] ? pad || c < next || c >= t->cols : !pad || c != 0)
                    return ERR("%s: tensor %s: sell slice %zu row %zu slot %zu: %s", path, t->name, s, s * SELL + i, j,
                               j >= n[i] ? "padding that is not column 0 and value 0"
                               : pad ? "a stored element whose value is 0" : "column out of order or range");
                next = c + 1;
            }
        }
    }
    return 0;
}

// The members of a sell tensor and their checks.
static int sell_members(PackTensor *t, const Pack *p, size_t *rank) {
    size_t slices = (t->rows + SELL - 1) / SELL, size;
    const char *path = p->path;
    if (t->cols > SELL_COLS_MAX || pack_val_is_quant(t->val))
        return ERR("%s: tensor %s: sell holds at most %d columns of F32, BF16 or F16 values (%zu of %s)", path,
                   t->name, SELL_COLS_MAX, t->cols, VAL_NAMES[t->val]);
    if (!(t->nnz_ptr = (const uint32_t *)tensor_member(p, rank, t, S_NNZ, 4 * (t->rows + 1), NULL))) return -1;
    TRY(check_prefix(t->nnz_ptr, t->rows, t->cols, t->nnz, path, t->name, "nnz"));
    if (!(t->index = tensor_member(p, rank, t, S_INDEX, SIZE_MAX, &size))) return -1;
    if (size % (2 * SELL)) return ERR("%s: member %s.index has %zu bytes, not a multiple of 16", path, t->name, size);
    t->slots = size / (2 * SELL);
    t->index_bytes = size;
    if (!(t->ix_ptr = (const uint32_t *)tensor_member(p, rank, t, S_IXPTR, 4 * (slices + 1), NULL))) return -1;
    TRY(check_prefix(t->ix_ptr, slices, SIZE_MAX, t->slots, path, t->name, "ixptr"));
    if (!(t->values = tensor_member(p, rank, t, S_VALUES, pack_val_bytes(t->val, SELL * t->slots), &t->values_bytes)))
        return -1;
    return check_sell(t, path);
}

// Nm: in every row, each group's positions below M and strictly increasing, the row's
// padding bits zero.
static int check_nm(const PackTensor *t, const char *path) {
    unsigned n = t->nm_n, m = t->nm_m, bits = pack_nm_bits(m);
    size_t groups = t->cols / m, stride = pack_nm_row_bytes(t->cols, n, m), used = groups * n * bits;
    for (size_t r = 0; r < t->rows; r++) {
        const uint8_t *row = t->index + r * stride;
        for (size_t g = 0, e = 0; g < groups; g++) {
            unsigned next = 0; // the least position the next element may have
            for (unsigned j = 0; j < n; j++, e++) {
                unsigned c = pack_nm_pos(row, e, bits);
                if (c < next || c >= m)
                    return ERR("%s: tensor %s: nm row %zu group %zu: position %u out of order or range (%u:%u)", path,
                               t->name, r, g, c, n, m);
                next = c + 1;
            }
        }
        if (used % 8 && row[stride - 1] >> (used % 8))
            return ERR("%s: tensor %s: nm row %zu: padding bits after its positions are not zero", path, t->name, r);
    }
    return 0;
}

// The members of an nm tensor and their checks: the pattern, nnz as it implies.
static int nm_members(PackTensor *t, const Pack *p, size_t *rank, const json_t *pat) {
    const char *path = p->path;
    const json_t *jn = json_array_get(pat, 0), *jm = json_array_get(pat, 1);
    if (!json_is_array(pat) || json_array_size(pat) != 2 || !json_is_integer(jn) || !json_is_integer(jm) ||
        json_integer_value(jn) < 1 || json_integer_value(jm) <= json_integer_value(jn) ||
        json_integer_value(jm) > NM_M_MAX)
        return ERR("%s: tensor %s: pattern is not [N, M] with 0 < N < M <= %d", path, t->name, NM_M_MAX);
    t->nm_n = (unsigned)json_integer_value(jn);
    t->nm_m = (unsigned)json_integer_value(jm);
    if (t->ndim != 2 || t->cols % t->nm_m)
        return ERR("%s: tensor %s: nm %u:%u needs a 2-D tensor whose columns M divides (%zu x %zu)", path, t->name,
                   t->nm_n, t->nm_m, t->rows, t->cols);
    if (t->nnz != t->rows * (t->cols / t->nm_m) * t->nm_n)
        return ERR("%s: tensor %s: nnz %zu, but nm %u:%u of %zu x %zu stores %zu", path, t->name, t->nnz, t->nm_n,
                   t->nm_m, t->rows, t->cols, t->rows * (t->cols / t->nm_m) * t->nm_n);
    size_t ix = t->rows * pack_nm_row_bytes(t->cols, t->nm_n, t->nm_m);
    if (!(t->index = tensor_member(p, rank, t, S_INDEX, ix, &t->index_bytes))) return -1;
    if (!(t->values = tensor_member(p, rank, t, S_VALUES, pack_val_bytes(t->val, t->nnz), &t->values_bytes))) return -1;
    return check_nm(t, path);
}

// One manifest tensor entry: its fields, its members, its streams.
static int manifest_tensor(PackTensor *t, const Pack *p, size_t *rank, const json_t *o, StDtype dt) {
    static const char *const keys[] = {"name", "shape", "dtype", "prunable", "encoding", "values", "nnz", "pattern"};
    const char *path = p->path;
    const json_t *pat = json_is_object(o) ? json_object_get(o, "pattern") : NULL; // nm only
    TRY(keys_exact(o, keys, pat ? 8 : 7, path, "a tensor entry"));
    const char *name = json_string_value(json_object_get(o, "name"));
    if (!name || !pack_name_ok(name, TENSOR_NAME_MAX))
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
    int e = s ? name_index(ENC_NAMES, p->version + 2, s) : -1; // version 1: three, 2: tiles, 3: sell, 4: nm
    if (e < 0) return ERR("%s: tensor %s: unknown encoding %s (format version %d)", path, name, s ? s : "?", p->version);
    t->enc = (PackEnc)e;
    s = json_string_value(json_object_get(o, "values"));
    int v = s ? name_index(VAL_NAMES, 5, s) : -1;
    if (v < 0) return ERR("%s: tensor %s: unknown value type %s", path, name, s ? s : "?");
    t->val = (PackVal)v;
    // The value type follows from the pack's quant and dtype: a tensor must agree.
    PackVal dval = PACK_F32;
    pack_val_of_dtype(&dval, dt);
    PackVal want = t->prunable ? pack_val_of_quant(p->quant, dval) : dval;
    if (t->val != want)
        return ERR("%s: tensor %s: values %s, but a %s tensor of this pack (quant %s, dtype %s) has %s", path, name,
                   VAL_NAMES[t->val], t->prunable ? "prunable" : "dense", QUANT_NAMES[p->quant], st_dtype_name(dt),
                   VAL_NAMES[want]);
    if (!t->prunable && t->enc != PACK_DENSE)
        return ERR("%s: tensor %s: not prunable but %s", path, name, ENC_NAMES[t->enc]);
    if ((t->enc == PACK_NM) != (pat != NULL))
        return ERR("%s: tensor %s: a pattern goes with encoding nm and only with it (%s)", path, name, ENC_NAMES[t->enc]);
    if (json_size(&t->nnz, json_object_get(o, "nnz")) < 0) return ERR("%s: tensor %s: bad nnz", path, name);
    if (t->enc == PACK_DENSE ? t->nnz != numel : t->nnz > numel || t->nnz > UINT32_MAX)
        return ERR("%s: tensor %s: nnz %zu does not fit %s (%zu elements)", path, name, t->nnz, ENC_NAMES[t->enc], numel);
    if (t->enc == PACK_DENSE) {
        if (!(t->values = tensor_member(p, rank, t, S_DENSE, pack_val_bytes(t->val, numel), &t->values_bytes))) return -1;
    } else if (t->enc == PACK_TILES) {
        TRY(tiles_members(t, p, rank));
    } else if (t->enc == PACK_SELL) {
        TRY(sell_members(t, p, rank));
    } else if (t->enc == PACK_NM) {
        TRY(nm_members(t, p, rank, pat));
    } else {
        if (!(t->nnz_ptr = (const uint32_t *)tensor_member(p, rank, t, S_NNZ, 4 * (t->rows + 1), NULL))) return -1;
        TRY(check_prefix(t->nnz_ptr, t->rows, t->cols, t->nnz, path, name, "nnz"));
        size_t want_ix = t->enc == PACK_BITMAP ? t->rows * ((t->cols + 7) / 8) : SIZE_MAX;
        if (!(t->index = tensor_member(p, rank, t, S_INDEX, want_ix, &t->index_bytes))) return -1;
        if (t->enc == PACK_DELTA) {
            if (!(t->ix_ptr = (const uint32_t *)tensor_member(p, rank, t, S_IXPTR, 4 * (t->rows + 1), NULL))) return -1;
            TRY(check_prefix(t->ix_ptr, t->rows, SIZE_MAX, t->index_bytes, path, name, "ixptr"));
        }
        if (!(t->values = tensor_member(p, rank, t, S_VALUES, pack_val_bytes(t->val, t->nnz), &t->values_bytes))) return -1;
        TRY(t->enc == PACK_BITMAP ? check_bitmap(t, path) : check_delta(t, path));
    }
    if (pack_val_is_quant(t->val) && !(t->scales = (const float *)tensor_member(p, rank, t, S_SCALES, 4 * t->rows, NULL)))
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
    size_t *rank = xcalloc((size_t)p->n_members, sizeof *rank);
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
    if (rc == 0 && (!d || st_dtype_parse(&dt, d) < 0 || pack_val_of_dtype(&dval, dt) < 0))
        rc = ERR("%s: manifest.json: dtype %s is not F32, BF16 or F16", path, d ? d : "?");
    if (rc == 0) rc = manifest_members(p, json_object_get(root, "members"));
    const json_t *ts = json_object_get(root, "tensors");
    if (rc == 0 && !json_is_array(ts)) rc = ERR("%s: manifest.json: tensors is not an array", path);
    if (rc == 0) {
        p->n = 0;
        p->t = xcalloc(json_array_size(ts) + 1, sizeof *p->t);
        for (size_t i = 0; rc == 0 && i < json_array_size(ts); i++) {
            rc = manifest_tensor(&p->t[i], p, rank, json_array_get(ts, i), dt);
            for (int j = 0; rc == 0 && j < p->n; j++)
                if (strcmp(p->t[j].name, p->t[i].name) == 0) rc = ERR("%s: tensor %s appears twice", path, p->t[i].name);
            if (rc == 0) p->n++;
        }
    }
    for (int i = 1; rc == 0 && i < p->n_members; i++) {
        const PackMember *mb = &p->members[i];
        if (rank[i]) continue;
        int f = 0;
        while (f < PACK_N_FILES && strcmp(pack_file_name(f), mb->name) != 0) f++;
        if (f == PACK_N_FILES)
            rc = ERR("%s: member %s is neither a stream of a listed tensor nor an allowed file", path, mb->name);
        else rank[i] = file_rank(f);
        if (f == 0) { // config.json
            p->config_json = (const char *)p->map.data + mb->offset;
            p->config_len = mb->size;
        }
    }
    if (rc == 0 && !p->config_json) rc = ERR("%s: no config.json member", path);
    for (int i = 2; rc == 0 && i < p->n_members; i++)
        if (rank[i] < rank[i - 1])
            rc = ERR("%s: member %s comes after %s, out of the documented order (manifest.json, config.json, the "
                     "other files, then each tensor's members in the manifest's order)", path, p->members[i].name,
                     p->members[i - 1].name);
    free(rank);
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
    if (t->enc == PACK_NM) { // row r: its groups' n positions and values in turn
        unsigned n = t->nm_n, m = t->nm_m, bits = pack_nm_bits(m);
        size_t stride = pack_nm_row_bytes(cols, n, m), per_row = cols / m * n;
        for (size_t r = r0; r < r1; r++, out += cols) {
            memset(out, 0, cols * sizeof *out);
            for (size_t e = 0; e < per_row; e++)
                out[e / n * m + pack_nm_pos(t->index + r * stride, e, bits)] = val_get(t, r * per_row + e, r);
        }
        return;
    }
    if (t->enc == PACK_SELL) { // row r: lane r%8 of its slice's first nnz slots
        const uint16_t *ix = (const uint16_t *)t->index;
        for (size_t r = r0; r < r1; r++, out += cols) {
            memset(out, 0, cols * sizeof *out);
            size_t e = SELL * (size_t)t->ix_ptr[r / SELL] + r % SELL;
            for (size_t j = 0; j < t->nnz_ptr[r + 1] - t->nnz_ptr[r]; j++, e += SELL) out[ix[e]] = val_get(t, e, r);
        }
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

size_t pack_tensor_nonzeros(const PackTensor *t) {
    if (t->enc != PACK_DENSE && t->enc != PACK_NM) return t->nnz; // (nm stores the zeros of groups short of N)
    float *row = xmalloc((t->cols ? t->cols : 1) * sizeof *row);
    size_t n = 0;
    for (size_t r = 0; r < t->rows; r++) {
        pack_decode_rows(row, t, r, r + 1);
        for (size_t c = 0; c < t->cols; c++) n += row[c] != 0;
    }
    free(row);
    return n;
}

void pack_prunable_totals(PackTotals *s, const Pack *p) {
    memset(s, 0, sizeof *s);
    for (int i = 0; i < p->n; i++) {
        const PackTensor *t = &p->t[i];
        if (!t->prunable) continue;
        s->numel += t->rows * t->cols;
        s->nonzeros += pack_tensor_nonzeros(t);
        s->bytes += pack_tensor_bytes(t);
    }
}
