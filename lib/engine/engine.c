// engine.c: the engine's dispatch and the default-device rule (engine.h), and the CPU's
// table: model.c's forward passes in fp32.
#include "engine/engine.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h" // defines: ERR, TRY, xmalloc, xcalloc, err_prefix
#include "dist/dist.h"  // defines: dist_size, dist_reduce_scatter_f32
#include "base/cuda.h"    // defines: cuda_device_count, cuda_info
#include "nn/layers.h"  // defines: crossentropy_forward

struct Engine {
    const EngineOps *ops;
    EngineKind kind;
    void *ctx; // the device's context (CUDA: a CudaCtx), NULL on the CPU
};

int engine_pick(EngineKind *kind, const char *name) {
    *kind = ENGINE_CPU;
    if (name && strcmp(name, "cpu") == 0) return 0;
    if (name && *name && strcmp(name, "cuda") != 0) return ERR("unknown device %s (cuda, cpu)", name);
    int cuda = name && *name; // asked for, or the default
    if (cuda_device_count() > 0) *kind = ENGINE_CUDA;
    else if (cuda) return ERR("--device cuda: %s; use --device cpu", cuda_info());
    return 0;
}

int engine_open(Engine **out, const char *name, int device) {
    *out = NULL;
    EngineKind kind;
    TRY(engine_pick(&kind, name));
    const EngineOps *ops = kind == ENGINE_CUDA ? engine_cuda_ops : &engine_cpu_ops; // (CUDA: a build with it)
    Engine *e = xcalloc(1, sizeof *e);
    e->ops = ops;
    e->kind = kind;
    if (ops->open && ops->open(&e->ctx, device) < 0) {
        free(e);
        return -1;
    }
    *out = e;
    return 0;
}

void engine_close(Engine *e) {
    if (!e) return;
    if (e->ops->close) e->ops->close(e->ctx);
    free(e);
}

EngineKind engine_kind(const Engine *e) { return e->kind; }
const char *engine_name(const Engine *e) { return e->ops->name; }

// --- dispatch ---------------------------------------------------------------------------------

int engine_win_auto_batch(Engine *e, const Model *m, int seq, size_t nwin, int max) {
    int b = max;
    if ((size_t)b > nwin) b = (int)nwin;
    double budget = e->ops->win_budget(e->ctx);
    while (b > 1 && (double)e->ops->win_bytes(m, b, seq) > budget) b--;
    return b < 1 ? 1 : b;
}

int engine_win_open(EngineWin *w, Engine *e, const Model *m, int batch, int seq) {
    w->e = e;
    return e->ops->win_open(&w->s, e->ctx, m, batch, seq);
}
int engine_win_nll(double *total, EngineWin *w, const int32_t *x, const int32_t *targets, int nb) {
    return w->e->ops->win_nll(total, w->s, x, targets, nb);
}
size_t engine_win_device_bytes(const EngineWin *w) { return w->e->ops->win_device_bytes(w->s); }
void engine_win_close(EngineWin *w) {
    if (w->e && w->s) w->e->ops->win_close(w->s);
    w->s = NULL;
}

int engine_oneshot(Engine *e, uint8_t *mask, OneShotStats *st, Model *m, const OneShotSpec *spec,
                   const int32_t *windows, int n, int seq, Progress *pr) {
    return e->ops->oneshot(e->ctx, mask, st, m, spec, windows, n, seq, pr);
}

int engine_rows_open(EngineRows *r, Engine *e, const Model *m) {
    r->e = e;
    return e->ops->rows_open(&r->s, e->ctx, m);
}
int engine_rows_reserve(EngineRows *r, size_t longest, size_t *max_rows) {
    return r->e->ops->rows_reserve(r->s, longest, max_rows);
}
int engine_rows_score(EngineRows *r, double *ll, const EngineBatch *b) { return r->e->ops->rows_score(r->s, ll, b); }
void engine_rows_close(EngineRows *r) {
    if (r->e && r->s) r->e->ops->rows_close(r->s);
    r->s = NULL;
}

int engine_dec_open(EngineDec *d, Engine *e, const Model *m, int max_T) {
    d->e = e;
    return e->ops->dec_open(&d->s, e->ctx, m, max_T);
}
const float *engine_dec_step(EngineDec *d, int32_t token, int pos) { return d->e->ops->dec_step(d->s, token, pos); }
int engine_dec_has_greedy(const EngineDec *d) {
    const char *gl = getenv("BEST_GREEDY_LOGITS"); // 1: the logits come back, as before the greedy step
    return d->e->ops->dec_greedy && !(gl && strcmp(gl, "1") == 0);
}
int engine_dec_greedy(EngineDec *d, int32_t token, int pos, int32_t *next) {
    return d->e->ops->dec_greedy(d->s, token, pos, next);
}
void engine_dec_stats(EngineDecStats *st, const EngineDec *d) {
    memset(st, 0, sizeof *st);
    if (d->e->ops->dec_stats) d->e->ops->dec_stats(st, d->s);
}
void engine_dec_close(EngineDec *d) {
    if (d->e && d->s) d->e->ops->dec_close(d->s);
    d->s = NULL;
}

// The training step: the calls of a device only do nothing on the CPU.
int engine_train_open(EngineTrain *t, Engine *e, Model *m, const AdamW *opt, const uint8_t *mask,
                      const EngineTrainShape *sh) {
    t->e = e;
    t->s = NULL;
    return e->ops->train_open(&t->s, e->ctx, m, opt, mask, sh);
}
void engine_train_close(EngineTrain *t) {
    if (t->e && t->s) t->e->ops->train_close(t->s);
    t->s = NULL;
}
int engine_train_on_device(const EngineTrain *t) { return t->s && t->e->ops->on_device; }
int engine_train_norm_later(const EngineTrain *t, int passes) { return t->e->ops->train_norm_later(passes); }
void engine_train_download(EngineTrain *t, float *params, AdamW *opt, uint8_t *mask) {
    if (engine_train_on_device(t)) t->e->ops->train_download(t->s, params, opt, mask);
}
void engine_train_upload(EngineTrain *t, const float *params, const AdamW *opt, const uint8_t *mask) {
    if (engine_train_on_device(t)) t->e->ops->train_upload(t->s, params, opt, mask);
}
int engine_train_grads(EngineTrain *t, double *loss, double *sumsq, const EngineGrads *g) {
    return t->e->ops->train_grads(t->s, loss, sumsq, g);
}
void engine_train_optimize(EngineTrain *t, double *norm, const EngineOptim *o) { t->e->ops->train_optimize(t->s, norm, o); }
int engine_train_mask_update(EngineTrain *t, const MaskSpec *spec) {
    return engine_train_on_device(t) ? t->e->ops->train_mask_update(t->s, spec) : 1;
}
void engine_train_mask_begin(EngineTrain *t) {
    if (engine_train_on_device(t)) t->e->ops->train_mask_begin(t->s);
}
void engine_train_mask_end(EngineTrain *t) {
    if (engine_train_on_device(t)) t->e->ops->train_mask_end(t->s);
}
void engine_train_step_end(EngineTrain *t, double wall) {
    if (engine_train_on_device(t)) t->e->ops->train_step_end(t->s, wall);
}
double engine_train_sparsity(EngineTrain *t) { return t->e->ops->train_sparsity(t->s); }
double engine_train_comm_bytes(const EngineTrain *t) {
    return engine_train_on_device(t) ? t->e->ops->train_comm_bytes(t->s) : 0;
}
int engine_train_nccl(const EngineTrain *t) { return engine_train_on_device(t) ? t->e->ops->train_nccl(t->s) : 0; }
void engine_train_memory(const EngineTrain *t, size_t *measured, size_t *computed) {
    *measured = *computed = 0;
    if (engine_train_on_device(t)) t->e->ops->train_memory(t->s, measured, computed);
}
int engine_train_profiled(const EngineTrain *t) { return engine_train_on_device(t) ? t->e->ops->train_profiled(t->s) : 0; }
void engine_train_profile_write(EngineTrain *t, FILE *f) {
    if (engine_train_on_device(t)) t->e->ops->train_profile_write(t->s, f);
}

// --- the CPU ----------------------------------------------------------------------------------

static size_t cpu_win_bytes(const Model *m, int batch, int seq) { return model_acts_bytes(m, batch, seq, 0); }

static double cpu_win_budget(void *ctx) {
    (void)ctx; // a quarter of the memory available now
    return 0.25 * (double)sysconf(_SC_AVPHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
}

typedef struct {
    const Model *m;
    ModelActs a; // (batch, seq), or (nb, seq) after a last smaller batch
    int batch, seq;
    float *nll; // (batch * seq)
} CpuWin;

static int cpu_win_open(void **s, void *ctx, const Model *m, int batch, int seq) {
    (void)ctx;
    CpuWin *w = xcalloc(1, sizeof *w);
    if (model_acts_init(&w->a, m, batch, seq, 0) < 0) {
        free(w);
        return -1;
    }
    w->m = m, w->batch = batch, w->seq = seq;
    w->nll = xmalloc((size_t)batch * (size_t)seq * sizeof *w->nll);
    *s = w;
    return 0;
}

static int cpu_win_nll(double *total, void *s, const int32_t *x, const int32_t *targets, int nb) {
    CpuWin *w = s;
    if (nb != w->batch) { // the last, smaller batch gets its own buffers
        model_acts_free(&w->a);
        w->batch = 0;
        TRY(model_acts_init(&w->a, w->m, nb, w->seq, 0));
        w->batch = nb;
    }
    TRY(model_eval(NULL, w->nll, w->m, &w->a, x, targets));
    for (size_t i = 0; i < (size_t)nb * (size_t)w->seq; i++) *total += w->nll[i];
    return 0;
}

static size_t cpu_win_device_bytes(const void *s) {
    (void)s;
    return 0;
}

static void cpu_win_close(void *s) {
    CpuWin *w = s;
    if (w->batch) model_acts_free(&w->a);
    free(w->nll);
    free(w);
}

typedef struct {
    const Model *m;
    PackedActs a;
    int have_acts;
    float *nll; // (a.logit_rows)
} CpuRows;

static int cpu_rows_open(void **s, void *ctx, const Model *m) {
    (void)ctx;
    CpuRows *r = xcalloc(1, sizeof *r);
    r->m = m;
    *s = r;
    return 0;
}

// Batches of as many rows as 256 MiB of activations hold (256 to 2048, and longest),
// logits 64 MiB at a time (16 to 512 rows).
static int cpu_rows_reserve(void *s, size_t longest, size_t *max_rows) {
    CpuRows *r = s;
    const Model *m = r->m;
    size_t row_floats = 2 * m->C + 2 * m->Q + 2 * m->KVD + 2 * m->I + m->NH + m->HD + (size_t)omp_get_max_threads();
    size_t rows = (256u << 20) / (row_floats * sizeof(float)), logit_rows = (64u << 20) / (m->V * sizeof(float));
    rows = rows < 256 ? 256 : rows > 2048 ? 2048 : rows;
    logit_rows = logit_rows < 16 ? 16 : logit_rows > 512 ? 512 : logit_rows;
    if (longest > rows) rows = longest;
    if (r->have_acts) packed_acts_free(&r->a);
    r->have_acts = 0;
    TRY(packed_acts_init(&r->a, m, rows, logit_rows, longest));
    r->have_acts = 1;
    r->nll = xrealloc(r->nll, logit_rows * sizeof *r->nll);
    *max_rows = rows;
    return 0;
}

// The scoring rows' NLL (layers.h's cross-entropy, as model_eval's) logit_rows at a time,
// subtracted in row order (the same sums whatever the threads).
static int cpu_rows_score(void *s, double *ll, const EngineBatch *b) {
    CpuRows *r = s;
    PackedActs *a = &r->a;
    TRY(model_forward_packed(r->m, a, b->tok, b->pos, b->n, b->seg, b->nseg));
    for (size_t r0 = 0; r0 < b->n_score; r0 += a->logit_rows) {
        size_t nr = b->n_score - r0 < a->logit_rows ? b->n_score - r0 : a->logit_rows;
        const float *z = model_packed_logits(r->m, a, b->score_row + r0, nr);
        crossentropy_forward(r->nll, NULL, z, b->target + r0, nr, r->m->V);
        for (size_t k = 0; k < nr; k++) ll[b->score_req[r0 + k]] -= r->nll[k];
    }
    return 0;
}

static void cpu_rows_close(void *s) {
    CpuRows *r = s;
    if (r->have_acts) packed_acts_free(&r->a);
    free(r->nll);
    free(r);
}

typedef struct {
    const Model *m;
    KVCache c;
} CpuDec;

static int cpu_dec_open(void **s, void *ctx, const Model *m, int max_T) {
    (void)ctx;
    CpuDec *d = xcalloc(1, sizeof *d);
    d->m = m;
    if (kvcache_init(&d->c, m, max_T) < 0) {
        free(d);
        return -1;
    }
    *s = d;
    return 0;
}

static const float *cpu_dec_step(void *s, int32_t token, int pos) {
    CpuDec *d = s;
    return model_forward_token(d->m, &d->c, token, pos);
}

static void cpu_dec_close(void *s) {
    CpuDec *d = s;
    kvcache_free(&d->c);
    free(d);
}

typedef struct {
    Model *m;
    ModelActs acts; // (micro_batch, seq) the training activations
} CpuTrain;

static int cpu_train_open(void **s, void *ctx, Model *m, const AdamW *opt, const uint8_t *mask,
                          const EngineTrainShape *sh) {
    (void)ctx, (void)opt, (void)mask; // (the host's own)
    CpuTrain *t = xcalloc(1, sizeof *t);
    t->m = m;
    if (model_acts_init(&t->acts, m, sh->micro_batch, sh->seq, 1) < 0) {
        free(t);
        return -1;
    }
    model_grads_init(m);
    *s = t;
    return 0;
}

static void cpu_train_close(void *s) {
    CpuTrain *t = s;
    model_acts_free(&t->acts);
    free(t);
}

static int cpu_train_norm_later(int passes) {
    (void)passes;
    return 0;
}

// This rank's sequences forward and backward, micro-batch by micro-batch; the gradients
// reduce-scattered, this rank's slice masked and its sum of squares taken.
static int cpu_train_grads(void *s, double *loss, double *sumsq, const EngineGrads *g) {
    CpuTrain *t = s;
    Model *m = t->m;
    model_zero_grad(m);
    int n_micro = g->batch / g->micro_batch;
    size_t mb = (size_t)g->micro_batch * (size_t)g->seq; // tokens a micro-batch
    *loss = 0;
    for (int i = 0; i < n_micro / dist_size(); i++) {
        if (model_forward(m, &t->acts, g->tokens + i * mb, g->targets + i * mb) < 0) {
            err_prefix("step %d", g->step);
            return -1;
        }
        *loss += t->acts.loss / n_micro;
        model_backward(m, &t->acts, (float)g->micro_batch / (float)g->batch);
    }
    dist_reduce_scatter_f32(m->grads, m->n_params);
    float *gs = m->grads + g->lo;
    if (g->masked) mask_apply(gs, g->mask, g->hi - g->lo);
    *sumsq = grad_sumsq(gs, g->hi - g->lo);
    return 0;
}

// clip_grad_norm_ by the norm of every rank's gradient, then AdamW on this rank's slice.
static void cpu_train_optimize(void *s, double *norm, const EngineOptim *o) {
    CpuTrain *t = s;
    Model *m = t->m;
    float coef = o->clip > 0 ? grad_clip_coef(*norm, o->clip) : 1.0f;
    size_t n = o->hi - o->lo;
    if (coef < 1.0f) grad_scale(m->grads + o->lo, coef, n);
    adamw_step(o->opt, m->params + o->lo, m->grads + o->lo, o->masked ? o->mask : NULL, o->h);
}

static double cpu_train_sparsity(void *s) {
    CpuTrain *t = s;
    return model_sparsity(t->m);
}

static int cpu_oneshot(void *ctx, uint8_t *mask, OneShotStats *st, Model *m, const OneShotSpec *spec,
                       const int32_t *windows, int n, int seq, Progress *pr) {
    (void)ctx;
    return oneshot_prune(mask, st, m, spec, windows, n, seq, pr);
}

const EngineOps engine_cpu_ops = {
    .name = "cpu",
    .win_bytes = cpu_win_bytes,
    .win_budget = cpu_win_budget,
    .win_open = cpu_win_open,
    .win_nll = cpu_win_nll,
    .win_device_bytes = cpu_win_device_bytes,
    .win_close = cpu_win_close,
    .rows_open = cpu_rows_open,
    .rows_reserve = cpu_rows_reserve,
    .rows_score = cpu_rows_score,
    .rows_close = cpu_rows_close,
    .dec_open = cpu_dec_open,
    .dec_step = cpu_dec_step,
    .dec_close = cpu_dec_close,
    .oneshot = cpu_oneshot,
    .train_open = cpu_train_open,
    .on_device = 0,
    .train_norm_later = cpu_train_norm_later,
    .train_close = cpu_train_close,
    .train_grads = cpu_train_grads,
    .train_optimize = cpu_train_optimize,
    .train_sparsity = cpu_train_sparsity,
};
