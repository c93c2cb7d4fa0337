// model.cu: the training step of model.c on a CUDA device (DevModel, declared in
// model.h): the forward and backward of a LLaMA / Qwen3 decoder in the order model.c runs
// them, the lm_head and cross-entropy in chunks of rows, the gradient's sum of squares,
// clipping and masked AdamW, with every tensor on the device.
//
// Memory: the fp32 weights, gradients and Adam's two moments in one device allocation
// each, laid out as the host block (so the host's offsets, masks and moments line up),
// a bf16 copy of the weights (the products' operands, refreshed after each optimizer
// step), a uint8 mask, and one allocation carved into the activations of one (B, T).
// With GPU ranks the fp32 weights, moments and mask are this rank's slice of the block,
// and the embedding, norms and biases (what the forward reads in fp32) are also held
// whole in one more allocation (rep): model.h says how they are kept the same.
// Activations are fp32, as on the CPU; each product's operands are cast to bf16 right
// before it (cast_bf16_cuda) and it accumulates in fp32. Full logits never exist: the
// forward computes the loss a chunk of ce_rows rows at a time, and the backward computes
// each chunk's logits again (one more lm_head product; llm.c instead fuses the loss's
// backward into the forward, which needs the loss scale up front) and turns them into
// dlogits in place.
//
// Host traffic per step: the tokens and targets in, the loss of each forward, the
// gradient's sum of squares and the count of zero prunable weights out (doubles from a
// fixed-order reduction of this file). The weights and moments come back only when the
// caller asks (devmodel_download: saves, mask updates).
//
// Written like layers.cu so that tests/cuda_emu.h runs it on the CPU (tests/test_step.cpp
// includes this file): launches through LAUNCH, the API's linkage through BEST_KAPI, static
// shared memory, every barrier reached by the whole block.
//
// Not here: the kernels (layers.cu, adamw.cu; the matrix products and attention of
// their own files), the loop, schedules and masks (run/train.c), where a mask is chosen.
//
// Why one file of ~1500 lines: the step's init, forward, backward, evaluation and decoding
// all work on DevModel's carved buffers through the same static helpers (the products'
// operands, the reductions, the graphs, the profile's marks), and the emulated tests
// include this file whole; a cut would make those helpers extern for two or three users.
// The decode step's fused kernels already live apart (decode_fused.cuh).
#include "nn/model.h" // defines: DevModel, LayerActs, the devmodel_ prototypes (BEST_CUDA)

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/args.h"        // defines: args_choice
#include "base/error.h"       // defines: ERR, CHECK, xcalloc
#include "dist/dist.h"        // defines: dist_slice
#include "dist/dist_nccl.h"   // defines: devcomm_sum, devcomm_share, devcomm_wait
#include "nn/adamw.h"         // defines: adamw_update_cuda
#include "nn/attention_cudnn.h" // defines: attn_cudnn_* (the emulator: test_step's stand-ins)
#include "base/cuda.h"          // defines: CUDA_CHECK, LAUNCH, BEST_KAPI, CudaCtx
#include "nn/cuda_reduce.cuh" // defines: block_sum
#include "nn/decode_fused.h"  // defines: DecodeJob, decode_fused_gemv_cuda
#include "nn/kernel_math.h"   // defines: km_blocks, km_thread_index, km_rmsnorm_dw_chunks
#include "base/carve.h"       // defines: Carver, carve_take
#include "nn/layers.h"        // defines: the _cuda kernels, rope_table

// Blocks of a reduction's first pass (the partial sums; the second pass adds them in order).
#define DEV_RED_BLOCKS (KM_GRID_CAP < 256u ? KM_GRID_CAP : 256u)
// Logits (floats) of one chunk when devmodel_init is not told the rows: 256 MiB.
#define DEV_CE_FLOATS ((size_t)1 << 26)
// fp32 weights, gradients, exp_avg, exp_avg_sq; the bf16 copy; the mask (one rank)
#define DEV_BYTES_PER_PARAM (4 + 4 + 4 + 4 + 2 + 1)
// DEVMODEL_EVAL of a folder: the bf16 copy (and, 4 bytes a parameter of it, rep: the
// embedding, norms and biases the forward reads in fp32)
#define DEV_EVAL_BYTES_PER_PARAM 2
// GPU ranks: gradients and the bf16 copy of every parameter; fp32 weights, exp_avg,
// exp_avg_sq and the mask of the slice's (and rep: 4 bytes a parameter of it)
#define DEV_RANKS_BYTES_PER_PARAM (4 + 2)
#define DEV_SLICE_BYTES_PER_PARAM (4 + 4 + 4 + 1)

enum { RED_SUM, RED_SUMSQ, RED_ZEROS };             // what a reduction adds up
enum { SLOT_LOSS, SLOT_SUMSQ, SLOT_ZEROS, N_SLOTS }; // d->scalars

// --- small kernels: scaling, reductions ----------------------------------------

#define DEV_GRID_STRIDE(i, n)                                                               \
    for (size_t i = km_thread_index(blockIdx.x, blockDim.x, threadIdx.x); i < (n);          \
         i += (size_t)gridDim.x * blockDim.x)

// g (n) *= s.
static __global__ void dev_scale_kernel(float *g, float s, size_t n) {
    DEV_GRID_STRIDE(i, n) g[i] *= s;
}

// part (gridDim.x) = per block, the sum over its grid-stride share of x (n) of x, x^2, or
// (x == 0), in double; with a mask (n, or NULL) positions of mask 0 count as x = 0 (the
// bits of a sum over x after mask_apply). A fixed grid for a given n: the same bits every run.
static __global__ void dev_reduce_kernel(double *part, const float *x, const uint8_t *mask, size_t n, int op) {
    double s = 0;
    DEV_GRID_STRIDE(i, n) {
        double v = mask && !mask[i] ? 0.0 : x[i];
        s += op == RED_SUM ? v : op == RED_SUMSQ ? v * v : (double)(x[i] == 0.0f);
    }
    s = block_sum(s); // cuda_reduce.cuh's, in double
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

// *out (= or += with acc) the sum of part (n) in order: one thread.
static __global__ void dev_reduce_final_kernel(double *out, const double *part, unsigned n, int acc) {
    double s = 0;
    for (unsigned i = 0; i < n; i++) s += part[i];
    *out = acc ? *out + s : s;
}

// d->scalars[slot] (= or += with acc) the reduction op of x (n), masked by mask (n) or
// NULL as dev_reduce_kernel; stays on the device.
static void reduce_into(DevModel *d, int slot, const float *x, const uint8_t *mask, size_t n, int op, int acc) {
    cudaStream_t st = d->ctx->stream;
    unsigned blocks = km_blocks(n, KM_THREADS, DEV_RED_BLOCKS);
    LAUNCH(dev_reduce_kernel, blocks, KM_THREADS, st, d->part, x, mask, n, op);
    CUDA_CHECK(cudaGetLastError());
    LAUNCH(dev_reduce_final_kernel, 1, 1, st, d->scalars + slot, (const double *)d->part, blocks, acc);
    CUDA_CHECK(cudaGetLastError());
}

// d->scalars[slot] on the host (waits for the stream).
static double fetch_scalar(DevModel *d, int slot) {
    double v;
    CUDA_CHECK(cudaMemcpyAsync(&v, d->scalars + slot, sizeof v, cudaMemcpyDeviceToHost, d->ctx->stream));
    CUDA_CHECK(cudaStreamSynchronize(d->ctx->stream));
    return v;
}

// --- allocation ---------------------------------------------------------------------------

#define TAKE_F(cv, n) ((float *)carve_take(cv, (n) * sizeof(float)))

static size_t max3(size_t a, size_t b, size_t c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

// Carves the activations of d (sizes set) out of cv. With d->recompute every layer has
// its own input (res) but shares one set of the rest: the forward overwrites them layer
// by layer, the backward runs each layer's forward again first. With d->eval the layers
// share their input too (block_forward may write its output over its input) and there
// is no backward scratch.
static void acts_layout(DevModel *d, Carver *cv) {
    const Model *m = d->m;
    size_t N = d->N, C = m->C, Q = m->Q, KVD = m->KVD, I = m->I, V = m->V, HD = m->HD;
    for (size_t l = 0; l < m->L; l++) {
        LayerActs *s = &d->layer[l];
        if ((d->recompute || d->eval) && l > 0) {
            float *res = d->eval ? d->layer[0].res : TAKE_F(cv, N * C);
            *s = d->layer[0];
            s->res = res;
            continue;
        }
        memset(s, 0, sizeof *s);
        const LayerActField *fields = layer_act_fields(); // model.h's table, the CPU's too
        for (int i = 0; i < N_LAYER_ACT_FIELDS; i++) {
            const LayerActField *f = &fields[i];
            size_t w = LAYER_ACT_WIDTH(m, f->width);
            if (f->qk_norm_only && !m->qk_norm) continue;
            if (!f->bf16_offset) *LAYER_ACT_PTR(s, f->offset, float) = TAKE_F(cv, N * w);
            else if (!d->eval) // xn1, xn2: the products' bf16 operands only (evaluating: d->xbf)
                *LAYER_ACT_PTR(s, f->bf16_offset, uint16_t) = (uint16_t *)carve_take(cv, N * w * sizeof(uint16_t));
        }
    }
    d->resf = TAKE_F(cv, N * C);
    d->rstdf = TAKE_F(cv, N);
    d->xnf = TAKE_F(cv, N * C);
    d->logits = TAKE_F(cv, d->ce_rows * V);
    d->logits_bf = (uint16_t *)carve_take(cv, d->ce_rows * V * sizeof(uint16_t));
    d->nll = TAKE_F(cv, N);
    d->rope_cos = TAKE_F(cv, (size_t)d->T * HD / 2);
    d->rope_sin = TAKE_F(cv, (size_t)d->T * HD / 2);
    size_t widest = max3(C, Q, I);
    d->xbf = (uint16_t *)carve_take(cv, N * widest * sizeof(uint16_t));
    if ((d->m->ext || d->gemv) && d->decode) d->xr = TAKE_F(cv, widest);
    d->part = (double *)carve_take(cv, DEV_RED_BLOCKS * sizeof(double));
    d->scalars = (double *)carve_take(cv, N_SLOTS * sizeof(double));
    d->tokens = (int32_t *)carve_take(cv, N * sizeof(int32_t));
    d->targets = (int32_t *)carve_take(cv, N * sizeof(int32_t));
    if (!d->eval) d->emb_index = (int32_t *)carve_take(cv, (3 * N + 1) * sizeof(int32_t));
    if (d->eval && !d->decode) { // devmodel_forward_packed's rows
        d->rows_pos = (int32_t *)carve_take(cv, N * sizeof(int32_t));
        d->rows_vis = (int32_t *)carve_take(cv, 3 * N * sizeof(int32_t));
    }
    if (d->decode) {
        if (d->kv_bf16) {
            d->kcb = (uint16_t *)carve_take(cv, m->L * (size_t)d->T * KVD * sizeof(uint16_t));
            d->vcb = (uint16_t *)carve_take(cv, m->L * (size_t)d->T * KVD * sizeof(uint16_t));
        } else {
            d->kc = TAKE_F(cv, m->L * (size_t)d->T * KVD);
            d->vc = TAKE_F(cv, m->L * (size_t)d->T * KVD);
        }
        d->step_in = (int32_t *)carve_take(cv, 2 * sizeof(int32_t));
        d->next_dev = (int32_t *)carve_take(cv, sizeof(int32_t));
        if (d->dec_split) d->dec_part = TAKE_F(cv, attention_decode_part_floats((size_t)d->T, m->NH, HD));
    }
    if (d->eval) return; // the backward's scratch follows
    d->dres = TAKE_F(cv, N * C);
    d->dxn = TAKE_F(cv, N * C);
    d->datt = TAKE_F(cv, N * Q);
    d->dq = TAKE_F(cv, N * Q);
    d->dk = TAKE_F(cv, N * KVD);
    d->dv = TAKE_F(cv, N * KVD);
    d->dkh = TAKE_F(cv, N * Q); // (B, NH, T, HD)
    d->dvh = TAKE_F(cv, N * Q);
    d->dh = TAKE_F(cv, N * I);
    d->dgate = TAKE_F(cv, N * I);
    d->dup = TAKE_F(cv, N * I);
    d->dybf = (uint16_t *)carve_take(cv, N * widest * sizeof(uint16_t));
    // RMSNorm's weight-gradient partials (rows of C, or of HD for the q/k norms) and the
    // bias gradients' scratch (km_colsum_chunks(N) * OC, bias_backward_cuda's)
    size_t sc = max3(km_rmsnorm_dw_chunks(N) * C, km_rmsnorm_dw_chunks(N * m->NH) * HD,
                     km_rmsnorm_dw_chunks(N * m->KV) * HD);
    size_t sb = (size_t)km_colsum_chunks(N) * max3(C, Q, I);
    if (m->cfg.attention_bias || m->cfg.mlp_bias) sc = sc > sb ? sc : sb;
    d->scratch = TAKE_F(cv, sc);
}

// *p = bytes of device memory, or ERR saying how much was asked for what.
static int dev_malloc(void **p, size_t bytes, const char *what) {
    *p = NULL;
    cudaError_t e = cudaMalloc(p, bytes);
    if (e == cudaSuccess) return 0;
    (void)cudaGetLastError();
    *p = NULL;
    return ERR("CUDA: cannot allocate %.2f GiB of device memory for %s: %s (a smaller --micro-batch or "
               "--seq, --recompute when training, or a smaller model)", (double)bytes / (1 << 30), what,
               cudaGetErrorString(e));
}

// The same pointers as m's named ones, at the same offsets from base.
static void params_rebase(ModelParams *out, const Model *m, float *base) {
    const float *const *src = (const float *const *)&m->w;
    float **dst = (float **)out;
    for (size_t i = 0; i < sizeof(ModelParams) / sizeof(float *); i++)
        dst[i] = src[i] ? base + (src[i] - m->params) : NULL;
}

// Whether every GPU rank holds p's fp32 weights whole (rep): the embedding and the 1-D
// tensors, which the forward reads as fp32.
static int rep_holds(const Model *m, const ParamInfo *p) {
    return p->ndim == 1 || p->offset == (size_t)(m->w.embed - m->params);
}

// [off, off + len) appended to the ranges off, len (*n of them, at most cap), merged into
// the last one when it ends there.
static void range_add(size_t *off, size_t *len, int *n, int cap, size_t o, size_t k) {
    if (*n > 0 && off[*n - 1] + len[*n - 1] == o) {
        len[*n - 1] += k;
        return;
    }
    CHECK(*n < cap, "devmodel_init: more than %d ranges of one kind in the block", cap);
    off[*n] = o;
    len[(*n)++] = k;
}

// With ranks: d->w's embedding, norms and biases into d->rep (the rep ranges one after
// another), the matrices NULL (read as bf16).
static void weights_rebase_rep(DevModel *d) {
    const Model *m = d->m;
    const float *const *src = (const float *const *)&m->w;
    float **dst = (float **)&d->w;
    for (size_t i = 0; i < sizeof(ModelParams) / sizeof(float *); i++) {
        dst[i] = NULL;
        size_t o = src[i] ? (size_t)(src[i] - m->params) : SIZE_MAX, c = 0;
        for (int r = 0; r < d->n_rep_r && !dst[i]; c += d->rep_len[r++])
            if (o >= d->rep_off[r] && o < d->rep_off[r] + d->rep_len[r]) dst[i] = d->rep + c + (o - d->rep_off[r]);
    }
}

// --- the profile (--profile) -----------------------------------------------------------------

// Events recorded at the phase boundaries of a step: interval i (from mark i to mark i+1)
// belongs to phase[i]. Full (a long step), the intervals so far are folded in and the last
// mark starts the next batch.
#define PROF_MARKS 2048
typedef struct DevProf DevProf;
struct DevProf {
    cudaEvent_t ev[PROF_MARKS];
    int phase[PROF_MARKS];
    int n;                          // marks of this step so far
    double ms[DP_N], flops[DP_N];   // summed over the counted steps
    double calls[DP_N];
    double step_ms[DP_N];           // this step's, added to ms when the step counts
    double step_flops[DP_N], step_calls[DP_N];
    int steps, counted;             // steps seen; steps summed (all but the first, when more)
    double first_ms[DP_N], first_flops[DP_N], first_calls[DP_N];
};

static const char *const PROF_NAMES[DP_N] = {
    "zero grads", "embedding", "rmsnorm", "q|k|v (+qk norm)", "rope", "attention", "o proj", "gate|up",
    "swiglu", "down", "head + loss", "bwd head + loss", "bwd down", "bwd swiglu", "bwd gate|up", "bwd rmsnorm",
    "bwd o proj", "bwd attention", "bwd rope (+qk norm)", "bwd q|k|v", "bwd embedding", "collectives (wait)",
    "clip (grad norm)", "optimizer", "mask update",
};

static void prof_free(DevProf *p) {
    if (!p) return;
    for (int i = 0; i < PROF_MARKS; i++) CUDA_CHECK(cudaEventDestroy(p->ev[i]));
    free(p);
}

BEST_KAPI void devmodel_profile_start(DevModel *d) {
    DevProf *p = (DevProf *)xcalloc(1, sizeof *p);
    for (int i = 0; i < PROF_MARKS; i++) CUDA_CHECK(cudaEventCreate(&p->ev[i]));
    d->prof = p;
}

// The intervals between the marks so far into this step's sums; the last mark stays as
// the first of the next ones.
static void prof_fold(DevProf *p) {
    if (p->n < 2) return;
    CUDA_CHECK(cudaEventSynchronize(p->ev[p->n - 1]));
    for (int i = 0; i + 1 < p->n; i++) {
        float ms;
        CUDA_CHECK(cudaEventElapsedTime(&ms, p->ev[i], p->ev[i + 1]));
        p->step_ms[p->phase[i]] += ms;
    }
    cudaEvent_t last = p->ev[p->n - 1];
    p->ev[p->n - 1] = p->ev[0];
    p->ev[0] = last;
    p->phase[0] = p->phase[p->n - 1];
    p->n = 1;
}

BEST_KAPI void devmodel_profile_mark(DevModel *d, int phase, double flops) {
    DevProf *p = d->prof;
    if (!p) return;
    if (p->n == PROF_MARKS) prof_fold(p);
    CUDA_CHECK(cudaEventRecord(p->ev[p->n], d->ctx->stream));
    p->phase[p->n++] = phase;
    p->step_flops[phase] += flops;
    p->step_calls[phase] += 1;
}

BEST_KAPI void devmodel_profile_step(DevModel *d) {
    DevProf *p = d->prof;
    if (!p) return;
    devmodel_profile_mark(d, DP_ZERO, 0); // the end of the last interval (a mark with no time after it)
    p->step_calls[DP_ZERO] -= 1;
    prof_fold(p);
    p->n = 0;
    // the first step (cuBLASLt's first calls, the caches) stays apart while there are others
    if (p->steps++ == 0) {
        memcpy(p->first_ms, p->step_ms, sizeof p->step_ms);
        memcpy(p->first_flops, p->step_flops, sizeof p->step_flops);
        memcpy(p->first_calls, p->step_calls, sizeof p->step_calls);
    } else {
        for (int i = 0; i < DP_N; i++) {
            p->ms[i] += p->step_ms[i];
            p->flops[i] += p->step_flops[i];
            p->calls[i] += p->step_calls[i];
        }
        p->counted++;
    }
    memset(p->step_ms, 0, sizeof p->step_ms);
    memset(p->step_flops, 0, sizeof p->step_flops);
    memset(p->step_calls, 0, sizeof p->step_calls);
}

// The bytes one call of a phase must move at least (its floor's other half), for the
// phases that are not products: fp32 reads and writes of its tensors at d's N rows; 0
// where the FLOPs decide (the products, attention, the head) or the phase is the host's.
static double prof_bytes(const DevModel *d, int phase) {
    const Model *m = d->m;
    double N = (double)d->N, C = (double)m->C, Q = (double)m->Q, KVD = (double)m->KVD, I = (double)m->I;
    double P = (double)d->n_params, S = (double)(d->own_hi - d->own_lo);
    switch (phase) {
    case DP_ZERO: return 4 * P;                          // the gradients set to 0
    case DP_EMBED: case DP_BWD_EMBED: return 8 * N * C;  // rows read, rows written
    case DP_NORM: return 6 * N * C;                      // x read, x-hat written in bf16
    case DP_BWD_NORM: return 16 * N * C;                 // dy, x read, dres read and written
    case DP_ROPE: case DP_BWD_ROPE: return 8 * N * (Q + KVD); // q and k read and written
    case DP_SWIGLU: return 10 * N * I;                   // gate, up read, h written in bf16
    case DP_BWD_SWIGLU: // dh, gate, up read, dgate, dup written (in bf16 without MLP biases)
        return (d->g.bgate || d->g.bup ? 20 : 16) * N * I;
    case DP_CLIP: return 5 * S;                          // gradients and mask read
    case DP_OPTIM: return 31 * S;                        // w, m, v, g, mask read; w, m, v, bf16 w written
    default: return 0;
    }
}

// A positive number from the environment, or 0.
static double env_positive(const char *name) {
    const char *v = getenv(name);
    double x = v ? atof(v) : 0;
    return x > 0 ? x : 0;
}

BEST_KAPI void devmodel_profile_write(const DevModel *d, FILE *f, double wall_ms) {
    const DevProf *p = d->prof;
    if (!p) return;
    double peak_tf = env_positive("BEST_PEAK_TFLOPS"), peak_tbs = env_positive("BEST_PEAK_TBS");
    int k = p->counted ? p->counted : 1;
    const double *ms = p->counted ? p->ms : p->first_ms, *fl = p->counted ? p->flops : p->first_flops;
    const double *calls = p->counted ? p->calls : p->first_calls;
    double total = 0;
    for (int i = 0; i < DP_N; i++) total += ms[i];
    fprintf(f, "# best-train --profile: device time per phase of a step (CUDA events), mean of %d step%s%s\n", k,
            k == 1 ? "" : "s", p->counted ? " after the first" : " (the only one)");
    fprintf(f, "# step: %.3f ms on the device (the phases' sum), %.3f ms on the host's clock\n", total / k, wall_ms);
    if (peak_tf > 0 && peak_tbs > 0)
        fprintf(f, "# floor: FLOPs at %.4g TFLOP/s or bytes at %.4g TB/s (BEST_PEAK_TFLOPS, BEST_PEAK_TBS), the larger\n",
                peak_tf, peak_tbs);
    else
        fprintf(f, "# floor: not computed (set BEST_PEAK_TFLOPS and BEST_PEAK_TBS: the GPU's bf16 product rate and "
                "memory bandwidth)\n");
    fprintf(f, "%-22s %12s %8s %8s %12s %9s %10s %8s %10s %8s\n", "phase", "ms/step", "% step", "calls", "GFLOP/step",
            "TFLOP/s", "GB/step", "TB/s", "floor ms", "x floor");
    double floor_total = 0;
    for (int i = 0; i < DP_N; i++) {
        double m = ms[i] / k, g = fl[i] / k / 1e9, gb = prof_bytes(d, i) * calls[i] / k / 1e9;
        fprintf(f, "%-22s %12.4f %8.2f %8.0f ", PROF_NAMES[i], m, total > 0 ? 100 * ms[i] / total : 0, calls[i] / k);
        if (fl[i] > 0) fprintf(f, "%12.4g %9.4g ", g, m > 0 ? g / m : 0); // GFLOP / ms = TFLOP/s
        else fprintf(f, "%12s %9s ", "-", "-");
        if (gb > 0) fprintf(f, "%10.4g %8.4g ", gb, m > 0 ? gb / m : 0); // GB / ms = TB/s
        else fprintf(f, "%10s %8s ", "-", "-");
        double fl_ms = peak_tf > 0 ? g / peak_tf : 0, by_ms = peak_tbs > 0 ? gb / peak_tbs : 0;
        double floor_ms = fl_ms > by_ms ? fl_ms : by_ms;
        floor_total += floor_ms;
        if (floor_ms > 0 && peak_tf > 0 && peak_tbs > 0) fprintf(f, "%10.4f %8.2f\n", floor_ms, m / floor_ms);
        else fprintf(f, "%10s %8s\n", "-", "-");
    }
    if (floor_total > 0)
        fprintf(f, "# the phases' floors add to %.4f ms a step: the step is %.2fx that\n", floor_total, total / k / floor_total);
}

BEST_KAPI void devmodel_free(DevModel *d) {
    void *bufs[] = {d->params, d->grads, d->adam_m, d->adam_v, d->wbf, d->mask, d->acts, d->wdec, d->rep,
                    d->attn_bf};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        if (bufs[i]) CUDA_CHECK(cudaFree(bufs[i]));
    if (d->dw)
        for (int i = 0; i < d->m->n_info; i++)
            if (d->dw[i]) d->m->ext->ops->dev_free(d->dw[i]);
    if (d->graph) CUDA_CHECK(cudaGraphExecDestroy(d->graph));
    if (d->graph_greedy) CUDA_CHECK(cudaGraphExecDestroy(d->graph_greedy));
    if (d->host_next) CUDA_CHECK(cudaFreeHost(d->host_next));
    if (d->host_in) CUDA_CHECK(cudaFreeHost(d->host_in));
    if (d->host_logits) CUDA_CHECK(cudaFreeHost(d->host_logits));
    free(d->dw);
    free(d->host_index);
    free(d->layer);
    prof_free(d->prof);
    memset(d, 0, sizeof *d);
}

// d->rep = the rep ranges of block (n_params, the host block's layout), which is in host
// or device memory as kind says.
static void rep_fill(DevModel *d, const float *block, cudaMemcpyKind kind) {
    size_t c = 0;
    for (int r = 0; r < d->n_rep_r; c += d->rep_len[r++])
        CUDA_CHECK(cudaMemcpyAsync(d->rep + c, block + d->rep_off[r], d->rep_len[r] * sizeof(float), kind,
                                   d->ctx->stream));
}

// An evaluation DevModel of a folder (no fp32 block on the device): the block's bf16 copy,
// cast on the device 64 MiB of the block at a time through a buffer of its own (freed
// before returning: devmodel_bytes does not count it), and rep from the host. 0, or ERR.
static int upload_eval(DevModel *d, const float *params) {
    cudaStream_t st = d->ctx->stream;
    size_t n = d->n_params, chunk = n < ((size_t)1 << 24) ? n : (size_t)1 << 24;
    float *stage;
    TRY(dev_malloc((void **)&stage, (chunk ? chunk : 1) * sizeof(float), "staging the weights' upload"));
    for (size_t a = 0; a < n; a += chunk) {
        size_t k = n - a < chunk ? n - a : chunk;
        CUDA_CHECK(cudaMemcpyAsync(stage, params + a, k * sizeof(float), cudaMemcpyHostToDevice, st));
        cast_bf16_cuda(d->wbf + a, stage, k, st); // the stream orders the next copy after it
    }
    rep_fill(d, params, cudaMemcpyHostToDevice);
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaFree(stage));
    return 0;
}

BEST_KAPI void devmodel_upload(DevModel *d, const float *params, const AdamW *opt, const uint8_t *mask) {
    CHECK(d->params, "devmodel_upload: an evaluation DevModel of a folder holds bf16 weights, uploaded once by "
          "devmodel_init");
    cudaStream_t st = d->ctx->stream;
    size_t n = d->n_params, own = d->own_hi - d->own_lo;
    if (!d->comm) {
        CUDA_CHECK(cudaMemcpyAsync(d->params, params, n * sizeof(float), cudaMemcpyHostToDevice, st));
        if (d->wbf) cast_bf16_cuda(d->wbf, d->params, n, st);
    } else { // the block into the gradients' memory: the bf16 copy, the slice and rep from there
        CUDA_CHECK(cudaMemcpyAsync(d->grads, params, n * sizeof(float), cudaMemcpyHostToDevice, st));
        cast_bf16_cuda(d->wbf, d->grads, n, st);
        CUDA_CHECK(cudaMemcpyAsync(d->params, d->grads + d->own_lo, own * sizeof(float), cudaMemcpyDeviceToDevice,
                                   st));
        rep_fill(d, d->grads, cudaMemcpyDeviceToDevice);
        CUDA_CHECK(cudaMemsetAsync(d->grads, 0, n * sizeof(float), st));
    }
    if (opt) {
        CUDA_CHECK(cudaMemcpyAsync(d->adam_m, opt->m, own * sizeof(float), cudaMemcpyHostToDevice, st));
        CUDA_CHECK(cudaMemcpyAsync(d->adam_v, opt->v, own * sizeof(float), cudaMemcpyHostToDevice, st));
    }
    CHECK(!d->eval || (!opt && !mask), "devmodel_upload: an evaluation DevModel holds weights only");
    if (mask) CUDA_CHECK(cudaMemcpyAsync(d->mask, mask, own, cudaMemcpyHostToDevice, st));
    else if (d->mask) CUDA_CHECK(cudaMemsetAsync(d->mask, 1, own, st));
    // the host buffers may change as soon as we return (pageable copies are staged, but
    // say so explicitly rather than rely on it)
    CUDA_CHECK(cudaStreamSynchronize(st));
}

// The sizes of d for m at (B, T) (no allocation).
// Decoding's switches in the environment (docs/best-eval.md), the default value first:
// our bf16 GEMV for a folder's products, attention over the cache in key chunks, the keys
// and values cache in bf16, the products that share an input fused (a folder's by our GEMV).
static const struct {
    const char *name;
    const char *values[2];
} DECODE_ENV[] = {{"BEST_DECODE_GEMV", {"cublas", "own"}}, {"BEST_DECODE_ATTN", {"single", "split"}},
                  {"BEST_KV", {"fp32", "bf16"}}, {"BEST_DECODE_FUSE", {"off", "on"}}};
#define N_DECODE_ENV (sizeof DECODE_ENV / sizeof *DECODE_ENV)

// DECODE_ENV[i]'s value: 0 (the default, or unset), 1, or -1 for another.
static int decode_env(size_t i) { return args_choice(getenv(DECODE_ENV[i].name), DECODE_ENV[i].values, 2); }

static void devmodel_shape(DevModel *d, const Model *m, int B, int T, size_t ce_rows, int flags) {
    d->m = m;
    d->recompute = (flags & DEVMODEL_RECOMPUTE) != 0;
    d->eval = (flags & (DEVMODEL_EVAL | DEVMODEL_DECODE)) != 0;
    d->decode = (flags & DEVMODEL_DECODE) != 0;
    d->n_params = m->n_params;
    d->own_lo = 0;
    d->own_hi = m->n_params;
    d->B = B;
    d->T = T;
    d->N = (size_t)B * (size_t)T;
    d->ce_rows = ce_rows ? ce_rows : DEV_CE_FLOATS / m->V;
    if (d->ce_rows < 1) d->ce_rows = 1;
    if (d->ce_rows > d->N) d->ce_rows = d->N;
    // decoding: the switches of DECODE_ENV (devmodel_init refuses other values); a stored
    // model's products are its own (no GEMV of the bf16 copy)
    d->fuse = d->decode && decode_env(3) == 1 && (!m->ext || m->ext->ops->dev_fused);
    d->gemv = d->decode && !m->ext && (decode_env(0) == 1 || d->fuse);
    d->dec_split = d->decode && decode_env(1) == 1;
    d->kv_bf16 = d->decode && decode_env(2) == 1;
}

BEST_KAPI size_t devmodel_bytes(size_t *acts_bytes, const Model *m, int B, int T, size_t ce_rows, int flags,
                                int ranks) {
    DevModel d;
    memset(&d, 0, sizeof d);
    devmodel_shape(&d, m, B, T, ce_rows, flags);
    d.layer = (LayerActs *)xcalloc(m->L, sizeof *d.layer);
    Carver cv = {NULL, 0};
    acts_layout(&d, &cv);
    free(d.layer);
    if (acts_bytes) *acts_bytes = cv.used;
    size_t rep = 0;
    for (int i = 0; i < m->n_info && !m->ext; i++)
        if (rep_holds(m, &m->info[i])) rep += m->info[i].numel;
    if (ranks > 0 && !m->ext && !d.eval) {
        size_t lo, hi;
        dist_slice(&lo, &hi, m->n_params, 0, ranks);
        return m->n_params * DEV_RANKS_BYTES_PER_PARAM + (hi - lo) * DEV_SLICE_BYTES_PER_PARAM + rep * sizeof(float) +
               cv.used;
    }
    if (!m->ext && d.eval) return m->n_params * DEV_EVAL_BYTES_PER_PARAM + rep * sizeof(float) + cv.used;
    if (!m->ext) return m->n_params * DEV_BYTES_PER_PARAM + cv.used;
    size_t bytes = m->n_params * sizeof(float) + cv.used; // the 1-D block, the activations
    for (int i = 0; i < m->n_info; i++)
        if (m->ext->t[i]) bytes += m->ext->ops->bytes(m->ext->t[i]);
    if (!d.decode) bytes += m->ext->max_numel * sizeof(uint16_t); // wdec
    return bytes;
}

// d->dw: the stored weights of d->m on the device. 0, or ERR (out of device memory).
static int stored_upload(DevModel *d) {
    const Model *m = d->m;
    d->dw = (void **)xcalloc((size_t)m->n_info, sizeof *d->dw);
    for (int i = 0; i < m->n_info; i++) {
        if (!m->ext->t[i]) continue;
        size_t bytes;
        TRY(m->ext->ops->dev_upload(&d->dw[i], &bytes, m->ext->t[i]));
        d->weight_bytes += bytes;
    }
    return 0;
}

// --- attention through cuDNN (attention_cudnn.h; BEST_ATTN=cudnn) -------------------------

// The scale of the scores, as attention.cu and the CPU form it.
static float attn_scale(size_t HD) { return 1.0f / sqrtf((float)HD); }

// BEST_ATTN in the environment: own (attention.cu; also when unset) or cudnn, which a
// training DevModel takes when cuDNN loads and has a deterministic forward and backward for
// its shape (else one line says why, and attention.cu runs). cudnn leaves grouped-query
// attention (fewer key/value heads than query heads) to attention.cu: on an H200 with
// cuDNN 9.19 its GQA results were wrong (test_step_gpu, 2026-11-29: 8 heads over 2 and 16
// over 4, o or dq off by 1e-1 and more, differing from run to run; the one MHA shape was
// right). cudnn-gqa takes cuDNN for GQA all the same, to check a newer cuDNN on a GPU.
// 0, or -1 after ERR for another value or no device memory for cuDNN's bf16 operands
// (N (4 Q + 4 KVD) of them).
static int attn_choose(DevModel *d) {
    static const char *const names[] = {"own", "cudnn", "cudnn-gqa"};
    int want = args_choice(getenv("BEST_ATTN"), names, 3);
    if (want == 0) return 0;
    if (want < 0) return ERR("BEST_ATTN=%s in the environment: expected own, cudnn or cudnn-gqa", getenv("BEST_ATTN"));
    const Model *m = d->m;
    if (want == 1 && m->KV != m->NH) {
        fprintf(stderr, "note: BEST_ATTN=cudnn: %zu query heads over %zu key/value heads: cuDNN's grouped-query "
                "attention gave wrong results on a GPU (BEST_ATTN=cudnn-gqa takes it all the same); attention.cu "
                "instead\n", m->NH, m->KV);
        return 0;
    }
    if (attn_cudnn_prepare((size_t)d->B, (size_t)d->T, m->NH, m->KV, m->HD, attn_scale(m->HD), 1) < 0) {
        fprintf(stderr, "note: BEST_ATTN=cudnn: %s; attention.cu instead\n", err_msg());
        return 0;
    }
    TRY(dev_malloc((void **)&d->attn_bf, d->N * (4 * m->Q + 4 * m->KVD) * sizeof(uint16_t),
                   "cuDNN attention's bf16 operands"));
    d->attn_cudnn = 1;
    return 0;
}

// cuDNN's bf16 operands in d->attn_bf: q, o, k, v, dout, dq, dk, dv (N rows each, of Q or
// KVD values); q, k, v cast from layer s's.
typedef struct {
    uint16_t *q, *o, *k, *v, *dout, *dq, *dk, *dv;
} AttnBf;

static AttnBf attn_operands(DevModel *d, const LayerActs *s) {
    const Model *m = d->m;
    cudaStream_t st = d->ctx->stream;
    size_t N = d->N, Q = m->Q, KVD = m->KVD;
    AttnBf b;
    b.q = d->attn_bf, b.o = b.q + N * Q, b.k = b.o + N * Q, b.v = b.k + N * KVD;
    b.dout = b.v + N * KVD, b.dq = b.dout + N * Q, b.dk = b.dq + N * Q, b.dv = b.dk + N * KVD;
    cast_bf16_cuda(b.q, s->q, N * Q, st);
    cast_bf16_cuda(b.k, s->k, N * KVD, st);
    cast_bf16_cuda(b.v, s->v, N * KVD, st);
    return b;
}

// The forward of layer s's attention through cuDNN: s->att and s->lse (cuDNN's statistics).
static void attn_forward_cudnn(DevModel *d, LayerActs *s) {
    const Model *m = d->m;
    AttnBf b = attn_operands(d, s);
    if (attn_cudnn_forward(b.o, s->lse, b.q, b.k, b.v, (size_t)d->B, (size_t)d->T, m->NH, m->KV, m->HD,
                           attn_scale(m->HD), d->ctx->stream) < 0)
        DIE("%s", err_msg()); // (its graph was built at init: a failure now is cuDNN's at run time)
    widen_bf16_cuda(s->att, b.o, d->N * m->Q, d->ctx->stream); // exact: the o projection's operand is b.o again
}

// The backward of layer s's attention through cuDNN: d->dq, dk, dv from d->datt.
static void attn_backward_cudnn(DevModel *d, const LayerActs *s) {
    const Model *m = d->m;
    cudaStream_t st = d->ctx->stream;
    size_t N = d->N, Q = m->Q, KVD = m->KVD;
    AttnBf b = attn_operands(d, s); // (the forward's casts again: the buffer serves every layer)
    cast_bf16_cuda(b.o, s->att, N * Q, st); // the forward's bf16 output, bit for bit
    cast_bf16_cuda(b.dout, d->datt, N * Q, st);
    if (attn_cudnn_backward(b.dq, b.dk, b.dv, b.dout, b.q, b.k, b.v, b.o, s->lse, (size_t)d->B, (size_t)d->T, m->NH,
                            m->KV, m->HD, attn_scale(m->HD), 1, st) < 0)
        DIE("%s", err_msg());
    widen_bf16_cuda(d->dq, b.dq, N * Q, st);
    widen_bf16_cuda(d->dk, b.dk, N * KVD, st);
    widen_bf16_cuda(d->dv, b.dv, N * KVD, st);
}

BEST_KAPI int devmodel_init_ranks(DevModel *d, CudaCtx *c, const Model *m, int B, int T, size_t ce_rows,
                                  int flags, DevComm *comm) {
    memset(d, 0, sizeof *d);
    CHECK(!comm || !(flags & (DEVMODEL_EVAL | DEVMODEL_DECODE)), "devmodel_init_ranks: ranks are for training");
    if (B < 1 || T < 1) return ERR("batch %d x %d: both must be at least 1", B, T);
    CHECK(!(flags & DEVMODEL_DECODE) || B == 1, "devmodel_init: DEVMODEL_DECODE decodes one sequence (B = 1)");
    if (m->ext && !(flags & (DEVMODEL_EVAL | DEVMODEL_DECODE))) return model_need_folder(m, "training on the device");
    if (m->ext && !m->ext->ops->dev_upload)
        return ERR("%s: %s cannot go on a CUDA device in this build", m->ext->path, m->ext->what);
    d->ctx = c;
    devmodel_shape(d, m, B, T, ce_rows, flags);
    for (size_t i = 0; i < N_DECODE_ENV; i++)
        if (decode_env(i) < 0) {
            memset(d, 0, sizeof *d);
            return ERR("%s=%s in the environment: expected %s or %s", DECODE_ENV[i].name, getenv(DECODE_ENV[i].name),
                       DECODE_ENV[i].values[0], DECODE_ENV[i].values[1]);
        }
    d->comm = comm;
    if (comm) dist_slice(&d->own_lo, &d->own_hi, d->n_params, devcomm_rank(comm), devcomm_size(comm));
    // the prunable families as ranges of the block (the table is in block order)
    // and, with ranks or evaluating a folder, those the forward reads in fp32 (rep): the
    // embedding, the 1-D ones
    int eval_folder = d->eval && !m->ext; // no fp32 block on the device: bf16 and rep
    for (int i = 0; i < m->n_info && !m->ext; i++) { // (a store's are not in the block)
        const ParamInfo *p = &m->info[i];
        if (p->prunable) range_add(d->pr_off, d->pr_len, &d->n_pr, 8, p->offset, p->numel);
        if ((comm || eval_folder) && rep_holds(m, p)) {
            range_add(d->rep_off, d->rep_len, &d->n_rep_r, DEV_REP_RANGES, p->offset, p->numel);
            d->n_rep += p->numel;
        }
    }
    d->layer = (LayerActs *)xcalloc(m->L, sizeof *d->layer);
    Carver cv = {NULL, 0};
    acts_layout(d, &cv);
    d->acts_bytes = cv.used;
    size_t n = d->n_params, own = d->own_hi - d->own_lo;
    int rc = eval_folder ? 0 : dev_malloc((void **)&d->params, (own ? own : 1) * sizeof(float), "the weights");
    if (rc == 0 && (comm || eval_folder))
        rc = dev_malloc((void **)&d->rep, (d->n_rep ? d->n_rep : 1) * sizeof(float), "the embedding, norms and biases");
    d->weight_bytes = ((eval_folder ? 0 : own) + d->n_rep) * sizeof(float);
    if (rc == 0 && !d->eval) rc = dev_malloc((void **)&d->grads, n * sizeof(float), "the gradients");
    if (rc == 0 && !d->eval) rc = dev_malloc((void **)&d->adam_m, own * sizeof(float), "Adam's exp_avg");
    if (rc == 0 && !d->eval) rc = dev_malloc((void **)&d->adam_v, own * sizeof(float), "Adam's exp_avg_sq");
    if (rc == 0 && !m->ext) rc = dev_malloc((void **)&d->wbf, n * sizeof(uint16_t), "the bf16 weights");
    if (rc == 0 && !m->ext) d->weight_bytes += n * sizeof(uint16_t);
    if (rc == 0 && m->ext && !d->decode)
        rc = dev_malloc((void **)&d->wdec, m->ext->max_numel * sizeof(uint16_t), "one weight decoded to bf16");
    if (rc == 0 && m->ext) rc = stored_upload(d);
    if (rc == 0 && d->decode) { // pinned: the graph's copies read and write them
        if (cudaMallocHost((void **)&d->host_in, 2 * sizeof(int32_t)) != cudaSuccess ||
            cudaMallocHost((void **)&d->host_logits, m->V * sizeof(float)) != cudaSuccess ||
            cudaMallocHost((void **)&d->host_next, sizeof(int32_t)) != cudaSuccess) {
            (void)cudaGetLastError();
            rc = ERR("CUDA: cannot allocate %.1f MiB of pinned host memory for the logits",
                     (double)m->V * 4 / (1 << 20));
        }
        const char *g = getenv("BEST_CUDA_GRAPH");
        d->no_graph = g && strcmp(g, "0") == 0;
    }
    if (rc == 0 && !d->eval) rc = dev_malloc((void **)&d->mask, own ? own : 1, "the mask");
    if (rc == 0 && !d->eval) rc = attn_choose(d);
    if (rc == 0 && !d->eval) d->host_index = (int32_t *)xmalloc((3 * d->N + 1) * sizeof(int32_t));
    if (rc == 0) rc = dev_malloc((void **)&d->acts, cv.used, "the activations");
    if (rc < 0) {
        devmodel_free(d);
        return -1;
    }
    cv = (Carver){(char *)d->acts, 0};
    acts_layout(d, &cv);
    if (d->rep) weights_rebase_rep(d);
    else params_rebase(&d->w, m, d->params);
    cudaStream_t st = c->stream;
    if (!d->eval) {
        params_rebase(&d->g, m, d->grads);
        CUDA_CHECK(cudaMemsetAsync(d->grads, 0, n * sizeof(float), st));
        CUDA_CHECK(cudaMemsetAsync(d->adam_m, 0, own * sizeof(float), st));
        CUDA_CHECK(cudaMemsetAsync(d->adam_v, 0, own * sizeof(float), st));
    }
    size_t half = (size_t)T * m->HD / 2;
    float *cs = (float *)xmalloc(2 * half * sizeof(float));
    rope_table(cs, cs + half, 0, (size_t)T, m->HD, m->cfg.rope_theta);
    CUDA_CHECK(cudaMemcpyAsync(d->rope_cos, cs, half * sizeof(float), cudaMemcpyHostToDevice, st));
    CUDA_CHECK(cudaMemcpyAsync(d->rope_sin, cs + half, half * sizeof(float), cudaMemcpyHostToDevice, st));
    if (eval_folder) rc = upload_eval(d, m->params); // synchronises: cs may go
    else devmodel_upload(d, m->params, NULL, NULL);
    free(cs);
    if (rc < 0) devmodel_free(d);
    return rc;
}

BEST_KAPI int devmodel_init(DevModel *d, CudaCtx *c, const Model *m, int B, int T, size_t ce_rows, int flags) {
    return devmodel_init_ranks(d, c, m, B, T, ce_rows, flags, NULL);
}

BEST_KAPI void devmodel_download(const DevModel *d, float *params, AdamW *opt) {
    CHECK(d->params, "devmodel_download: an evaluation DevModel of a folder holds no fp32 weights");
    cudaStream_t st = d->ctx->stream;
    size_t own = d->own_hi - d->own_lo;
    CUDA_CHECK(cudaMemcpyAsync(params + d->own_lo, d->params, own * sizeof(float), cudaMemcpyDeviceToHost, st));
    if (opt) {
        CUDA_CHECK(cudaMemcpyAsync(opt->m, d->adam_m, own * sizeof(float), cudaMemcpyDeviceToHost, st));
        CUDA_CHECK(cudaMemcpyAsync(opt->v, d->adam_v, own * sizeof(float), cudaMemcpyDeviceToHost, st));
    }
    CUDA_CHECK(cudaStreamSynchronize(st));
}

BEST_KAPI void devmodel_download_grads(const DevModel *d, float *grads) {
    CUDA_CHECK(cudaMemcpyAsync(grads, d->grads, d->n_params * sizeof(float), cudaMemcpyDeviceToHost,
                               d->ctx->stream));
    CUDA_CHECK(cudaStreamSynchronize(d->ctx->stream));
}

BEST_KAPI void devmodel_download_nll(const DevModel *d, float *nll) {
    CUDA_CHECK(cudaMemcpyAsync(nll, d->nll, d->n_rows * sizeof(float), cudaMemcpyDeviceToHost, d->ctx->stream));
    CUDA_CHECK(cudaStreamSynchronize(d->ctx->stream));
}

BEST_KAPI void devmodel_download_mask(const DevModel *d, uint8_t *mask) {
    CUDA_CHECK(cudaMemcpyAsync(mask, d->mask, d->own_hi - d->own_lo, cudaMemcpyDeviceToHost, d->ctx->stream));
    CUDA_CHECK(cudaStreamSynchronize(d->ctx->stream));
}

// --- forward ------------------------------------------------------------------------------

// The offset in the block of the host's weight w (a pointer into m->params, m->w's).
static size_t woff(const DevModel *d, const float *w) { return (size_t)(w - d->m->params); }

// d->xbf (N, n) = the bf16 operand of the products that read x (N, n); a stored model
// decoding also gets it back as floats in d->xr (its matvecs read fp32), once for all
// the products that share it (q, k, v; gate, up).
static void operand(DevModel *d, const float *x, size_t N, size_t n) {
    cudaStream_t st = d->ctx->stream;
    cast_bf16_cuda(d->xbf, x, N * n, st);
    if ((d->dw || d->gemv) && d->decode) widen_bf16_cuda(d->xr, d->xbf, n, st);
}

// operand's second half, for an operand a kernel wrote in bf16 itself (xb is d->xbf when
// decoding: evaluation has no per-layer operands).
static void operand_widen(DevModel *d, const uint16_t *xb, size_t n) {
    if ((d->dw || d->gemv) && d->decode) widen_bf16_cuda(d->xr, xb, n, d->ctx->stream);
}

// Where a norm writes the products' bf16 operand: the layer's own (training: the backward
// reads it again), else d->xbf.
static uint16_t *norm_out(DevModel *d, uint16_t *own) { return own ? own : d->xbf; }

// y (N, OC) = or += (acc) xbf (N, IC) @ W^T + b, W (OC, IC) = matrix w of layer l: its bf16
// copy; a stored weight (d->dw): decoded to bf16 into d->wdec for the same product
// (evaluation: the very operand of the unpacked folder when the stored values are bf16,
// or fp32 of bf16 weights), or, one row (decoding), its dev_matvec straight from the
// storage on d->xr, xbf widened to fp32 by operand (the dense path's operand, summed in
// another order).
static void linear(DevModel *d, float *y, const uint16_t *xbf, ModelMatrix w, size_t l, const float *b,
                   size_t N, size_t IC, size_t OC, int acc) {
    const Model *m = d->m;
    int i = model_matrix_index(m, w, l);
    if (!d->dw && d->gemv) { // decoding, one row: xbf widened into xr by operand
        CHECK(N == 1 && xbf == d->xbf, "linear: a gemv of %zu rows, or not of operand's", N);
        gemv_bf16_cuda(y, d->xr, d->wbf + m->info[i].offset, b, acc ? y : NULL, OC, IC, d->ctx->stream);
        return;
    }
    if (!d->dw) {
        matmul_forward_cuda(d->ctx, y, xbf, d->wbf + m->info[i].offset, b, N, IC, OC, acc);
        return;
    }
    cudaStream_t st = d->ctx->stream;
    if (d->decode) {
        CHECK(N == 1 && xbf == d->xbf, "linear: a stored weight's product of %zu rows, or not of operand's, while "
              "decoding", N);
        m->ext->ops->dev_matvec(y, d->xr, d->dw[i], b, acc, st);
    } else {
        m->ext->ops->dev_decode(d->wdec, 1, NULL, 0, d->dw[i], st);
        matmul_forward_cuda(d->ctx, y, xbf, d->wdec, b, N, IC, OC, acc);
    }
}

// y (N, OC) = res + xbf @ W^T + b: a residual connection, res added in the product's
// epilogue (cuBLASLt's C != D; our GEMV's res) where the weight is the bf16 copy, else
// copied into y first for an accumulating product (a stored weight's). res may be y.
static void linear_res(DevModel *d, float *y, const float *res, const uint16_t *xbf, ModelMatrix w, size_t l,
                       const float *b, size_t N, size_t IC, size_t OC) {
    const Model *m = d->m;
    size_t at = m->info[model_matrix_index(m, w, l)].offset;
    if (!d->dw && d->gemv) {
        CHECK(N == 1 && xbf == d->xbf, "linear_res: a gemv of %zu rows, or not of operand's", N);
        gemv_bf16_cuda(y, d->xr, d->wbf + at, b, res, OC, IC, d->ctx->stream);
    } else if (!d->dw) {
        matmul_forward_add_cuda(d->ctx, y, xbf, d->wbf + at, b, res, N, IC, OC);
    } else {
        if (y != res)
            CUDA_CHECK(cudaMemcpyAsync(y, res, N * OC * sizeof(float), cudaMemcpyDeviceToDevice, d->ctx->stream));
        linear(d, y, xbf, w, l, b, N, IC, OC, 1);
    }
}

// x (N, C) = the embeddings of the N tokens (device ids).
static void embed(DevModel *d, float *x, const int32_t *tokens, size_t N) {
    const Model *m = d->m;
    if (d->dw) m->ext->ops->dev_decode(x, 0, tokens, N, d->dw[model_matrix_index(m, MW_EMBED, 0)], d->ctx->stream);
    else embedding_forward_cuda(x, tokens, d->w.embed, N, m->C, d->ctx->stream);
}

#define LW(p, size) ((p) ? (p) + l * (size) : NULL) // layer l's slice of a stacked family

// The decode step's job j over the matrices w[0..j->n) of layer l in one kernel
// (nn/decode_fused.h): 0 when launched (counted in d->n_fused), -1 when not fusing or those
// weights cannot take it (nothing launched: the caller runs the unfused kernels).
static int fused(DevModel *d, DecodeJob *j, const ModelMatrix *w, size_t l) {
    const Model *m = d->m;
    if (!d->fuse) return -1;
    const void *dt[DECODE_SEG_MAX];
    const uint16_t *wb[DECODE_SEG_MAX];
    for (int g = 0; g < j->n; g++) {
        int i = model_matrix_index(m, w[g], l);
        if (d->dw) dt[g] = d->dw[i];
        else wb[g] = d->wbf + m->info[i].offset;
    }
    cudaStream_t st = d->ctx->stream;
    int rc = d->dw ? m->ext->ops->dev_fused(j, dt, st) : decode_fused_gemv_cuda(j, wb, st);
    d->n_fused += rc == 0;
    return rc;
}

// A job of one matrix (rows OC) on input x (IC): y = res + W x' + b, x' = bf16(rmsnorm(x,
// norm_w)) or bf16(x) (norm_w NULL).
static DecodeJob job_one(const float *x, const float *norm_w, float eps, size_t IC, float *y, const float *res,
                         const float *b, size_t OC) {
    DecodeJob j;
    memset(&j, 0, sizeof j);
    j.x = x, j.norm_w = norm_w, j.eps = eps, j.IC = IC, j.n = 1;
    j.rows[0] = OC, j.y[0] = y, j.res[0] = res, j.b[0] = b;
    return j;
}

// The attention half's inputs of block l for the N rows of s->res: xn1, and q, k, v
// (Qwen3's q/k norms applied; RoPE not yet).
static void block_qkv(DevModel *d, size_t l, LayerActs *s, size_t N) {
    const Model *m = d->m;
    const ModelParams *w = &d->w;
    cudaStream_t st = d->ctx->stream;
    size_t C = m->C, Q = m->Q, KVD = m->KVD, HD = m->HD, NH = m->NH, KV = m->KV;
    float eps = (float)m->cfg.rms_norm_eps;
    float *q = m->qk_norm ? s->qraw : s->q, *k = m->qk_norm ? s->kraw : s->k;
    // decoding, fused: the norm and the three products in one kernel
    DecodeJob j = job_one(s->res, w->attn_norm + l * C, eps, C, q, NULL, LW(w->bq, Q), Q);
    j.n = 3, j.rows[1] = j.rows[2] = KVD, j.y[1] = k, j.y[2] = s->v, j.b[1] = LW(w->bk, KVD), j.b[2] = LW(w->bv, KVD);
    static const ModelMatrix QKV[] = {MW_Q, MW_K, MW_V};
    if (N != 1 || fused(d, &j, QKV, l) < 0) {
        devmodel_profile_mark(d, DP_NORM, 0);
        uint16_t *xb = norm_out(d, s->xn1b);
        rmsnorm_forward_bf16_cuda(xb, s->rstd1, s->res, w->attn_norm + l * C, N, C, eps, st);
        devmodel_profile_mark(d, DP_QKV, 2.0 * N * C * (Q + 2 * KVD));
        operand_widen(d, xb, C);
        linear(d, q, xb, MW_Q, l, LW(w->bq, Q), N, C, Q, 0);
        linear(d, k, xb, MW_K, l, LW(w->bk, KVD), N, C, KVD, 0);
        linear(d, s->v, xb, MW_V, l, LW(w->bv, KVD), N, C, KVD, 0);
    }
    if (m->qk_norm && !(N == 1 && d->fuse)) { // (fused decoding: in decode_rope_append_cuda)
        rmsnorm_forward_cuda(s->q, s->qrstd, s->qraw, w->q_norm + l * HD, N * NH, HD, eps, st);
        rmsnorm_forward_cuda(s->k, s->krstd, s->kraw, w->k_norm + l * HD, N * KV, HD, eps, st);
    }
}

// The rest of block l from its attention output s->att (N rows): res2 = res + o_proj(att),
// then out (N, C) = res2 + down(silu(gate) * up). out may be s->res (in place: res is
// read before out is written); out NULL: only what the block's backward reads
// (recomputation: the down projection is not needed).
static void block_out(DevModel *d, size_t l, LayerActs *s, size_t N, float *out) {
    const Model *m = d->m;
    const ModelParams *w = &d->w;
    cudaStream_t st = d->ctx->stream;
    size_t C = m->C, Q = m->Q, I = m->I;
    float eps = (float)m->cfg.rms_norm_eps;
    int one = N == 1 && out; // decoding may fuse (below); training and evaluation do not
    DecodeJob j = job_one(s->att, NULL, eps, Q, s->res2, s->res, LW(w->bo, C), C);
    static const ModelMatrix O[] = {MW_O}, GATE_UP[] = {MW_GATE, MW_UP}, DOWN[] = {MW_DOWN};
    if (!one || fused(d, &j, O, l) < 0) {
        devmodel_profile_mark(d, DP_O, 2.0 * N * Q * C);
        operand(d, s->att, N, Q);
        linear_res(d, s->res2, s->res, d->xbf, MW_O, l, LW(w->bo, C), N, Q, C); // res2 = res + o_proj(att)
    }
    // gate|up: the norm, both products and SwiGLU, h into xbf and (widened) xr
    j = job_one(s->res2, w->mlp_norm + l * C, eps, C, NULL, NULL, LW(w->bgate, I), I);
    j.n = 2, j.rows[1] = I, j.b[1] = LW(w->bup, I), j.swiglu = 1, j.hb = d->xbf, j.hr = d->xr;
    if (!one || fused(d, &j, GATE_UP, l) < 0) {
        devmodel_profile_mark(d, DP_NORM, 0);
        uint16_t *xb = norm_out(d, s->xn2b);
        rmsnorm_forward_bf16_cuda(xb, s->rstd2, s->res2, w->mlp_norm + l * C, N, C, eps, st);
        devmodel_profile_mark(d, DP_GATE_UP, 4.0 * N * C * I);
        operand_widen(d, xb, C);
        linear(d, s->gate, xb, MW_GATE, l, LW(w->bgate, I), N, C, I, 0);
        linear(d, s->up, xb, MW_UP, l, LW(w->bup, I), N, C, I, 0);
        if (!out) return;
        devmodel_profile_mark(d, DP_SWIGLU, 0);
        swiglu_forward_bf16_cuda(d->xbf, s->gate, s->up, N * I, st); // h, straight into the down projection's operand
        operand_widen(d, d->xbf, I);
    }
    // down: h's operand is in xr wherever decoding may fuse (bf16 of it is xbf again)
    j = job_one(d->xr, NULL, eps, I, out, s->res2, LW(w->bdown, C), C);
    if (!one || fused(d, &j, DOWN, l) < 0) {
        devmodel_profile_mark(d, DP_DOWN, 2.0 * N * I * C);
        linear_res(d, out, s->res2, d->xbf, MW_DOWN, l, LW(w->bdown, C), N, I, C); // out = res2 + down(h)
    }
}

// One decoder block (model.c's block_forward) over the (B, T) rows: s->res in, out (N, C)
// out (NULL: see block_out).
static void block_forward(DevModel *d, size_t l, float *out) {
    const Model *m = d->m;
    LayerActs *s = &d->layer[l];
    cudaStream_t st = d->ctx->stream;
    size_t B = (size_t)d->B, T = (size_t)d->T, N = d->N;
    block_qkv(d, l, s, N);
    devmodel_profile_mark(d, DP_ROPE, 0);
    rope_forward_cuda(s->q, d->rope_cos, d->rope_sin, B, T, m->NH, m->HD, st);
    rope_forward_cuda(s->k, d->rope_cos, d->rope_sin, B, T, m->KV, m->HD, st);
    // causal: Q K^T and P V over the (T + 1) / 2 keys a query sees on average
    devmodel_profile_mark(d, DP_ATTN, 4.0 * B * m->NH * m->HD * (double)T * (T + 1) / 2);
    if (d->attn_cudnn) attn_forward_cudnn(d, s);
    else attention_forward_cuda(s->att, s->lse, s->q, s->k, s->v, B, T, T, 0, m->NH, m->KV, m->HD, st);
    block_out(d, l, s, N, out);
}
#undef LW

// 0, or ERR for an id outside [lo, V) (lo = -1: targets may be ignored).
static int ids_check(const int32_t *ids, size_t n, size_t V, int32_t lo, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] < lo || (ids[i] >= 0 && (size_t)ids[i] >= V))
            return ERR("%s %d at position %zu is outside [%d, %zu)", what, ids[i], i, lo, V);
    return 0;
}

// The tokens and targets (may be NULL) of the first N rows to the device, after their
// checks; d->n_rows, n_valid set, the loss cleared.
static int forward_inputs(DevModel *d, const int32_t *tokens, const int32_t *targets, size_t N) {
    cudaStream_t st = d->ctx->stream;
    size_t V = d->m->V;
    TRY(ids_check(tokens, N, V, 0, "token"));
    if (targets) TRY(ids_check(targets, N, V, -1, "target"));
    d->has_targets = targets != NULL;
    d->n_rows = N;
    d->n_valid = 0;
    d->loss = 0;
    d->nll_sum = 0;
    CUDA_CHECK(cudaMemcpyAsync(d->tokens, tokens, N * sizeof(int32_t), cudaMemcpyHostToDevice, st));
    if (!d->eval) { // the embedding's backward, from the rows of each token (host_index is reused
        // at the next forward, after the device has taken this copy: pageable memory is staged)
        d->n_uniq = embedding_index(d->host_index, tokens, N);
        CUDA_CHECK(cudaMemcpyAsync(d->emb_index, d->host_index, (3 * N + 1) * sizeof(int32_t),
                                   cudaMemcpyHostToDevice, st));
    }
    if (targets) {
        CUDA_CHECK(cudaMemcpyAsync(d->targets, targets, N * sizeof(int32_t), cudaMemcpyHostToDevice, st));
        for (size_t n = 0; n < N; n++) d->n_valid += targets[n] >= 0;
    }
    return 0;
}

// After the last block (its output in d->resf, N rows): the final norm, and with targets
// the loss, ce_rows rows of logits at a time; waits for the device.
// head_scale > 0 (devmodel_forward_backward): the head's backward too, chunk by chunk while
// the chunk's logits are there: dlogits = head_scale (softmax - onehot), d(xnf) rows into
// dxn, lm_head's gradient (the backward then skips its head).
static void forward_head(DevModel *d, size_t N, float head_scale) {
    const Model *m = d->m;
    cudaStream_t st = d->ctx->stream;
    size_t C = m->C, V = m->V;
    int grad = head_scale > 0 && d->has_targets;
    devmodel_profile_mark(d, DP_HEAD, d->has_targets ? (grad ? 6.0 : 2.0) * N * C * V : 0);
    rmsnorm_forward_cuda(d->xnf, d->rstdf, d->resf, d->w.final_norm, N, C, (float)m->cfg.rms_norm_eps, st);
    if (!d->has_targets) {
        CUDA_CHECK(cudaStreamSynchronize(st)); // the host's tokens may change on return
        return;
    }
    cast_bf16_cuda(d->xbf, d->xnf, N * C, st);
    for (size_t r0 = 0; r0 < N; r0 += d->ce_rows) {
        size_t nr = N - r0 < d->ce_rows ? N - r0 : d->ce_rows;
        linear(d, d->logits, d->xbf + r0 * C, MW_HEAD, 0, NULL, nr, C, V, 0);
        if (!grad) {
            crossentropy_chunk_cuda(NULL, d->nll + r0, NULL, d->logits, d->targets + r0, 1.0f, nr, V, st);
            continue;
        }
        crossentropy_chunk_cuda(d->logits, d->nll + r0, NULL, d->logits, d->targets + r0, head_scale, nr, V, st);
        cast_bf16_cuda(d->logits_bf, d->logits, nr * V, st);
        matmul_backward_cuda(d->ctx, d->dxn + r0 * C, d->g.lm_head, d->logits_bf, d->xbf + r0 * C,
                             d->wbf + woff(d, m->w.lm_head), nr, C, V, 0);
    }
    reduce_into(d, SLOT_LOSS, d->nll, NULL, N, RED_SUM, 0);
    double sum = fetch_scalar(d, SLOT_LOSS);
    d->nll_sum = sum;
    // no valid target: 0, as model_forward
    d->loss = d->n_valid ? (float)(sum / d->n_valid) : 0.0f;
}

// devmodel_forward; loss_scale > 0 (devmodel_forward_backward): with the head's backward
// for that scale of the loss (no valid target: none, as backward).
static int forward(DevModel *d, const int32_t *tokens, const int32_t *targets, float loss_scale) {
    TRY(forward_inputs(d, tokens, targets, d->N));
    devmodel_profile_mark(d, DP_EMBED, 0);
    embed(d, d->layer[0].res, d->tokens, d->N);
    for (size_t l = 0; l < d->m->L; l++)
        block_forward(d, l, l + 1 == d->m->L ? d->resf : d->layer[l + 1].res);
    forward_head(d, d->N, loss_scale > 0 && d->n_valid ? loss_scale / (float)d->n_valid : 0.0f);
    return 0;
}

BEST_KAPI int devmodel_forward(DevModel *d, const int32_t *tokens, const int32_t *targets) {
    return forward(d, tokens, targets, 0);
}

// vis (n, 3): attention_packed_cuda's keys of each row from the segments seg (nseg, 4) of
// layers.h's attention_packed. 0, or ERR when the segments do not cover the n rows once
// each or a prefix does not lie before its segment.
static int packed_vis(int32_t *vis, const int32_t *seg, size_t nseg, size_t n) {
    for (size_t r = 0; r < 3 * n; r++) vis[r] = -1;
    for (size_t s = 0; s < nseg; s++) {
        const int32_t *g = seg + 4 * s;
        if (g[0] < 0 || g[1] < 0 || g[2] < 0 || g[3] < 0 || (size_t)g[0] + (size_t)g[1] > n ||
            (size_t)g[2] + (size_t)g[3] > (size_t)g[0])
            return ERR("packed rows: segment %zu {%d, %d, %d, %d} is outside the %zu rows or its prefix is not "
                       "before it", s, g[0], g[1], g[2], g[3], n);
        for (int32_t r = g[0]; r < g[0] + g[1]; r++) {
            if (vis[3 * r] >= 0) return ERR("packed rows: row %d is in two segments", r);
            vis[3 * r] = g[2], vis[3 * r + 1] = g[2] + g[3], vis[3 * r + 2] = g[0];
        }
    }
    for (size_t r = 0; r < n; r++)
        if (vis[3 * r] < 0) return ERR("packed rows: row %zu is in no segment", r);
    return 0;
}

BEST_KAPI int devmodel_forward_packed(DevModel *d, const int32_t *tokens, const int32_t *pos, const int32_t *targets,
                                      size_t n, const int32_t *seg, size_t nseg) {
    const Model *m = d->m;
    cudaStream_t st = d->ctx->stream;
    CHECK(d->eval && !d->decode && d->B == 1, "devmodel_forward_packed needs a DevModel made with DEVMODEL_EVAL "
          "and B = 1");
    if (n > d->N) return ERR("packed rows: %zu rows, the DevModel holds %zu", n, d->N);
    for (size_t r = 0; r < n; r++)
        if (pos[r] < 0 || pos[r] >= d->T)
            return ERR("packed rows: row %zu at position %d, outside [0, %d)", r, pos[r], d->T);
    int32_t *vis = (int32_t *)xmalloc((3 * n + 1) * sizeof *vis);
    int rc = packed_vis(vis, seg, nseg, n);
    if (rc == 0) rc = forward_inputs(d, tokens, targets, n);
    if (rc < 0) {
        free(vis);
        return rc;
    }
    CUDA_CHECK(cudaMemcpyAsync(d->rows_pos, pos, n * sizeof(int32_t), cudaMemcpyHostToDevice, st));
    CUDA_CHECK(cudaMemcpyAsync(d->rows_vis, vis, 3 * n * sizeof(int32_t), cudaMemcpyHostToDevice, st));
    float *res = d->layer[0].res; // every layer's input and output (DEVMODEL_EVAL shares it)
    embed(d, res, d->tokens, n);
    for (size_t l = 0; l < m->L; l++) {
        LayerActs *s = &d->layer[l];
        block_qkv(d, l, s, n);
        rope_at_cuda(s->q, d->rope_cos, d->rope_sin, d->rows_pos, n, m->NH, m->HD, st);
        rope_at_cuda(s->k, d->rope_cos, d->rope_sin, d->rows_pos, n, m->KV, m->HD, st);
        attention_packed_cuda(s->att, s->q, s->k, s->v, d->rows_vis, n, m->NH, m->KV, m->HD, st);
        block_out(d, l, s, n, l + 1 == m->L ? d->resf : res);
    }
    forward_head(d, n, 0); // waits for the device: vis may go
    free(vis);
    return 0;
}

// The work of one decode step, enqueued on the stream (or recorded into its graph): the
// token and position from pinned memory to d->step_in, then everything reads the position
// there, so that one graph serves every step.
static void decode_step(DevModel *d, int greedy) {
    const Model *m = d->m;
    cudaStream_t st = d->ctx->stream;
    size_t C = m->C, V = m->V, KVD = m->KVD, HD = m->HD, T = (size_t)d->T;
    const int32_t *pos = d->step_in + 1;
    CUDA_CHECK(cudaMemcpyAsync(d->step_in, d->host_in, 2 * sizeof(int32_t), cudaMemcpyHostToDevice, st));
    d->n_fused = 0;
    float *res = d->layer[0].res; // every layer's input and output (DEVMODEL_EVAL shares it)
    embed(d, res, d->step_in, 1);
    for (size_t l = 0; l < m->L; l++) {
        LayerActs *s = &d->layer[l];
        size_t at = l * T * KVD; // (T, KV, HD) of layer l
        block_qkv(d, l, s, 1);
        if (d->fuse) { // q/k norms, RoPE and the cache's row in one kernel
            RopeAppendJob rj = {s->q, s->k, m->qk_norm ? s->qraw : s->q, m->qk_norm ? s->kraw : s->k,
                                m->qk_norm ? d->w.q_norm + l * HD : NULL, m->qk_norm ? d->w.k_norm + l * HD : NULL,
                                (float)m->cfg.rms_norm_eps, s->v,
                                d->kv_bf16 ? (void *)(d->kcb + at) : (void *)(d->kc + at),
                                d->kv_bf16 ? (void *)(d->vcb + at) : (void *)(d->vc + at), d->kv_bf16, d->rope_cos,
                                d->rope_sin, pos, m->NH, m->KV, HD};
            decode_rope_append_cuda(&rj, st);
            d->n_fused++;
        } else {
            rope_at_cuda(s->q, d->rope_cos, d->rope_sin, pos, 1, m->NH, HD, st);
            rope_at_cuda(s->k, d->rope_cos, d->rope_sin, pos, 1, m->KV, HD, st);
            if (d->kv_bf16) kv_append_bf16_cuda(d->kcb + at, d->vcb + at, s->k, s->v, pos, KVD, st);
            else kv_append_cuda(d->kc + at, d->vc + at, s->k, s->v, pos, KVD, st);
        }
        if (d->kv_bf16)
            attention_decode_bf16_cuda(s->att, d->dec_part, s->q, d->kcb + at, d->vcb + at, pos, T, m->NH, m->KV, HD,
                                       st);
        else
            attention_decode_split_cuda(s->att, d->dec_part, s->q, d->kc + at, d->vc + at, pos, T, m->NH, m->KV, HD,
                                        st); // (dec_part NULL: one block a head)
        block_out(d, l, s, 1, res);
    }
    DecodeJob j = job_one(res, d->w.final_norm, (float)m->cfg.rms_norm_eps, C, d->logits, NULL, NULL, V);
    static const ModelMatrix HEAD[] = {MW_HEAD};
    if (fused(d, &j, HEAD, 0) < 0) {
        rmsnorm_forward_cuda(d->xnf, d->rstdf, res, d->w.final_norm, 1, C, (float)m->cfg.rms_norm_eps, st);
        operand(d, d->xnf, 1, C);
        linear(d, d->logits, d->xbf, MW_HEAD, 0, NULL, 1, C, V, 0);
    }
    if (greedy) { // the token, not the logits
        argmax_cuda(d->next_dev, d->logits, V, st);
        CUDA_CHECK(cudaMemcpyAsync(d->host_next, d->next_dev, sizeof(int32_t), cudaMemcpyDeviceToHost, st));
    } else {
        CUDA_CHECK(cudaMemcpyAsync(d->host_logits, d->logits, V * sizeof(float), cudaMemcpyDeviceToHost, st));
    }
}

// d->graph = decode_step captured; where capturing fails, d->no_graph (steps launched
// one by one from then on).
static void decode_capture(DevModel *d, int greedy) {
    cudaStream_t st = d->ctx->stream;
    cudaGraph_t g = NULL;
    cudaGraphExec_t *exec = greedy ? &d->graph_greedy : &d->graph;
    cudaError_t e = cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
    if (e == cudaSuccess) {
        decode_step(d, greedy);
        e = cudaStreamEndCapture(st, &g);
    }
    if (e == cudaSuccess) e = cudaGraphInstantiate(exec, g, 0);
    if (g) CUDA_CHECK(cudaGraphDestroy(g));
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        *exec = NULL;
        d->no_graph = 1;
    }
}

// One decode step, its graph captured at its first call (greedy: the other graph).
static int forward_token(DevModel *d, int32_t token, size_t pos, int greedy) {
    CHECK(d->decode, "devmodel_forward_token needs a DevModel made with DEVMODEL_DECODE");
    cudaStream_t st = d->ctx->stream;
    TRY(ids_check(&token, 1, d->m->V, 0, "token"));
    if (pos >= (size_t)d->T) return ERR("position %zu is past the %d positions of the decode cache", pos, d->T);
    d->host_in[0] = token;
    d->host_in[1] = (int32_t)pos;
    cudaGraphExec_t *exec = greedy ? &d->graph_greedy : &d->graph;
    if (!*exec && !d->no_graph) decode_capture(d, greedy);
    if (*exec) CUDA_CHECK(cudaGraphLaunch(*exec, st));
    else decode_step(d, greedy);
    CUDA_CHECK(cudaStreamSynchronize(st));
    return 0;
}

BEST_KAPI int devmodel_forward_token(float *logits, DevModel *d, int32_t token, size_t pos) {
    TRY(forward_token(d, token, pos, 0));
    memcpy(logits, d->host_logits, d->m->V * sizeof(float));
    return 0;
}

BEST_KAPI int devmodel_forward_token_greedy(int32_t *next, DevModel *d, int32_t token, size_t pos) {
    TRY(forward_token(d, token, pos, 1));
    *next = *d->host_next;
    return 0;
}

// --- backward -----------------------------------------------------------------------------

// db (OC) += column sums of dy (N, OC), when the model has that bias.
// The backward of one Linear y = x @ W^T + b, W the matrix at offset w of the block (its
// bf16 copy), its input x (N, IC) in bf16: dy (N, OC) fp32 cast to bf16 into d->dybf;
// dx (N, IC) = or += (dx_acc) dy @ W; dW += dy^T @ x, dW at offset w of d->grads; db (OC)
// += column sums of dy when db is not NULL.
static void linear_back(DevModel *d, float *dx, size_t w, float *db, const float *dy, const uint16_t *x,
                        size_t IC, size_t OC, int dx_acc) {
    cast_bf16_cuda(d->dybf, dy, d->N * OC, d->ctx->stream);
    matmul_backward_cuda(d->ctx, dx, d->grads + w, d->dybf, x, d->wbf + w, d->N, IC, OC, dx_acc);
    if (db) bias_backward_cuda(db, d->scratch, dy, d->N, OC, d->ctx->stream);
}

// linear_back for a dy already in bf16 (dyb, (N, OC)) and no bias.
static void linear_back_bf16(DevModel *d, float *dx, size_t w, const uint16_t *dyb, const uint16_t *x, size_t IC,
                             size_t OC, int dx_acc) {
    matmul_backward_cuda(d->ctx, dx, d->grads + w, dyb, x, d->wbf + w, d->N, IC, OC, dx_acc);
}

// One block backward (model.c's block_backward): d->dres holds d(block output) on entry and
// d(block input) on exit.
static void block_backward(DevModel *d, size_t l) {
    const Model *m = d->m;
    const ModelParams *w = &d->w, *g = &d->g, *hw = &m->w; // (hw: the host's, for the matrices' offsets)
    const LayerActs *s = &d->layer[l];
    cudaStream_t st = d->ctx->stream;
    size_t B = (size_t)d->B, T = (size_t)d->T, N = d->N;
    size_t C = m->C, Q = m->Q, KVD = m->KVD, I = m->I, HD = m->HD, NH = m->NH, KV = m->KV;
#define LW(p, size) ((p) ? (p) + l * (size) : NULL)
    // MLP: out = res2 + down(silu(gate) * up); h recomputed
    devmodel_profile_mark(d, DP_BWD_DOWN, 4.0 * N * I * C);
    swiglu_forward_bf16_cuda(d->xbf, s->gate, s->up, N * I, st);
    linear_back(d, d->dh, woff(d, hw->wdown) + l * C * I, LW(g->bdown, C), d->dres, d->xbf, I, C, 0);
    devmodel_profile_mark(d, DP_BWD_SWIGLU, 0);
    if (!g->bgate && !g->bup) { // no biases to read dgate, dup in fp32: straight into bf16, in their buffers
        uint16_t *dgb = (uint16_t *)d->dgate, *dub = (uint16_t *)d->dup;
        swiglu_backward_bf16_cuda(dgb, dub, d->dh, s->gate, s->up, N * I, st);
        devmodel_profile_mark(d, DP_BWD_GATE_UP, 8.0 * N * C * I);
        linear_back_bf16(d, d->dxn, woff(d, hw->wgate) + l * I * C, dgb, s->xn2b, C, I, 0);
        linear_back_bf16(d, d->dxn, woff(d, hw->wup) + l * I * C, dub, s->xn2b, C, I, 1);
    } else {
        swiglu_backward_cuda(d->dgate, d->dup, d->dh, s->gate, s->up, N * I, st);
        devmodel_profile_mark(d, DP_BWD_GATE_UP, 8.0 * N * C * I);
        linear_back(d, d->dxn, woff(d, hw->wgate) + l * I * C, LW(g->bgate, I), d->dgate, s->xn2b, C, I, 0);
        linear_back(d, d->dxn, woff(d, hw->wup) + l * I * C, LW(g->bup, I), d->dup, s->xn2b, C, I, 1);
    }
    devmodel_profile_mark(d, DP_BWD_NORM, 0);
    rmsnorm_backward_cuda(d->dres, g->mlp_norm + l * C, d->scratch, d->dxn, s->res2, s->rstd2,
                          w->mlp_norm + l * C, N, C, 1, st); // dres is now d(res2)
    // attention: res2 = res + o_proj(att)
    devmodel_profile_mark(d, DP_BWD_O, 4.0 * N * Q * C);
    cast_bf16_cuda(d->xbf, s->att, N * Q, st);
    linear_back(d, d->datt, woff(d, hw->wo) + l * C * Q, LW(g->bo, C), d->dres, d->xbf, Q, C, 0);
    // dV, dP (recomputed P), dQ, dK: 2.5 times the forward's products
    devmodel_profile_mark(d, DP_BWD_ATTN, 10.0 * B * NH * HD * (double)T * (T + 1) / 2);
    if (d->attn_cudnn)
        attn_backward_cudnn(d, s);
    else
        attention_backward_cuda(d->dq, d->dk, d->dv, d->dkh, d->dvh, d->datt, s->q, s->k, s->v, s->att, s->lse,
                                B, T, NH, KV, HD, st);
    devmodel_profile_mark(d, DP_BWD_ROPE, 0);
    rope_backward_cuda(d->dq, d->rope_cos, d->rope_sin, B, T, NH, HD, st);
    rope_backward_cuda(d->dk, d->rope_cos, d->rope_sin, B, T, KV, HD, st);
    if (m->qk_norm) { // in place: d(q after norm) -> d(q_proj output)
        rmsnorm_backward_cuda(d->dq, g->q_norm + l * HD, d->scratch, d->dq, s->qraw, s->qrstd,
                              w->q_norm + l * HD, N * NH, HD, 0, st);
        rmsnorm_backward_cuda(d->dk, g->k_norm + l * HD, d->scratch, d->dk, s->kraw, s->krstd,
                              w->k_norm + l * HD, N * KV, HD, 0, st);
    }
    devmodel_profile_mark(d, DP_BWD_QKV, 4.0 * N * C * (Q + 2 * KVD));
    linear_back(d, d->dxn, woff(d, hw->wq) + l * Q * C, LW(g->bq, Q), d->dq, s->xn1b, C, Q, 0);
    linear_back(d, d->dxn, woff(d, hw->wk) + l * KVD * C, LW(g->bk, KVD), d->dk, s->xn1b, C, KVD, 1);
    linear_back(d, d->dxn, woff(d, hw->wv) + l * KVD * C, LW(g->bv, KVD), d->dv, s->xn1b, C, KVD, 1);
    devmodel_profile_mark(d, DP_BWD_NORM, 0);
    rmsnorm_backward_cuda(d->dres, g->attn_norm + l * C, d->scratch, d->dxn, s->res, s->rstd1,
                          w->attn_norm + l * C, N, C, 1, st); // dres is now d(res)
#undef LW
}

// With GPU ranks: the gradients of layer l (every per-layer family's tensor of it), or
// with l = L those of the rest (embedding, final norm, an untied lm_head), summed over
// the ranks onto their owners behind the backward so far; the count of gradients summed.
static size_t grads_sum(DevModel *d, size_t l) {
    const Model *m = d->m;
    const ModelParams *g = &d->g;
    size_t C = m->C, Q = m->Q, KVD = m->KVD, I = m->I, HD = m->HD;
    struct { const float *p; size_t n; } f[] = {
        {g->attn_norm, C}, {g->wq, Q * C}, {g->bq, Q}, {g->wk, KVD * C}, {g->bk, KVD}, {g->wv, KVD * C},
        {g->bv, KVD}, {g->q_norm, HD}, {g->k_norm, HD}, {g->wo, C * Q}, {g->bo, C}, {g->mlp_norm, C},
        {g->wgate, I * C}, {g->bgate, I}, {g->wup, I * C}, {g->bup, I}, {g->wdown, C * I}, {g->bdown, C}};
    struct { const float *p; size_t n; } rest[] = {
        {g->embed, m->V * C}, {g->final_norm, C}, {g->lm_head != g->embed ? g->lm_head : NULL, m->V * C}};
    size_t summed = 0, k = l < m->L ? sizeof f / sizeof *f : sizeof rest / sizeof *rest;
    for (size_t i = 0; i < k; i++) {
        const float *p = l < m->L ? (f[i].p ? f[i].p + l * f[i].n : NULL) : rest[i].p;
        if (!p) continue;
        size_t n = l < m->L ? f[i].n : rest[i].n, a = (size_t)(p - d->grads);
        devcomm_sum(d->comm, d->grads, d->n_params, a, a + n, d->ctx->stream);
        summed += n;
    }
    return summed;
}

// The last of the sums: the rest after the layers (summed: the layers' count), the check
// that every gradient was summed once, and d's stream behind them all.
static void grads_sum_last(DevModel *d, size_t summed) {
    summed += grads_sum(d, d->m->L);
    CHECK(summed == d->n_params, "devmodel_backward_sum: %zu of %zu gradients summed (a family missing)", summed,
          d->n_params);
    devmodel_profile_mark(d, DP_COLLECTIVE, 0);
    devcomm_wait(d->comm, d->ctx->stream);
}

// devmodel_backward, and with sum (and ranks) devmodel_backward_sum.
// head_done: the forward did the head's backward (devmodel_forward_backward).
static void backward(DevModel *d, float loss_scale, int sum, int head_done) {
    CHECK(!d->eval, "devmodel_backward: an evaluation DevModel has no gradients");
    CHECK(d->has_targets, "devmodel_backward needs a forward with targets");
    sum = sum && d->comm;
    size_t summed = 0;
    if (!d->n_valid) { // the loss is a constant 0: this rank adds nothing, but joins the sums
        for (size_t l = 0; sum && l < d->m->L; l++) summed += grads_sum(d, l);
        if (sum) grads_sum_last(d, summed);
        return;
    }
    const Model *m = d->m;
    cudaStream_t st = d->ctx->stream;
    size_t N = d->N, C = m->C, V = m->V;
    // the head, chunk by chunk: logits again, dlogits = scale * (softmax - onehot) in
    // place, then d(xnf) rows and lm_head's gradient (tied: the embedding's)
    float scale = loss_scale / (float)d->n_valid;
    devmodel_profile_mark(d, DP_BWD_HEAD, head_done ? 0 : 6.0 * N * C * V); // the logits again, then dx and dW
    if (!head_done) cast_bf16_cuda(d->xbf, d->xnf, N * C, st);
    for (size_t r0 = 0; r0 < N && !head_done; r0 += d->ce_rows) {
        size_t nr = N - r0 < d->ce_rows ? N - r0 : d->ce_rows;
        linear(d, d->logits, d->xbf + r0 * C, MW_HEAD, 0, NULL, nr, C, V, 0);
        crossentropy_chunk_cuda(d->logits, d->nll + r0, NULL, d->logits, d->targets + r0, scale, nr, V, st);
        cast_bf16_cuda(d->logits_bf, d->logits, nr * V, st);
        matmul_backward_cuda(d->ctx, d->dxn + r0 * C, d->g.lm_head, d->logits_bf, d->xbf + r0 * C,
                             d->wbf + woff(d, m->w.lm_head), nr, C, V, 0);
    }
    devmodel_profile_mark(d, DP_BWD_NORM, 0);
    rmsnorm_backward_cuda(d->dres, d->g.final_norm, d->scratch, d->dxn, d->resf, d->rstdf, d->w.final_norm,
                          N, C, 0, st);
    for (size_t l = m->L; l-- > 0;) {
        if (d->recompute) block_forward(d, l, NULL); // the same kernels on the same input: the same bits
        block_backward(d, l);
        if (sum) summed += grads_sum(d, l); // while the layers below go on
    }
    devmodel_profile_mark(d, DP_BWD_EMBED, 0);
    embedding_backward_index_cuda(d->g.embed, d->dres, d->emb_index, d->n_uniq, N, C, st);
    if (sum) grads_sum_last(d, summed);
}

BEST_KAPI void devmodel_backward(DevModel *d, float loss_scale) { backward(d, loss_scale, 0, 0); }
BEST_KAPI void devmodel_backward_sum(DevModel *d, float loss_scale) { backward(d, loss_scale, 1, 0); }

BEST_KAPI int devmodel_forward_backward(DevModel *d, const int32_t *tokens, const int32_t *targets,
                                        float loss_scale, int sum) {
    CHECK(!d->eval && targets && loss_scale > 0, "devmodel_forward_backward: a training DevModel, targets and a "
          "positive loss scale");
    TRY(forward(d, tokens, targets, loss_scale));
    backward(d, loss_scale, sum, 1);
    return 0;
}

// --- the optimizer ------------------------------------------------------------------------

BEST_KAPI void devmodel_zero_grad(DevModel *d) {
    CHECK(!d->eval, "devmodel_zero_grad: an evaluation DevModel has no gradients");
    devmodel_profile_mark(d, DP_ZERO, 0);
    CUDA_CHECK(cudaMemsetAsync(d->grads, 0, d->n_params * sizeof(float), d->ctx->stream));
}

BEST_KAPI double devmodel_grad_sumsq(DevModel *d, int masked) {
    devmodel_profile_mark(d, DP_CLIP, 0);
    size_t n = d->own_hi - d->own_lo;
    float *g = d->grads + d->own_lo;
    if (masked) masked_fill_cuda(g, d->mask, 0.0f, n, d->ctx->stream);
    if (n == 0) return 0; // a rank with an empty slice (more ranks than parameters)
    reduce_into(d, SLOT_SUMSQ, g, NULL, n, RED_SUMSQ, 0);
    return fetch_scalar(d, SLOT_SUMSQ);
}

BEST_KAPI void devmodel_grad_scale(DevModel *d, float s) {
    size_t n = d->own_hi - d->own_lo;
    if (n == 0) return;
    LAUNCH(dev_scale_kernel, km_blocks(n, KM_THREADS, KM_GRID_CAP), KM_THREADS, d->ctx->stream,
           d->grads + d->own_lo, s, n);
    CUDA_CHECK(cudaGetLastError());
}

// devmodel_share_weights; with cast 0 the bf16 copy of this rank's part is already written
// (the one-pass optimizer's).
static void share_weights(DevModel *d, size_t a, size_t b, int cast) {
    cudaStream_t st = d->ctx->stream;
    size_t lo, hi; // this rank's part
    dist_part(&lo, &hi, a, b, d->own_lo, d->own_hi);
    if (cast) cast_bf16_cuda(d->wbf + lo, d->params + (lo - d->own_lo), hi - lo, st);
    if (!d->comm) return;
    devcomm_share(d->comm, d->wbf + a, sizeof(uint16_t), d->n_params, a, b, st);
    size_t c = 0;
    for (int r = 0; r < d->n_rep_r; c += d->rep_len[r++]) { // rep's range r: the part this rank owns
        size_t ra, rb, sa, sb; // from its slice, then the owners' parts of [a, b) to every rank
        dist_part(&ra, &rb, d->rep_off[r], d->rep_off[r] + d->rep_len[r], lo, hi);
        if (ra < rb)
            CUDA_CHECK(cudaMemcpyAsync(d->rep + c + (ra - d->rep_off[r]), d->params + (ra - d->own_lo),
                                       (rb - ra) * sizeof(float), cudaMemcpyDeviceToDevice, st));
        dist_part(&sa, &sb, d->rep_off[r], d->rep_off[r] + d->rep_len[r], a, b);
        if (sa < sb) devcomm_share(d->comm, d->rep + c + (sa - d->rep_off[r]), sizeof(float), d->n_params, sa, sb, st);
    }
    devcomm_wait(d->comm, st);
}

BEST_KAPI void devmodel_share_weights(DevModel *d, size_t a, size_t b) { share_weights(d, a, b, 1); }

BEST_KAPI void devmodel_adamw(DevModel *d, const AdamWHyper *h, int t, int masked) {
    devmodel_profile_mark(d, DP_OPTIM, 0);
    size_t lo = d->own_lo, n = d->own_hi - d->own_lo;
    adamw_update_cuda(d->params, d->adam_m, d->adam_v, d->grads + lo, masked ? d->mask : NULL, h, t, n,
                      d->ctx->stream);
    devmodel_share_weights(d, 0, d->n_params); // each rank updated its slice: all of them to all
}

// --- the one-pass optimizer (adamw.cu's adamw_fused_cuda) ---------------------------------

BEST_KAPI void devmodel_grad_sumsq_start(DevModel *d, int masked) {
    devmodel_profile_mark(d, DP_CLIP, 0);
    size_t n = d->own_hi - d->own_lo; // 0: a rank with an empty slice, whose sum is 0
    reduce_into(d, SLOT_SUMSQ, d->grads + d->own_lo, masked ? d->mask : NULL, n, RED_SUMSQ, 0);
}

BEST_KAPI double devmodel_grad_sumsq_get(DevModel *d) { return fetch_scalar(d, SLOT_SUMSQ); }

BEST_KAPI void devmodel_grad_sumsq_put(DevModel *d, double total) {
    d->sumsq_total = total; // (a copy from pageable memory is staged before the call returns)
    CUDA_CHECK(cudaMemcpyAsync(d->scalars + SLOT_SUMSQ, &d->sumsq_total, sizeof(double), cudaMemcpyHostToDevice,
                               d->ctx->stream));
}

BEST_KAPI void devmodel_optimize(DevModel *d, const AdamWHyper *h, int t, int masked, double max_norm, int vec) {
    devmodel_profile_mark(d, DP_OPTIM, 0);
    size_t lo = d->own_lo, n = d->own_hi - d->own_lo;
    adamw_fused_cuda(d->params, d->adam_m, d->adam_v, d->wbf + lo, d->grads + lo, masked ? d->mask : NULL,
                     d->scalars + SLOT_SUMSQ, max_norm, h, t, n, vec, d->ctx->stream);
    share_weights(d, 0, d->n_params, 0); // the bf16 copy of the slice is written: to every rank
}

BEST_KAPI void devmodel_sync(DevModel *d) { CUDA_CHECK(cudaStreamSynchronize(d->ctx->stream)); }

BEST_KAPI double devmodel_sparsity(DevModel *d) {
    size_t total = 0;
    int any = 0;
    for (int r = 0; r < d->n_pr; r++) {
        size_t a, b; // this rank's part
        dist_part(&a, &b, d->pr_off[r], d->pr_off[r] + d->pr_len[r], d->own_lo, d->own_hi);
        if (a < b) reduce_into(d, SLOT_ZEROS, d->params + (a - d->own_lo), NULL, b - a, RED_ZEROS, any++ > 0);
        total += d->pr_len[r];
    }
    double zeros = any ? fetch_scalar(d, SLOT_ZEROS) : 0.0;
    if (d->comm) dist_sum_f64(&zeros, 1); // every rank's slice
    return total ? zeros / (double)total : 0.0;
}
