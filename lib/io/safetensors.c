// safetensors.c: the safetensors reader (mmap + validation) and writer (HF byte
// layout, streamed through an atomic AFile). See safetensors.h for the format
// and for what is checked; the checks follow huggingface/safetensors'
// safetensors/src/tensor.rs (read_metadata, Metadata::validate, prepare), read at
// the 0.8.0-dev tree.
#include "io/safetensors.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h" // defines: ERR, xmalloc, xstrdup
#include "base/vec.h"   // defines: ByteVec

#include <xxhash.h>

// --- dtypes --------------------------------------------------------------------

static const struct { const char *name; size_t size; } dtypes[ST_NDTYPES] = {
    [ST_BOOL] = {"BOOL", 1}, [ST_U8] = {"U8", 1}, [ST_I8] = {"I8", 1},
    [ST_F8_E5M2] = {"F8_E5M2", 1}, [ST_F8_E4M3] = {"F8_E4M3", 1},
    [ST_F8_E8M0] = {"F8_E8M0", 1}, [ST_F8_E4M3FNUZ] = {"F8_E4M3FNUZ", 1},
    [ST_F8_E5M2FNUZ] = {"F8_E5M2FNUZ", 1}, [ST_I16] = {"I16", 2}, [ST_U16] = {"U16", 2},
    [ST_F16] = {"F16", 2}, [ST_BF16] = {"BF16", 2}, [ST_I32] = {"I32", 4},
    [ST_U32] = {"U32", 4}, [ST_F32] = {"F32", 4}, [ST_C64] = {"C64", 8},
    [ST_F64] = {"F64", 8}, [ST_I64] = {"I64", 8}, [ST_U64] = {"U64", 8},
};

const char *st_dtype_name(StDtype d) {
    return (unsigned)d < ST_NDTYPES ? dtypes[d].name : "?";
}

size_t st_dtype_size(StDtype d) {
    return (unsigned)d < ST_NDTYPES ? dtypes[d].size : 0;
}

int st_dtype_parse(StDtype *out, const char *name) {
    for (int i = 0; i < ST_NDTYPES; i++)
        if (strcmp(name, dtypes[i].name) == 0) { *out = (StDtype)i; return 0; }
    return -1;
}

// --- helpers -------------------------------------------------------------------

// Strict UTF-8 as Rust's str::from_utf8 accepts it: no overlong forms, no
// surrogates, nothing above U+10FFFF. Returns 1, or 0 with *bad = offending offset.
static int utf8_valid(const uint8_t *s, size_t n, size_t *bad) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t len;
        uint8_t lo = 0x80, hi = 0xBF; // allowed range of the second byte
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else { *bad = i; return 0; }
        if (n - i < len || s[i + 1] < lo || s[i + 1] > hi) { *bad = i; return 0; }
        for (size_t k = 2; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) { *bad = i; return 0; }
        i += len;
    }
    return 1;
}

static uint64_t hash_name(const char *s) { // FNV-1a
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

// Product of dims times the element size, or -1 on overflow.
static int shape_bytes(size_t *nelem, size_t *nbytes, const int64_t *shape, int ndim,
                       size_t esize) {
    size_t n = 1;
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0 || (uint64_t)shape[i] > SIZE_MAX ||
            __builtin_mul_overflow(n, (size_t)shape[i], &n)) return -1;
    if (__builtin_mul_overflow(n, esize, nbytes)) return -1;
    *nelem = n;
    return 0;
}

// --- reader --------------------------------------------------------------------

typedef struct { size_t begin, end; int order; } Span; // a tensor's place while sorting

static int span_cmp(const void *a, const void *b) {
    const Span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->order - y->order; // zero-size tensors at one offset keep header order
}

static int parse_metadata(SafeTensors *st, json_t *meta) {
    if (json_is_null(meta)) return 0; // the reference reads null as "no metadata"
    if (!json_is_object(meta))
        return ERR("%s: __metadata__ must be an object of strings", st->path);
    size_t n = json_object_size(meta);
    st->meta_keys = xcalloc(n, sizeof(char *));
    st->meta_vals = xcalloc(n, sizeof(char *));
    const char *key;
    json_t *val;
    json_object_foreach(meta, key, val) {
        if (!json_is_string(val))
            return ERR("%s: __metadata__ value of '%.100s' is not a string", st->path, key);
        st->meta_keys[st->n_meta] = xstrdup(key);
        st->meta_vals[st->n_meta] = xstrdup(json_string_value(val));
        st->n_meta++;
    }
    return 0;
}

// Reads a non-negative JSON integer.
static int json_size(size_t *out, json_t *v) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) return -1;
    *out = (size_t)json_integer_value(v);
    return 0;
}

// Fills t (all but data) and its span from one header entry.
static int parse_tensor(StTensor *t, Span *span, const SafeTensors *st, const char *name,
                        json_t *e) {
    const char *p = st->path;
    if (!json_is_object(e)) return ERR("%s: tensor '%.100s': entry is not an object", p, name);
    json_t *dt = json_object_get(e, "dtype");
    json_t *shape = json_object_get(e, "shape");
    json_t *offs = json_object_get(e, "data_offsets");
    if (!json_is_string(dt))
        return ERR("%s: tensor '%.100s': dtype missing or not a string", p, name);
    if (st_dtype_parse(&t->dtype, json_string_value(dt)) < 0)
        return ERR("%s: tensor '%.100s': unsupported dtype '%.40s'", p, name,
                   json_string_value(dt));
    if (!json_is_array(shape))
        return ERR("%s: tensor '%.100s': shape missing or not an array", p, name);
    if (json_array_size(shape) > ST_MAX_DIMS)
        return ERR("%s: tensor '%.100s': %zu dimensions, at most %d supported", p, name,
                   json_array_size(shape), ST_MAX_DIMS);
    t->ndim = (int)json_array_size(shape);
    for (int i = 0; i < t->ndim; i++) {
        json_t *d = json_array_get(shape, (size_t)i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return ERR("%s: tensor '%.100s': shape[%d] is not a non-negative integer", p,
                       name, i);
        t->shape[i] = (int64_t)json_integer_value(d);
    }
    if (shape_bytes(&t->nelem, &t->nbytes, t->shape, t->ndim, st_dtype_size(t->dtype)) < 0)
        return ERR("%s: tensor '%.100s': shape overflows the size arithmetic", p, name);
    size_t begin, end;
    if (!json_is_array(offs) || json_array_size(offs) != 2 ||
        json_size(&begin, json_array_get(offs, 0)) < 0 ||
        json_size(&end, json_array_get(offs, 1)) < 0)
        return ERR("%s: tensor '%.100s': data_offsets must be [begin, end] with "
                   "non-negative integers", p, name);
    if (end < begin)
        return ERR("%s: tensor '%.100s': data_offsets [%zu, %zu] end before they begin",
                   p, name, begin, end);
    if (end - begin != t->nbytes)
        return ERR("%s: tensor '%.100s': data_offsets [%zu, %zu] hold %zu bytes but its "
                   "dtype %s and shape need %zu", p, name, begin, end, end - begin,
                   st_dtype_name(t->dtype), t->nbytes);
    if (end > st->data_size)
        return ERR("%s: tensor '%.100s': data_offsets [%zu, %zu] run past the data region "
                   "(%zu bytes)", p, name, begin, end, st->data_size);
    t->offset = begin;
    span->begin = begin;
    span->end = end;
    return 0;
}

// Sorts the tensors by offset and checks that they tile the data region exactly.
static int check_layout(SafeTensors *st, Span *spans) {
    int n = st->n_tensors;
    for (int i = 0; i < n; i++) spans[i].order = i;
    qsort(spans, (size_t)n, sizeof *spans, span_cmp);
    StTensor *sorted = xmalloc((size_t)(n ? n : 1) * sizeof *sorted);
    for (int i = 0; i < n; i++) sorted[i] = st->tensors[spans[i].order];
    free(st->tensors);
    st->tensors = sorted;
    size_t pos = 0;
    for (int i = 0; i < n; i++) {
        const StTensor *t = &st->tensors[i];
        if (t->offset > pos)
            return ERR("%s: gap of %zu bytes before tensor '%.100s' (offset %zu): tensors "
                       "must tile the data region", st->path, t->offset - pos, t->name, t->offset);
        if (t->offset < pos)
            return ERR("%s: tensor '%.100s' (offset %zu) overlaps tensor '%.100s' (ends at "
                       "%zu)", st->path, t->name, t->offset, st->tensors[i - 1].name, pos);
        pos = t->offset + t->nbytes;
    }
    if (pos != st->data_size)
        return ERR("%s: tensors cover %zu bytes but the data region holds %zu (truncated "
                   "file or trailing bytes)", st->path, pos, st->data_size);
    return 0;
}

static void build_index(SafeTensors *st) {
    size_t cap = 16;
    while (cap < 2 * (size_t)st->n_tensors) cap *= 2;
    st->index = xmalloc(cap * sizeof *st->index);
    for (size_t i = 0; i < cap; i++) st->index[i] = -1;
    st->index_cap = cap;
    for (int i = 0; i < st->n_tensors; i++) {
        size_t h = (size_t)hash_name(st->tensors[i].name) & (cap - 1);
        while (st->index[h] >= 0) h = (h + 1) & (cap - 1);
        st->index[h] = i;
    }
}

static int parse_header(SafeTensors *st, json_t *root) {
    size_t n = json_object_size(root);
    st->tensors = xcalloc(n ? n : 1, sizeof *st->tensors);
    Span *spans = xcalloc(n ? n : 1, sizeof *spans);
    const char *key;
    json_t *val;
    int rc = 0;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            if ((rc = parse_metadata(st, val)) < 0) break;
            continue;
        }
        StTensor *t = &st->tensors[st->n_tensors];
        t->name = xstrdup(key);
        st->n_tensors++; // counted before parsing so that st_close frees the name
        if ((rc = parse_tensor(t, &spans[st->n_tensors - 1], st, key, val)) < 0) break;
    }
    if (rc == 0) rc = check_layout(st, spans);
    free(spans);
    if (rc < 0) return -1;
    for (int i = 0; i < st->n_tensors; i++)
        st->tensors[i].data = st->data + st->tensors[i].offset;
    build_index(st);
    return 0;
}

static int parse_file(SafeTensors *st) {
    const char *p = st->path;
    if (st->size < 8)
        return ERR("%s: %zu bytes is too short for a safetensors file", p, st->size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | st->buf[i];
    if (n > ST_MAX_HEADER)
        return ERR("%s: header length %llu exceeds the %zu-byte limit (not a safetensors "
                   "file?)", p, (unsigned long long)n, ST_MAX_HEADER);
    if (n > st->size - 8)
        return ERR("%s: header length %llu runs past the end of the file (%zu bytes; "
                   "truncated?)", p, (unsigned long long)n, st->size);
    const uint8_t *h = st->buf + 8;
    st->header_len = (size_t)n;
    st->data = h + n;
    st->data_size = st->size - 8 - (size_t)n;
    if (n == 0 || h[0] != '{') return ERR("%s: header does not start with '{'", p);
    size_t bad;
    if (!utf8_valid(h, (size_t)n, &bad))
        return ERR("%s: header is not valid UTF-8 (byte %zu of the header)", p, bad);
    json_error_t je;
    json_t *root = json_loadb((const char *)h, (size_t)n, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return ERR("%s: header is not valid JSON: %s (header byte %d)", p, je.text,
                   je.position);
    int rc = json_is_object(root) ? parse_header(st, root)
                                  : ERR("%s: header is not a JSON object", p);
    json_decref(root);
    return rc;
}

int st_open_mem(SafeTensors *st, const void *buf, size_t size, const char *name) {
    memset(st, 0, sizeof *st);
    st->path = xstrdup(name);
    st->buf = buf;
    st->size = size;
    if (parse_file(st) < 0) { st_close(st); return -1; }
    return 0;
}

int st_open(SafeTensors *st, const char *path) {
    MappedFile m;
    memset(st, 0, sizeof *st);
    TRY(mapped_open(&m, path));
    if (st_open_mem(st, m.data, m.size, path) < 0) { mapped_close(&m); return -1; }
    st->map = m;
    return 0;
}

void st_close(SafeTensors *st) {
    for (int i = 0; i < st->n_tensors; i++) free((char *)st->tensors[i].name);
    for (int i = 0; i < st->n_meta; i++) { free(st->meta_keys[i]); free(st->meta_vals[i]); }
    free(st->tensors);
    free(st->index);
    free(st->meta_keys);
    free(st->meta_vals);
    free(st->path);
    if (st->map.data) mapped_close(&st->map);
    memset(st, 0, sizeof *st);
}

const StTensor *st_find(const SafeTensors *st, const char *name) {
    if (!st->index) return NULL;
    size_t h = (size_t)hash_name(name) & (st->index_cap - 1);
    for (; st->index[h] >= 0; h = (h + 1) & (st->index_cap - 1))
        if (strcmp(st->tensors[st->index[h]].name, name) == 0) return &st->tensors[st->index[h]];
    return NULL;
}

const char *st_meta(const SafeTensors *st, const char *key) {
    for (int i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta_keys[i], key) == 0) return st->meta_vals[i];
    return NULL;
}

// --- scalar conversions --------------------------------------------------------

static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float st_bf16_to_f32(uint16_t b) { return bits_f32((uint32_t)b << 16); }

float st_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    if (exp == 0) { // zero or subnormal: mant * 2^-24, exact in float
        float v = (float)mant * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    if (exp == 31) return bits_f32(sign | 0x7f800000u | (mant << 13));
    return bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t st_f32_to_f16(float f) {
    uint32_t x = f32_bits(f), ax = x & 0x7fffffffu;
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    if (ax > 0x7f800000u) { // NaN: keep the top payload bits, as numpy does
        uint32_t r = 0x7c00u + ((ax & 0x7fffffu) >> 13);
        return (uint16_t)(sign | (r == 0x7c00u ? r + 1 : r));
    }
    if (ax >= 0x477ff000u) return sign | 0x7c00; // >= 65520 rounds to infinity
    if (ax < 0x38800000u) {                     // below 2^-14: subnormal half or zero
        if (ax <= 0x33000000u) return sign;     // <= 2^-25 rounds (to even) to zero
        uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126 - e, hm = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (hm & 1))) hm++;
        return (uint16_t)(sign | hm);
    }
    uint32_t hb = (ax >> 13) - (112u << 10), rem = ax & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (hb & 1))) hb++; // a carry into the exponent is right
    return (uint16_t)(sign | hb);
}

uint16_t st_f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); // quiet NaN
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

int st_to_f32(float *out, const SafeTensors *st, const StTensor *t) {
    const uint8_t *p = t->data;
    size_t n = t->nelem;
    switch (t->dtype) {
    case ST_F32:
        if (n) memcpy(out, p, n * 4);
        return 0;
    case ST_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t v;
            memcpy(&v, p + 2 * i, 2);
            out[i] = st_bf16_to_f32(v);
        }
        return 0;
    case ST_F16:
        for (size_t i = 0; i < n; i++) {
            uint16_t v;
            memcpy(&v, p + 2 * i, 2);
            out[i] = st_f16_to_f32(v);
        }
        return 0;
    default:
        return ERR("%s: tensor '%.100s' has dtype %s; expected F32, BF16 or F16", st->path,
                   t->name, st_dtype_name(t->dtype));
    }
}

int st_to_f32_alloc(float **out, const SafeTensors *st, const StTensor *t) {
    float *a = xmalloc(t->nelem * sizeof(float));
    if (st_to_f32(a, st, t) < 0) { free(a); *out = NULL; return -1; }
    *out = a;
    return 0;
}

// --- writer --------------------------------------------------------------------

void st_writer_init(StWriter *w) { memset(w, 0, sizeof *w); }

void st_writer_free(StWriter *w) {
    for (int i = 0; i < w->n; i++) free(w->entries[i].name);
    for (int i = 0; i < w->n_meta; i++) { free(w->meta_keys[i]); free(w->meta_vals[i]); }
    free(w->entries);
    free(w->meta_keys);
    free(w->meta_vals);
    memset(w, 0, sizeof *w);
}

static int check_utf8_str(const char *what, const char *s) {
    size_t bad;
    if (!utf8_valid((const uint8_t *)s, strlen(s), &bad))
        return ERR("safetensors writer: %s '%.100s' is not valid UTF-8", what, s);
    return 0;
}

static int writer_new_entry(StWriterEntry **out, StWriter *w, const char *name,
                            StDtype dtype, int ndim, const int64_t *shape) {
    const char *pre = "safetensors writer";
    if ((unsigned)dtype >= ST_NDTYPES)
        return ERR("%s: tensor '%.100s': bad dtype %d", pre, name, (int)dtype);
    if (strcmp(name, "__metadata__") == 0)
        return ERR("%s: '__metadata__' is not a tensor name", pre);
    TRY(check_utf8_str("tensor name", name));
    if (ndim < 0 || ndim > ST_MAX_DIMS)
        return ERR("%s: tensor '%.100s': ndim %d not in [0, %d]", pre, name, ndim, ST_MAX_DIMS);
    for (int i = 0; i < w->n; i++)
        if (strcmp(w->entries[i].name, name) == 0)
            return ERR("%s: duplicate tensor name '%.100s'", pre, name);
    StWriterEntry e = {0};
    size_t nelem;
    if (ndim) memcpy(e.shape, shape, (size_t)ndim * sizeof *shape);
    if (shape_bytes(&nelem, &e.nbytes, e.shape, ndim, st_dtype_size(dtype)) < 0)
        return ERR("%s: tensor '%.100s': negative or overflowing shape", pre, name);
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 16;
        w->entries = xrealloc(w->entries, (size_t)w->cap * sizeof *w->entries);
    }
    e.name = xstrdup(name);
    e.dtype = dtype;
    e.ndim = ndim;
    w->entries[w->n] = e;
    *out = &w->entries[w->n++];
    return 0;
}

int st_writer_add(StWriter *w, const char *name, StDtype dtype, int ndim,
                  const int64_t *shape, const void *data) {
    StWriterEntry *e;
    TRY(writer_new_entry(&e, w, name, dtype, ndim, shape));
    e->data = data;
    return 0;
}

int st_writer_add_fn(StWriter *w, const char *name, StDtype dtype, int ndim,
                     const int64_t *shape, StFillFn fill, void *ctx) {
    StWriterEntry *e;
    TRY(writer_new_entry(&e, w, name, dtype, ndim, shape));
    e->fill = fill;
    e->ctx = ctx;
    return 0;
}

int st_writer_meta(StWriter *w, const char *key, const char *value) {
    TRY(check_utf8_str("metadata key", key));
    TRY(check_utf8_str("metadata value", value));
    for (int i = 0; i < w->n_meta; i++)
        if (strcmp(w->meta_keys[i], key) == 0) {
            free(w->meta_vals[i]);
            w->meta_vals[i] = xstrdup(value);
            return 0;
        }
    if (w->n_meta == w->cap_meta) {
        w->cap_meta = w->cap_meta ? 2 * w->cap_meta : 8;
        w->meta_keys = xrealloc(w->meta_keys, (size_t)w->cap_meta * sizeof(char *));
        w->meta_vals = xrealloc(w->meta_vals, (size_t)w->cap_meta * sizeof(char *));
    }
    w->meta_keys[w->n_meta] = xstrdup(key);
    w->meta_vals[w->n_meta] = xstrdup(value);
    w->n_meta++;
    return 0;
}

// A JSON string as serde_json writes it: \" \\ \b \f \n \r \t, other controls as
// \u00xx (lowercase hex), everything else (UTF-8, DEL, '/') verbatim.
static void json_put_str(ByteVec *b, const char *s) {
    static const char hex[] = "0123456789abcdef";
    bytevec_push(b, '"');
    for (; *s; s++) {
        uint8_t c = (uint8_t)*s;
        const char *esc = NULL;
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default: break;
        }
        if (esc) bytevec_append(b, esc, 2);
        else if (c < 0x20) {
            char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            bytevec_append(b, u, 6);
        } else bytevec_push(b, (char)c);
    }
    bytevec_push(b, '"');
}

static void json_put_fmt(ByteVec *b, const char *fmt, unsigned long long v) {
    char tmp[32];
    int k = snprintf(tmp, sizeof tmp, fmt, v);
    bytevec_append(b, tmp, (size_t)k);
}

// Writer order = the reference's prepare(): dtype rank descending, then name bytes.
static int entry_cmp(const void *a, const void *b) {
    const StWriterEntry *x = *(const StWriterEntry *const *)a;
    const StWriterEntry *y = *(const StWriterEntry *const *)b;
    if (x->dtype != y->dtype) return x->dtype > y->dtype ? -1 : 1;
    return strcmp(x->name, y->name); // compares as unsigned char, like Rust's str Ord
}

typedef struct { const char *key, *val; } MetaPair;
static int meta_cmp(const void *a, const void *b) {
    return strcmp(((const MetaPair *)a)->key, ((const MetaPair *)b)->key);
}

// Header bytes, padded, for the entries in file order.
static void writer_header(ByteVec *b, const StWriter *w, const StWriterEntry **order) {
    bytevec_push(b, '{');
    if (w->n_meta) {
        // The Python library keeps metadata in a Rust HashMap (random order); sorted
        // keys make ours deterministic.
        MetaPair *m = xmalloc((size_t)w->n_meta * sizeof *m);
        for (int i = 0; i < w->n_meta; i++) m[i] = (MetaPair){w->meta_keys[i], w->meta_vals[i]};
        qsort(m, (size_t)w->n_meta, sizeof *m, meta_cmp);
        bytevec_append(b, "\"__metadata__\":{", 16);
        for (int i = 0; i < w->n_meta; i++) {
            if (i) bytevec_push(b, ',');
            json_put_str(b, m[i].key);
            bytevec_push(b, ':');
            json_put_str(b, m[i].val);
        }
        bytevec_push(b, '}');
        free(m);
    }
    size_t off = 0;
    for (int i = 0; i < w->n; i++) {
        const StWriterEntry *e = order[i];
        if (i || w->n_meta) bytevec_push(b, ',');
        json_put_str(b, e->name);
        bytevec_append(b, ":{\"dtype\":", 10);
        json_put_str(b, st_dtype_name(e->dtype));
        bytevec_append(b, ",\"shape\":[", 10);
        for (int d = 0; d < e->ndim; d++)
            json_put_fmt(b, d ? ",%llu" : "%llu", (unsigned long long)e->shape[d]);
        json_put_fmt(b, "],\"data_offsets\":[%llu,", off);
        json_put_fmt(b, "%llu]}", off + e->nbytes);
        off += e->nbytes;
    }
    bytevec_push(b, '}');
    while (b->n % 8) bytevec_push(b, ' ');
}

static int write_entry(FILE *fp, const StWriterEntry *e, const char *path, uint8_t **chunk) {
    if (!e->fill) {
        if (e->nbytes && fwrite(e->data, 1, e->nbytes, fp) != e->nbytes)
            return ERR("%s: write failed: %s", path, strerror(errno));
        return 0;
    }
    const size_t CHUNK = (size_t)1 << 20;
    if (!*chunk) *chunk = xmalloc(CHUNK);
    for (size_t off = 0; off < e->nbytes; off += CHUNK) {
        size_t n = e->nbytes - off < CHUNK ? e->nbytes - off : CHUNK;
        if (e->fill(*chunk, off, n, e->ctx) < 0) {
            err_prefix("%s: tensor '%.100s'", path, e->name);
            return -1;
        }
        if (fwrite(*chunk, 1, n, fp) != n)
            return ERR("%s: write failed: %s", path, strerror(errno));
    }
    return 0;
}

int st_writer_write(const StWriter *w, const char *path) {
    const StWriterEntry **order = xmalloc((size_t)(w->n ? w->n : 1) * sizeof *order);
    for (int i = 0; i < w->n; i++) order[i] = &w->entries[i];
    qsort(order, (size_t)w->n, sizeof *order, entry_cmp);
    ByteVec h = {0};
    writer_header(&h, w, order);
    int rc = 0;
    if (h.n > ST_MAX_HEADER) {
        rc = ERR("%s: header of %zu bytes exceeds the %zu-byte safetensors limit", path, h.n,
                 ST_MAX_HEADER);
        goto done;
    }
    AFile f;
    if ((rc = afile_open(&f, path)) < 0) goto done;
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)((uint64_t)h.n >> (8 * i));
    if (fwrite(len, 1, 8, f.fp) != 8 || fwrite(h.v, 1, h.n, f.fp) != h.n)
        rc = ERR("%s: write failed: %s", path, strerror(errno));
    uint8_t *chunk = NULL;
    for (int i = 0; rc == 0 && i < w->n; i++)
        rc = write_entry(f.fp, order[i], path, &chunk);
    free(chunk);
    if (rc == 0) rc = afile_commit(&f);
    else afile_abort(&f);
done:
    bytevec_free(&h);
    free(order);
    return rc;
}

// --- content hash ----------------------------------------------------------------

// One item of the hash, from a reader or a writer: a tensor (data NULL for none yet:
// a writer's fill entries) or a metadata pair (name the key, data the value).
typedef struct {
    const char *name;
    StDtype dtype;
    int ndim;
    const int64_t *shape;
    const void *data;
    size_t nbytes;
} HashItem;

static int item_cmp(const void *a, const void *b) {
    return strcmp(((const HashItem *)a)->name, ((const HashItem *)b)->name);
}

// The hash (safetensors.h) of metadata pairs meta (n_meta; data holds the value) and
// tensors (n_t), both sorted here.
static uint64_t content_hash(HashItem *meta, int n_meta, HashItem *t, int n_t, const char *skip) {
    qsort(meta, (size_t)n_meta, sizeof *meta, item_cmp);
    qsort(t, (size_t)n_t, sizeof *t, item_cmp);
    XXH64_state_t *h = XXH64_createState();
    CHECK(h, "out of memory");
    XXH64_reset(h, 0);
    for (int i = 0; i < n_meta; i++) {
        if (skip && strcmp(meta[i].name, skip) == 0) continue;
        XXH64_update(h, meta[i].name, strlen(meta[i].name) + 1);
        XXH64_update(h, meta[i].data, strlen(meta[i].data) + 1);
    }
    for (int i = 0; i < n_t; i++) {
        char dims[ST_MAX_DIMS * 21 + 1] = "";
        size_t len = 0;
        for (int d = 0; d < t[i].ndim; d++)
            len += (size_t)snprintf(dims + len, sizeof dims - len, "%s%lld", d ? "," : "", (long long)t[i].shape[d]);
        XXH64_update(h, t[i].name, strlen(t[i].name) + 1);
        const char *dt = st_dtype_name(t[i].dtype);
        XXH64_update(h, dt, strlen(dt) + 1);
        XXH64_update(h, dims, len + 1);
        XXH64_update(h, t[i].data, t[i].nbytes);
    }
    uint64_t x = XXH64_digest(h);
    XXH64_freeState(h);
    return x;
}

uint64_t st_content_hash(const SafeTensors *st, const char *skip) {
    HashItem *meta = xcalloc((size_t)st->n_meta + 1, sizeof *meta);
    HashItem *t = xcalloc((size_t)st->n_tensors + 1, sizeof *t);
    for (int i = 0; i < st->n_meta; i++) meta[i] = (HashItem){st->meta_keys[i], 0, 0, NULL, st->meta_vals[i], 0};
    for (int i = 0; i < st->n_tensors; i++) {
        const StTensor *x = &st->tensors[i];
        t[i] = (HashItem){x->name, x->dtype, x->ndim, x->shape, x->data, x->nbytes};
    }
    uint64_t h = content_hash(meta, st->n_meta, t, st->n_tensors, skip);
    free(meta);
    free(t);
    return h;
}

int st_writer_content_hash(uint64_t *out, const StWriter *w, const char *skip) {
    HashItem *meta = xcalloc((size_t)w->n_meta + 1, sizeof *meta);
    HashItem *t = xcalloc((size_t)w->n + 1, sizeof *t);
    int rc = 0;
    for (int i = 0; i < w->n_meta; i++) meta[i] = (HashItem){w->meta_keys[i], 0, 0, NULL, w->meta_vals[i], 0};
    for (int i = 0; i < w->n && rc == 0; i++) {
        const StWriterEntry *e = &w->entries[i];
        if (e->fill) rc = ERR("safetensors writer: tensor '%.100s' is filled at write time: no content hash before", e->name);
        t[i] = (HashItem){e->name, e->dtype, e->ndim, e->shape, e->data, e->nbytes};
    }
    if (rc == 0) *out = content_hash(meta, w->n_meta, t, w->n, skip);
    free(meta);
    free(t);
    return rc;
}

int st_check_content_hash(const SafeTensors *st, const char *key) {
    const char *v = st_meta(st, key);
    char want[17];
    snprintf(want, sizeof want, "%016llx", (unsigned long long)st_content_hash(st, key));
    if (!v) return ERR("%s: no \"%s\" in the metadata (not saved by this version of best?)", st->path, key);
    if (strcmp(v, want) != 0)
        return ERR("%s: the contents do not match their hash (%s %s, computed %s): the file was changed or damaged "
                   "after it was saved", st->path, key, v, want);
    return 0;
}
