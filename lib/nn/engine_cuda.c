// engine_cuda.c: the engine's CUDA table (engine.h): model.cu's DevModel on one GPU, in
// DEVMODEL_EVAL for windows and rows (bf16 matrix products, fp32 elsewhere; a pack's
// weights stay packed there, decoded to bf16 right before each product) and
// DEVMODEL_DECODE for generation (the keys and values cached on the device, a pack's
// products read straight from its encodings, spmv.h). In a build without CUDA the table
// is NULL and engine_pick never chooses it.
#include "nn/engine.h"

#ifndef BEST_CUDA
const EngineOps *const engine_cuda_ops = NULL;
#else
#include <stdlib.h>
#include <string.h>

#include "base/error.h" // defines: ERR, TRY, xmalloc, xcalloc, xrealloc
#include "nn/cuda.h"    // defines: CudaCtx, cuda_ctx_create, cuda_mem_free, cuda_mem_in_use

static int cuda_open(void **ctx, int device) {
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
};
const EngineOps *const engine_cuda_ops = &cuda_ops;
#endif
