// engine_cuda.c: the engine's CUDA table (engine.h): model.cu's DevModel on one GPU, in
// DEVMODEL_EVAL for windows and rows (bf16 matrix products, fp32 elsewhere; a pack's
// weights stay packed there, decoded to bf16 right before each product) and
// DEVMODEL_DECODE for generation (the keys and values cached on the device, a pack's
// products read straight from its encodings, spmv.h), and the training step (DevModel's
// fp32 weights, gradients, moments and mask; under mpirun one GPU a rank, and NCCL
// between them: dist_nccl.h); and best-mask's one-shot walk (sparse/calib.cu, one block
// on the device at a time). In a build without CUDA the table is NULL and engine_pick
// never chooses it.
#include "engine/engine.h"

#ifndef BEST_CUDA
const EngineOps *const engine_cuda_ops = NULL;
#else
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"     // defines: ERR, TRY, xmalloc, xcalloc, xrealloc, err_prefix
#include "dist/dist.h"      // defines: dist_is_mpi, dist_agree, dist_rank, dist_size
#include "dist/dist_nccl.h" // defines: DevComm, devcomm_init, devcomm_free, devcomm_bytes
#include "base/cuda.h"        // defines: CudaCtx, cuda_ctx_create, cuda_mem_free, cuda_mem_in_use

// ENGINE_LOCAL_GPU: under mpirun each rank takes the GPU of its local rank.
static int cuda_open(void **ctx, int device) {
    if (device == ENGINE_LOCAL_GPU) {
        const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK"), *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
        int here = dist_is_mpi() && ls ? atoi(ls) : 1;
        device = dist_is_mpi() && lr ? atoi(lr) : 0;
        if (here > cuda_device_count())
            return ERR("--device cuda: mpirun started %d ranks on this machine, which has %d GPU%s: one rank a GPU "
                       "(mpirun -np, or a hostfile's slots), or --device cpu", here, cuda_device_count(),
                       cuda_device_count() == 1 ? "" : "s");
    }
    CudaCtx *c;
    TRY(cuda_ctx_create(&c, device, (size_t)32 << 20)); // cuBLASLt's workspace: 32 MiB (Hopper)
    *ctx = c;
    return 0;
}

static void cuda_close(void *ctx) { cuda_ctx_free(ctx); }

static size_t cuda_win_bytes(const Model *m, int batch, int seq) {
    return devmodel_bytes(NULL, m, batch, seq, 0, DEVMODEL_EVAL, 0);
}

static double cuda_win_budget(void *ctx) { return 0.5 * (double)cuda_mem_free(ctx); } // half the device's free memory

typedef struct {
    DevModel d;
    int batch, seq;
    int32_t *x, *targets; // (batch, seq) a batch, padded
} CudaWin;

static int cuda_win_open(void **s, void *ctx, const Model *m, int batch, int seq) {
    CudaWin *w = xcalloc(1, sizeof *w);
    if (devmodel_init(&w->d, ctx, m, batch, seq, 0, DEVMODEL_EVAL) < 0) {
        free(w);
        return -1;
    }
    w->batch = batch, w->seq = seq;
    size_t N = (size_t)batch * (size_t)seq;
    w->x = xmalloc(N * sizeof *w->x);
    w->targets = xmalloc(N * sizeof *w->targets);
    *s = w;
    return 0;
}

// A last, smaller batch is padded with copies of its first window, without targets.
static int cuda_win_nll(double *total, void *s, const int32_t *x, const int32_t *targets, int nb) {
    CudaWin *w = s;
    size_t T = (size_t)w->seq, N = (size_t)w->batch * T;
    memcpy(w->x, x, (size_t)nb * T * sizeof *w->x);
    for (size_t b = (size_t)nb; b < (size_t)w->batch; b++) memcpy(w->x + b * T, w->x, T * sizeof *w->x);
    for (size_t i = 0; i < N; i++) w->targets[i] = -1;
    memcpy(w->targets, targets, (size_t)nb * T * sizeof *w->targets);
    TRY(devmodel_forward(&w->d, w->x, w->targets));
    *total += w->d.nll_sum; // in double on the device, in a fixed order
    return 0;
}

static size_t cuda_win_device_bytes(const void *s) {
    const CudaWin *w = s;
    return w->d.weight_bytes + w->d.acts_bytes;
}

static void cuda_win_close(void *s) {
    CudaWin *w = s;
    devmodel_free(&w->d);
    free(w->x);
    free(w->targets);
    free(w);
}

#define ROWS_DEFAULT ((size_t)1 << 14) // rows a batch, unless a document has more

typedef struct {
    CudaCtx *c;
    const Model *m;
    DevModel d;       // (when rows > 0) DEVMODEL_EVAL of rows rows
    size_t rows;      // rows a batch
    int32_t *targets; // (rows) per row, -1 where a row does not score
    float *nll;       // (rows)
} CudaRows;

// r's DevModel and buffers for batches of rows rows (the model uploaded again). 0, or ERR.
static int rows_alloc(CudaRows *r, size_t rows) {
    if (r->rows) devmodel_free(&r->d);
    r->rows = 0;
    TRY(devmodel_init(&r->d, r->c, r->m, 1, (int)rows, 0, DEVMODEL_EVAL));
    r->rows = rows;
    r->targets = xrealloc(r->targets, rows * sizeof *r->targets);
    r->nll = xrealloc(r->nll, rows * sizeof *r->nll);
    return 0;
}

static void cuda_rows_close(void *s) {
    CudaRows *r = s;
    if (r->rows) devmodel_free(&r->d);
    free(r->targets);
    free(r->nll);
    free(r);
}

// The model goes up once, for batches of ROWS_DEFAULT rows, and again only for a task with
// a longer document (rare).
static int cuda_rows_open(void **s, void *ctx, const Model *m) {
    CudaRows *r = xcalloc(1, sizeof *r);
    r->c = ctx, r->m = m;
    if (rows_alloc(r, ROWS_DEFAULT) < 0) {
        cuda_rows_close(r);
        return -1;
    }
    *s = r;
    return 0;
}

static int cuda_rows_reserve(void *s, size_t longest, size_t *max_rows) {
    CudaRows *r = s;
    if (longest > r->rows) TRY(rows_alloc(r, longest));
    *max_rows = r->rows;
    return 0;
}

static int cuda_rows_score(void *s, double *ll, const EngineBatch *b) {
    CudaRows *r = s;
    for (size_t i = 0; i < b->n; i++) r->targets[i] = -1;
    for (size_t k = 0; k < b->n_score; k++) r->targets[b->score_row[k]] = b->target[k];
    TRY(devmodel_forward_packed(&r->d, b->tok, b->pos, r->targets, b->n, b->seg, b->nseg));
    devmodel_download_nll(&r->d, r->nll);
    for (size_t k = 0; k < b->n_score; k++) ll[b->score_req[k]] -= r->nll[b->score_row[k]];
    return 0;
}

typedef struct {
    CudaCtx *c;
    DevModel d;
    float *logits; // (V) on the host
    size_t mem_before, mem_loaded;
} CudaDec;

static int cuda_dec_open(void **s, void *ctx, const Model *m, int max_T) {
    CudaDec *d = xcalloc(1, sizeof *d);
    d->c = ctx;
    d->mem_before = cuda_mem_in_use(ctx);
    if (devmodel_init(&d->d, ctx, m, 1, max_T, 0, DEVMODEL_DECODE) < 0) {
        free(d);
        return -1;
    }
    d->mem_loaded = cuda_mem_in_use(ctx);
    d->logits = xmalloc(m->V * sizeof *d->logits);
    *s = d;
    return 0;
}

static const float *cuda_dec_step(void *s, int32_t token, int pos) {
    CudaDec *d = s;
    return devmodel_forward_token(d->logits, &d->d, token, (size_t)pos) < 0 ? NULL : d->logits;
}

// the argmax on the device, 4 bytes back a token
static int cuda_dec_greedy(void *s, int32_t token, int pos, int32_t *next) {
    CudaDec *d = s;
    return devmodel_forward_token_greedy(next, &d->d, token, (size_t)pos);
}

static void cuda_dec_stats(EngineDecStats *st, const void *s) {
    const CudaDec *d = s;
    st->weight_bytes = d->d.weight_bytes;
    st->bytes = d->d.weight_bytes + d->d.acts_bytes;
    st->mem_before = d->mem_before;
    st->mem_loaded = d->mem_loaded;
    st->mem_now = cuda_mem_in_use(d->c);
    st->cuda_graph = d->d.graph || d->d.graph_greedy;
    st->fused = d->d.n_fused;
}

static void cuda_dec_close(void *s) {
    CudaDec *d = s;
    free(d->logits);
    devmodel_free(&d->d);
    free(d);
}

typedef struct {
    CudaCtx *c;
    DevModel d;
    DevComm *comm;   // under mpirun: the GPU ranks' NCCL communicator
    const Model *m;
    EngineTrainShape sh;
    size_t mem;      // bytes in use on the GPU after the first step (cudaMemGetInfo)
    double prof_wall, prof_first; // --profile: the host clock's seconds of the steps after
    int prof_steps;               // the first, of the first, and the steps timed
} CudaTrain;

// What cuda_train_open's DevModel takes for this shape (docs/best-train.md's table).
static size_t cuda_train_bytes(const Model *m, const EngineTrainShape *sh, int ranks) {
    size_t acts;
    return devmodel_bytes(&acts, m, sh->micro_batch, sh->seq, 0, sh->recompute ? DEVMODEL_RECOMPUTE : 0, ranks);
}

// Every rank calls it: under mpirun (one rank too: the same path as several, so that
// mpirun -np 1 checks it) the ranks join their NCCL communicator; without, none.
static int cuda_oneshot(void *ctx, uint8_t *mask, OneShotStats *st, Model *m, const OneShotSpec *spec,
                        const int32_t *windows, int n, int seq, Progress *pr) {
    return oneshot_prune_cuda(mask, st, m, spec, windows, n, seq, pr, ctx);
}

static int cuda_train_open(void **s, void *ctx, Model *m, const AdamW *opt, const uint8_t *mask,
                           const EngineTrainShape *sh) {
    CudaTrain *t = xcalloc(1, sizeof *t);
    t->c = ctx, t->m = m, t->sh = *sh;
    if (dist_is_mpi() && dist_agree(devcomm_init(&t->comm)) < 0) {
        free(t);
        return -1;
    }
    if (devmodel_init_ranks(&t->d, ctx, m, sh->micro_batch, sh->seq, 0, sh->recompute ? DEVMODEL_RECOMPUTE : 0,
                            t->comm) < 0) {
        devcomm_free(t->comm);
        free(t);
        return -1;
    }
    devmodel_upload(&t->d, m->params, opt, mask);
    if (sh->profile) devmodel_profile_start(&t->d);
    *s = t;
    return 0;
}

static void cuda_train_close(void *s) {
    CudaTrain *t = s;
    devmodel_free(&t->d);
    devcomm_free(t->comm);
    free(t);
}

static void cuda_train_download(void *s, float *params, AdamW *opt, uint8_t *mask) {
    CudaTrain *t = s;
    devmodel_download(&t->d, params, opt);
    if (mask) devmodel_download_mask(&t->d, mask); // the device updates it (mask_update_cuda)
}

static void cuda_train_upload(void *s, const float *params, const AdamW *opt, const uint8_t *mask) {
    CudaTrain *t = s;
    devmodel_upload(&t->d, params, opt, mask);
}

// The tokens go up, the losses and the sum of squares come back; for the one-pass
// optimizer on one rank the sum stays on the device (*sumsq NaN: known after the step).
// With GPU ranks the last micro-batch's backward sums the gradients onto their owners
// (devmodel_backward_sum, over NCCL).
static int cuda_train_grads(void *s, double *loss, double *sumsq, const EngineGrads *g) {
    CudaTrain *t = s;
    DevModel *d = &t->d;
    devmodel_zero_grad(d);
    int n_micro = g->batch / g->micro_batch, ranks = dist_size(), local = n_micro / ranks;
    size_t mb = (size_t)g->micro_batch * (size_t)g->seq; // tokens a micro-batch
    *loss = 0;
    for (int i = 0; i < local; i++) {
        // forward and backward; the last micro-batch's sums the gradients over GPU ranks
        float scale = (float)g->micro_batch / (float)g->batch;
        if (devmodel_forward_backward(d, g->tokens + i * mb, g->targets + i * mb, scale, i == local - 1) < 0) {
            err_prefix("step %d", g->step);
            return -1;
        }
        *loss += d->loss / n_micro;
    }
    if (g->passes) {
        *sumsq = devmodel_grad_sumsq(d, g->masked);
        return 0;
    }
    devmodel_grad_sumsq_start(d, g->masked);
    *sumsq = ranks > 1 ? devmodel_grad_sumsq_get(d) : NAN; // the ranks add theirs on the host
    return 0;
}

// Enqueued, then waited for, so that the host's clock times the work (until 2026-11-29
// tokens/s left the device's AdamW out, and the mask update).
static int cuda_train_norm_later(int passes) { return !passes && dist_size() == 1; }

static void cuda_train_optimize(void *s, double *norm, const EngineOptim *o) {
    CudaTrain *t = s;
    DevModel *d = &t->d;
    if (!o->passes) {
        if (!isnan(o->sumsq)) devmodel_grad_sumsq_put(d, o->sumsq); // every rank's
        devmodel_optimize(d, o->h, o->t, o->masked, o->clip, o->vec);
    } else {
        float coef = o->clip > 0 ? grad_clip_coef(*norm, o->clip) : 1.0f;
        if (coef < 1.0f) devmodel_grad_scale(d, coef);
        devmodel_adamw(d, o->h, o->t, o->masked);
    }
    devmodel_sync(d);
    if (isnan(o->sumsq)) *norm = sqrt(devmodel_grad_sumsq_get(d));
    o->opt->t++; // the host's count of steps (the moments are the device's until downloaded)
}

static int cuda_train_mask_update(void *s, const MaskSpec *spec) {
    CudaTrain *t = s;
    MaskSpans ms; // its slice's weights, moments and mask; the gradients as the scores' scratch
    mask_spans_of(&ms, &t->d);
    return mask_update_cuda(&ms, spec);
}

static void cuda_train_mask_begin(void *s) {
    CudaTrain *t = s;
    devmodel_profile_mark(&t->d, DP_MASK, 0);
}

static void cuda_train_mask_end(void *s) {
    CudaTrain *t = s;
    devmodel_sync(&t->d);
}

static void cuda_train_step_end(void *s, double wall) {
    CudaTrain *t = s;
    if (!t->mem) t->mem = cuda_mem_in_use(t->c); // all allocated by now
    if (!t->d.prof) return;
    devmodel_profile_step(&t->d);
    if (t->prof_steps++ == 0) t->prof_first = wall;
    else t->prof_wall += wall;
}

static double cuda_train_sparsity(void *s) {
    CudaTrain *t = s;
    return devmodel_sparsity(&t->d);
}

static double cuda_train_comm_bytes(const void *s) {
    const CudaTrain *t = s;
    return t->comm ? devcomm_bytes(t->comm) : 0;
}

static int cuda_train_nccl(const void *s) {
    const CudaTrain *t = s;
    return t->comm != NULL;
}

static void cuda_train_memory(const void *s, size_t *measured, size_t *computed) {
    const CudaTrain *t = s;
    *measured = t->mem;
    *computed = cuda_train_bytes(t->m, &t->sh, dist_size());
}

static int cuda_train_profiled(const void *s) {
    const CudaTrain *t = s;
    return t->prof_steps > 0;
}

static void cuda_train_profile_write(void *s, FILE *f) {
    CudaTrain *t = s;
    double wall_ms = 1e3 * (t->prof_steps > 1 ? t->prof_wall / (t->prof_steps - 1) : t->prof_first);
    devmodel_profile_write(&t->d, f, wall_ms);
    fprintf(f, "# device memory: %.3f GiB in use after the first step (cudaMemGetInfo), %.3f GiB computed "
            "(devmodel_bytes)\n", (double)t->mem / (1 << 30),
            (double)cuda_train_bytes(t->m, &t->sh, dist_size()) / (1 << 30));
}

static const EngineOps cuda_ops = {
    .name = "cuda",
    .open = cuda_open,
    .close = cuda_close,
    .win_bytes = cuda_win_bytes,
    .win_budget = cuda_win_budget,
    .win_open = cuda_win_open,
    .win_nll = cuda_win_nll,
    .win_device_bytes = cuda_win_device_bytes,
    .win_close = cuda_win_close,
    .rows_open = cuda_rows_open,
    .rows_reserve = cuda_rows_reserve,
    .rows_score = cuda_rows_score,
    .rows_close = cuda_rows_close,
    .dec_open = cuda_dec_open,
    .dec_step = cuda_dec_step,
    .dec_greedy = cuda_dec_greedy,
    .dec_stats = cuda_dec_stats,
    .dec_close = cuda_dec_close,
    .train_open = cuda_train_open,
    .on_device = 1,
    .train_norm_later = cuda_train_norm_later,
    .train_close = cuda_train_close,
    .train_download = cuda_train_download,
    .train_upload = cuda_train_upload,
    .train_grads = cuda_train_grads,
    .train_optimize = cuda_train_optimize,
    .train_mask_update = cuda_train_mask_update,
    .train_mask_begin = cuda_train_mask_begin,
    .train_mask_end = cuda_train_mask_end,
    .train_step_end = cuda_train_step_end,
    .train_sparsity = cuda_train_sparsity,
    .train_comm_bytes = cuda_train_comm_bytes,
    .train_nccl = cuda_train_nccl,
    .train_memory = cuda_train_memory,
    .train_profiled = cuda_train_profiled,
    .train_profile_write = cuda_train_profile_write,
    .oneshot = cuda_oneshot,
};
const EngineOps *const engine_cuda_ops = &cuda_ops;
#endif
