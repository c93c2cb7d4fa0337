// decode_fused.h: one kernel for the products of a decode step that share an input
// (batch 1, one token), on a CUDA device: the input staged once per block in shared
// memory as the bf16 operand the unfused path would make (after its RMSNorm, or rounded
// as it is), then every row of up to three weights:
//   q|k|v     norm + three products                       (3 launches + a norm, a widen)
//   o_proj    the operand's rounding + product + residual (a cast, a widen, a product)
//   gate|up   norm + both products + SwiGLU, h in bf16 and fp32 (2 products + 3 kernels)
//   down      product + residual (a stored weight's residual copy)
// and, after q|k|v, one kernel for Qwen3's q/k norms, RoPE and the cache's new row
// (decode_rope_append_cuda: 2 norms, 2 RoPE launches and an append before).
// Each output is the same bits as the unfused kernels' on the same weights: the norm is
// summed by a block as rmsnorm_forward_kernel sums it (same threads, same butterfly), a
// row's dot in the order the unfused kernel of its weights takes (gemv_bf16_cuda's, the
// pairs kernel's at the tensor's lanes), x read as the very floats the unfused path's
// widened operand holds. The weights are the folder's bf16 copy (decode_fused_gemv_cuda,
// layers.cu) or a pack's tensors in the pairs layout (pack/spmv.h: devpack_weight_fused).
// BEST_DECODE_FUSE=on turns it on (model.cu); it has NEVER RUN ON A GPU (2026-11-29).
#ifndef BEST_DECODE_FUSED_H
#define BEST_DECODE_FUSED_H

#include <stddef.h>
#include <stdint.h>

#define DECODE_STAGE_MAX 16384 // the widest input a block stages (bf16: 32 KiB of shared memory)
#define DECODE_SEG_MAX 3       // weights a launch

typedef struct DecodeJob {
    const float *x;      // (IC) the input, fp32, device
    const float *norm_w; // (IC) RMSNorm weight: the operand is bf16(rmsnorm(x)); NULL: bf16(x)
    float eps;
    size_t IC;
    int n;               // weights: 1 to DECODE_SEG_MAX (swiglu: 2, gate then up)
    size_t rows[DECODE_SEG_MAX];
    unsigned lanes[DECODE_SEG_MAX];   // lanes a row of W_i: 32, 16, 8 or 4 (set by the launcher)
    float *y[DECODE_SEG_MAX];         // (rows[i]) = res + W_i x' + b (not swiglu)
    const float *b[DECODE_SEG_MAX];   // (rows[i]) or NULL
    const float *res[DECODE_SEG_MAX]; // (rows[i]) or NULL; may be y[i]
    int swiglu;          // h = silu(gate x' + b0) * (up x' + b1) (rows[0] = rows[1]) into:
    uint16_t *hb;        // (rows[0]) h rounded to bf16
    float *hr;           // (rows[0]) hb as floats
} DecodeJob;

// q and k of one decode step after their products (decode_rope_append_cuda), a block a
// head: Qwen3's RMSNorm of each head (q_norm, k_norm; summed as rmsnorm_forward_kernel sums
// a row of HD), RoPE at *pos, k and v into the cache's row *pos (rounded to bf16 for a bf16
// cache): rmsnorm_forward_cuda, rope_at_cuda and kv_append(_bf16)_cuda's bits.
typedef struct RopeAppendJob {
    float *q, *k;                 // (NH, HD), (KV, HD): the rotated (normed) heads
    const float *qraw, *kraw;     // their products; without norms q and k themselves (in place)
    const float *q_norm, *k_norm; // (HD) Qwen3's weights, or NULL for both (no norm)
    float eps;
    const float *v;               // (KV, HD)
    void *kc, *vc;                // the layer's cache (T, KV, HD): floats, or bf16 bits (kv_bf16)
    int kv_bf16;
    const float *cos, *sin;       // RoPE's tables (T, HD / 2)
    const int32_t *pos;           // (1) device: the step's position
    size_t NH, KV, HD;
} RopeAppendJob;

#ifdef BEST_CUDA // (the emulated tests include the .cu files themselves)
#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st;
// The job with W_i = w[i] (rows[i], IC) bf16 bits, asynchronous on stream: 0, or -1 (no
// launch) when IC is over DECODE_STAGE_MAX.
int decode_fused_gemv_cuda(const DecodeJob *j, const uint16_t *const *w, struct CUstream_st *stream);
void decode_rope_append_cuda(const RopeAppendJob *j, struct CUstream_st *stream);

#ifdef __cplusplus
}
#endif
#endif

#endif
