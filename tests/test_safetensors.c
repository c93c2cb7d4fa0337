// test_safetensors.c: the safetensors reader and writer (lib/io/safetensors.c).
//
// Without arguments: unit tests (round trip of every dtype, float conversions,
// the real stories260K file from ../shared, and corrupt files that must fail with
// a message naming the file). Two more modes serve tests/t_safetensors_py.sh,
// which compares us with the Python safetensors package:
//   test_safetensors --write-fixture PATH [KEY=VALUE...]   the fixture set, with metadata
//   test_safetensors --dump PATH                           one line per tensor / metadata entry
//   test_safetensors --to-f16 IN OUT                       F32 tensors of IN as F16 in OUT
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"     // defines: err_msg, xmalloc
#include "base/fileio.h"    // defines: path_join
#include "io/safetensors.h" // defines: SafeTensors, StWriter
#include "test.h"           // defines: T_OK, T_SKIP, T_DONE

// --- the fixture (tests/t_safetensors_py.sh builds the same tensors in numpy) ---

typedef struct { const char *name; StDtype dtype; int ndim; int64_t shape[3]; } FixSpec;

// Names exercise the writer's order (dtype rank, then bytes: "Z" < "a" < "a.b") and
// serde_json's string escapes.
static const FixSpec fixture[] = {
    {"z.bool", ST_BOOL, 2, {3, 5}},
    {"a.u8", ST_U8, 1, {7}},
    {"m.i8", ST_I8, 2, {2, 3}},
    {"b.i16", ST_I16, 2, {4, 1}},
    {"c.u16", ST_U16, 1, {5}},
    {"weight", ST_F16, 2, {3, 4}},
    {"model.layers.0.mlp.up_proj.weight", ST_F32, 2, {4, 6}},
    {"model.layers.0.mlp.down_proj.weight", ST_F32, 2, {6, 4}},
    {"i32", ST_I32, 3, {2, 2, 2}},
    {"u32", ST_U32, 1, {3}},
    {"f64", ST_F64, 2, {2, 3}},
    {"i64", ST_I64, 0, {0}},
    {"u64", ST_U64, 1, {2}},
    {"c64", ST_C64, 1, {2}},
    {"empty", ST_F32, 2, {0, 4}},
    {"\xc3\xbc" "n\xc3\xaf" "c\xc3\xb6" "d\xc3\xa9 \"q\" back\\slash\ttab\x01" "ctl\x7f/", ST_F32, 1, {2}},
    {"Zupper", ST_F32, 1, {1}},
    {"a", ST_F32, 1, {1}},
    {"a.b", ST_F32, 1, {1}},
};
#define N_FIXTURE ((int)(sizeof fixture / sizeof fixture[0]))

// Byte j of fixture tensor k. F16 high bytes lose bit 6 so that no value is
// Inf/NaN (hardware half conversions may quiet NaNs differently).
static uint8_t fixture_byte(int k, size_t j) {
    if (fixture[k].dtype == ST_BOOL) return (uint8_t)((j + (size_t)k) & 1);
    uint8_t b = (uint8_t)((j * 37 + (size_t)k * 11 + 5) & 0xff);
    if (fixture[k].dtype == ST_F16 && (j & 1)) b &= 0xBF;
    return b;
}

static size_t spec_bytes(const FixSpec *f) {
    size_t n = st_dtype_size(f->dtype);
    for (int i = 0; i < f->ndim; i++) n *= (size_t)f->shape[i];
    return n;
}

// Adds the fixture to w; *bufs receives the data blocks (free each, then the array).
static void fixture_add(StWriter *w, uint8_t ***bufs) {
    *bufs = xcalloc(N_FIXTURE, sizeof **bufs);
    for (int k = 0; k < N_FIXTURE; k++) {
        size_t n = spec_bytes(&fixture[k]);
        uint8_t *d = xmalloc(n);
        for (size_t j = 0; j < n; j++) d[j] = fixture_byte(k, j);
        (*bufs)[k] = d;
        CHECK(st_writer_add(w, fixture[k].name, fixture[k].dtype, fixture[k].ndim,
                            fixture[k].shape, d) == 0, "%s", err_msg());
    }
}

static void fixture_free(uint8_t **bufs) {
    for (int k = 0; k < N_FIXTURE; k++) free(bufs[k]);
    free(bufs);
}

static uint64_t fnv(const void *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ ((const uint8_t *)p)[i]) * 1099511628211ull;
    return h;
}

static void print_hex(const char *s) {
    if (!*s) printf("-");
    for (; *s; s++) printf("%02x", (uint8_t)*s);
}

static int mode_write_fixture(int argc, char **argv) {
    StWriter w;
    uint8_t **bufs;
    st_writer_init(&w);
    fixture_add(&w, &bufs);
    for (int i = 3; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) { fprintf(stderr, "want KEY=VALUE, got %s\n", argv[i]); return 2; }
        *eq = 0;
        TRY_OR_DIE(st_writer_meta(&w, argv[i], eq + 1));
    }
    TRY_OR_DIE(st_writer_write(&w, argv[2]));
    st_writer_free(&w);
    fixture_free(bufs);
    return 0;
}

// One line per metadata entry and per tensor (in data order); names in hex so that
// any bytes survive. F16/F32 tensors also get a hash of their float32 conversion.
static int mode_dump(const char *path) {
    SafeTensors st;
    TRY_OR_DIE(st_open(&st, path));
    for (int i = 0; i < st.n_meta; i++) {
        printf("meta ");
        print_hex(st.meta_keys[i]);
        printf(" ");
        print_hex(st.meta_vals[i]);
        printf("\n");
    }
    for (int i = 0; i < st.n_tensors; i++) {
        const StTensor *t = &st.tensors[i];
        printf("tensor ");
        print_hex(t->name);
        printf(" %s ", st_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++) printf(d ? ",%lld" : "%lld", (long long)t->shape[d]);
        if (!t->ndim) printf("-");
        printf(" %zu %016llx", t->nbytes, (unsigned long long)fnv(t->data, t->nbytes));
        if (t->dtype == ST_F16 || t->dtype == ST_F32 || t->dtype == ST_BF16) {
            float *f;
            TRY_OR_DIE(st_to_f32_alloc(&f, &st, t));
            printf(" %016llx", (unsigned long long)fnv(f, t->nelem * 4));
            free(f);
        }
        printf("\n");
    }
    st_close(&st);
    return 0;
}

// Writes every F32 tensor of in as F16, converted chunk by chunk in a fill callback
// (the way a model saver streams bf16/f16 from f32 master weights).
static int fill_f16(void *buf, size_t off, size_t n, void *ctx) {
    const StTensor *t = ctx;
    uint16_t *o = buf;
    for (size_t i = 0; i < n / 2; i++) {
        float f;
        memcpy(&f, (const uint8_t *)t->data + 2 * off + 4 * i, 4);
        o[i] = st_f32_to_f16(f);
    }
    return 0;
}

static int mode_to_f16(const char *in, const char *out) {
    SafeTensors st;
    StWriter w;
    TRY_OR_DIE(st_open(&st, in));
    st_writer_init(&w);
    for (int i = 0; i < st.n_tensors; i++) {
        const StTensor *t = &st.tensors[i];
        if (t->dtype == ST_F32)
            TRY_OR_DIE(st_writer_add_fn(&w, t->name, ST_F16, t->ndim, t->shape, fill_f16,
                                        (void *)t));
    }
    TRY_OR_DIE(st_writer_write(&w, out));
    st_writer_free(&w);
    st_close(&st);
    return 0;
}

// --- helpers for the unit tests --------------------------------------------------

static char tmpdir[] = "/tmp/test_safetensors.XXXXXX";

static char *tmp_path(const char *name) { return path_join(tmpdir, name); }

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f, "cannot create %s", path);
    CHECK(fwrite(p, 1, n, f) == n, "write %s", path);
    fclose(f);
}

// A file made of a header (padded with spaces to 8; ' becomes " so that the tests
// below stay readable) and ndata bytes of data.
static size_t make_raw(uint8_t **out, const char *header, size_t ndata) {
    size_t hl = strlen(header), padded = (hl + 7) / 8 * 8;
    uint8_t *b = xcalloc(8 + padded + ndata, 1);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    for (size_t i = 0; i < hl; i++) b[8 + i] = header[i] == '\'' ? '"' : (uint8_t)header[i];
    memset(b + 8 + hl, ' ', padded - hl);
    for (size_t i = 0; i < ndata; i++) b[8 + padded + i] = (uint8_t)i;
    *out = b;
    return 8 + padded + ndata;
}

// Parsing must fail with a message that names the file (and, if given, contains want).
static void expect_bad_mem(const char *what, const uint8_t *b, size_t n, const char *want) {
    SafeTensors st;
    int rc = st_open_mem(&st, b, n, "bad.safetensors");
    const char *m = err_msg();
    T_OK(rc < 0 && strncmp(m, "bad.safetensors: ", 17) == 0 && (!want || strstr(m, want)),
         "rejects %s: %s", what, rc < 0 ? m : "(accepted)");
}

static void expect_bad(const char *what, const char *header, size_t ndata, const char *want) {
    uint8_t *b;
    size_t n = make_raw(&b, header, ndata);
    expect_bad_mem(what, b, n, want);
    free(b);
}

static void expect_good(const char *what, const char *header, size_t ndata, int ntensors) {
    uint8_t *b;
    size_t n = make_raw(&b, header, ndata);
    SafeTensors st;
    int rc = st_open_mem(&st, b, n, "good.safetensors");
    T_OK(rc == 0 && st.n_tensors == ntensors, "accepts %s%s%s", what, rc ? ": " : "",
         rc ? err_msg() : "");
    if (rc == 0) st_close(&st);
    free(b);
}

// --- unit tests ------------------------------------------------------------------

static void test_round_trip(void) {
    StWriter w;
    uint8_t **bufs;
    st_writer_init(&w);
    fixture_add(&w, &bufs);
    T_OK(st_writer_meta(&w, "format", "np") == 0 && st_writer_meta(&w, "step", "1") == 0 &&
         st_writer_meta(&w, "step", "40") == 0, "metadata set, second set replaces");
    char *path = tmp_path("rt.safetensors");
    T_OK(st_writer_write(&w, path) == 0, "writer writes %s", path);
    SafeTensors st;
    int rc = st_open(&st, path);
    T_OK(rc == 0, "reader opens the writer's file%s%s", rc ? ": " : "", rc ? err_msg() : "");
    if (rc == 0) {
        T_OK(st.n_tensors == N_FIXTURE, "%d tensors", st.n_tensors);
        T_OK(st.header_len % 8 == 0, "header padded to 8 bytes (%zu)", st.header_len);
        int good = 1;
        for (int k = 0; k < N_FIXTURE; k++) {
            const StTensor *t = st_find(&st, fixture[k].name);
            int ok = t && t->dtype == fixture[k].dtype && t->ndim == fixture[k].ndim &&
                     t->nbytes == spec_bytes(&fixture[k]);
            for (int d = 0; ok && d < t->ndim; d++) ok = t->shape[d] == fixture[k].shape[d];
            ok = ok && (t->nbytes == 0 || memcmp(t->data, bufs[k], t->nbytes) == 0);
            // the writer aligns every tensor to its element size (descending dtype order)
            ok = ok && ((uintptr_t)t->data - (uintptr_t)st.buf) % st_dtype_size(t->dtype) == 0;
            if (!ok) { good = 0; T_OK(0, "tensor %d (%s) round trip", k, st_dtype_name(fixture[k].dtype)); }
        }
        T_OK(good, "every dtype round-trips: name, dtype, shape, bytes, alignment");
        T_OK(st_find(&st, "nope") == NULL && st_find(&st, "") == NULL, "st_find misses cleanly");
        const char *fmt = st_meta(&st, "format"), *step = st_meta(&st, "step");
        T_OK(fmt && strcmp(fmt, "np") == 0 && step && strcmp(step, "40") == 0 &&
             st_meta(&st, "x") == NULL && st.n_meta == 2, "metadata round-trips");
        // data order: dtype rank descending, then name bytes
        int sorted = 1;
        for (int i = 1; i < st.n_tensors; i++) {
            const StTensor *a = &st.tensors[i - 1], *b = &st.tensors[i];
            if (a->dtype < b->dtype || (a->dtype == b->dtype && strcmp(a->name, b->name) > 0))
                sorted = 0;
        }
        T_OK(sorted && st.tensors[0].dtype == ST_U64, "tensors in the reference's order");
        float f[4];
        T_OK(st_to_f32(f, &st, st_find(&st, "i32")) < 0 && strstr(err_msg(), path) &&
             strstr(err_msg(), "I32"), "st_to_f32 refuses I32: %s", err_msg());
        st_close(&st);
    }
    st_writer_free(&w);
    fixture_free(bufs);
    free(path);
}

// Fill callback: tensor of n floats converted to bf16 on the fly.
typedef struct { const float *src; int calls; } FillCtx;
static int fill_bf16(void *buf, size_t off, size_t n, void *ctx) {
    FillCtx *c = ctx;
    uint16_t *o = buf;
    for (size_t i = 0; i < n / 2; i++) o[i] = st_f32_to_bf16(c->src[off / 2 + i]);
    c->calls++;
    return 0;
}
static int fill_fail(void *buf, size_t off, size_t n, void *ctx) {
    (void)buf; (void)off; (void)n; (void)ctx;
    return ERR("fill failed on purpose");
}

static void test_writer_stream(void) {
    size_t n = 1500000; // 3 MB of bf16: three chunks
    float *src = xmalloc(n * sizeof *src);
    for (size_t i = 0; i < n; i++) src[i] = (float)i * 0.001f - 7.0f;
    FillCtx c = {src, 0};
    StWriter w;
    st_writer_init(&w);
    int64_t shape[2] = {1500, 1000};
    T_OK(st_writer_add_fn(&w, "w", ST_BF16, 2, shape, fill_bf16, &c) == 0, "add_fn");
    char *path = tmp_path("stream.safetensors");
    int rc = st_writer_write(&w, path);
    T_OK(rc == 0 && c.calls == 3, "streamed write in %d chunks of 1 MiB", c.calls);
    SafeTensors st;
    if (st_open(&st, path) == 0) {
        float *back;
        int ok = st_to_f32_alloc(&back, &st, st_find(&st, "w")) == 0;
        for (size_t i = 0; ok && i < n; i++) {
            float d = back[i] - src[i];
            if (d < 0) d = -d;
            float a = src[i] < 0 ? -src[i] : src[i];
            ok = d <= a * (1.0f / 256);
        }
        T_OK(ok, "bf16 written by callback reads back within bf16 precision");
        free(back);
        st_close(&st);
    } else T_OK(0, "open streamed file: %s", err_msg());
    st_writer_free(&w);
    // a failing callback leaves no file behind
    char *path2 = tmp_path("fail.safetensors");
    st_writer_init(&w);
    st_writer_add_fn(&w, "w", ST_BF16, 2, shape, fill_fail, NULL);
    T_OK(st_writer_write(&w, path2) < 0 && strstr(err_msg(), "fill failed") &&
         access(path2, F_OK) != 0, "failing fill: error, no file: %s", err_msg());
    st_writer_free(&w);
    free(path);
    free(path2);
    free(src);
}

static void test_writer_errors(void) {
    StWriter w;
    st_writer_init(&w);
    int64_t s1[1] = {2}, neg[2] = {3, -1}, big[3] = {1ll << 40, 1ll << 40, 1ll << 40};
    float d[2] = {0};
    T_OK(st_writer_add(&w, "x", ST_F32, 1, s1, d) == 0, "add x");
    T_OK(st_writer_add(&w, "x", ST_F32, 1, s1, d) < 0 && strstr(err_msg(), "duplicate"),
         "duplicate name refused: %s", err_msg());
    T_OK(st_writer_add(&w, "__metadata__", ST_F32, 1, s1, d) < 0, "__metadata__ refused");
    T_OK(st_writer_add(&w, "bad\xff", ST_F32, 1, s1, d) < 0 && strstr(err_msg(), "UTF-8"),
         "non-UTF-8 name refused");
    T_OK(st_writer_add(&w, "n", ST_F32, 2, neg, d) < 0, "negative dim refused");
    T_OK(st_writer_add(&w, "o", ST_F32, 3, big, d) < 0, "overflowing shape refused");
    T_OK(st_writer_add(&w, "nd", ST_F32, 9, big, d) < 0, "ndim 9 refused");
    T_OK(st_writer_add(&w, "dt", (StDtype)99, 1, s1, d) < 0, "bad dtype refused");
    T_OK(st_writer_meta(&w, "k", "\xc0\x80") < 0, "non-UTF-8 metadata refused");
    T_OK(st_writer_write(&w, "/dev/null/x.safetensors") < 0 && // (under a file: a missing folder would be made)
         strstr(err_msg(), "/dev/null/x.safetensors"), "unwritable path: %s", err_msg());
    st_writer_free(&w);
    // an empty writer makes a valid empty file
    st_writer_init(&w);
    char *path = tmp_path("empty.safetensors");
    SafeTensors st;
    T_OK(st_writer_write(&w, path) == 0 && st_open(&st, path) == 0 && st.n_tensors == 0 &&
         st.size == 16, "empty file: 8 + \"{}\" padded to 8");
    if (st.buf) st_close(&st);
    st_writer_free(&w);
    free(path);
}

static void test_conversions(void) {
    struct { uint16_t h; float f; } f16[] = {
        {0x0000, 0.0f}, {0x3c00, 1.0f}, {0xc000, -2.0f}, {0x7bff, 65504.0f},
        {0x0001, 5.9604644775390625e-8f}, {0x0400, 6.103515625e-5f}, {0x3555, 0.333251953125f},
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof f16 / sizeof f16[0]; i++)
        ok &= st_f16_to_f32(f16[i].h) == f16[i].f && st_f32_to_f16(f16[i].f) == f16[i].h;
    T_OK(ok, "f16 known values both ways");
    // every finite half survives f16 -> f32 -> f16; NaN stays NaN, Inf stays Inf
    ok = 1;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = st_f16_to_f32((uint16_t)h);
        uint16_t back = st_f32_to_f16(f);
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) ok &= f != f && (back & 0x7c00) == 0x7c00 && (back & 0x3ff);
        else ok &= back == h;
    }
    T_OK(ok, "all 65536 halves round-trip through float");
    T_OK(st_f32_to_f16(65519.0f) == 0x7bff && st_f32_to_f16(65520.0f) == 0x7c00 &&
         st_f32_to_f16(1e9f) == 0x7c00 && st_f32_to_f16(-1e9f) == 0xfc00,
         "f16 overflow rounds to infinity at 65520");
    T_OK(st_f32_to_f16(2.98023223876953125e-8f) == 0 &&       // 2^-25: tie to even (0)
         st_f32_to_f16(2.98023259404089e-8f) == 1 &&          // just above: 2^-24
         st_f32_to_f16(8.94069671630859375e-8f) == 2 &&       // 1.5 * 2^-24: tie to even (2)
         st_f32_to_f16(1.0f + 1.0f / 2048) == 0x3c00 &&       // tie: even mantissa
         st_f32_to_f16(1.0f + 3.0f / 2048) == 0x3c02,         // tie: round up to even
         "f16 round to nearest even, normal and subnormal");
    ok = 1;
    for (uint32_t b = 0; b < 65536; b++) {
        float f = st_bf16_to_f32((uint16_t)b);
        uint16_t back = st_f32_to_bf16(f);
        if ((b & 0x7f80) == 0x7f80 && (b & 0x7f)) ok &= f != f && (back & 0x7f80) == 0x7f80 && (back & 0x7f);
        else ok &= back == b;
    }
    T_OK(ok, "all 65536 bfloat16 values round-trip through float");
    T_OK(st_f32_to_bf16(1.0f + 1.0f / 256) == 0x3f80 && st_f32_to_bf16(1.0f + 3.0f / 256) == 0x3f82 &&
         st_f32_to_bf16(3.4028235e38f) == 0x7f80, "bf16 round to nearest even, overflow to Inf");
}

static void test_shared_model(void) {
    const char *sh = test_shared();
    if (!sh) { T_SKIP("stories260K safetensors: ../shared not found"); return; }
    char *path = path_join(sh, "models/stories260K/model.safetensors");
    if (access(path, R_OK) != 0) { T_SKIP("stories260K safetensors: %s absent", path); free(path); return; }
    SafeTensors st;
    int rc = st_open(&st, path);
    T_OK(rc == 0, "opens %s%s%s", path, rc ? ": " : "", rc ? err_msg() : "");
    if (rc == 0) {
        T_OK(st.n_tensors == 2 + 5 * 9, "47 tensors (%d)", st.n_tensors);
        const char *fmt = st_meta(&st, "format");
        T_OK(fmt && strcmp(fmt, "pt") == 0, "metadata format=pt");
        const StTensor *e = st_find(&st, "model.embed_tokens.weight");
        T_OK(e && e->dtype == ST_F32 && e->ndim == 2 && e->shape[0] == 512 && e->shape[1] == 64,
             "embed_tokens (512, 64) F32");
        int ok = 1;
        const char *names[] = {"q_proj", "k_proj", "v_proj", "o_proj"};
        const int64_t rows[] = {64, 32, 32, 64};
        for (int l = 0; l < 5; l++) {
            char n[128];
            for (int k = 0; k < 4; k++) {
                snprintf(n, sizeof n, "model.layers.%d.self_attn.%s.weight", l, names[k]);
                const StTensor *t = st_find(&st, n);
                ok &= t && t->ndim == 2 && t->shape[0] == rows[k] && t->shape[1] == 64;
            }
            snprintf(n, sizeof n, "model.layers.%d.mlp.down_proj.weight", l);
            const StTensor *t = st_find(&st, n);
            ok &= t && t->shape[0] == 64 && t->shape[1] == 172;
            snprintf(n, sizeof n, "model.layers.%d.mlp.gate_proj.weight", l);
            t = st_find(&st, n);
            ok &= t && t->shape[0] == 172 && t->shape[1] == 64;
        }
        T_OK(ok, "attention (q 64x64, k/v 32x64) and MLP shapes of 5 layers");
        T_OK(st_find(&st, "lm_head.weight") == NULL, "no lm_head (tied embeddings)");
        const StTensor *nw = st_find(&st, "model.norm.weight");
        float v[64];
        T_OK(nw && st_to_f32(v, &st, nw) == 0 && v[0] > 2.4583f && v[0] < 2.4584f,
             "model.norm.weight[0] = 2.458309 (numpy says so)");
        st_close(&st);
    }
    free(path);
}

static void test_corrupt(void) {
    const char *one = "{'t':{'dtype':'F32','shape':[2],'data_offsets':[0,8]}}";
    expect_good("a minimal file", one, 8, 1);
    expect_good("an empty header {}", "{}", 0, 0);
    expect_good("__metadata__ null", "{'__metadata__':null}", 0, 0);
    expect_good("zero-size tensors sharing an offset",
                "{'a':{'dtype':'F32','shape':[0],'data_offsets':[0,0]},"
                "'b':{'dtype':'I8','shape':[2,0],'data_offsets':[0,0]},"
                "'c':{'dtype':'U8','shape':[],'data_offsets':[0,1]}}", 1, 3);
    expect_good("tensors listed out of offset order",
                "{'b':{'dtype':'U8','shape':[2],'data_offsets':[2,4]},"
                "'a':{'dtype':'U8','shape':[2],'data_offsets':[0,2]}}", 4, 2);

    // truncation at every length of a real file, in memory and a few on disk
    uint8_t *b;
    size_t n = make_raw(&b, one, 8);
    int all = 1;
    for (size_t len = 0; len < n; len++) {
        SafeTensors st;
        int rc = st_open_mem(&st, b, len, "trunc.safetensors");
        all &= rc < 0 && strncmp(err_msg(), "trunc.safetensors: ", 19) == 0;
        if (rc == 0) st_close(&st);
    }
    T_OK(all, "truncated at each of %zu lengths: error naming the file", n);
    char *p = tmp_path("trunc.safetensors");
    all = 1;
    size_t lens[] = {0, 3, 8, 20, n - 1};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        write_bytes(p, b, lens[i]);
        SafeTensors st;
        all &= st_open(&st, p) < 0 && strstr(err_msg(), p) != NULL;
    }
    T_OK(all, "truncated files on disk: error names the path");
    T_OK(st_open(&(SafeTensors){0}, "/nonexistent/x.safetensors") < 0 &&
         strstr(err_msg(), "/nonexistent/x.safetensors"), "missing file: %s", err_msg());
    // trailing byte after the data
    uint8_t *b2 = xmalloc(n + 1);
    memcpy(b2, b, n);
    b2[n] = 0;
    expect_bad_mem("a trailing byte", b2, n + 1, "trailing");
    // header length huge / past the end
    memcpy(b2, b, n);
    for (int i = 0; i < 8; i++) b2[i] = 0xff;
    expect_bad_mem("header length 2^64-1", b2, n, "limit");
    uint64_t big = 100000001;
    for (int i = 0; i < 8; i++) b2[i] = (uint8_t)(big >> (8 * i));
    expect_bad_mem("header length 100000001", b2, n, "limit");
    uint64_t past = n;
    for (int i = 0; i < 8; i++) b2[i] = (uint8_t)(past >> (8 * i));
    expect_bad_mem("header length past the end", b2, n, "past the end");
    free(b2);
    free(b);
    free(p);

    expect_bad("offsets out of range",
               "{'t':{'dtype':'F32','shape':[2],'data_offsets':[8,16]}}", 8, "data region");
    expect_bad("end before begin",
               "{'t':{'dtype':'F32','shape':[0],'data_offsets':[8,0]}}", 8, "end before");
    expect_bad("overlapping tensors",
               "{'a':{'dtype':'F32','shape':[2],'data_offsets':[0,8]},"
               "'b':{'dtype':'F32','shape':[2],'data_offsets':[4,12]}}", 12, "overlaps");
    expect_bad("the same bytes twice",
               "{'a':{'dtype':'F32','shape':[2],'data_offsets':[0,8]},"
               "'b':{'dtype':'F32','shape':[2],'data_offsets':[0,8]}}", 8, "overlaps");
    expect_bad("a gap between tensors",
               "{'a':{'dtype':'F32','shape':[1],'data_offsets':[0,4]},"
               "'b':{'dtype':'F32','shape':[1],'data_offsets':[8,12]}}", 12, "gap");
    expect_bad("a gap at the start",
               "{'a':{'dtype':'F32','shape':[1],'data_offsets':[4,8]}}", 8, "gap");
    expect_bad("uncovered tail",
               "{'a':{'dtype':'F32','shape':[1],'data_offsets':[0,4]}}", 8, "cover");
    expect_bad("bad dtype", "{'t':{'dtype':'F33','shape':[2],'data_offsets':[0,8]}}", 8, "dtype");
    expect_bad("sub-byte dtype F4",
               "{'t':{'dtype':'F4','shape':[2],'data_offsets':[0,1]}}", 1, "dtype");
    expect_bad("dtype not a string",
               "{'t':{'dtype':4,'shape':[2],'data_offsets':[0,8]}}", 8, "dtype");
    expect_bad("negative shape",
               "{'t':{'dtype':'F32','shape':[-2],'data_offsets':[0,8]}}", 8, "shape");
    expect_bad("fractional shape",
               "{'t':{'dtype':'F32','shape':[2.0],'data_offsets':[0,8]}}", 8, "shape");
    expect_bad("missing shape", "{'t':{'dtype':'F32','data_offsets':[0,8]}}", 8, "shape");
    expect_bad("shape/offset mismatch",
               "{'t':{'dtype':'F32','shape':[3],'data_offsets':[0,8]}}", 8, "need 12");
    expect_bad("shape overflow",
               "{'t':{'dtype':'F32','shape':[4294967296,4294967296],'data_offsets':[0,8]}}", 8, "overflow");
    expect_bad("9 dimensions",
               "{'t':{'dtype':'U8','shape':[1,1,1,1,1,1,1,1,1],'data_offsets':[0,1]}}", 1, "dimensions");
    expect_bad("3 offsets",
               "{'t':{'dtype':'U8','shape':[1],'data_offsets':[0,1,1]}}", 1, "data_offsets");
    expect_bad("negative offset",
               "{'t':{'dtype':'U8','shape':[0],'data_offsets':[-1,-1]}}", 0, "data_offsets");
    expect_bad("entry not an object", "{'t':[1,2]}", 0, "not an object");
    expect_bad("duplicate keys",
               "{'t':{'dtype':'U8','shape':[1],'data_offsets':[0,1]},"
               "'t':{'dtype':'U8','shape':[1],'data_offsets':[1,2]}}", 2, "duplicate");
    expect_bad("duplicate metadata keys", "{'__metadata__':{'a':'1','a':'2'}}", 0, "duplicate");
    expect_bad("metadata value not a string", "{'__metadata__':{'a':1}}", 0, "not a string");
    expect_bad("metadata not an object", "{'__metadata__':['a']}", 0, "__metadata__");
    expect_bad("non-UTF-8 header",
               "{'t\xff':{'dtype':'U8','shape':[1],'data_offsets':[0,1]}}", 1, "UTF-8");
    expect_bad("overlong UTF-8", "{'\xc0\xaf':{}}", 0, "UTF-8");
    expect_bad("UTF-8 surrogate", "{'\xed\xa0\x80':{}}", 0, "UTF-8");
    expect_bad("header not JSON", "{'t':", 0, "JSON");
    expect_bad("header a JSON array", "[1]", 0, "{");
    expect_bad("header not starting with {", " {}", 0, "{");
    expect_bad("garbage after the JSON", "{}x", 0, "JSON");
    expect_bad("NUL in a name",
               "{'a\\u0000b':{'dtype':'U8','shape':[0],'data_offsets':[0,0]}}", 0, "JSON");
    uint8_t zero[8] = {0};
    expect_bad_mem("header length 0", zero, 8, "{");
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "--write-fixture") == 0) return mode_write_fixture(argc, argv);
    if (argc == 3 && strcmp(argv[1], "--dump") == 0) return mode_dump(argv[2]);
    if (argc == 4 && strcmp(argv[1], "--to-f16") == 0) return mode_to_f16(argv[2], argv[3]);
    if (argc != 1) {
        fprintf(stderr, "usage: %s [--write-fixture PATH [KEY=VALUE...] | --dump PATH | "
                "--to-f16 IN OUT]\n", argv[0]);
        return 2;
    }
    CHECK(mkdtemp(tmpdir), "mkdtemp");
    test_round_trip();
    test_writer_stream();
    test_writer_errors();
    test_conversions();
    test_shared_model();
    test_corrupt();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    T_DONE();
}
