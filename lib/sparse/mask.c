// mask.c: computing masks and their files (see mask.h); their reports (JSON, SVG, the
// table) are mask_report.c's.
#include "sparse/mask.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"    // defines: ERR, TRY, xmalloc
#include "dist/dist.h"     // defines: dist_sum_u64, dist_exscan_u64, dist_agree
#include "sparse/select.h" // defines: Select

// Weights scored per step of the stream: 3 x 256 KiB of scratch, small next to any
// tensor worth pruning, large enough that select_count's overhead vanishes.
#define CHUNK ((size_t)1 << 16)
#define PAR_MIN_WORK 32768 // below this a fork-join costs more than the loop

const char *const MASK_MODULES[7] = {"q", "k", "v", "o", "gate", "up", "down"};
static const char *const MODULE_SUFFIX[7] = {
    "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
    "self_attn.o_proj.weight", "mlp.gate_proj.weight",    "mlp.up_proj.weight",
    "mlp.down_proj.weight",
};

int mask_group_parse(MaskGroup *out, const char *name) {
    if (strcmp(name, "global") == 0) { *out = GROUP_GLOBAL; return 0; }
    if (strcmp(name, "layer") == 0) { *out = GROUP_LAYER; return 0; }
    return -1;
}

const char *mask_group_name(MaskGroup g) { return g == GROUP_GLOBAL ? "global" : g == GROUP_LAYER ? "layer" : "?"; }

uint64_t mask_count(const uint8_t *mask, size_t n) {
    uint64_t c = 0;
    for (size_t i = 0; i < n; i++) c += mask[i] != 0;
    return c;
}

void mask_apply(float *x, const uint8_t *mask, size_t n) {
#pragma omp parallel for schedule(static) if (n > PAR_MIN_WORK)
    for (size_t i = 0; i < n; i++)
        if (!mask[i]) x[i] = 0.0f;
}

int mask_module_of(int *layer, const char *name) {
    int l, pos = 0;
    if (sscanf(name, "model.layers.%d.%n", &l, &pos) != 1 || pos == 0 || l < 0) return -1;
    for (int i = 0; i < 7; i++)
        if (strcmp(name + pos, MODULE_SUFFIX[i]) == 0) { *layer = l; return i; }
    return -1;
}

// --- moments ------------------------------------------------------------------------

static int info_find(const ParamInfo *info, int n_info, const char *name, size_t len) {
    for (int i = 0; i < n_info; i++)
        if (strlen(info[i].name) == len && memcmp(info[i].name, name, len) == 0) return i;
    return -1;
}

static int shape_equal(const StTensor *t, const ParamInfo *p) {
    if (t->ndim != p->ndim) return 0;
    for (int d = 0; d < p->ndim; d++)
        if (t->shape[d] != p->shape[d]) return 0;
    return 1;
}

static void shape_str(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ndim && n < cap; d++)
        n += (size_t)snprintf(buf + n, cap - n, d ? ",%lld" : "%lld", (long long)shape[d]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

int moments_open(Moments *mo, const char *path, const ParamInfo *info, int n_info) {
    memset(mo, 0, sizeof *mo);
    TRY(st_open(&mo->st, path));
    mo->is_file = 1;
    mo->n_info = n_info;
    mo->m = xcalloc((size_t)n_info, sizeof *mo->m);
    mo->v = xcalloc((size_t)n_info, sizeof *mo->v);
    for (int i = 0; i < mo->st.n_tensors; i++) {
        const StTensor *t = &mo->st.tensors[i];
        size_t len = strlen(t->name);
        int sq = len > 11 && strcmp(t->name + len - 11, ".exp_avg_sq") == 0;
        int avg = !sq && len > 8 && strcmp(t->name + len - 8, ".exp_avg") == 0;
        int p = avg || sq ? info_find(info, n_info, t->name, len - (sq ? 11 : 8)) : -1;
        if (p < 0) {
            ERR("%s: tensor %s is not NAME.exp_avg or NAME.exp_avg_sq of a parameter of this model", path, t->name);
            goto fail;
        }
        char want[64], got[64];
        if (t->dtype != ST_F32 || !shape_equal(t, &info[p])) {
            shape_str(want, sizeof want, info[p].ndim, info[p].shape);
            shape_str(got, sizeof got, t->ndim, t->shape);
            ERR("%s: tensor %s is %s %s, want F32 %s", path, t->name, st_dtype_name(t->dtype), got, want);
            goto fail;
        }
        if (sq) mo->v[p] = t;
        else mo->m[p] = t;
    }
    for (int p = 0; p < n_info; p++) {
        if (!info[p].prunable) continue;
        if (!mo->m[p] || !mo->v[p]) {
            ERR("%s: no tensor %s.%s (a dump of another model?)", path, info[p].name, mo->m[p] ? "exp_avg_sq" : "exp_avg");
            goto fail;
        }
    }
    return 0;
fail:
    moments_close(mo);
    return -1;
}

void moments_from_block(Moments *mo, const float *exp_avg, const float *exp_avg_sq, size_t lo) {
    memset(mo, 0, sizeof *mo);
    mo->flat_m = exp_avg;
    mo->flat_v = exp_avg_sq;
    mo->flat_lo = lo;
}

void moments_close(Moments *mo) {
    if (mo->is_file) st_close(&mo->st);
    free(mo->m);
    free(mo->v);
    memset(mo, 0, sizeof *mo);
}

const char *moments_step(const Moments *mo) { return mo->is_file ? st_meta(&mo->st, "step") : NULL; }

// --- computing ----------------------------------------------------------------------

typedef struct {
    const MaskSpec *spec;
    const ParamInfo *info;
    const float *params;     // (n_params)
    const Moments *mo;
    const uint8_t *old;      // (hi - lo) or NULL
    size_t lo, hi;           // the slice of the block this rank scores (dist.h)
    float *s, *m, *v;        // (CHUNK) scratch: scores, exp_avg, exp_avg_sq
    size_t step;             // chunks end at multiples of this in a tensor (CHUNK, or with N:M
                             // groups a multiple of spec->nm_m, so that a chunk cuts none)
    NMEdges edges;           // N:M: the groups this rank shares with others, protected (nm.h)
} Scorer;

// Moments of tensor p, elements [off, off + n), into buf (a file's data need not be
// aligned, so it is copied); NULL when the criterion does not read them.
static const float *moment_chunk(float *buf, const Moments *mo, const StTensor *const *ts, const float *flat,
                                 const ParamInfo *p, int ip, size_t off, size_t n) {
    if (!mo) return NULL;
    if (flat) return flat + (p->offset + off - mo->flat_lo);
    if (!ts || !ts[ip]) return NULL;
    memcpy(buf, (const char *)ts[ip]->data + off * sizeof(float), n * sizeof(float));
    return buf;
}

// The input saliency_score refused in a chunk, named by its file, tensor and element
// within the tensor (found again here: the slow path only).
static int chunk_error(const Scorer *sc, const ParamInfo *p, size_t off, size_t n, const float *w,
                       const float *m, const float *v) {
    const char *wf = sc->spec->weights_from ? sc->spec->weights_from : "the weights";
    const char *mf = sc->mo && sc->mo->is_file ? sc->mo->st.path : "the Adam moments";
    TRY(params_check_finite(wf, p, w, off, n));
    TRY(params_check_moments(mf, p->name, m, v, off, n));
    err_prefix("%s: tensor %s", wf, p->name);
    return -1;
}

// sc->s (n) = scores of tensor ip, elements [off, off + n); weights an old mask
// pruned get -1 (not candidates, select.h).
static int score_raw(Scorer *sc, int ip, size_t off, size_t n) {
    const ParamInfo *p = &sc->info[ip];
    Saliency sal = sc->spec->saliency;
    const Moments *mo = sc->mo;
    const float *m = NULL, *v = NULL;
    if (sal == SAL_FIRST) m = moment_chunk(sc->m, mo, mo ? mo->m : NULL, mo ? mo->flat_m : NULL, p, ip, off, n);
    if (sal == SAL_SECOND) v = moment_chunk(sc->v, mo, mo ? mo->v : NULL, mo ? mo->flat_v : NULL, p, ip, off, n);
    const float *w = sc->params + p->offset + off;
    if (saliency_score(sc->s, sal, w, m, v, n) < 0) return chunk_error(sc, p, off, n, w, m, v);
    if (sc->old) {
        const uint8_t *o = sc->old + (p->offset + off - sc->lo);
        for (size_t j = 0; j < n; j++)
            if (!o[j]) sc->s[j] = -1.0f;
    }
    return 0;
}

// score_raw, and with N:M groups the protected weights +inf (nm.h): the chunk's whole
// groups here, the groups it shares with another rank from the edges found before.
static int score_chunk(Scorer *sc, int ip, size_t off, size_t n) {
    TRY(score_raw(sc, ip, off, n));
    int m = sc->spec->nm_m;
    if (!m) return 0;
    size_t um = (size_t)m, g0 = (off + um - 1) / um * um, g1 = (off + n) / um * um;
    if (g1 > g0) nm_protect(sc->s + (g0 - off), g1 - g0, m, sc->spec->nm_keep);
    size_t x0 = sc->info[ip].offset + off; // the chunk in block elements
    for (int e = 0; e < 2; e++)
        for (size_t j = 0; j < sc->edges.len[e]; j++) {
            size_t x = sc->edges.at[e] + j;
            if (x >= x0 && x - x0 < n) sc->s[x - x0] = sc->edges.s[e][j];
        }
    return 0;
}

// The end of the chunk that starts at off (< b) in a tensor: the next multiple of
// sc->step, or b.
static size_t chunk_end(const Scorer *sc, size_t off, size_t b) {
    size_t e = (off / sc->step + 1) * sc->step;
    return e < b ? e : b;
}

// Keeps exactly k candidates among the tensors idx (n_idx), in their order, into mask
// (this rank's slice; the ranks call it together).
static int select_tensors(uint8_t *mask, Scorer *sc, const int *idx, int n_idx, uint64_t k) {
    Select s;
    select_init(&s, k);
    int rc = 0;
    size_t a, b;
    while (!s.done && rc == 0) {
        for (int t = 0; t < n_idx && rc == 0 && select_needs_data(&s); t++) {
            params_part(&a, &b, &sc->info[idx[t]], sc->lo, sc->hi);
            for (size_t off = a, e; off < b && rc == 0; off = e) {
                e = chunk_end(sc, off, b);
                size_t n = e - off;
                rc = score_chunk(sc, idx[t], off, n);
                if (rc == 0) select_count(&s, sc->s, n);
            }
        }
        if (dist_agree(rc) < 0) rc = -1;
        if (rc == 0) dist_sum_u64(s.hist, SELECT_HIST_LEN); // the ranks' counts
        if (rc == 0) rc = select_advance(&s);
    }
    uint64_t ties = 0; // ties on the ranks before this one (select.h)
    if (rc == 0 && dist_size() > 1) {
        for (int t = 0; t < n_idx && rc == 0; t++) {
            const ParamInfo *p = &sc->info[idx[t]];
            params_part(&a, &b, p, sc->lo, sc->hi);
            for (size_t off = a, e; off < b && rc == 0; off = e) {
                e = chunk_end(sc, off, b);
                size_t n = e - off;
                rc = score_chunk(sc, idx[t], off, n);
                if (rc == 0) ties += select_count_ties(&s, sc->s, n);
            }
        }
        ties = dist_exscan_u64(ties);
    }
    for (int t = 0; t < n_idx && rc == 0; t++) {
        const ParamInfo *p = &sc->info[idx[t]];
        params_part(&a, &b, p, sc->lo, sc->hi);
        for (size_t off = a, e; off < b && rc == 0; off = e) {
            e = chunk_end(sc, off, b);
            size_t n = e - off;
            rc = score_chunk(sc, idx[t], off, n);
            if (rc == 0) select_mark(mask + (p->offset + off - sc->lo), &s, sc->s, n, &ties);
        }
    }
    select_free(&s);
    return rc;
}

// Weights a group of n keeps under spec.
static uint64_t keep_count(const MaskSpec *spec, uint64_t n) {
    if (spec->prune_floor) return n - (uint64_t)floor(spec->sparsity * (double)n);
    return select_keep_count(spec->sparsity, n);
}

// With N:M groups: the chunk step, and this rank's edges (nm.h) scored and protected
// together with the other ranks'. Every rank calls it; an error on one is an error on all.
static int edges_protect(Scorer *sc, int n_info) {
    int m = sc->spec->nm_m, rc = 0;
    sc->step = CHUNK - CHUNK % (size_t)m;
    NMEdges *e = &sc->edges;
    nm_edges_find(e, sc->info, n_info, m, sc->lo, sc->hi);
    for (int k = 0; k < 2 && rc == 0; k++) {
        if (!e->len[k]) continue;
        const ParamInfo *p = &sc->info[e->tensor[k]];
        rc = score_raw(sc, e->tensor[k], e->at[k] - p->offset, e->len[k]);
        if (rc == 0) memcpy(e->s[k], sc->s, e->len[k] * sizeof(float));
    }
    TRY(dist_agree(rc));
    nm_edges_protect(e, m, sc->spec->nm_keep);
    return 0;
}

int mask_compute(uint8_t *mask, const MaskSpec *spec, const ParamInfo *info, int n_info,
                 const float *params, size_t n_params, const Moments *mo, const uint8_t *old) {
    return mask_compute_slice(mask, spec, info, n_info, params, 0, n_params, mo, old);
}

// Candidates (weights old keeps) of tensor p, over all ranks.
static uint64_t candidates(const ParamInfo *p, const uint8_t *old, size_t lo, size_t hi) {
    size_t a, b;
    params_part(&a, &b, p, lo, hi);
    uint64_t c = old ? mask_count(old + (p->offset + a - lo), b - a) : b - a;
    dist_sum_u64(&c, 1);
    return c;
}

int mask_compute_slice(uint8_t *mask, const MaskSpec *spec, const ParamInfo *info, int n_info,
                       const float *params, size_t lo, size_t hi, const Moments *mo, const uint8_t *old) {
    if (!(spec->sparsity >= 0.0 && spec->sparsity < 1.0))
        return ERR("sparsity %g is outside [0, 1)", spec->sparsity);
    if (saliency_needs_moments(spec->saliency) && !mo)
        return ERR("%s-order saliency needs Adam moments", saliency_name(spec->saliency));
    if (spec->nm_m && !(spec->nm_m >= 2 && spec->nm_m <= NM_MAX && spec->nm_keep >= 1 && spec->nm_keep <= spec->nm_m))
        return ERR("N:M groups of %d keeping %d: want 1 <= keep <= M <= %d", spec->nm_m, spec->nm_keep, NM_MAX);
    Scorer sc = {.spec = spec, .info = info, .params = params, .mo = mo, .old = old, .lo = lo, .hi = hi, .step = CHUNK};
    sc.s = xmalloc(3 * CHUNK * sizeof(float));
    sc.m = sc.s + CHUNK;
    sc.v = sc.m + CHUNK;
    if (spec->nm_m && edges_protect(&sc, n_info) < 0) {
        free(sc.s);
        return -1;
    }
    int *idx = xmalloc((size_t)(n_info ? n_info : 1) * sizeof *idx);
    int n_idx = 0, rc = 0;
    uint64_t n_prunable = 0;
    memset(mask, 1, hi - lo);
    for (int i = 0; i < n_info; i++) {
        if (!info[i].prunable) continue;
        idx[n_idx++] = i;
        n_prunable += info[i].numel;
    }
    if (spec->group == GROUP_GLOBAL) {
        uint64_t k = keep_count(spec, n_prunable), cand = 0;
        for (int t = 0; t < n_idx; t++) cand += candidates(&info[idx[t]], old, lo, hi);
        if (k > cand)
            rc = ERR("sparsity %g keeps %llu of %llu weights, but the old mask keeps only %llu: a mask only shrinks",
                     spec->sparsity, (unsigned long long)k, (unsigned long long)n_prunable, (unsigned long long)cand);
        else
            rc = select_tensors(mask, &sc, idx, n_idx, k);
    } else {
        for (int t = 0; t < n_idx && rc == 0; t++) {
            const ParamInfo *p = &info[idx[t]];
            uint64_t k = keep_count(spec, p->numel), c = candidates(p, old, lo, hi);
            rc = select_tensors(mask, &sc, &idx[t], 1, k < c ? k : c);
        }
    }
    free(idx);
    free(sc.s);
    return rc;
}

// --- file ---------------------------------------------------------------------------

typedef struct { const uint8_t *mask; } PackCtx;  // one tensor's packed bytes (ceil(numel/8),)

static int fill_bits(void *buf, size_t off, size_t n, void *ctx) {
    // bytes [off, off + n) of the tensor's ceil(numel / 8), packed by mask_save
    const PackCtx *c = ctx;
    memcpy(buf, c->mask + off, n);
    return 0;
}

int mask_save(const char *path, const uint8_t *mask, const MaskMeta *meta, const ParamInfo *info, int n_info) {
    StWriter w;
    st_writer_init(&w);
    uint8_t *packed = NULL;
    PackCtx *ctx = NULL;
    char buf[64];
    uint64_t n_prunable = 0, kept = 0;
    int rc = 0;
    for (int i = 0; i < n_info; i++)
        if (info[i].prunable) {
            n_prunable += info[i].numel;
            kept += mask_count(mask + info[i].offset, info[i].numel);
        }
    if (meta->packed) {
        // One packed buffer (n_prunable / 8 bytes) rather than packing on the fly: it
        // is an eighth of the mask we already hold.
        size_t total = 0;
        for (int i = 0; i < n_info; i++)
            if (info[i].prunable) total += (info[i].numel + 7) / 8;
        packed = xcalloc(total ? total : 1, 1);
        ctx = xcalloc((size_t)n_info, sizeof *ctx);
        size_t at = 0;
        for (int i = 0; i < n_info; i++) {
            if (!info[i].prunable) continue;
            const uint8_t *m = mask + info[i].offset;
            for (size_t j = 0; j < info[i].numel; j++) packed[at + j / 8] |= (uint8_t)((m[j] != 0) << (j % 8));
            ctx[i].mask = packed + at;
            at += (info[i].numel + 7) / 8;
        }
    }
    rc |= st_writer_meta(&w, "format", "best-mask");
    rc |= st_writer_meta(&w, "version", "1");
    rc |= st_writer_meta(&w, "packing", meta->packed ? "bits" : "bytes");
    if (!isnan(meta->sparsity)) {
        snprintf(buf, sizeof buf, "%.17g", meta->sparsity);
        rc |= st_writer_meta(&w, "sparsity", buf);
    }
    if (meta->saliency) rc |= st_writer_meta(&w, "saliency", meta->saliency);
    if (meta->group) rc |= st_writer_meta(&w, "group", meta->group);
    if (meta->method) rc |= st_writer_meta(&w, "method", meta->method);
    if (meta->schedule) rc |= st_writer_meta(&w, "schedule", meta->schedule);
    if (meta->pattern) rc |= st_writer_meta(&w, "pattern", meta->pattern);
    if (meta->step >= 0) {
        snprintf(buf, sizeof buf, "%lld", meta->step);
        rc |= st_writer_meta(&w, "step", buf);
    }
    if (meta->steps > 0) {
        snprintf(buf, sizeof buf, "%lld", meta->steps);
        rc |= st_writer_meta(&w, "steps", buf);
    }
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)n_prunable);
    rc |= st_writer_meta(&w, "prunable", buf);
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)kept);
    rc |= st_writer_meta(&w, "kept", buf);
    for (int i = 0; rc == 0 && i < n_info; i++) {
        const ParamInfo *p = &info[i];
        if (!p->prunable) continue;
        if (meta->packed) {
            char key[128];
            snprintf(key, sizeof key, "shape:%s", p->name);
            shape_str(buf, sizeof buf, p->ndim, p->shape);
            rc = st_writer_meta(&w, key, buf);
            int64_t nb = (int64_t)((p->numel + 7) / 8);
            if (rc == 0) rc = st_writer_add_fn(&w, p->name, ST_U8, 1, &nb, fill_bits, &ctx[i]);
        } else {
            // the mask's bytes are 0/1 already: BOOL straight from the block
            rc = st_writer_add(&w, p->name, ST_BOOL, p->ndim, p->shape, mask + p->offset);
        }
    }
    if (rc == 0) rc = st_writer_write(&w, path);
    st_writer_free(&w);
    free(packed);
    free(ctx);
    return rc < 0 ? -1 : 0;
}

// Tensor t of the file for parameter p, into out (numel,) as 0/1 bytes.
static int read_tensor(uint8_t *out, const SafeTensors *st, const StTensor *t, const ParamInfo *p, int bits) {
    char want[64], got[64];
    shape_str(want, sizeof want, p->ndim, p->shape);
    shape_str(got, sizeof got, t->ndim, t->shape);
    const uint8_t *d = t->data;
    if (bits) {
        size_t nb = (p->numel + 7) / 8;
        if (t->dtype != ST_U8 || t->ndim != 1 || (size_t)t->shape[0] != nb)
            return ERR("%s: tensor %s is %s %s, want bit-packed U8 [%zu] for shape %s", st->path, t->name,
                       st_dtype_name(t->dtype), got, nb, want);
        char key[128];
        snprintf(key, sizeof key, "shape:%s", p->name);
        const char *s = st_meta(st, key);
        if (s && strcmp(s, want) != 0)
            return ERR("%s: tensor %s: metadata says shape %s, the model's is %s", st->path, t->name, s, want);
        for (size_t j = 0; j < p->numel; j++) out[j] = (d[j / 8] >> (j % 8)) & 1;
        if (p->numel % 8 && (d[nb - 1] >> (p->numel % 8)))
            return ERR("%s: tensor %s: padding bits of the last byte are not 0", st->path, t->name);
        return 0;
    }
    if ((t->dtype != ST_BOOL && t->dtype != ST_U8) || !shape_equal(t, p))
        return ERR("%s: tensor %s is %s %s, want BOOL %s", st->path, t->name, st_dtype_name(t->dtype), got, want);
    for (size_t j = 0; j < p->numel; j++) {
        if (d[j] > 1)
            return ERR("%s: tensor %s: element %zu is %u, not 0 or 1", st->path, t->name, j, (unsigned)d[j]);
        out[j] = d[j];
    }
    return 0;
}

int mask_read(uint8_t *mask, const SafeTensors *st, const ParamInfo *info, int n_info, size_t n_params) {
    const char *fmt = st_meta(st, "format"), *ver = st_meta(st, "version"), *pk = st_meta(st, "packing");
    if (fmt && strcmp(fmt, "best-mask") != 0)
        return ERR("%s: format is \"%s\", not a best-mask file", st->path, fmt);
    if (ver && strcmp(ver, "1") != 0)
        return ERR("%s: mask version %s is not supported (1)", st->path, ver);
    int bits = pk && strcmp(pk, "bits") == 0;
    if (pk && !bits && strcmp(pk, "bytes") != 0)
        return ERR("%s: unknown packing \"%s\" (bytes or bits)", st->path, pk);
    int found = 0;
    for (int i = 0; i < n_info; i++) {
        const ParamInfo *p = &info[i];
        if (p->offset + p->numel > n_params || p->offset + p->numel < p->offset)
            return ERR("%s: parameter table does not fit the block", st->path);
        if (!p->prunable) {
            memset(mask + p->offset, 1, p->numel);
            continue;
        }
        const StTensor *t = st_find(st, p->name);
        if (!t) return ERR("%s: no tensor %s (a mask for another model?)", st->path, p->name);
        TRY(read_tensor(mask + p->offset, st, t, p, bits));
        found++;
    }
    if (found != st->n_tensors) {
        for (int i = 0; i < st->n_tensors; i++) {
            const char *name = st->tensors[i].name;
            int p = info_find(info, n_info, name, strlen(name));
            if (p < 0) return ERR("%s: tensor %s is not a parameter of this model", st->path, name);
            if (!info[p].prunable) return ERR("%s: tensor %s is not prunable (only the block's Linear weights are)", st->path, name);
        }
    }
    return 0;
}

int mask_file_pattern(NMPattern *out, const char *path, const uint8_t *mask, const ParamInfo *info, int n_info) {
    out->n = out->m = 0;
    SafeTensors st;
    TRY(st_open(&st, path));
    const char *v = st_meta(&st, "pattern");
    int rc = 0;
    if (v && nm_parse(out, v) < 0) rc = ERR("%s: metadata pattern = \"%s\" is not N:M", path, v);
    st_close(&st);
    for (int i = 0; i < n_info && rc == 0 && out->m; i++) {
        const ParamInfo *p = &info[i];
        if (!p->prunable) continue;
        size_t rows = (size_t)p->shape[0], cols = (size_t)p->shape[1], bad;
        if (cols % (size_t)out->m)
            rc = ERR("%s: pattern %d:%d, but %s has %zu columns", path, out->n, out->m, p->name, cols);
        else if ((bad = nm_violations(mask + p->offset, rows, cols, out)))
            rc = ERR("%s: pattern %d:%d, but %s keeps more than %d of %d in %zu groups", path, out->n, out->m, p->name,
                     out->n, out->m, bad);
    }
    return rc;
}

int mask_load(uint8_t *mask, const char *path, const ParamInfo *info, int n_info, size_t n_params) {
    SafeTensors st;
    TRY(st_open(&st, path));
    int rc = mask_read(mask, &st, info, n_info, n_params);
    st_close(&st);
    return rc;
}
