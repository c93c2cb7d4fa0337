// parquet.c: the Parquet reader of parquet.h. Field ids and enums are the Parquet
// format's (parquet.thrift); the Thrift compact protocol is decoded here by hand, with
// every read bounded by the buffer it is in.
#include "io/parquet.h"

#include <limits.h>
#include <snappy-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "base/error.h" // defines: ERR, TRY, xmalloc
#include "base/utf8.h"  // defines: utf8_valid

// --- the Thrift compact protocol ------------------------------------------------------

enum { CT_STOP, CT_TRUE, CT_FALSE, CT_I8, CT_I16, CT_I32, CT_I64, CT_DOUBLE, CT_BINARY, CT_LIST, CT_SET, CT_MAP,
       CT_STRUCT };
#define THRIFT_MAX_DEPTH 32

typedef struct {
    const uint8_t *p, *end;
    int bad;                 // set on the first malformed or out-of-bounds read; reads then yield 0
    int depth;
} Thrift;

static uint64_t t_varint(Thrift *t) {
    uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (t->p >= t->end) break;
        uint8_t b = *t->p++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return x;
    }
    t->bad = 1;
    return 0;
}

static int64_t t_int(Thrift *t) {
    uint64_t u = t_varint(t);
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

static uint8_t t_byte(Thrift *t) {
    if (t->p >= t->end) {
        t->bad = 1;
        return 0;
    }
    return *t->p++;
}

// A binary (string) field: its bytes inside the buffer, or NULL.
static const uint8_t *t_binary(Thrift *t, size_t *n) {
    uint64_t len = t_varint(t);
    if (t->bad || len > (uint64_t)(t->end - t->p)) {
        t->bad = 1;
        *n = 0;
        return NULL;
    }
    const uint8_t *s = t->p;
    t->p += len;
    *n = (size_t)len;
    return s;
}

// A list or set header: its element type and count (each element takes at least one
// byte, except booleans in a struct, so a count beyond the bytes left is malformed).
static uint64_t t_list(Thrift *t, int *etype) {
    uint8_t h = t_byte(t);
    uint64_t n = h >> 4;
    *etype = h & 15;
    if (n == 15) n = t_varint(t);
    if (n > (uint64_t)(t->end - t->p)) t->bad = 1;
    return t->bad ? 0 : n;
}

static void t_skip(Thrift *t, int type);

// Skips a struct's fields up to its STOP.
static void t_skip_struct(Thrift *t) {
    if (++t->depth > THRIFT_MAX_DEPTH) t->bad = 1;
    while (!t->bad) {
        uint8_t h = t_byte(t);
        if ((h & 15) == CT_STOP) break;
        if (!(h >> 4)) t_int(t); // a long-form field id
        t_skip(t, h & 15);
    }
    t->depth--;
}

static void t_skip(Thrift *t, int type) {
    size_t n;
    int et;
    switch (type) {
    case CT_TRUE: case CT_FALSE: break;
    case CT_I8: t_byte(t); break;
    case CT_I16: case CT_I32: case CT_I64: t_varint(t); break;
    case CT_DOUBLE:
        if (t->end - t->p < 8) t->bad = 1;
        else t->p += 8;
        break;
    case CT_BINARY: t_binary(t, &n); break;
    case CT_LIST: case CT_SET: {
        if (++t->depth > THRIFT_MAX_DEPTH) t->bad = 1;
        uint64_t k = t_list(t, &et);
        for (uint64_t i = 0; i < k && !t->bad; i++) t_skip(t, et == CT_TRUE || et == CT_FALSE ? CT_I8 : et);
        t->depth--;
        break;
    }
    case CT_MAP: {
        if (++t->depth > THRIFT_MAX_DEPTH) t->bad = 1;
        uint64_t k = t_varint(t);
        if (k > (uint64_t)(t->end - t->p)) t->bad = 1;
        uint8_t kv = k && !t->bad ? t_byte(t) : 0;
        for (uint64_t i = 0; i < k && !t->bad; i++) {
            t_skip(t, kv >> 4);
            t_skip(t, kv & 15);
        }
        t->depth--;
        break;
    }
    case CT_STRUCT: t_skip_struct(t); break;
    default: t->bad = 1;
    }
}

// Reads a struct: field(t, id, type, ctx) for each field, which reads it or skips it.
typedef void (*FieldFn)(Thrift *t, int id, int type, void *ctx);
static void t_struct(Thrift *t, FieldFn field, void *ctx) {
    if (++t->depth > THRIFT_MAX_DEPTH) t->bad = 1;
    int id = 0;
    while (!t->bad) {
        uint8_t h = t_byte(t);
        int type = h & 15;
        if (type == CT_STOP) break;
        id = h >> 4 ? id + (h >> 4) : (int)t_int(t);
        field(t, id, type, ctx);
    }
    t->depth--;
}

// An integer field of any width (the writers differ: i32 and i64 both occur).
static int64_t t_number(Thrift *t, int type) {
    if (type == CT_I8) return (int8_t)t_byte(t);
    if (type == CT_I16 || type == CT_I32 || type == CT_I64) return t_int(t);
    t_skip(t, type);
    t->bad = 1;
    return 0;
}

// --- the footer -------------------------------------------------------------------------

enum { TYPE_BYTE_ARRAY = 6 };
enum { REP_REQUIRED, REP_OPTIONAL, REP_REPEATED };
static const char *const TYPE_NAMES[] = {"BOOLEAN", "INT32", "INT64", "INT96", "FLOAT", "DOUBLE", "BYTE_ARRAY",
                                         "FIXED_LEN_BYTE_ARRAY"};
static const char *const CODEC_NAMES[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD",
                                          "LZ4_RAW"};
static const char *const ENCODING_NAMES[] = {"PLAIN", "GROUP_VAR_INT", "PLAIN_DICTIONARY", "RLE", "BIT_PACKED",
                                             "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY",
                                             "RLE_DICTIONARY", "BYTE_STREAM_SPLIT"};
#define NAME_OF(tab, i) ((i) >= 0 && (size_t)(i) < sizeof tab / sizeof *tab ? tab[i] : "unknown")

typedef struct {
    int type, repetition, n_children;
    const uint8_t *name;
    size_t name_len;
} SchemaEl;

typedef struct {
    SchemaEl *schema;
    uint64_t n_schema;
    int64_t n_rows;
    int encrypted;
    // the row groups: each one's rows and its columns' chunks, read straight into the
    // chunk of the column we want once its index is known (the schema comes first)
    int leaf;                // the column's index among the leaves, or -1
    ParquetChunk *chunks;
    uint64_t n_groups;
    int64_t group_rows;      // of the row group being read
    int64_t col_i;           // index of the column chunk being read in its row group
    const char *bad;         // what is unsupported, once found
    int64_t meta_type;
    int has_dict, external;
    int64_t dict_off, data_off;
} Footer;

static void schema_field(Thrift *t, int id, int type, void *ctx) {
    SchemaEl *s = ctx;
    if (id == 1) s->type = (int)t_number(t, type);
    else if (id == 3) s->repetition = (int)t_number(t, type);
    else if (id == 4 && type == CT_BINARY) s->name = t_binary(t, &s->name_len);
    else if (id == 5) s->n_children = (int)t_number(t, type);
    else t_skip(t, type);
}

static void colmeta_field(Thrift *t, int id, int type, void *ctx) {
    Footer *f = ctx;
    ParquetChunk *c = &f->chunks[f->n_groups];
    if (id == 1) f->meta_type = t_number(t, type);
    else if (id == 4) c->codec = (int)t_number(t, type);
    else if (id == 5) c->n_values = (uint64_t)t_number(t, type);
    else if (id == 6) c->usize = (uint64_t)t_number(t, type);
    else if (id == 7) c->size = (uint64_t)t_number(t, type);
    else if (id == 9) f->data_off = t_number(t, type);
    else if (id == 11) f->dict_off = t_number(t, type), f->has_dict = 1;
    else t_skip(t, type);
}

static void chunk_field(Thrift *t, int id, int type, void *ctx) {
    Footer *f = ctx;
    if (f->col_i != f->leaf) t_skip(t, type);
    else if (id == 1) f->external = 1, t_skip(t, type);
    else if (id == 3 && type == CT_STRUCT) t_struct(t, colmeta_field, f);
    else if (id == 8 || id == 9) f->bad = "encrypted columns", t_skip(t, type);
    else t_skip(t, type);
}

static void group_field(Thrift *t, int id, int type, void *ctx) {
    Footer *f = ctx;
    if (id == 1 && type == CT_LIST) {
        int et;
        uint64_t n = t_list(t, &et);
        if (et != CT_STRUCT || (int64_t)n <= f->leaf) t->bad = 1;
        for (f->col_i = 0; (uint64_t)f->col_i < n && !t->bad; f->col_i++) t_struct(t, chunk_field, f);
    } else if (id == 3) {
        f->group_rows = t_number(t, type);
    } else {
        t_skip(t, type);
    }
}

static void file_field(Thrift *t, int id, int type, void *ctx) {
    Footer *f = ctx;
    int et;
    if (id == 2 && type == CT_LIST) {
        f->n_schema = t_list(t, &et);
        if (et != CT_STRUCT || f->n_schema == 0) t->bad = 1;
        free(f->schema); // a field given twice: the last one counts
        f->schema = xcalloc(f->n_schema ? f->n_schema : 1, sizeof *f->schema);
        for (uint64_t i = 0; i < f->n_schema && !t->bad; i++) t_struct(t, schema_field, &f->schema[i]);
    } else if (id == 3) {
        f->n_rows = t_number(t, type);
    } else if (id == 4 && type == CT_LIST && f->leaf >= 0) {
        uint64_t n = t_list(t, &et);
        if (et != CT_STRUCT) t->bad = 1;
        free(f->chunks);
        f->chunks = xcalloc(n ? n : 1, sizeof *f->chunks);
        for (f->n_groups = 0; f->n_groups < n && !t->bad && !f->bad; f->n_groups++) {
            f->group_rows = -1, f->meta_type = -1, f->has_dict = 0, f->external = 0, f->dict_off = f->data_off = -1;
            f->chunks[f->n_groups].codec = -1;
            t_struct(t, group_field, f);
            ParquetChunk *c = &f->chunks[f->n_groups];
            if (f->external) f->bad = "column chunks in other files (file_path)";
            if (t->bad || f->bad) break;
            // the chunk starts at its dictionary page when it has one
            int64_t start = f->has_dict && f->dict_off > 0 && f->dict_off < f->data_off ? f->dict_off : f->data_off;
            if (f->group_rows < 0 || f->meta_type != TYPE_BYTE_ARRAY || start < 4 || c->codec < 0 ||
                c->n_values != (uint64_t)f->group_rows) {
                t->bad = 1;
                break;
            }
            c->offset = (uint64_t)start;
        }
    } else if (id == 8 || id == 9) {
        f->encrypted = 1;
        t_skip(t, type);
    } else {
        t_skip(t, type);
    }
}

// The column's place in the schema: the leaf index of the top-level field named
// column (depth-first order is the order of the column chunks), or an error.
static int schema_find(Parquet *p, Footer *f) {
    const SchemaEl *s = f->schema;
    if (s[0].n_children < 1 || (uint64_t)s[0].n_children >= f->n_schema)
        return ERR("%s: malformed footer (the schema's root has %d fields)", p->path, s[0].n_children);
    // walk the tree: remaining[d] = fields still to come under the node at depth d
    int remaining[THRIFT_MAX_DEPTH + 1], depth = 0, leaf = 0;
    remaining[0] = s[0].n_children;
    ByteVec names = {0};
    int rc = 1; // 1: not found yet
    for (uint64_t i = 1; i < f->n_schema && depth >= 0 && rc == 1; i++) {
        const SchemaEl *e = &s[i];
        int top = depth == 0;
        int match = top && e->name && e->name_len == strlen(p->column) && memcmp(e->name, p->column, e->name_len) == 0;
        if (top && names.n < 400) {
            if (names.n) bytevec_append(&names, ", ", 2);
            bytevec_append(&names, e->name ? (const char *)e->name : "?", e->name ? e->name_len : 1);
        }
        if (match) {
            if (e->n_children > 0)
                rc = ERR("%s: column %s is nested (a group of %d fields): not supported; a top-level string column "
                         "is", p->path, p->column, e->n_children);
            else if (e->repetition == REP_REPEATED)
                rc = ERR("%s: column %s is repeated (a list): not supported; a string per row is", p->path, p->column);
            else if (e->type != TYPE_BYTE_ARRAY)
                rc = ERR("%s: column %s is %s, not a string column (BYTE_ARRAY)", p->path, p->column,
                         NAME_OF(TYPE_NAMES, e->type));
            else {
                f->leaf = leaf;
                p->optional = e->repetition == REP_OPTIONAL;
                rc = 0;
            }
        }
        remaining[depth]--;
        if (e->n_children > 0) {
            if (depth == THRIFT_MAX_DEPTH || (uint64_t)e->n_children >= f->n_schema) {
                rc = ERR("%s: malformed footer (the schema is too deep or too wide)", p->path);
                break;
            }
            remaining[++depth] = e->n_children;
        } else {
            leaf++;
        }
        while (depth >= 0 && remaining[depth] == 0) depth--;
    }
    if (rc == 1)
        rc = ERR("%s: no column %s (top-level columns: %.*s); choose one with --field", p->path, p->column,
                 (int)names.n, names.v ? names.v : "");
    bytevec_free(&names);
    return rc;
}

int parquet_open_mem(Parquet *p, const void *data, size_t size, const char *name, const char *column) {
    memset(p, 0, sizeof *p);
    p->path = xstrdup(name);
    p->column = xstrdup(column);
    p->data = data;
    p->size = size;
    const uint8_t *d = data;
    int rc = 0;
    Footer f = {0};
    f.leaf = -1;
    if (size >= 4 && memcmp(d + size - 4, "PARE", 4) == 0)
        rc = ERR("%s: an encrypted Parquet file (PARE): not supported", name);
    else if (size < 12 || memcmp(d, "PAR1", 4) != 0 || memcmp(d + size - 4, "PAR1", 4) != 0)
        rc = ERR("%s: not a Parquet file (no PAR1 at its start and end)", name);
    uint32_t flen = 0;
    if (rc == 0) {
        memcpy(&flen, d + size - 8, 4); // little-endian, as the format and x86-64 are
        if (flen > size - 12) rc = ERR("%s: footer of %u bytes in a file of %zu", name, flen, size);
    }
    if (rc == 0) {
        // twice: the schema first (to learn which column chunk is ours), then the row groups
        for (int pass = 0; pass < 2 && rc == 0; pass++) {
            Thrift t = {d + size - 8 - flen, d + size - 8, 0, 0};
            free(f.schema);
            f.schema = NULL;
            t_struct(&t, file_field, &f);
            if (t.bad) rc = ERR("%s: malformed footer (Thrift metadata)", name);
            else if (f.encrypted) rc = ERR("%s: encrypted footer or columns: not supported", name);
            else if (f.bad) rc = ERR("%s: column %s: %s: not supported", name, column, f.bad);
            else if (!f.schema) rc = ERR("%s: malformed footer (no schema)", name);
            else if (pass == 0) rc = schema_find(p, &f);
        }
    }
    uint64_t row = 0;
    for (uint64_t g = 0; rc == 0 && g < f.n_groups; g++) {
        ParquetChunk *c = &f.chunks[g];
        uint64_t footer_at = size - 8 - flen;
        if (c->offset > footer_at || c->size > footer_at - c->offset)
            rc = ERR("%s: row group %llu: column %s's chunk [%llu, +%llu) is outside the file's data", name,
                     (unsigned long long)g, column, (unsigned long long)c->offset, (unsigned long long)c->size);
        else if (c->codec != 0 && c->codec != 1 && c->codec != 2 && c->codec != 6)
            rc = ERR("%s: row group %llu: column %s is compressed with %s: not supported (UNCOMPRESSED, SNAPPY, "
                     "GZIP, ZSTD are)", name, (unsigned long long)g, column, NAME_OF(CODEC_NAMES, c->codec));
        c->row0 = row;
        row += c->n_values;
    }
    if (rc == 0 && f.n_groups > INT_MAX) rc = ERR("%s: %llu row groups", name, (unsigned long long)f.n_groups);
    if (rc == 0 && (f.n_rows < 0 || (uint64_t)f.n_rows != row))
        rc = ERR("%s: the footer says %lld rows, the row groups hold %llu", name, (long long)f.n_rows,
                 (unsigned long long)row);
    free(f.schema);
    if (rc < 0) {
        free(f.chunks);
        free(p->path);
        free(p->column);
        memset(p, 0, sizeof *p);
        return -1;
    }
    p->chunks = f.chunks;
    p->n_groups = (int)f.n_groups;
    p->n_rows = row;
    return 0;
}

int parquet_open(Parquet *p, const char *path, const char *column) {
    MappedFile m;
    TRY(mapped_open(&m, path));
    if (parquet_open_mem(p, m.data, m.size, path, column) < 0) {
        mapped_close(&m);
        return -1;
    }
    p->map = m;
    return 0;
}

void parquet_close(Parquet *p) {
    mapped_close(&p->map);
    free(p->chunks);
    free(p->path);
    free(p->column);
    memset(p, 0, sizeof *p);
}

// --- pages ---------------------------------------------------------------------------------

enum { PAGE_DATA = 0, PAGE_INDEX = 1, PAGE_DICT = 2, PAGE_DATA_V2 = 3 };
enum { ENC_PLAIN = 0, ENC_PLAIN_DICT = 2, ENC_RLE = 3, ENC_RLE_DICT = 8 };

typedef struct {
    int64_t type, usize, csize;
    int64_t n_values, encoding, def_encoding;   // v1, v2 and dictionary pages
    int64_t def_len, rep_len, compressed;       // v2
    int has_data, has_dict, has_v2;
} PageHeader;

// DataPageHeader and DictionaryPageHeader: num_values and encoding are fields 1 and 2 of
// both; field 3 is the data page's definition level encoding (the dictionary's is_sorted,
// a boolean, is skipped).
static void data_field(Thrift *t, int id, int type, void *ctx) {
    PageHeader *h = ctx;
    if (id == 1) h->n_values = t_number(t, type);
    else if (id == 2) h->encoding = t_number(t, type);
    else if (id == 3 && type != CT_TRUE && type != CT_FALSE) h->def_encoding = t_number(t, type);
    else t_skip(t, type);
}

static void v2_field(Thrift *t, int id, int type, void *ctx) {
    PageHeader *h = ctx;
    if (id == 1) h->n_values = t_number(t, type);
    else if (id == 4) h->encoding = t_number(t, type);
    else if (id == 5) h->def_len = t_number(t, type);
    else if (id == 6) h->rep_len = t_number(t, type);
    else if (id == 7 && (type == CT_TRUE || type == CT_FALSE)) h->compressed = type == CT_TRUE;
    else t_skip(t, type);
}

static void page_field(Thrift *t, int id, int type, void *ctx) {
    PageHeader *h = ctx;
    if (id == 1) h->type = t_number(t, type);
    else if (id == 2) h->usize = t_number(t, type);
    else if (id == 3) h->csize = t_number(t, type);
    else if ((id == 5 || id == 7) && type == CT_STRUCT) {
        t_struct(t, data_field, h);
        h->has_data |= id == 5;
        h->has_dict |= id == 7;
    } else if (id == 8 && type == CT_STRUCT) {
        t_struct(t, v2_field, h);
        h->has_v2 = 1;
    } else {
        t_skip(t, type);
    }
}

// What decoding one column chunk needs.
typedef struct {
    const Parquet *p;
    int g;
    const ParquetChunk *c;
    ParquetText *out;            // its page and page_cap: the current page, decompressed
    uint8_t *dict;               // the dictionary page, decompressed; its entries:
    uint32_t *dict_off, *dict_len; // (n_dict)
    uint64_t n_dict;
    uint64_t row;                // rows of the chunk done (values, nulls included)
} Chunk;

static int chunk_err(const Chunk *k, const char *what) {
    return ERR("%s: row group %d, column %s: %s", k->p->path, k->g, k->p->column, what);
}

// dst (dn) = the page bytes src (sn) undone with the chunk's codec; exactly dn bytes.
static int decompress(const Chunk *k, uint8_t *dst, size_t dn, const uint8_t *src, size_t sn) {
    switch (k->c->codec) {
    case 0:
        if (sn != dn) return chunk_err(k, "an uncompressed page whose two sizes differ");
        if (dn) memcpy(dst, src, dn);
        return 0;
    case 1: {
        size_t n;
        if (snappy_uncompressed_length((const char *)src, sn, &n) != SNAPPY_OK || n != dn ||
            snappy_uncompress((const char *)src, sn, (char *)dst, &n) != SNAPPY_OK || n != dn)
            return chunk_err(k, "corrupt Snappy data in a page");
        return 0;
    }
    case 2: {
        z_stream z = {0};
        if (inflateInit2(&z, 15 + 32) != Z_OK) return chunk_err(k, "zlib cannot start");
        z.next_in = (Bytef *)src, z.avail_in = (uInt)sn;
        z.next_out = dst, z.avail_out = (uInt)dn;
        int zr = sn > UINT_MAX || dn > UINT_MAX ? Z_BUF_ERROR : inflate(&z, Z_FINISH);
        size_t got = z.total_out;
        inflateEnd(&z);
        if (zr != Z_STREAM_END || got != dn) return chunk_err(k, "corrupt gzip data in a page");
        return 0;
    }
    case 6: {
        size_t n = ZSTD_decompress(dst, dn, src, sn);
        if (ZSTD_isError(n) || n != dn) return chunk_err(k, "corrupt Zstandard data in a page");
        return 0;
    }
    }
    return chunk_err(k, "an unsupported codec"); // refused at open
}

// The RLE / bit-packed hybrid (definition levels, dictionary indices) over [p, end).
typedef struct {
    const uint8_t *p, *end;
    int width;                  // bits per value, 0..32
    uint64_t run;               // values left in the current run
    int packed;                 // the run is bit-packed (else repeated)
    uint32_t value;             // the repeated value
    uint64_t bit;               // bit-packed: position of the next value, in bits from p
    int bad;
} Hybrid;

static int hybrid_next_run(Hybrid *h) {
    Thrift t = {h->p, h->end, 0, 0}; // the run header is a ULEB128 varint, as Thrift's
    uint64_t head = t_varint(&t);
    if (t.bad) return h->bad = 1, -1;
    h->p = t.p;
    h->packed = head & 1;
    if (h->packed) {
        uint64_t groups = head >> 1; // of 8 values
        uint64_t bytes = groups * (uint64_t)h->width;
        if (groups == 0 || groups > (1ull << 32) || bytes > (uint64_t)(h->end - h->p)) return h->bad = 1, -1;
        h->run = groups * 8;
        h->bit = 0;
    } else {
        h->run = head >> 1;
        int nb = (h->width + 7) / 8;
        if (h->run == 0 || nb > h->end - h->p) return h->bad = 1, -1;
        h->value = 0;
        for (int i = 0; i < nb; i++) h->value |= (uint32_t)h->p[i] << (8 * i);
        if (h->width < 32 && (h->value >> h->width)) return h->bad = 1, -1;
        h->p += nb;
    }
    return 0;
}

// The next value, or -1 when the data ends or is malformed.
static int64_t hybrid_next(Hybrid *h) {
    if (h->run == 0 && hybrid_next_run(h) < 0) return -1;
    h->run--;
    if (!h->packed) return h->value;
    uint32_t v = 0;
    for (int i = 0; i < h->width; i++, h->bit++) v |= (uint32_t)(h->p[h->bit >> 3] >> (h->bit & 7) & 1) << i;
    if (h->run == 0) h->p += (h->bit + 7) / 8; // the run's bytes (whole groups of 8 values)
    return v;
}

// The run of equal values ahead, at most max: its value, its length into *n (1 inside
// a bit-packed run). Nulls come in long runs: they are skipped a run at a time.
static int64_t hybrid_take(Hybrid *h, uint64_t max, uint64_t *n) {
    if (h->run == 0 && hybrid_next_run(h) < 0) return -1;
    if (h->packed) {
        *n = 1;
        return hybrid_next(h);
    }
    *n = h->run < max ? h->run : max;
    h->run -= *n;
    return h->value;
}

// Appends string s (n) as the next row, checked to be UTF-8.
static int emit(Chunk *k, const uint8_t *s, size_t n) {
    ParquetText *o = k->out;
    size_t bad;
    if (!utf8_valid((const char *)s, n, &bad)) {
        char msg[96];
        snprintf(msg, sizeof msg, "row %llu: invalid UTF-8 at byte %zu of its string",
                 (unsigned long long)(k->c->row0 + k->row), bad);
        return chunk_err(k, msg);
    }
    if (o->text.n + n > PARQUET_MAX_GROUP_TEXT) return chunk_err(k, "more text than a row group may hold (2 GiB)");
    if (o->n + 2 > o->cap) {
        o->cap = o->cap ? 2 * o->cap : 1024;
        o->off = xrealloc(o->off, o->cap * sizeof *o->off);
    }
    bytevec_append(&o->text, s, n);
    o->off[++o->n] = o->text.n;
    k->row++;
    return 0;
}

// A dictionary page: its PLAIN strings become the chunk's dictionary.
static int read_dict(Chunk *k, const PageHeader *h, const uint8_t *src) {
    if (k->dict) return chunk_err(k, "a second dictionary page");
    if (h->encoding != ENC_PLAIN && h->encoding != ENC_PLAIN_DICT)
        return chunk_err(k, "a dictionary page not PLAIN encoded");
    size_t n = (size_t)h->usize;
    k->dict = xmalloc(n ? n : 1);
    TRY(decompress(k, k->dict, n, src, (size_t)h->csize));
    if (h->n_values < 0 || (uint64_t)h->n_values > n / 4) return chunk_err(k, "a dictionary of more entries than bytes");
    k->n_dict = (uint64_t)h->n_values;
    k->dict_off = xmalloc((k->n_dict ? k->n_dict : 1) * sizeof *k->dict_off);
    k->dict_len = xmalloc((k->n_dict ? k->n_dict : 1) * sizeof *k->dict_len);
    size_t at = 0;
    for (uint64_t i = 0; i < k->n_dict; i++) {
        uint32_t len;
        if (n - at < 4) return chunk_err(k, "a dictionary entry past its page");
        memcpy(&len, k->dict + at, 4);
        at += 4;
        if (len > n - at) return chunk_err(k, "a dictionary entry past its page");
        k->dict_off[i] = (uint32_t)at, k->dict_len[i] = len;
        at += len;
    }
    return 0;
}

// The values of a data page: nv rows (nulls included), def levels in defs (NULL for a
// required column), values in [v, vend) with encoding enc.
static int read_values(Chunk *k, uint64_t nv, Hybrid *defs, const uint8_t *v, const uint8_t *vend, int64_t enc) {
    Hybrid idx = {0};
    int dict = enc == ENC_RLE_DICT || enc == ENC_PLAIN_DICT;
    if (dict) {
        if (!k->dict) return chunk_err(k, "dictionary indices without a dictionary page");
        if (vend == v) { // a page of nulls only may have no values at all
            idx.bad = 1;
        } else {
            idx = (Hybrid){v + 1, vend, v[0], 0, 0, 0, 0, 0};
            if (v[0] > 32) return chunk_err(k, "dictionary indices wider than 32 bits");
        }
    } else if (enc != ENC_PLAIN) {
        char msg[96];
        snprintf(msg, sizeof msg, "values encoded %s: not supported (PLAIN and dictionaries are)",
                 NAME_OF(ENCODING_NAMES, enc));
        return chunk_err(k, msg);
    }
    for (uint64_t i = 0; i < nv;) {
        uint64_t run = nv - i; // a required column: all present
        if (defs) {
            int64_t d = hybrid_take(defs, nv - i, &run);
            if (d < 0 || d > 1) return chunk_err(k, "malformed definition levels");
            if (d == 0) { // a run of nulls
                k->out->nulls += run, k->row += run, i += run;
                continue;
            }
        }
        for (uint64_t r = 0; r < run; r++) { // a run of present values
            if (dict) {
                int64_t j = idx.bad ? -1 : hybrid_next(&idx);
                if (j < 0 || (uint64_t)j >= k->n_dict)
                    return chunk_err(k, "a dictionary index out of range, or missing");
                TRY(emit(k, k->dict + k->dict_off[j], k->dict_len[j]));
            } else {
                uint32_t len;
                if (vend - v < 4) return chunk_err(k, "a value past the end of its page");
                memcpy(&len, v, 4);
                v += 4;
                if (len > (uint64_t)(vend - v)) return chunk_err(k, "a value past the end of its page");
                TRY(emit(k, v, len));
                v += len;
            }
        }
        i += run;
    }
    return 0;
}

// A data page (v1 or v2) of the chunk.
static int read_data(Chunk *k, const PageHeader *h, const uint8_t *src) {
    int v2 = h->type == PAGE_DATA_V2;
    if (h->n_values < 0 || (uint64_t)h->n_values > PARQUET_MAX_PAGE_VALUES)
        return chunk_err(k, "a data page of more values than this reader takes (2^26; parquet.h)");
    uint64_t nv = (uint64_t)h->n_values;
    if (nv > k->c->n_values - k->row) return chunk_err(k, "data pages hold more values than the chunk");
    size_t us = (size_t)h->usize, cs = (size_t)h->csize, levels = 0;
    if (v2) {
        if (h->rep_len != 0) return chunk_err(k, "repetition levels in a flat column");
        if (h->def_len < 0 || (uint64_t)h->def_len > cs || (uint64_t)h->def_len > us)
            return chunk_err(k, "definition levels longer than their page");
        levels = (size_t)h->def_len; // stored uncompressed, before the values
    }
    ParquetText *o = k->out;
    if (us + 8 > o->page_cap) { // kept across pages and row groups: no fresh pages to fault in
        o->page_cap = us + 8 > 2 * o->page_cap ? us + 8 : 2 * o->page_cap;
        free(o->page);
        o->page = xmalloc(o->page_cap);
    }
    memcpy(o->page, src, levels);
    if (v2 && !h->compressed) {
        if (cs != us) return chunk_err(k, "an uncompressed page whose two sizes differ");
        memcpy(o->page + levels, src + levels, us - levels);
    } else if (us - levels > 0 || cs - levels > 0) {
        TRY(decompress(k, o->page + levels, us - levels, src + levels, cs - levels));
    }
    const uint8_t *p = o->page, *end = o->page + us;
    Hybrid defs = {0};
    if (k->p->optional) {
        if (v2) {
            defs = (Hybrid){p, p + levels, 1, 0, 0, 0, 0, 0};
            p += levels;
        } else {
            if (h->def_encoding != ENC_RLE) return chunk_err(k, "definition levels not RLE encoded: not supported");
            uint32_t len;
            if (end - p < 4) return chunk_err(k, "definition levels past the end of their page");
            memcpy(&len, p, 4);
            if (len > (uint64_t)(end - p - 4)) return chunk_err(k, "definition levels past the end of their page");
            defs = (Hybrid){p + 4, p + 4 + len, 1, 0, 0, 0, 0, 0};
            p += 4 + len;
        }
    } else if (v2) {
        p += levels; // a required column has none, but skip what the header says is there
    }
    return read_values(k, nv, k->p->optional ? &defs : NULL, p, end, h->encoding);
}

int parquet_read_group(ParquetText *t, const Parquet *p, int g) {
    t->text.n = 0;
    t->n = 0;
    t->nulls = 0;
    if (!t->off) {
        t->cap = 1024;
        t->off = xmalloc(t->cap * sizeof *t->off);
    }
    t->off[0] = 0;
    const ParquetChunk *c = &p->chunks[g];
    // the strings take about the chunk's decompressed size: one allocation, not a doubling
    // series of copies (the hint is bounded: a footer may lie)
    bytevec_reserve(&t->text, c->usize < c->size * 64 && c->usize < PARQUET_MAX_GROUP_TEXT ? c->usize : 0);
    Chunk k = {p, g, c, t, NULL, NULL, NULL, 0, 0};
    const uint8_t *at = p->data + c->offset, *end = at + c->size;
    int rc = 0;
    while (rc == 0 && k.row < c->n_values) {
        PageHeader h = {-1, -1, -1, -1, -1, -1, 0, 0, 1, 0, 0, 0};
        Thrift th = {at, end, 0, 0};
        t_struct(&th, page_field, &h);
        if (th.bad) {
            rc = chunk_err(&k, at == end ? "the chunk ends before its values" : "a malformed page header");
            break;
        }
        at = th.p;
        if (h.csize < 0 || h.usize < 0 || (uint64_t)h.csize > (uint64_t)(end - at) ||
            (uint64_t)h.usize > PARQUET_MAX_PAGE_BYTES) {
            rc = chunk_err(&k, "a page whose size is negative, past the chunk, or above 1 GiB decompressed");
            break;
        }
        const uint8_t *src = at;
        at += h.csize;
        if (h.type == PAGE_DICT && h.has_dict) rc = read_dict(&k, &h, src);
        else if (h.type == PAGE_DATA && h.has_data) rc = read_data(&k, &h, src);
        else if (h.type == PAGE_DATA_V2 && h.has_v2) rc = read_data(&k, &h, src);
        else if (h.type != PAGE_INDEX) rc = chunk_err(&k, "a page of unknown type, or without its header");
    }
    free(k.dict);
    free(k.dict_off);
    free(k.dict_len);
    return rc;
}

void parquet_text_free(ParquetText *t) {
    bytevec_free(&t->text);
    free(t->off);
    free(t->page);
    memset(t, 0, sizeof *t);
}
