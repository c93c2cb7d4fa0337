// calib.cu: calib.c's layer-by-layer one-shot walk on a CUDA device (oneshot_prune_cuda,
// calib.h): block l's weights go up, every calibration window goes through the block
// while the statistics of each Linear layer's input are summed, the block's matrices are
// pruned (and for SparseGPT updated) on the device and come back to the host, and the
// windows go through the pruned block to become block l+1's inputs, as the papers do.
//
// What stays on the device for the whole run: x (n, T, C) fp32, every window's input to
// the current block (as x on the CPU). Per block: the seven matrices in bf16 (the
// products' operands) with the norms and biases in fp32; one matrix in fp32 with its mask
// while it is pruned; the four inputs' statistics (SparseGPT: X^T X (d, d) fp32 each, the
// q/k/v and gate/up inputs shared as on the CPU; Wanda: squared norms (d) in double); for
// SparseGPT one factor U (d, d) and sparsegpt_prune_cuda's scratch; and the activations
// of `batch` windows at a time. No whole model: weights are streamed a block at a time
// from the host's block (m->params), which gets the pruned and updated weights back.
//
// The block's forward is model.cu's, with this file's buffers: the norm writes the bf16
// operand of the products that read it (rmsnorm_forward_bf16_cuda), cuBLASLt multiplies
// (bf16 operands, fp32 accumulation, the residual in the epilogue), Qwen3's q/k norms,
// RoPE, attention.cu's causal attention, SwiGLU into the down projection's bf16 operand.
// The statistics are taken from those bf16 operands, the input each product really reads
// (the reference implementations, in fp16, do the same): X^T X through cuBLASLt's dw
// product (H += x^T x, fp32 accumulation), Wanda's sums of squares by wanda.cu.
//
// Written like model.cu so that tests/cuda_emu.h runs it on the CPU
// (tests/test_calib_cuda.cpp), with CPU stand-ins for cuBLASLt and cuSOLVER only.
// Never run on a GPU as of 2026-11-29.
#include "sparse/calib.h"
#include "sparse/nm.h" // defines: nm_check, nm_prune_cuda

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/carve.h"       // defines: Carver, carve_take
#include "base/cuda.h"        // defines: CudaCtx, CUDA_CHECK, LAUNCH, BEST_KAPI
#include "base/error.h"       // defines: ERR, TRY, xmalloc
#include "nn/layers.h"        // defines: the _cuda kernels, matmul_*_cuda, rope_table
#include "sparse/saliency.h"  // defines: saliency_score_cuda
#include "sparse/select.h"    // defines: select_mask_cuda, select_cuda_scratch
#include "sparse/sparsegpt.h" // defines: sparsegpt_factor_cuda, sparsegpt_prune_cuda
#include "sparse/wanda.h"     // defines: wanda_accumulate_cuda, wanda_prune_cuda

// The seven Linear layers of a block and which of the block's four inputs each reads
// (calib.c's tables): 0 = xn1 (C), 1 = att (Q), 2 = xn2 (C), 3 = h (I).
static const ModelMatrix LINEARS[7] = {MW_Q, MW_K, MW_V, MW_O, MW_GATE, MW_UP, MW_DOWN};
static const int INPUT_OF[7] = {0, 0, 0, 1, 2, 2, 3};
enum { LQ, LK, LV, LO, LGATE, LUP, LDOWN };

// The most activations a batch of windows may take when the device has room (bytes).
#define ONESHOT_ACTS_MAX ((size_t)4 << 30)

#define TAKE(cv, T, n) ((T *)carve_take(cv, (size_t)(n) * sizeof(T)))

// The walk's device state.
typedef struct {
    const Model *m;
    CudaCtx *c;
    OneShotMethod method;
    int fp32;                     // products and X^T X in fp32 (OneShotSpec.fp32), else on bf16 operands
    size_t n, T, B;               // windows, their length, windows a batch
    size_t dim[4];                // the four inputs' widths: C, Q, C, I
    size_t rows[7], cols[7];      // the seven matrices' shapes
    size_t wmax;                  // the largest matrix's elements
    // the block
    uint16_t *wbf[7];             // (rows, cols) bf16 (fp32: NULL)
    float *wf32[7];               // (rows, cols) fp32 (fp32 only)
    float *bias[7];               // (rows) or NULL
    float *attn_norm, *mlp_norm;  // (C)
    float *q_norm, *k_norm;       // (HD) Qwen3, else NULL
    float *wf;                    // (wmax) one matrix in fp32, being pruned
    uint8_t *wmask;               // (wmax) its mask
    // the windows
    float *x;                     // (n, T, C) the current block's inputs
    // one batch's activations (N = B T rows)
    float *q, *k, *v, *qraw, *kraw, *att; // (N, Q), (N, KVD), (N, KVD), Qwen3's raw q, k, (N, Q)
    float *res2, *gate, *up;      // (N, C), (N, I), (N, I)
    float *rstd, *qrstd, *krstd;  // (N), (N NH), (N KV)
    void *xop;                    // (N, max(C, Q, I)) a product's operand: bf16 bits, or fp32
    float *rope_cos, *rope_sin;   // (T, HD/2)
    // the statistics and the factor
    float *H[4];                  // SparseGPT: (d, d) X^T X
    double *colsq[4];             // Wanda: (d)
    float *U;                     // SparseGPT: (dmax, dmax)
    uint8_t *dead;                // (dmax)
    void *scratch;                // sparsegpt_prune_scratch(rows max)
    float *scores;                // magnitude: (wmax)
    uint64_t *sel;                // magnitude: select_cuda_scratch(wmax)
    unsigned long long *bad;      // magnitude: (1) saliency_score_cuda's count of bad weights
    char *base;                   // the one allocation
} Walk;

static size_t max_of(const size_t *v, int n) {
    size_t x = 0;
    for (int i = 0; i < n; i++) x = v[i] > x ? v[i] : x;
    return x;
}

// w's sizes for m, method, n windows of T tokens, B a batch (no allocation).
static void walk_shape(Walk *w, const Model *m, OneShotMethod method, int fp32, size_t n, size_t T, size_t B) {
    memset(w, 0, sizeof *w);
    w->m = m, w->method = method, w->fp32 = fp32, w->n = n, w->T = T, w->B = B;
    size_t C = m->C, Q = m->Q, KVD = m->KVD, I = m->I;
    size_t dim[4] = {C, Q, C, I}, rows[7] = {Q, KVD, KVD, C, I, I, C};
    memcpy(w->dim, dim, sizeof dim);
    memcpy(w->rows, rows, sizeof rows);
    for (int f = 0; f < 7; f++) w->cols[f] = dim[INPUT_OF[f]], w->wmax = rows[f] * w->cols[f] > w->wmax ?
                                                                            rows[f] * w->cols[f] : w->wmax;
}

// Carves w's buffers out of cv (base NULL: measures); what the method needs only.
static void walk_layout(Walk *w, Carver *cv) {
    const Model *m = w->m;
    size_t C = m->C, Q = m->Q, KVD = m->KVD, I = m->I, HD = m->HD, N = w->B * w->T;
    int gpt = w->method == ONESHOT_SPARSEGPT, mag = w->method == ONESHOT_MAGNITUDE;
    w->wf = TAKE(cv, float, w->wmax);
    w->wmask = TAKE(cv, uint8_t, w->wmax);
    if (mag) { // no forward: the scores and the select's scratch of one tensor
        w->scores = TAKE(cv, float, w->wmax);
        w->sel = TAKE(cv, uint64_t, select_cuda_scratch(w->wmax));
        w->bad = TAKE(cv, unsigned long long, 1);
        return;
    }
    const ModelParams *p = &m->w;
    const float *b[7] = {p->bq, p->bk, p->bv, p->bo, p->bgate, p->bup, p->bdown};
    for (int f = 0; f < 7; f++) {
        if (w->fp32) w->wf32[f] = TAKE(cv, float, w->rows[f] * w->cols[f]);
        else w->wbf[f] = TAKE(cv, uint16_t, w->rows[f] * w->cols[f]);
        w->bias[f] = b[f] ? TAKE(cv, float, w->rows[f]) : NULL;
    }
    w->attn_norm = TAKE(cv, float, C);
    w->mlp_norm = TAKE(cv, float, C);
    w->q_norm = m->qk_norm ? TAKE(cv, float, HD) : NULL;
    w->k_norm = m->qk_norm ? TAKE(cv, float, HD) : NULL;
    w->x = TAKE(cv, float, w->n * w->T * C);
    w->q = TAKE(cv, float, N * Q);
    w->k = TAKE(cv, float, N * KVD);
    w->v = TAKE(cv, float, N * KVD);
    w->qraw = m->qk_norm ? TAKE(cv, float, N * Q) : NULL;
    w->kraw = m->qk_norm ? TAKE(cv, float, N * KVD) : NULL;
    w->att = TAKE(cv, float, N * Q);
    w->res2 = TAKE(cv, float, N * C);
    w->gate = TAKE(cv, float, N * I);
    w->up = TAKE(cv, float, N * I);
    w->rstd = TAKE(cv, float, N);
    w->qrstd = TAKE(cv, float, N * m->NH);
    w->krstd = TAKE(cv, float, N * m->KV);
    w->xop = carve_take(cv, N * max_of(w->dim, 4) * (w->fp32 ? sizeof(float) : sizeof(uint16_t)));
    w->rope_cos = TAKE(cv, float, w->T * HD / 2);
    w->rope_sin = TAKE(cv, float, w->T * HD / 2);
    size_t dmax = max_of(w->dim, 4);
    for (int g = 0; g < 4; g++) {
        if (gpt) w->H[g] = TAKE(cv, float, w->dim[g] * w->dim[g]);
        else w->colsq[g] = TAKE(cv, double, w->dim[g]);
    }
    if (gpt) {
        w->U = TAKE(cv, float, dmax * dmax);
        w->dead = TAKE(cv, uint8_t, dmax);
        w->scratch = carve_take(cv, sparsegpt_prune_scratch(max_of(w->rows, 7)));
    }
}

// Bytes of w's buffers with B windows a batch.
static size_t walk_bytes(const Model *m, OneShotMethod method, int fp32, size_t n, size_t T, size_t B) {
    Walk w;
    walk_shape(&w, m, method, fp32, n, T, B);
    Carver cv = {NULL, 0};
    walk_layout(&w, &cv);
    return cv.used;
}

BEST_KAPI size_t oneshot_cuda_bytes(const Model *m, OneShotMethod method, int fp32, int n, int seq, int batch,
                                    size_t free_bytes, int *batch_out) {
    size_t B = batch > 0 ? (size_t)batch : 1, N = (size_t)n, T = (size_t)seq;
    if (batch <= 0 && method != ONESHOT_MAGNITUDE) {
        // the most windows (at most n) whose activations fit in half of what is free after
        // the rest, and in ONESHOT_ACTS_MAX
        size_t fixed = walk_bytes(m, method, fp32, N, T, 1), one = walk_bytes(m, method, fp32, N, T, 2) - fixed;
        size_t room = free_bytes > fixed ? (free_bytes - fixed) / 2 : 0;
        if (room > ONESHOT_ACTS_MAX) room = ONESHOT_ACTS_MAX;
        B = one ? room / one : N;
        if (B < 1) B = 1;
        if (B > N) B = N;
    }
    if (batch_out) *batch_out = (int)B;
    return walk_bytes(m, method, fp32, N, T, B);
}

// --- the block -------------------------------------------------------------------------------

// The products' copy of matrix f (bf16, or fp32) from w->wf.
static void weights_refresh(Walk *w, int f) {
    size_t n = w->rows[f] * w->cols[f];
    cudaStream_t st = w->c->stream;
    if (w->fp32) CUDA_CHECK(cudaMemcpyAsync(w->wf32[f], w->wf, n * sizeof(float), cudaMemcpyDeviceToDevice, st));
    else cast_bf16_cuda(w->wbf[f], w->wf, n, st);
}

// The host's fp32 matrix f of layer l into w->wf, and (forward 1) the products' copy of it
// from there.
static void matrix_up(Walk *w, size_t l, int f, int forward) {
    const Model *m = w->m;
    const ParamInfo *p = &m->info[model_matrix_index(m, LINEARS[f], l)];
    size_t n = w->rows[f] * w->cols[f];
    cudaStream_t st = w->c->stream;
    CUDA_CHECK(cudaMemcpyAsync(w->wf, m->params + p->offset, n * sizeof(float), cudaMemcpyHostToDevice, st));
    if (forward) weights_refresh(w, f);
}

// Block l's weights up: the seven matrices as bf16, the norms and biases in fp32.
static void block_up(Walk *w, size_t l) {
    const Model *m = w->m;
    const ModelParams *p = &m->w;
    cudaStream_t st = w->c->stream;
    size_t C = m->C, HD = m->HD;
    for (int f = 0; f < 7; f++) {
        matrix_up(w, l, f, 1);
        const float *b[7] = {p->bq, p->bk, p->bv, p->bo, p->bgate, p->bup, p->bdown};
        if (b[f])
            CUDA_CHECK(cudaMemcpyAsync(w->bias[f], b[f] + l * w->rows[f], w->rows[f] * sizeof(float),
                                       cudaMemcpyHostToDevice, st));
    }
    CUDA_CHECK(cudaMemcpyAsync(w->attn_norm, p->attn_norm + l * C, C * sizeof(float), cudaMemcpyHostToDevice, st));
    CUDA_CHECK(cudaMemcpyAsync(w->mlp_norm, p->mlp_norm + l * C, C * sizeof(float), cudaMemcpyHostToDevice, st));
    if (m->qk_norm) {
        CUDA_CHECK(cudaMemcpyAsync(w->q_norm, p->q_norm + l * HD, HD * sizeof(float), cudaMemcpyHostToDevice, st));
        CUDA_CHECK(cudaMemcpyAsync(w->k_norm, p->k_norm + l * HD, HD * sizeof(float), cudaMemcpyHostToDevice, st));
    }
}

// Input g's statistics from its operand x (N, d) (bf16 bits, or fp32): X^T X or the
// squared norms.
static void stats_add(Walk *w, int g, const void *x, size_t N) {
    size_t d = w->dim[g];
    cudaStream_t st = w->c->stream;
    if (w->method == ONESHOT_SPARSEGPT) {
        if (w->fp32) // H (d, d) += x^T x
            matmul_f32_cuda(w->c, w->H[g], (const float *)x, (const float *)x, NULL, d, d, N, d, d, d, 1, 0, 1.0f,
                            1.0f);
        else matmul_backward_cuda(w->c, NULL, w->H[g], (const uint16_t *)x, (const uint16_t *)x, NULL, N, d, d, 0);
    } else if (w->fp32) {
        wanda_accumulate_f32_cuda(w->colsq[g], (const float *)x, N, d, st);
    } else {
        wanda_accumulate_cuda(w->colsq[g], (const uint16_t *)x, N, d, st);
    }
}

// y (N, OC) = [res +] x (N, IC) @ W_f^T + b_f: cuBLASLt on the bf16 operand and copy, the
// residual in the epilogue; or in fp32 (res copied into y first).
static void linear(Walk *w, float *y, const void *x, int f, size_t N, size_t IC, size_t OC, const float *res) {
    CudaCtx *c = w->c;
    if (w->fp32) {
        if (res && res != y)
            CUDA_CHECK(cudaMemcpyAsync(y, res, N * OC * sizeof(float), cudaMemcpyDeviceToDevice, c->stream));
        matmul_f32_cuda(c, y, (const float *)x, w->wf32[f], w->bias[f], N, OC, IC, IC, IC, OC, 0, 1, 1.0f,
                        res ? 1.0f : 0.0f);
    } else if (res) {
        matmul_forward_add_cuda(c, y, (const uint16_t *)x, w->wbf[f], w->bias[f], res, N, IC, OC);
    } else {
        matmul_forward_cuda(c, y, (const uint16_t *)x, w->wbf[f], w->bias[f], N, IC, OC, 0);
    }
}

// w->xop = RMSNorm(x (N, C)) with weight nw, as the products' operand.
static void norm_operand(Walk *w, const float *x, const float *nw, size_t N) {
    const Model *m = w->m;
    float eps = (float)m->cfg.rms_norm_eps;
    if (w->fp32) rmsnorm_forward_cuda((float *)w->xop, w->rstd, x, nw, N, m->C, eps, w->c->stream);
    else rmsnorm_forward_bf16_cuda((uint16_t *)w->xop, w->rstd, x, nw, N, m->C, eps, w->c->stream);
}

// The block's forward over B windows of x at res (B, T, C) (model.cu's block_forward with
// w's buffers): with stats, each product's input is summed into the statistics; with out,
// the block's output overwrites res, else the down projection is skipped. *t_stats gets
// the seconds the statistics took (the device waited for at their edges).
static void block_forward(Walk *w, float *res, size_t B, int stats, int out, double *t_stats) {
    const Model *m = w->m;
    cudaStream_t st = w->c->stream;
    size_t T = w->T, N = B * T, C = m->C, Q = m->Q, KVD = m->KVD, I = m->I, HD = m->HD;
    float eps = (float)m->cfg.rms_norm_eps;
    double t0 = 0;
#define STATS(g, x)                                   \
    if (stats) {                                      \
        CUDA_CHECK(cudaStreamSynchronize(st));        \
        t0 = now_seconds();                           \
        stats_add(w, g, x, N);                        \
        CUDA_CHECK(cudaStreamSynchronize(st));        \
        *t_stats += now_seconds() - t0;               \
    }
    norm_operand(w, res, w->attn_norm, N);
    STATS(0, w->xop);
    float *q = m->qk_norm ? w->qraw : w->q, *k = m->qk_norm ? w->kraw : w->k;
    linear(w, q, w->xop, LQ, N, C, Q, NULL);
    linear(w, k, w->xop, LK, N, C, KVD, NULL);
    linear(w, w->v, w->xop, LV, N, C, KVD, NULL);
    if (m->qk_norm) {
        rmsnorm_forward_cuda(w->q, w->qrstd, w->qraw, w->q_norm, N * m->NH, HD, eps, st);
        rmsnorm_forward_cuda(w->k, w->krstd, w->kraw, w->k_norm, N * m->KV, HD, eps, st);
    }
    rope_forward_cuda(w->q, w->rope_cos, w->rope_sin, B, T, m->NH, HD, st);
    rope_forward_cuda(w->k, w->rope_cos, w->rope_sin, B, T, m->KV, HD, st);
    attention_forward_cuda(w->att, NULL, w->q, w->k, w->v, B, T, T, 0, m->NH, m->KV, HD, st);
    const void *att = w->att; // o_proj's operand: att itself in fp32, else its bf16 cast
    if (!w->fp32) {
        cast_bf16_cuda((uint16_t *)w->xop, w->att, N * Q, st);
        att = w->xop;
    }
    STATS(1, att);
    linear(w, w->res2, att, LO, N, Q, C, res); // res2 = res + o_proj(att)
    norm_operand(w, w->res2, w->mlp_norm, N);
    STATS(2, w->xop);
    linear(w, w->gate, w->xop, LGATE, N, C, I, NULL);
    linear(w, w->up, w->xop, LUP, N, C, I, NULL);
    // h = silu(gate) * up, the down projection's operand
    if (w->fp32) swiglu_forward_cuda((float *)w->xop, w->gate, w->up, N * I, st);
    else swiglu_forward_bf16_cuda((uint16_t *)w->xop, w->gate, w->up, N * I, st);
    STATS(3, w->xop);
    if (out) linear(w, res, w->xop, LDOWN, N, I, C, w->res2); // out = res2 + down(h)
#undef STATS
}

// Every window through the block in batches (the clock's seconds split into forward and
// statistics).
static void windows_forward(Walk *w, int stats, int out, OneShotStats *tm) {
    size_t C = w->m->C;
    for (size_t s = 0; s < w->n; s += w->B) {
        size_t B = w->n - s < w->B ? w->n - s : w->B;
        double t0 = now_seconds(), ts = 0;
        block_forward(w, w->x + s * w->T * C, B, stats, out, &ts);
        CUDA_CHECK(cudaStreamSynchronize(w->c->stream));
        tm->forward += now_seconds() - t0 - ts;
        tm->stats += ts;
    }
}

// The prunable matrices of block l that read input g, pruned on the device from its
// statistics (SparseGPT: from its factor, made here), and their weights and masks back
// into the host's block and mask; the bf16 copies refreshed for the block's second pass.
static int prune_input(Walk *w, uint8_t *mask, size_t l, int g, double sparsity, double percdamp, const NMPattern *nm,
                       OneShotStats *tm) {
    const Model *m = w->m;
    CudaCtx *c = w->c;
    cudaStream_t st = c->stream;
    int gpt = w->method == ONESHOT_SPARSEGPT, any = 0;
    for (int f = 0; f < 7; f++) any |= INPUT_OF[f] == g && m->info[model_matrix_index(m, LINEARS[f], l)].prunable;
    if (!any) return 0;
    double t0 = now_seconds();
    if (gpt) {
        char what[160];
        snprintf(what, sizeof what, "layer %zu, the Hessian of %s", l,
                 g == 0 ? "q/k/v_proj" : g == 1 ? "o_proj" : g == 2 ? "gate/up_proj" : "down_proj");
        TRY(sparsegpt_factor_cuda(w->U, w->dead, w->H[g], w->dim[g], percdamp, what, c));
        CUDA_CHECK(cudaStreamSynchronize(st));
        tm->factor += now_seconds() - t0;
    }
    t0 = now_seconds();
    for (int f = 0; f < 7; f++) {
        const ParamInfo *p = &m->info[model_matrix_index(m, LINEARS[f], l)];
        if (INPUT_OF[f] != g || !p->prunable) continue;
        size_t rows = w->rows[f], cols = w->cols[f], n = rows * cols;
        matrix_up(w, l, f, 0);
        if (gpt) sparsegpt_prune_cuda(w->wf, w->wmask, rows, cols, w->U, w->dead, sparsity, nm, w->scratch, c);
        else if (nm->m) nm_prune_cuda(w->wf, w->wmask, rows, cols, w->colsq[g], nm, st);
        else wanda_prune_cuda(w->wf, w->wmask, rows, cols, w->colsq[g], sparsity, st);
        weights_refresh(w, f);
        CUDA_CHECK(cudaMemcpyAsync(m->params + p->offset, w->wf, n * sizeof(float), cudaMemcpyDeviceToHost, st));
        CUDA_CHECK(cudaMemcpyAsync(mask + p->offset, w->wmask, n, cudaMemcpyDeviceToHost, st));
    }
    CUDA_CHECK(cudaStreamSynchronize(st));
    tm->update += now_seconds() - t0;
    return 0;
}

// Magnitude: each prunable tensor's floor(S n) smallest |w| pruned, ties by select.h's rule
// (the later index pruned first), as mask_compute's --group layer with prune_floor: the
// scores and the selection on the device, the tensor up and its mask back one at a time;
// with an N:M pattern nm_prune_cuda's groups instead.
static int magnitude_walk(Walk *w, Model *m, uint8_t *mask, double sparsity, const NMPattern *nm) {
    cudaStream_t st = w->c->stream;
    unsigned long long *bad = w->bad;
    for (int i = 0; i < m->n_info; i++) {
        const ParamInfo *p = &m->info[i];
        if (!p->prunable) continue;
        size_t n = p->numel;
        uint64_t k = n - (uint64_t)floor(sparsity * (double)n);
        CUDA_CHECK(cudaMemcpyAsync(w->wf, m->params + p->offset, n * sizeof(float), cudaMemcpyHostToDevice, st));
        CUDA_CHECK(cudaMemsetAsync(bad, 0, sizeof *bad, st));
        saliency_score_cuda(w->scores, bad, SAL_MAGNITUDE, w->wf, NULL, NULL, n, st);
        unsigned long long nbad = 0;
        CUDA_CHECK(cudaMemcpyAsync(&nbad, bad, sizeof nbad, cudaMemcpyDeviceToHost, st));
        CUDA_CHECK(cudaStreamSynchronize(st));
        if (nbad) return ERR("%s: %llu weights are NaN or infinite", p->name, nbad);
        if (nm->m) nm_prune_cuda(w->wf, w->wmask, (size_t)p->shape[0], (size_t)p->shape[1], NULL, nm, st); // N:M of |w|
        else if (select_mask_cuda(w->wmask, w->sel, w->scores, n, k, st) < 0)
            return ERR("%s: the selection failed", p->name);
        CUDA_CHECK(cudaMemcpyAsync(mask + p->offset, w->wmask, n, cudaMemcpyDeviceToHost, st));
        CUDA_CHECK(cudaStreamSynchronize(st));
        for (size_t j = 0; j < n; j++)
            if (!mask[p->offset + j]) m->params[p->offset + j] = 0.0f;
    }
    return 0;
}

BEST_KAPI int oneshot_prune_cuda(uint8_t *mask, OneShotStats *st, Model *m, const OneShotSpec *spec,
                                 const int32_t *windows, int n, int seq, Progress *pr, CudaCtx *c) {
    OneShotStats tm;
    memset(&tm, 0, sizeof tm);
    TRY(nm_check(&spec->pattern, m->info, m->n_info));
    memset(mask, 1, m->n_params);
    int mag = spec->method == ONESHOT_MAGNITUDE;
    size_t T = (size_t)seq, C = m->C, N = mag ? 0 : (size_t)n;
    TRY(calib_check_windows(m, windows, (int)N, seq));
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    int B = 0;
    size_t bytes = oneshot_cuda_bytes(m, spec->method, spec->fp32, (int)N, seq, spec->batch < n ? spec->batch : n,
                                      free_b, &B);
    Walk w;
    walk_shape(&w, m, spec->method, spec->fp32, N, T, (size_t)B);
    w.c = c;
    cudaError_t e = cudaMalloc((void **)&w.base, bytes);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return ERR("CUDA: cannot allocate %.2f GiB of device memory for the one-shot walk (%.2f GiB free): %s "
                   "(fewer --nsamples or a shorter --seq, or --device cpu)", (double)bytes / (1 << 30),
                   (double)free_b / (1 << 30), cudaGetErrorString(e));
    }
    Carver cv = {w.base, 0};
    walk_layout(&w, &cv);
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    tm.device_bytes = (double)bytes;
    tm.device_in_use = (double)(total_b - free_b);
    int rc = 0;
    if (mag) {
        rc = magnitude_walk(&w, m, mask, spec->sparsity, &spec->pattern);
    } else {
        cudaStream_t s = c->stream;
        size_t half = T * m->HD / 2;
        float *cs = (float *)xmalloc(2 * half * sizeof(float)), *xw = (float *)xmalloc(T * C * sizeof(float));
        rope_table(cs, cs + half, 0, T, m->HD, m->cfg.rope_theta);
        CUDA_CHECK(cudaMemcpyAsync(w.rope_cos, cs, half * sizeof(float), cudaMemcpyHostToDevice, s));
        CUDA_CHECK(cudaMemcpyAsync(w.rope_sin, cs + half, half * sizeof(float), cudaMemcpyHostToDevice, s));
        double t0 = now_seconds();
        for (size_t i = 0; i < N; i++) { // the embeddings, a window at a time through the host
            model_embed(xw, m, windows + i * T, T);
            CUDA_CHECK(cudaMemcpyAsync(w.x + i * T * C, xw, T * C * sizeof(float), cudaMemcpyHostToDevice, s));
            CUDA_CHECK(cudaStreamSynchronize(s)); // (xw is reused)
        }
        tm.forward += now_seconds() - t0;
        free(cs);
        free(xw);
        for (size_t l = 0; l < m->L && rc == 0; l++) {
            block_up(&w, l);
            for (int g = 0; g < 4; g++) {
                size_t d = w.dim[g];
                if (w.H[g]) CUDA_CHECK(cudaMemsetAsync(w.H[g], 0, d * d * sizeof(float), s));
                else CUDA_CHECK(cudaMemsetAsync(w.colsq[g], 0, d * sizeof(double), s));
            }
            windows_forward(&w, 1, 0, &tm);
            for (int g = 0; g < 4 && rc == 0; g++) rc = prune_input(&w, mask, l, g, spec->sparsity, spec->percdamp, &spec->pattern, &tm);
            if (rc == 0) windows_forward(&w, 0, 1, &tm); // the pruned block's outputs: the next block's inputs
            if (pr) {
                snprintf(pr->extra, sizeof pr->extra, "%.2f s a block", (now_seconds() - pr->t0) / (double)(l + 1));
                progress_update(pr, l + 1);
            }
        }
    }
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
    CUDA_CHECK(cudaFree(w.base));
    if (st) *st = tm;
    return rc;
}
