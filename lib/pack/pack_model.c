// pack_model.c: a Model whose 2-D weights stay in a packed checkpoint (a WeightStore
// of nn/weight.h over pack.h's tensors and spmv.h's kernels), and model_open.
#include "pack/pack_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"  // defines: ERR, TRY, xcalloc
#include "base/fileio.h" // defines: path_is_dir, path_join
#include "pack/pack.h"   // defines: Pack, PackTensor, pack_open, pack_decode_rows
#include "pack/spmv.h"   // defines: spmv_forward, spmv_embed, the devpack_weight_ ops
#include "io/safetensors.h" // defines: st_f32_to_bf16, st_f32_to_f16

// The store: the open pack and, per table entry, its tensor (NULL for 1-D ones): the
// pack's, or one pack_model_replace put there (tuned[i], its streams in mem[i]).
typedef struct {
    WeightStore base; // first: a WeightStore * is a PackStore *
    Pack p;
    PackTensor **tuned; // (n_info) or NULL
    void **mem;         // (n_info) or NULL
} PackStore;

// w (rows, cols) = t in fp32, in slices of rows across threads (pack_decode_rows is
// one thread; a 7B model's evaluation decodes 6.5G weights per forward pass).
static void decode(float *w, const void *tv) {
    const PackTensor *t = tv;
    size_t rows = t->rows, cols = t->cols, slice = 64;
#pragma omp parallel for schedule(dynamic) if (rows * cols > (1 << 18))
    for (size_t r0 = 0; r0 < rows; r0 += slice)
        pack_decode_rows(w + r0 * cols, t, r0, r0 + slice < rows ? r0 + slice : rows);
}

static void matvec(float *y, const float *x, const void *t, const float *b, int acc) {
    spmv_forward(y, x, t, b, acc);
}

static void embed(float *x, const int32_t *tokens, const void *t, size_t N) { spmv_embed(x, tokens, t, N); }

static size_t bytes(const void *t) { return pack_tensor_bytes(t); }

static size_t row_bytes(const void *tv) {
    const PackTensor *t = tv;
    return t->values_bytes / t->rows;
}

#ifdef BEST_CUDA
static const WeightOps PACK_OPS = {decode, matvec, embed, bytes, row_bytes, devpack_weight_upload,
                                   devpack_weight_free, devpack_weight_matvec, spmv_decode_cuda,
                                   devpack_weight_fused};
#else
static const WeightOps PACK_OPS = {decode, matvec, embed, bytes, row_bytes, NULL, NULL, NULL, NULL, NULL};
#endif

static void store_close(WeightStore *s) {
    PackStore *ps = (PackStore *)s;
    for (int i = 0; ps->tuned && i < ps->p.n; i++) {
        free(ps->tuned[i]);
        free(ps->mem[i]);
    }
    free(ps->tuned);
    free(ps->mem);
    pack_close(&ps->p);
    free((void *)s->t);
    free(ps);
}

// A tar file's header block has "ustar" at offset 257 (POSIX and GNU both).
static int is_pack_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char h[512];
    int ok = fread(h, 1, sizeof h, f) == sizeof h && memcmp(h + 257, "ustar", 5) == 0;
    fclose(f);
    return ok;
}

// m (planned from p's config.json) against p's tensors, as for a folder: every table
// entry is there with its shape and nothing else is; and, as docs/formats.md orders
// the members, in the table's order.
static int match_tensors(const Model *m, const Pack *p) {
    for (int j = 0; j < p->n; j++)
        if (!model_param(m, p->t[j].name))
            return ERR("%s: unexpected tensor %s (not part of a %s with its config.json)", p->path, p->t[j].name,
                       config_arch_name(m->cfg.arch));
    for (int i = 0; i < m->n_info; i++) {
        const ParamInfo *pi = &m->info[i];
        const PackTensor *t = pack_find(p, pi->name);
        if (!t) return ERR("%s: missing tensor %s", p->path, pi->name);
        TRY(model_check_shape(pi, t->ndim, t->shape, p->path));
    }
    // The names are unique (pack.c), all in the table and all of the table: a permutation.
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->t[i].name, m->info[i].name) != 0)
            return ERR("%s: tensor %s is out of order: the parameter table has %s there", p->path, p->t[i].name,
                       m->info[i].name);
    return 0;
}

// model_plan over the pack's config.json, named "PACK: config.json" in messages.
static int plan_pack(Model *m, const Pack *p) {
    size_t n = strlen(p->path) + 16;
    char *name = xmalloc(n);
    snprintf(name, n, "%s: config.json", p->path);
    int rc = model_plan(m, p->config_json, p->config_len, name, 1);
    free(name);
    TRY(rc);
    if (match_tensors(m, p) < 0) {
        model_free(m);
        return -1;
    }
    return 0;
}

int pack_check_model(const Pack *p) {
    Model m;
    TRY(plan_pack(&m, p));
    model_free(&m);
    return 0;
}

static int pack_model_load(Model *m, const char *path) {
    memset(m, 0, sizeof *m);
    PackStore *ps = xcalloc(1, sizeof *ps);
    if (pack_open(&ps->p, path) < 0 || plan_pack(m, &ps->p) < 0) {
        pack_close(&ps->p);
        free(ps);
        return -1;
    }
    model_alloc(m); // the 1-D tensors only
    WeightStore *s = &ps->base;
    s->ops = &PACK_OPS;
    s->t = xcalloc((size_t)m->n_info, sizeof *s->t);
    s->path = ps->p.path;
    s->what = "a packed checkpoint";
    s->hint = "best-pack --unpack writes it";
    s->close = store_close;
    m->ext = s;
    for (int i = 0; i < m->n_info; i++) {
        const ParamInfo *p = &m->info[i];
        const PackTensor *t = &ps->p.t[i]; // the table's entry i (match_tensors)
        if (i == 0) m->dtype = t->dtype;
        if (p->ndim == 1) {
            pack_decode_rows(m->params + p->offset, t, 0, 1);
        } else {
            s->t[i] = t;
            if (t->rows * t->cols > s->max_numel) s->max_numel = t->rows * t->cols;
        }
    }
    return 0;
}

int model_open(Model *m, const char *path) {
    if (path_is_dir(path)) {
        // A best-train output folder (OUT/model, OUT/state, OUT/log.jsonl) means its model.
        char *cfg = path_join(path, "config.json"), *sub = path_join(path, "model");
        char *sub_cfg = path_join(sub, "config.json");
        int out = access(cfg, F_OK) != 0 && access(sub_cfg, F_OK) == 0;
        int rc = model_load(m, out ? sub : path);
        free(cfg);
        free(sub);
        free(sub_cfg);
        return rc;
    }
    if (is_pack_file(path)) return pack_model_load(m, path);
    memset(m, 0, sizeof *m);
    return ERR("%s: not a model folder (nor a packed checkpoint)", path);
}

// --- a folder's bf16/f16 weights as a dense store --------------------------------------------

typedef struct {
    WeightStore base; // first: a WeightStore * is a DenseStore *
    PackTensor *t;    // (n_info) dense tensors, rows and cols as in a pack; 1-D unused
    uint16_t *values; // every 2-D weight, back to back
} DenseStore;

static void dense_store_close(WeightStore *s) {
    DenseStore *d = (DenseStore *)s;
    free(d->t);
    free(d->values);
    free((void *)s->t);
    free(d);
}

void model_dense_store(Model *m) {
    if (m->ext || (m->dtype != ST_BF16 && m->dtype != ST_F16)) return;
    Model d; // the same table with the 2-D weights stored: a block of the 1-D ones only
    CHECK(model_plan(&d, m->config_json, m->config_len, "config.json", 1) == 0, "model_dense_store: %s", err_msg());
    model_alloc(&d);
    DenseStore *ds = xcalloc(1, sizeof *ds);
    size_t total = 0;
    for (int i = 0; i < m->n_info; i++)
        if (m->info[i].ndim == 2) total += m->info[i].numel;
    ds->values = xmalloc((total ? total : 1) * sizeof *ds->values);
    ds->t = xcalloc((size_t)m->n_info, sizeof *ds->t);
    WeightStore *s = &ds->base;
    s->ops = &PACK_OPS;
    s->t = xcalloc((size_t)m->n_info, sizeof *s->t);
    s->path = m->src_dir ? m->src_dir : "the model folder";
    s->what = "a model folder's bf16/f16 weights";
    s->hint = "load it without the dense store";
    s->close = dense_store_close;
    int bf16 = m->dtype == ST_BF16;
    size_t at = 0;
    for (int i = 0; i < m->n_info; i++) {
        const ParamInfo *p = &m->info[i];
        const float *w = m->params + p->offset;
        if (p->ndim == 1) {
            memcpy(d.params + d.info[i].offset, w, p->numel * sizeof *w);
            continue;
        }
        PackTensor *t = &ds->t[i];
        snprintf(t->name, sizeof t->name, "%s", p->name);
        t->ndim = 2, t->shape[0] = p->shape[0], t->shape[1] = p->shape[1];
        t->rows = (size_t)p->shape[0], t->cols = (size_t)p->shape[1];
        t->dtype = m->dtype, t->enc = PACK_DENSE, t->val = bf16 ? PACK_BF16 : PACK_F16;
        t->nnz = p->numel, t->prunable = p->prunable;
        uint16_t *v = ds->values + at;
        // exact: the block's values were read from this dtype
        for (size_t j = 0; j < p->numel; j++) v[j] = bf16 ? st_f32_to_bf16(w[j]) : st_f32_to_f16(w[j]);
        t->values = v, t->values_bytes = p->numel * sizeof *v;
        s->t[i] = t;
        if (p->numel > s->max_numel) s->max_numel = p->numel;
        at += p->numel;
    }
    d.dtype = m->dtype;
    d.src_dir = m->src_dir, m->src_dir = NULL;
    d.ext = s;
    model_free(m);
    *m = d;
}

int pack_model_file(const uint8_t **data, size_t *len, const Model *m, const char *name) {
    if (!m->ext || m->ext->close != store_close) return -1; // not a pack (a dense store has PACK_OPS too)
    const Pack *p = &((const PackStore *)m->ext)->p;
    const PackMember *pm = pack_member(p, name);
    if (!pm) return -1;
    *data = p->map.data + pm->offset;
    *len = pm->size;
    return 0;
}

// A pack's files for tokenizer_load_files: ctx is the Model.
static int pack_read(void *ctx, const char *name, char **data, size_t *n) {
    const uint8_t *d;
    size_t len;
    if (pack_model_file(&d, &len, ctx, name) < 0) return 1;
    *data = xmalloc(len + 1);
    memcpy(*data, d, len);
    (*data)[len] = 0;
    *n = len;
    return 0;
}

int tokenizer_of_model(Tokenizer *t, const Model *m, const char *where) {
    if (m->src_dir) return tokenizer_load(t, m->src_dir);
    TokFiles f = {pack_read, (void *)m, where};
    return tokenizer_load_files(t, &f);
}

int model_has_tokenizer(const Model *m) {
    static const char *const files[] = {"tokenizer.json", "tokenizer.model", "vocab.json"};
    for (int i = 0; i < 3; i++) {
        if (m->src_dir) {
            char *p = path_join(m->src_dir, files[i]);
            int ok = access(p, F_OK) == 0;
            free(p);
            if (ok) return 1;
        } else {
            const uint8_t *d;
            size_t n;
            if (pack_model_file(&d, &n, m, files[i]) == 0) return 1;
        }
    }
    return 0;
}

// A store is a PackStore when its ops are the pack's.
static PackStore *pack_store_of(const Model *m) {
    const WeightStore *s = m->ext;
    return s && s->ops == &PACK_OPS ? (PackStore *)m->ext : NULL;
}

const PackTensor *pack_model_tensor(const Model *m, int i) {
    PackStore *ps = pack_store_of(m);
    return ps && i >= 0 && i < m->n_info ? ps->base.t[i] : NULL;
}

void pack_model_replace(Model *m, int i, const PackTensor *t, void *mem) {
    PackStore *ps = pack_store_of(m);
    CHECK(ps && i >= 0 && i < ps->p.n && ps->base.t[i], "pack_model_replace: entry %d of a model not packed", i);
    if (!ps->tuned) {
        ps->tuned = xcalloc((size_t)ps->p.n, sizeof *ps->tuned);
        ps->mem = xcalloc((size_t)ps->p.n, sizeof *ps->mem);
    }
    free(ps->tuned[i]);
    free(ps->mem[i]);
    ps->tuned[i] = xmalloc(sizeof *ps->tuned[i]);
    *ps->tuned[i] = *t;
    ps->mem[i] = mem;
    ps->base.t[i] = ps->tuned[i];
}
