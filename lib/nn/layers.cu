// layers.cu: the CUDA twins of layers.c's kernels that are not matrix products, fp32
// on device pointers: embedding, RMSNorm, RoPE, SwiGLU, the residual add, the masked
// fill, the cast of fp32 to bf16 (the matrix products' operands), the cross-entropy of a
// chunk of rows of logits (softmax, loss and dlogits in one pass over the chunk), and the
// bias gradient of the matrix products (a column sum: the products themselves are cuBLASLt
// calls in matmul.cu, which the emulator cannot run). Shapes and semantics are
// layers.h's; each twin is declared there under BEST_CUDA.
//
// Each thread's arithmetic is kernel_math.h's, the same functions the CPU path calls,
// so a kernel differs from its CPU twin only in how rows are summed: a block sums a row
// in float by warp shuffles (cuda_reduce.cuh), the CPU in double and in order. No kernel
// uses atomics on floats: every output is written by one thread in a fixed order, so
// the results are the same bits on every run (the embedding and RMSNorm weight
// gradients included; docs/cuda.md says how).
//
// Written so that tests/cuda_emu.h can run it on the CPU (tests/test_kernels.cpp
// includes this file): launches go through LAUNCH, the API's linkage through BEST_KAPI,
// shared memory is static (no dynamic shared memory), every __syncthreads is reached by
// all threads of the block.
//
// Not here: matrix products (matmul.cu) and attention, the loop that calls these (the
// model's device step, to come).
#include "base/cuda.h"        // defines: CUDA_CHECK, LAUNCH, BEST_KAPI
#include "nn/cuda_reduce.cuh" // defines: block_sum, block_lse
#include "nn/decode_fused.cuh" // defines: decode_fused_kernel, DecodeJob
#include "nn/kernel_math.h" // defines: km_* (per element), km_blocks, km_row_threads
#include "nn/layers.h"      // defines: the _cuda prototypes (with BEST_CUDA)

#define ROW_THREADS_MAX KM_ROW_THREADS_MAX
#define XENT_THREADS_MAX 1024

// for (i over [0, n) in grid-stride steps): the loop of the elementwise kernels
#define GRID_STRIDE(i, n)                                                                  \
    for (size_t i = km_thread_index(blockIdx.x, blockDim.x, threadIdx.x); i < (n);          \
         i += (size_t)gridDim.x * blockDim.x)

// --- embedding ------------------------------------------------------------------------

// x (N, C) = rows tokens (N) of embed (V, C).
static __global__ void embedding_forward_kernel(float *x, const int32_t *tokens,
                                                const float *embed, size_t N, size_t C) {
    GRID_STRIDE(i, N * C) x[i] = embed[(size_t)tokens[i / C] * C + i % C];
}

// dembed (V, C) += dx rows at tokens. Deterministic without atomics: thread (c, bucket)
// owns channel c of every token t with t % EMBED_BUCKETS == bucket and adds their rows
// in row order, as the CPU does (the same bits). Each thread scans all N tokens; a
// token that fills the batch makes one bucket slow, never wrong.
#define EMBED_BUCKETS 64
static __global__ void embedding_backward_kernel(float *dembed, const float *dx,
                                                 const int32_t *tokens, size_t N, size_t C) {
    size_t c = km_thread_index(blockIdx.x, blockDim.x, threadIdx.x);
    if (c >= C) return; // no barriers here: leaving early is fine
    for (size_t n = 0; n < N; n++) {
        int32_t t = tokens[n];
        if ((unsigned)t % EMBED_BUCKETS == blockIdx.y) dembed[(size_t)t * C + c] += dx[n * C + c];
    }
}

// dembed rows of the U tokens of index (embedding_index's) += their dx rows in row order:
// block (u, chunk) owns channels chunk * blockDim.x + threadIdx.x of token u.
static __global__ void embedding_backward_index_kernel(float *dembed, const float *dx, const int32_t *index,
                                                       size_t U, size_t C) {
    size_t u = blockIdx.x, c = km_thread_index(blockIdx.y, blockDim.x, threadIdx.x);
    if (c >= C) return;
    const int32_t *off = index + U, *rows = index + 2 * U + 1;
    float *d = dembed + (size_t)index[u] * C + c;
    float acc = *d;
    for (int32_t i = off[u]; i < off[u + 1]; i++) acc += dx[(size_t)rows[i] * C + c];
    *d = acc;
}

BEST_KAPI void embedding_backward_index_cuda(float *dembed, const float *dx, const int32_t *index, size_t U,
                                             size_t N, size_t C, cudaStream_t stream) {
    if (N * C == 0 || U == 0) return;
    unsigned threads = km_row_threads(C, 256); // (U <= N rows: far inside grid.x's 2^31 - 1; C / 256 inside y's 65535)
    dim3 grid((unsigned)U, km_blocks(C, threads, 65535u));
    LAUNCH(embedding_backward_index_kernel, grid, threads, stream, dembed, dx, index, U, C);
    CUDA_CHECK(cudaGetLastError());
}

// y (OC) = res + W x + b (res NULL: none; res may be y) for one row x (IC, fp32) and W
// (OC, IC) bf16: a warp per
// row, the lanes taking 16 bytes (8 weights) at a time when IC is a multiple of 8 (every
// row then starts 16-byte aligned, as W does), else one weight; x through L1; a butterfly
// sum. Batch-1 decoding's dense products (BEST_DECODE_GEMV=own) without cuBLASLt.
static __global__ void gemv_bf16_kernel(float *y, const float *x, const uint16_t *w, const float *b,
                                        const float *res, size_t OC, size_t IC) {
    unsigned lane = threadIdx.x % 32;
    size_t warps = (size_t)gridDim.x * blockDim.x / 32;
    for (size_t r = km_thread_index(blockIdx.x, blockDim.x, threadIdx.x) / 32; r < OC; r += warps) {
        const uint16_t *row = w + r * IC;
        float s = 0;
        if (IC % 8 == 0) {
            const uint4 *v = (const uint4 *)row;
            for (size_t c = lane; c < IC / 8; c += 32) {
                uint4 u = v[c];
                uint32_t q[4] = {u.x, u.y, u.z, u.w};
                const float *xc = x + 8 * c;
                for (int i = 0; i < 4; i++) {
                    s += km_float_from_bf16((uint16_t)(q[i] & 0xffffu)) * xc[2 * i];
                    s += km_float_from_bf16((uint16_t)(q[i] >> 16)) * xc[2 * i + 1];
                }
            }
        } else {
            for (size_t c = lane; c < IC; c += 32) s += km_float_from_bf16(row[c]) * x[c];
        }
        for (int d = 16; d > 0; d >>= 1) s += __shfl_xor_sync(0xffffffffu, s, d);
        if (lane == 0) {
            if (res) s = res[r] + s;
            if (b) s += b[r];
            y[r] = s;
        }
    }
}

BEST_KAPI void gemv_bf16_cuda(float *y, const float *x, const uint16_t *w, const float *b, const float *res,
                              size_t OC, size_t IC, cudaStream_t stream) {
    if (OC == 0) return;
    LAUNCH(gemv_bf16_kernel, km_blocks(OC, KM_THREADS / 32, KM_GRID_CAP), KM_THREADS, stream, y, x, w, b, res, OC,
           IC);
    CUDA_CHECK(cudaGetLastError());
}

// decode_fused.h's source of the folder's bf16 rows: gemv_bf16_kernel's row dot (a warp a
// row, 8 weights a lane at a time when IC is a multiple of 8), x from the staged operand.
struct GemvSrc {
    const uint16_t *w[DECODE_SEG_MAX];
    size_t IC;
    __device__ float dot(int g, size_t r, unsigned sub, unsigned L, const uint16_t *xs) const {
        const uint16_t *row = w[g] + r * IC;
        float s = 0;
        if (IC % 8 == 0) {
            const uint4 *v = (const uint4 *)row, *xv = (const uint4 *)xs;
            for (size_t c = sub; c < IC / 8; c += L) {
                uint4 u = v[c], xu = xv[c];
                uint32_t q[4] = {u.x, u.y, u.z, u.w}, xq[4] = {xu.x, xu.y, xu.z, xu.w};
                for (int i = 0; i < 4; i++) {
                    s += km_float_from_bf16((uint16_t)(q[i] & 0xffffu)) * km_float_from_bf16((uint16_t)(xq[i] & 0xffffu));
                    s += km_float_from_bf16((uint16_t)(q[i] >> 16)) * km_float_from_bf16((uint16_t)(xq[i] >> 16));
                }
            }
        } else {
            for (size_t c = sub; c < IC; c += L) s += km_float_from_bf16(row[c]) * km_float_from_bf16(xs[c]);
        }
        return s;
    }
};

BEST_KAPI int decode_fused_gemv_cuda(const DecodeJob *j, const uint16_t *const *w, cudaStream_t stream) {
    if (j->IC > DECODE_STAGE_MAX) return -1;
    DecodeJob job = *j;
    GemvSrc src;
    src.IC = j->IC;
    for (int g = 0; g < DECODE_SEG_MAX; g++) {
        src.w[g] = g < j->n ? w[g] : NULL;
        job.lanes[g] = 32;
    }
    unsigned threads = decode_fused_threads(j->IC);
    LAUNCH(decode_fused_kernel<GemvSrc>, decode_fused_blocks(&job, threads), threads, stream, job, src);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

// *out = the greedy token of logits x (n): the first index of the largest value, NaNs never
// chosen, and 0 when x[0] is NaN (eval.c's sample_token at temperature 0: best = 0, then
// each later value that is > the best's). One block of ARGMAX_THREADS: each thread the
// first largest of its strided share, then a tree over shared memory (the larger value,
// the lower index on a tie; an empty share, index -1, loses).
#define ARGMAX_THREADS 1024
static __global__ void argmax_kernel(int32_t *out, const float *x, size_t n) {
    __shared__ float bv[ARGMAX_THREADS];
    __shared__ int32_t bi[ARGMAX_THREADS];
    unsigned t = threadIdx.x;
    float v = 0;
    int32_t i = -1;
    for (size_t k = t; k < n; k += blockDim.x)
        if (x[k] == x[k] && (i < 0 || x[k] > v)) v = x[k], i = (int32_t)k; // (x[k] == x[k]: not NaN)
    bv[t] = v, bi[t] = i;
    __syncthreads();
    for (unsigned h = blockDim.x / 2; h > 0; h >>= 1) {
        if (t < h) {
            float w = bv[t + h];
            int32_t j = bi[t + h];
            if (j >= 0 && (bi[t] < 0 || w > bv[t] || (w == bv[t] && j < bi[t]))) bv[t] = w, bi[t] = j;
        }
        __syncthreads();
    }
    if (t == 0) *out = x[0] != x[0] || bi[0] < 0 ? 0 : bi[0];
}

BEST_KAPI void argmax_cuda(int32_t *out, const float *x, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    LAUNCH(argmax_kernel, 1, ARGMAX_THREADS, stream, out, x, n);
    CUDA_CHECK(cudaGetLastError());
}

BEST_KAPI void embedding_forward_cuda(float *x, const int32_t *tokens, const float *embed,
                                      size_t N, size_t C, cudaStream_t stream) {
    if (N * C == 0) return;
    LAUNCH(embedding_forward_kernel, km_blocks(N * C, KM_THREADS, KM_GRID_CAP), KM_THREADS,
           stream, x, tokens, embed, N, C);
    CUDA_CHECK(cudaGetLastError());
}

BEST_KAPI void embedding_backward_cuda(float *dembed, const float *dx, const int32_t *tokens,
                                       size_t N, size_t C, cudaStream_t stream) {
    if (N * C == 0) return;
    unsigned threads = km_row_threads(C, 256);
    dim3 grid(km_blocks(C, threads, 0xffffffffu), EMBED_BUCKETS);
    LAUNCH(embedding_backward_kernel, grid, threads, stream, dembed, dx, tokens, N, C);
    CUDA_CHECK(cudaGetLastError());
}

// --- RMSNorm ----------------------------------------------------------------------------
// A block per row (rows in grid-stride steps), C spread over its threads.

// One output element: fp32 as is, or its bf16 bits (a product's operand, with no cast pass:
// the bits of cast_bf16_cuda after the fp32 kernel).
static __device__ __forceinline__ void store_out(float *p, float v) { *p = v; }
static __device__ __forceinline__ void store_out(uint16_t *p, float v) { *p = km_bf16_from_float(v); }

template <typename Out>
static __global__ void rmsnorm_forward_kernel(Out *y, float *rstd, const float *x,
                                              const float *w, size_t N, size_t C, float eps) {
    for (size_t n = blockIdx.x; n < N; n += gridDim.x) {
        const float *xr = x + n * C;
        float ss = 0.0f;
        for (size_t c = threadIdx.x; c < C; c += blockDim.x) ss += xr[c] * xr[c];
        float r = km_rmsnorm_rstd(block_sum(ss) / (float)C, eps);
        if (threadIdx.x == 0) rstd[n] = r;
        for (size_t c = threadIdx.x; c < C; c += blockDim.x) store_out(y + n * C + c, km_rmsnorm_y(xr[c], r, w[c]));
    }
}

// dx (N, C) = or += the input gradient (dx may be dy: each thread reads its dy before it
// writes the same element, and the row's dot is complete before any write).
static __global__ void rmsnorm_backward_dx_kernel(float *dx, const float *dy, const float *x,
                                                  const float *rstd, const float *w, size_t N,
                                                  size_t C, int dx_acc) {
    for (size_t n = blockIdx.x; n < N; n += gridDim.x) {
        const float *dyr = dy + n * C, *xr = x + n * C;
        float dot = 0.0f;
        for (size_t c = threadIdx.x; c < C; c += blockDim.x) dot += w[c] * dyr[c] * xr[c];
        float r = rstd[n];
        float coef = km_rmsnorm_dcoef((double)block_sum(dot), r, C);
        for (size_t c = threadIdx.x; c < C; c += blockDim.x) {
            float g = km_rmsnorm_dx(dyr[c], xr[c], w[c], r, coef);
            dx[n * C + c] = dx_acc ? dx[n * C + c] + g : g;
        }
    }
}

// part (chunks, C): chunk k's sum over its rows of dy * x * rstd, per channel, in row order.
static __global__ void rmsnorm_dw_part_kernel(float *part, const float *dy, const float *x,
                                              const float *rstd, size_t N, size_t C,
                                              size_t rows_per_chunk) {
    size_t c = km_thread_index(blockIdx.x, blockDim.x, threadIdx.x);
    if (c >= C) return;
    size_t lo = blockIdx.y * rows_per_chunk, hi = lo + rows_per_chunk < N ? lo + rows_per_chunk : N;
    float acc = 0.0f;
    for (size_t n = lo; n < hi; n++) acc += dy[n * C + c] * x[n * C + c] * rstd[n];
    part[blockIdx.y * C + c] = acc;
}

// out (C) += the chunks' sums of part (chunks, C), in chunk order (the RMSNorm weight
// gradient, the bias gradient).
static __global__ void chunks_sum_kernel(float *out, const float *part, size_t chunks, size_t C) {
    GRID_STRIDE(c, C) {
        float acc = 0.0f;
        for (size_t k = 0; k < chunks; k++) acc += part[k * C + c];
        out[c] += acc;
    }
}

BEST_KAPI void rmsnorm_forward_cuda(float *y, float *rstd, const float *x, const float *w,
                                    size_t N, size_t C, float eps, cudaStream_t stream) {
    if (N * C == 0) return;
    LAUNCH(rmsnorm_forward_kernel<float>, km_blocks(N, 1, KM_GRID_CAP), km_row_threads(C, ROW_THREADS_MAX),
           stream, y, rstd, x, w, N, C, eps);
    CUDA_CHECK(cudaGetLastError());
}

BEST_KAPI void rmsnorm_forward_bf16_cuda(uint16_t *y, float *rstd, const float *x, const float *w, size_t N,
                                         size_t C, float eps, cudaStream_t stream) {
    if (N * C == 0) return;
    LAUNCH(rmsnorm_forward_kernel<uint16_t>, km_blocks(N, 1, KM_GRID_CAP), km_row_threads(C, ROW_THREADS_MAX),
           stream, y, rstd, x, w, N, C, eps);
    CUDA_CHECK(cudaGetLastError());
}

BEST_KAPI void rmsnorm_backward_cuda(float *dx, float *dw, float *scratch, const float *dy,
                                     const float *x, const float *rstd, const float *w,
                                     size_t N, size_t C, int dx_acc, cudaStream_t stream) {
    if (N * C == 0) return;
    // dw first: it reads dy, which dx may overwrite (as on the CPU)
    unsigned chunks = km_rmsnorm_dw_chunks(N), threads = km_row_threads(C, 256);
    size_t rows_per_chunk = (N + chunks - 1) / chunks;
    dim3 grid(km_blocks(C, threads, 0xffffffffu), chunks);
    LAUNCH(rmsnorm_dw_part_kernel, grid, threads, stream, scratch, dy, x, rstd, N, C, rows_per_chunk);
    CUDA_CHECK(cudaGetLastError());
    LAUNCH(chunks_sum_kernel, km_blocks(C, KM_THREADS, KM_GRID_CAP), KM_THREADS, stream, dw,
           scratch, (size_t)chunks, C);
    CUDA_CHECK(cudaGetLastError());
    LAUNCH(rmsnorm_backward_dx_kernel, km_blocks(N, 1, KM_GRID_CAP),
           km_row_threads(C, ROW_THREADS_MAX), stream, dx, dy, x, rstd, w, N, C, dx_acc);
    CUDA_CHECK(cudaGetLastError());
}

// --- the bias gradient: db (OC) += column sums of dy (N, OC) ----------------------------------
// As the RMSNorm weight gradient: chunks of rows summed per column in row order into
// scratch, then the chunks in order. Deterministic; the CPU sums in double (colsum_add).

// part (chunks, C): chunk k's column sums of dy over its rows, in row order.
static __global__ void colsum_part_kernel(float *part, const float *dy, size_t N, size_t C,
                                          size_t rows_per_chunk) {
    size_t c = km_thread_index(blockIdx.x, blockDim.x, threadIdx.x);
    if (c >= C) return;
    size_t lo = blockIdx.y * rows_per_chunk, hi = lo + rows_per_chunk < N ? lo + rows_per_chunk : N;
    float acc = 0.0f;
    for (size_t n = lo; n < hi; n++) acc += dy[n * C + c];
    part[blockIdx.y * C + c] = acc;
}

BEST_KAPI void bias_backward_cuda(float *db, float *scratch, const float *dy, size_t N, size_t OC,
                                  cudaStream_t stream) {
    if (N * OC == 0) return;
    unsigned chunks = km_colsum_chunks(N), threads = km_row_threads(OC, 256);
    size_t rows_per_chunk = (N + chunks - 1) / chunks;
    dim3 grid(km_blocks(OC, threads, 0xffffffffu), chunks);
    LAUNCH(colsum_part_kernel, grid, threads, stream, scratch, dy, N, OC, rows_per_chunk);
    CUDA_CHECK(cudaGetLastError());
    LAUNCH(chunks_sum_kernel, km_blocks(OC, KM_THREADS, KM_GRID_CAP), KM_THREADS, stream, db,
           scratch, (size_t)chunks, OC);
    CUDA_CHECK(cudaGetLastError());
}

// --- RoPE -------------------------------------------------------------------------------
// A thread per (b, t, h, i < HD/2) pair, in place; sign -1 rotates back (the backward).

static __global__ void rope_kernel(float *x, const float *cos, const float *sin, size_t B,
                                   size_t T, size_t H, size_t HD, float sign) {
    size_t half = HD / 2;
    GRID_STRIDE(p, B * T * H * half) {
        size_t i = p % half, bth = p / half, t = bth / H % T; // bth = (b, t, h) flat
        float *v = x + bth * HD;
        km_rope_pair(v + i, v + i + half, cos[t * half + i], sign * sin[t * half + i]);
    }
}

static void rope_launch(float *x, const float *cos, const float *sin, size_t B, size_t T,
                        size_t H, size_t HD, float sign, cudaStream_t stream) {
    size_t n = B * T * H * (HD / 2);
    if (n == 0) return;
    LAUNCH(rope_kernel, km_blocks(n, KM_THREADS, KM_GRID_CAP), KM_THREADS, stream, x, cos, sin,
           B, T, H, HD, sign);
    CUDA_CHECK(cudaGetLastError());
}

BEST_KAPI void rope_forward_cuda(float *x, const float *cos, const float *sin, size_t B,
                                 size_t T, size_t H, size_t HD, cudaStream_t stream) {
    rope_launch(x, cos, sin, B, T, H, HD, 1.0f, stream);
}

BEST_KAPI void rope_backward_cuda(float *dx, const float *cos, const float *sin, size_t B,
                                  size_t T, size_t H, size_t HD, cudaStream_t stream) {
    rope_launch(dx, cos, sin, B, T, H, HD, -1.0f, stream);
}

// --- positions in device memory: RoPE row by row (decoding, packed rows), the keys/values cache --

static __global__ void rope_at_kernel(float *x, const float *cos, const float *sin, const int32_t *pos,
                                      size_t N, size_t H, size_t HD) {
    size_t half = HD / 2;
    GRID_STRIDE(p, N * H * half) {
        size_t i = p % half, t = (size_t)pos[p / half / H];
        float *v = x + p / half * HD;
        km_rope_pair(v + i, v + i + half, cos[t * half + i], sin[t * half + i]);
    }
}

template <typename Out>
static __global__ void kv_append_kernel(Out *kc, Out *vc, const float *k, const float *v, const int32_t *pos,
                                        size_t KVD) {
    size_t at = (size_t)*pos * KVD;
    GRID_STRIDE(i, KVD) {
        store_out(kc + at + i, k[i]);
        store_out(vc + at + i, v[i]);
    }
}

BEST_KAPI void rope_at_cuda(float *x, const float *cos, const float *sin, const int32_t *pos, size_t N, size_t H,
                            size_t HD, cudaStream_t stream) {
    size_t n = N * H * (HD / 2);
    if (n == 0) return;
    LAUNCH(rope_at_kernel, km_blocks(n, KM_THREADS, KM_GRID_CAP), KM_THREADS, stream, x, cos, sin, pos, N, H, HD);
    CUDA_CHECK(cudaGetLastError());
}

BEST_KAPI void kv_append_cuda(float *kc, float *vc, const float *k, const float *v, const int32_t *pos, size_t KVD,
                              cudaStream_t stream) {
    if (KVD == 0) return;
    LAUNCH(kv_append_kernel<float>, km_blocks(KVD, KM_THREADS, KM_GRID_CAP), KM_THREADS, stream, kc, vc, k, v, pos,
           KVD);
    CUDA_CHECK(cudaGetLastError());
}

BEST_KAPI void kv_append_bf16_cuda(uint16_t *kc, uint16_t *vc, const float *k, const float *v, const int32_t *pos,
                                   size_t KVD, cudaStream_t stream) {
    if (KVD == 0) return;
    LAUNCH(kv_append_kernel<uint16_t>, km_blocks(KVD, KM_THREADS, KM_GRID_CAP), KM_THREADS, stream, kc, vc, k, v,
           pos, KVD);
    CUDA_CHECK(cudaGetLastError());
}

// decode_fused.h's RopeAppendJob: block b a head (q heads, then k heads with their v),
// its threads as rmsnorm_forward_kernel's for a row of HD; a thread takes whole pairs
// (i, i + HD/2), read before they are written (so q may be qraw without norms).
static __global__ void decode_rope_append_kernel(RopeAppendJob j) {
    size_t b = blockIdx.x, HD = j.HD, half = HD / 2, t = (size_t)*j.pos;
    int is_q = b < j.NH;
    size_t h = is_q ? b : b - j.NH;
    const float *src = (is_q ? j.qraw : j.kraw) + h * HD, *w = is_q ? j.q_norm : j.k_norm;
    float *dst = (is_q ? j.q : j.k) + h * HD;
    float r = 0.0f;
    if (w) {
        float ss = 0.0f;
        for (size_t c = threadIdx.x; c < HD; c += blockDim.x) ss += src[c] * src[c];
        r = km_rmsnorm_rstd(block_sum(ss) / (float)HD, j.eps);
    }
    for (size_t i = threadIdx.x; i < half; i += blockDim.x) {
        float lo = src[i], hi = src[i + half];
        if (w) lo = km_rmsnorm_y(lo, r, w[i]), hi = km_rmsnorm_y(hi, r, w[i + half]);
        km_rope_pair(&lo, &hi, j.cos[t * half + i], j.sin[t * half + i]);
        dst[i] = lo, dst[i + half] = hi;
        if (is_q) continue;
        size_t at = (t * j.KV + h) * HD;
        if (j.kv_bf16) {
            store_out((uint16_t *)j.kc + at + i, lo), store_out((uint16_t *)j.kc + at + i + half, hi);
        } else {
            store_out((float *)j.kc + at + i, lo), store_out((float *)j.kc + at + i + half, hi);
        }
    }
    if (is_q) return;
    for (size_t c = threadIdx.x; c < HD; c += blockDim.x) {
        size_t at = (t * j.KV + h) * HD + c;
        if (j.kv_bf16) store_out((uint16_t *)j.vc + at, j.v[h * HD + c]);
        else store_out((float *)j.vc + at, j.v[h * HD + c]);
    }
}

BEST_KAPI void decode_rope_append_cuda(const RopeAppendJob *j, cudaStream_t stream) {
    if (j->NH + j->KV == 0 || j->HD == 0) return;
    LAUNCH(decode_rope_append_kernel, (unsigned)(j->NH + j->KV), km_row_threads(j->HD, ROW_THREADS_MAX), stream, *j);
    CUDA_CHECK(cudaGetLastError());
}

// --- SwiGLU, residual, masked fill, bf16 cast: elementwise ----------------------------------------------

template <typename Out>
static __global__ void swiglu_forward_kernel(Out *h, const float *gate, const float *up, size_t n) {
    GRID_STRIDE(i, n) store_out(h + i, km_swiglu_forward(gate[i], up[i]));
}

template <typename Out>
static __global__ void swiglu_backward_kernel(Out *dgate, Out *dup, const float *dh,
                                              const float *gate, const float *up, size_t n) {
    GRID_STRIDE(i, n) {
        float dg, du;
        km_swiglu_backward(&dg, &du, dh[i], gate[i], up[i]);
        store_out(dgate + i, dg);
        store_out(dup + i, du);
    }
}

static __global__ void residual_kernel(float *out, const float *a, const float *b, size_t n) {
    GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

static __global__ void masked_fill_kernel(float *x, const uint8_t *mask, float value, size_t n) {
    GRID_STRIDE(i, n) if (!mask[i]) x[i] = value;
}

static __global__ void cast_bf16_kernel(uint16_t *out, const float *in, size_t n) {
    GRID_STRIDE(i, n) out[i] = km_bf16_from_float(in[i]);
}

static __global__ void widen_bf16_kernel(float *out, const uint16_t *in, size_t n) {
    GRID_STRIDE(i, n) out[i] = km_float_from_bf16(in[i]);
}

BEST_KAPI void swiglu_forward_cuda(float *h, const float *gate, const float *up, size_t n,
                                   cudaStream_t stream) {
    if (n == 0) return;
    LAUNCH(swiglu_forward_kernel<float>, km_blocks(n, KM_THREADS, KM_GRID_CAP), KM_THREADS, stream, h,
           gate, up, n);
    CUDA_CHECK(cudaGetLastError());
}

BEST_KAPI void swiglu_forward_bf16_cuda(uint16_t *h, const float *gate, const float *up, size_t n,
                                        cudaStream_t stream) {
    if (n == 0) return;
    LAUNCH(swiglu_forward_kernel<uint16_t>, km_blocks(n, KM_THREADS, KM_GRID_CAP), KM_THREADS, stream, h,
           gate, up, n);
    CUDA_CHECK(cudaGetLastError());
}

BEST_KAPI void swiglu_backward_cuda(float *dgate, float *dup, const float *dh, const float *gate,
                                    const float *up, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    LAUNCH(swiglu_backward_kernel<float>, km_blocks(n, KM_THREADS, KM_GRID_CAP), KM_THREADS, stream,
           dgate, dup, dh, gate, up, n);
    CUDA_CHECK(cudaGetLastError());
}

BEST_KAPI void swiglu_backward_bf16_cuda(uint16_t *dgate, uint16_t *dup, const float *dh, const float *gate,
                                         const float *up, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    LAUNCH(swiglu_backward_kernel<uint16_t>, km_blocks(n, KM_THREADS, KM_GRID_CAP), KM_THREADS, stream,
           dgate, dup, dh, gate, up, n);
    CUDA_CHECK(cudaGetLastError());
}

BEST_KAPI void residual_forward_cuda(float *out, const float *a, const float *b, size_t n,
                                     cudaStream_t stream) {
    if (n == 0) return;
    LAUNCH(residual_kernel, km_blocks(n, KM_THREADS, KM_GRID_CAP), KM_THREADS, stream, out, a, b, n);
    CUDA_CHECK(cudaGetLastError());
}

BEST_KAPI void masked_fill_cuda(float *x, const uint8_t *mask, float value, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    LAUNCH(masked_fill_kernel, km_blocks(n, KM_THREADS, KM_GRID_CAP), KM_THREADS, stream, x, mask, value, n);
    CUDA_CHECK(cudaGetLastError());
}

BEST_KAPI void cast_bf16_cuda(uint16_t *out, const float *in, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    LAUNCH(cast_bf16_kernel, km_blocks(n, KM_THREADS, KM_GRID_CAP), KM_THREADS, stream, out, in, n);
    CUDA_CHECK(cudaGetLastError());
}

BEST_KAPI void widen_bf16_cuda(float *out, const uint16_t *in, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    LAUNCH(widen_bf16_kernel, km_blocks(n, KM_THREADS, KM_GRID_CAP), KM_THREADS, stream, out, in, n);
    CUDA_CHECK(cudaGetLastError());
}

// --- cross-entropy of a chunk of rows -------------------------------------------------------
// A block per row: one pass of online log-sum-exp over the row (each thread its strided
// share, then merged over the block), the loss, then a second pass writing dlogits.
// The target's logit is read before the block's first barrier, so that writing dlogits
// over logits (in place) cannot clobber it first.
static __global__ void crossentropy_chunk_kernel(float *dlogits, float *nll, float *lse,
                                                 const float *logits, const int32_t *targets,
                                                 float scale, size_t N, size_t V) {
    for (size_t n = blockIdx.x; n < N; n += gridDim.x) {
        const float *z = logits + n * V;
        int32_t t = targets[n];
        float zt = t >= 0 ? z[t] : 0.0f;
        float m = -INFINITY, s = 0.0f;
        for (size_t j = threadIdx.x; j < V; j += blockDim.x) km_lse_step(&m, &s, z[j]);
        block_lse(&m, &s);
        float l = km_lse_value(m, s);
        if (threadIdx.x == 0) {
            nll[n] = t >= 0 ? l - zt : 0.0f;
            if (lse) lse[n] = l;
        }
        if (!dlogits) continue;
        float *d = dlogits + n * V;
        for (size_t j = threadIdx.x; j < V; j += blockDim.x)
            d[j] = t >= 0 ? km_xent_dlogit(z[j], l, scale, j == (size_t)t) : 0.0f;
    }
}

BEST_KAPI void crossentropy_chunk_cuda(float *dlogits, float *nll, float *lse, const float *logits,
                                       const int32_t *targets, float scale, size_t N, size_t V,
                                       cudaStream_t stream) {
    if (N * V == 0) return;
    LAUNCH(crossentropy_chunk_kernel, km_blocks(N, 1, KM_GRID_CAP),
           km_row_threads(V, XENT_THREADS_MAX), stream, dlogits, nll, lse, logits, targets, scale,
           N, V);
    CUDA_CHECK(cudaGetLastError());
}
