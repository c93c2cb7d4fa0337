// layers.h: the layer kernels of a LLaMA / Qwen3 decoder on the CPU, each a forward
// and a backward, fp32 throughout.
//
// Every kernel works on flat row-major arrays whose shapes are given in the comment
// next to it; N = B*T rows of tokens. Matrix products go to BLAS (OpenBLAS), each cut
// into slices of its output across OpenMP threads with OpenBLAS itself kept to one
// thread (layers.c says why); the other kernels are OpenMP loops. Backward kernels ADD
// into parameter gradients (so micro-batches accumulate) and overwrite or add into
// activation gradients as each one says. Reductions over rows (weight and bias
// gradients, the loss) run in a fixed order, so results do not depend on the number
// of threads except inside BLAS.
//
// Not here: which kernel runs when, buffers and the parameter layout (model.h),
// the optimizer (adamw.h).
#ifndef BEST_LAYERS_H
#define BEST_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus // the CUDA twins (.cu) and the C++ tests include this
extern "C" {
#endif

// Threads the OpenMP kernels will use (for sizing per-thread scratch).
int layers_threads(void);
// Sets OpenBLAS to one thread (for the whole process: other BLAS callers should slice
// their work the same way). Idempotent; the matmul kernels call it themselves.
void layers_init(void);
// One line naming the BLAS and the threading in effect, for logs.
const char *layers_blas_info(void);

// --- linear: y = x @ w^T + b ------------------------------------------------------

// y (N, OC) = x (N, IC) @ w^T + b; w (OC, IC) as torch.nn.Linear stores it; b (OC) or
// NULL. acc = 1 adds into y instead of overwriting (residual connections).
void matmul_forward(float *y, const float *x, const float *w, const float *b,
                    size_t N, size_t IC, size_t OC, int acc);
// dx (N, IC) = or += dy (N, OC) @ w (dx_acc chooses; dx may be NULL);
// dw (OC, IC) += dy^T @ x; db (OC) += sum of dy's rows (db may be NULL).
void matmul_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                     const float *w, size_t N, size_t IC, size_t OC, int dx_acc);

// --- RMSNorm: y = w * x / sqrt(mean(x^2) + eps) -----------------------------------

// y (N, C), rstd (N) = 1/sqrt(mean(x^2)+eps) kept for the backward; x (N, C); w (C).
void rmsnorm_forward(float *y, float *rstd, const float *x, const float *w,
                     size_t N, size_t C, float eps);
// dx (N, C) = or += (dx_acc) the input gradient; dx may equal dy when dx_acc = 0;
// dw (C) += sum over rows of dy * x * rstd.
void rmsnorm_backward(float *dx, float *dw, const float *dy, const float *x,
                      const float *rstd, const float *w, size_t N, size_t C, int dx_acc);

// --- RoPE, Hugging Face rotate_half layout ------------------------------------------
// Dimension i of a head pairs with i + HD/2 (not 2i with 2i+1 as in Meta's layout):
//   out_i = x_i cos - x_{i+HD/2} sin,   out_{i+HD/2} = x_{i+HD/2} cos + x_i sin.

// cos, sin (T, HD/2): angles (pos0 + t) * theta^(-2i/HD), computed in float like
// transformers' LlamaRotaryEmbedding and llama2.c.
void rope_table(float *cos, float *sin, size_t pos0, size_t T, size_t HD, double theta);
// x (B, T, H, HD) rotated in place; row t uses cos/sin row t.
void rope_forward(float *x, const float *cos, const float *sin,
                  size_t B, size_t T, size_t H, size_t HD);
// dx (B, T, H, HD) in place: the inverse rotation (the Jacobian's transpose).
void rope_backward(float *dx, const float *cos, const float *sin,
                   size_t B, size_t T, size_t H, size_t HD);

// --- causal grouped-query attention -----------------------------------------------
// Query head h reads key/value head h / (NH/KV), as transformers' repeat_kv. Query
// row t sits at position pos0 + t and sees keys 0 .. pos0 + t; softmax scale
// 1/sqrt(HD). The probabilities are not kept: the backward recomputes them from the
// per-row log-sum-exp, so memory stays O(T) per head instead of O(T^2). Work goes by
// blocks of ATT_BLOCK query rows, each block's scores being one BLAS product.
#define ATT_BLOCK 64

// Floats of scratch one thread needs for Tk keys; callers allocate nscratch times that.
size_t attention_scratch(size_t Tk);

// out (B, Tq, NH, HD); lse (B, NH, Tq) or NULL; q (B, Tq, NH, HD); k, v (B, Tk, KV, HD);
// scratch (nscratch, attention_scratch(Tk)): at most nscratch threads take part.
void attention_forward(float *out, float *lse, const float *q, const float *k,
                       const float *v, float *scratch, size_t B, size_t Tq, size_t Tk,
                       size_t pos0, size_t NH, size_t KV, size_t HD, int nscratch);
// Attention over rows of several sequences packed together (sequences that share a
// prefix: best-eval --tasks), in segments of consecutive rows: segment s = seg[4s ..
// 4s+3] = {first row, rows, first row of its prefix, prefix rows}; its rows see the
// prefix's rows, then their own segment's causally (attention_forward's rows with pos0 =
// the prefix's length, the prefix's keys and values in front of the segment's). Queries
// and keys already rotated at their positions. out, q (N, NH, HD); k, v (N, KV, HD);
// scratch (nscratch, attention_packed_scratch(max_keys, HD)), max_keys the most keys of
// a segment (prefix and rows); segments run in parallel, at most nscratch threads. Not
// BLAS products but rows against keys held transposed (layers.c says why); the same
// softmax, summed in another order: outputs agree with attention_forward's to fp32
// rounding, and each row's depend only on its own keys, not on the segment around it.
size_t attention_packed_scratch(size_t max_keys, size_t HD);
void attention_packed(float *out, const float *q, const float *k, const float *v, const int32_t *seg, size_t nseg,
                      float *scratch, size_t max_keys, size_t NH, size_t KV, size_t HD, int nscratch);
// For training shapes (Tq = Tk = T, pos0 = 0). dq (B, T, NH, HD), dk, dv (B, T, KV, HD)
// are overwritten; dkh, dvh (B, NH, T, HD) are scratch (per query head, then summed
// over each group in a fixed order); dout, out (B, T, NH, HD); scratch as above.
void attention_backward(float *dq, float *dk, float *dv, float *dkh, float *dvh,
                        const float *dout, const float *q, const float *k, const float *v,
                        const float *out, const float *lse, float *scratch,
                        size_t B, size_t T, size_t NH, size_t KV, size_t HD, int nscratch);

// --- SwiGLU: h = silu(gate) * up ----------------------------------------------------

// h, gate, up (n) elementwise.
void swiglu_forward(float *h, const float *gate, const float *up, size_t n);
// dgate, dup (n) overwritten; dh, gate, up (n).
void swiglu_backward(float *dgate, float *dup, const float *dh, const float *gate,
                     const float *up, size_t n);

// --- embedding ------------------------------------------------------------------------

// x (N, C) = rows tokens (N) of embed (V, C); ids must already be in [0, V).
void embedding_forward(float *x, const int32_t *tokens, const float *embed, size_t N, size_t C);
// dembed (V, C) += dx rows at tokens (a token seen twice gets both rows, in order).
void embedding_backward(float *dembed, const float *dx, const int32_t *tokens,
                        size_t N, size_t C);
// The rows of tokens (N) grouped by token, for embedding_backward_index_cuda: index
// (3 N + 1) = the U distinct tokens ascending, then U + 1 offsets into the rows that
// follow, then the N row numbers, each token's in row order. Returns U.
size_t embedding_index(int32_t *index, const int32_t *tokens, size_t N);

// --- cross-entropy, as torch.nn.functional.cross_entropy(ignore_index=-1) -----------

// nll (N) = logsumexp(logits row) - logits[target] (0 where target < 0); lse (N) kept for
// the backward (may be NULL); logits (N, V); targets (N). Returns the sum of nll over
// rows with a target, in double, summed in row order.
double crossentropy_forward(float *nll, float *lse, const float *logits,
                            const int32_t *targets, size_t N, size_t V);
// dlogits (N, V) = scale * (softmax(logits) - onehot(target)); rows without a target
// get 0. dlogits may equal logits (in place); lse from the forward.
void crossentropy_backward(float *dlogits, const float *logits, const float *lse,
                           const int32_t *targets, float scale, size_t N, size_t V);

// --- the CUDA twins (layers.cu, attention.cu), in builds with CUDA (BEST_CUDA) ----------
// The CPU kernel's arguments as device pointers, plus the stream the launch goes to
// (asynchronous; launch errors are fatal, CUDA_CHECK). Results match the CPU kernels to
// fp32 rounding (docs/cuda.md); none uses float atomics, so each is deterministic.
// The keys of a chunk of attention_decode_split_cuda (below), and the floats of its scratch.
#define ATT_DEC_CHUNK 256
static inline size_t attention_decode_part_floats(size_t T, size_t NH, size_t HD) {
    return NH * ((T + ATT_DEC_CHUNK - 1) / ATT_DEC_CHUNK) * (HD + 2);
}

#ifdef BEST_CUDA
struct CUstream_st; // cudaStream_t is a struct CUstream_st *

// y (OC) = res + W x + b, one row x (IC) fp32, W (OC, IC) bf16 bits, b (OC) or NULL, res
// (OC) or NULL (none; y itself: accumulate): batch-1 decoding's dense product without
// cuBLASLt (a warp a row, 16-byte loads).
void gemv_bf16_cuda(float *y, const float *x, const uint16_t *w, const float *b, const float *res, size_t OC,
                    size_t IC, struct CUstream_st *stream);
// *out (device) = the greedy token of logits x (n, device): eval.c's sample_token at
// temperature 0 (the first index of the largest, NaNs never chosen, 0 when x[0] is NaN).
void argmax_cuda(int32_t *out, const float *x, size_t n, struct CUstream_st *stream);
void embedding_forward_cuda(float *x, const int32_t *tokens, const float *embed, size_t N,
                            size_t C, struct CUstream_st *stream);
void embedding_backward_cuda(float *dembed, const float *dx, const int32_t *tokens, size_t N,
                             size_t C, struct CUstream_st *stream);
// embedding_backward_cuda from embedding_index's index (3 N + 1, on the device) of U
// distinct tokens: a block row per token adds its rows in row order, N x C adds in all
// (the scan's C x 64 threads each read all N tokens); the same bits.
void embedding_backward_index_cuda(float *dembed, const float *dx, const int32_t *index, size_t U, size_t N,
                                   size_t C, struct CUstream_st *stream);
void rmsnorm_forward_cuda(float *y, float *rstd, const float *x, const float *w, size_t N,
                          size_t C, float eps, struct CUstream_st *stream);
// rmsnorm_forward_cuda writing y (N, C) as bf16 bits: a product's operand with no cast
// pass, the bits of cast_bf16_cuda after the fp32 kernel.
void rmsnorm_forward_bf16_cuda(uint16_t *y, float *rstd, const float *x, const float *w, size_t N, size_t C,
                               float eps, struct CUstream_st *stream);
// scratch (km_rmsnorm_dw_chunks(N) * C floats): the weight gradient's partial sums.
void rmsnorm_backward_cuda(float *dx, float *dw, float *scratch, const float *dy, const float *x,
                           const float *rstd, const float *w, size_t N, size_t C, int dx_acc,
                           struct CUstream_st *stream);
void rope_forward_cuda(float *x, const float *cos, const float *sin, size_t B, size_t T,
                       size_t H, size_t HD, struct CUstream_st *stream);
void rope_backward_cuda(float *dx, const float *cos, const float *sin, size_t B, size_t T,
                        size_t H, size_t HD, struct CUstream_st *stream);
// Rows at positions in device memory (a decode step's one token, so that a CUDA graph of
// the step serves every position; packed rows): x (N, H, HD) rotated in place, row r by
// row pos[r] of the tables, as rope_forward_cuda at that row; kc, vc (T, KVD) get k, v
// (KVD) at row *pos.
void rope_at_cuda(float *x, const float *cos, const float *sin, const int32_t *pos, size_t N, size_t H,
                  size_t HD, struct CUstream_st *stream);
void kv_append_cuda(float *kc, float *vc, const float *k, const float *v, const int32_t *pos,
                    size_t KVD, struct CUstream_st *stream);
// kv_append_cuda into a bf16 cache: k, v rounded to nearest even.
void kv_append_bf16_cuda(uint16_t *kc, uint16_t *vc, const float *k, const float *v, const int32_t *pos, size_t KVD,
                         struct CUstream_st *stream);
void swiglu_forward_cuda(float *h, const float *gate, const float *up, size_t n,
                         struct CUstream_st *stream);
// swiglu_forward_cuda writing h (n) as bf16 bits (the down projection's operand).
void swiglu_forward_bf16_cuda(uint16_t *h, const float *gate, const float *up, size_t n,
                              struct CUstream_st *stream);
void swiglu_backward_cuda(float *dgate, float *dup, const float *dh, const float *gate,
                          const float *up, size_t n, struct CUstream_st *stream);
// swiglu_backward_cuda writing dgate, dup (n) as bf16 bits: the gate and up projections'
// backward operands, with no cast pass (a model without their biases, whose gradients
// would read them in fp32).
void swiglu_backward_bf16_cuda(uint16_t *dgate, uint16_t *dup, const float *dh, const float *gate,
                               const float *up, size_t n, struct CUstream_st *stream);
// out (n) = a + b (out may be a or b): the residual connections.
void residual_forward_cuda(float *out, const float *a, const float *b, size_t n,
                           struct CUstream_st *stream);
// x[i] = value where mask[i] == 0, for i < n: pruned gradients and weights set to 0
// (mask.h's mask_apply), pruned weights' scores to -1 (not candidates, select.h).
void masked_fill_cuda(float *x, const uint8_t *mask, float value, size_t n,
                      struct CUstream_st *stream);
// out (n) = bf16 bits of in (n), rounded to nearest even: matrix-product operands.
void cast_bf16_cuda(uint16_t *out, const float *in, size_t n, struct CUstream_st *stream);
// out (n) = the floats of bf16 bits in (n), exactly: a bf16 operand for a product that
// reads fp32 (a packed weight's, spmv.h).
void widen_bf16_cuda(float *out, const uint16_t *in, size_t n, struct CUstream_st *stream);
// The cross-entropy of N rows of logits (N, V), a chunk of the batch's rows: nll (N) as
// crossentropy_forward's, lse (N) or NULL, and, unless dlogits is NULL, dlogits (N, V)
// as crossentropy_backward's (dlogits may be logits: in place).
void crossentropy_chunk_cuda(float *dlogits, float *nll, float *lse, const float *logits,
                             const int32_t *targets, float scale, size_t N, size_t V,
                             struct CUstream_st *stream);

// The Linear layer's matrix products (matmul.cu): cuBLASLt on tensor cores, bf16 operands,
// fp32 accumulation and results, on c's stream with c's workspace. Each product's map to
// cuBLASLt's column-major is matmul_map.h's. Any size and alignment; 16-byte aligned
// pointers and sizes that are multiples of 8 get the tensor-core kernels (matmul.cu).
struct CudaCtx;
// y (N, OC) fp32 = x (N, IC) @ w^T (+ b) (+ the old y when acc): x, w bf16 bits (w as
// torch.nn.Linear stores it, (OC, IC)); b (OC) fp32 or NULL; fp32 accumulation on tensor
// cores, on c's stream.
void matmul_forward_cuda(struct CudaCtx *c, float *y, const uint16_t *x, const uint16_t *w,
                         const float *b, size_t N, size_t IC, size_t OC, int acc);
// y (N, OC) = res (N, OC) + x @ w^T + b: the residual connection in cuBLASLt's epilogue
// (C = res, D = y, beta 1) instead of a copy of res into y first; res may be y.
void matmul_forward_add_cuda(struct CudaCtx *c, float *y, const uint16_t *x, const uint16_t *w, const float *b,
                             const float *res, size_t N, size_t IC, size_t OC);
// dx (N, IC) fp32 = or += (dx_acc) dy @ w, skipped when dx is NULL; dw (OC, IC) fp32 +=
// dy^T @ x, skipped when dw is NULL; dy (N, OC), x (N, IC), w (OC, IC) bf16 bits.
void matmul_backward_cuda(struct CudaCtx *c, float *dx, float *dw, const uint16_t *dy,
                          const uint16_t *x, const uint16_t *w, size_t N, size_t IC, size_t OC,
                          int dx_acc);
// C (M, N) = alpha op(A) (M, K) @ op(B) (K, N) + beta C (+ bias (N) along each row, or
// NULL), all fp32 and row-major with leading dimensions lda, ldb, ldc; op(A) = A^T when
// transa (A stored (K, M)), op(B) = B^T when transb (B stored (N, K)); through cuBLASLt in
// fp32 (CUBLAS_COMPUTE_32F: no TF32). SparseGPT's lazy update of the columns right of a
// block (sparsegpt.cu), and the one-shot walk's forward and X^T X with --precision fp32
// (calib.cu).
void matmul_f32_cuda(struct CudaCtx *c, float *C, const float *A, const float *B, const float *bias, size_t M,
                     size_t N, size_t K, size_t lda, size_t ldb, size_t ldc, int transa, int transb, float alpha,
                     float beta);
// db (OC) += column sums of dy (N, OC) fp32, deterministic (per-chunk sums in row order,
// then the chunks in order; no float atomics). scratch (km_colsum_chunks(N) * OC floats).
void bias_backward_cuda(float *db, float *scratch, const float *dy, size_t N, size_t OC,
                        struct CUstream_st *stream);

// Causal grouped-query attention (attention.cu), flash-attention style: no T x T matrix
// in memory, the backward recomputes the probabilities from lse. HD up to 256 (a larger
// one, or NH not a multiple of KV, dies with a message).
// out (B, Tq, NH, HD), lse (B, NH, Tq) or NULL; q (B, Tq, NH, HD); k, v (B, Tk, KV, HD);
// query row t at position pos0 + t sees keys 0 .. pos0 + t; query head h reads kv head
// h / (NH / KV); scale 1/sqrt(HD). fp32 in and out.
void attention_forward_cuda(float *out, float *lse, const float *q, const float *k,
                            const float *v, size_t B, size_t Tq, size_t Tk, size_t pos0,
                            size_t NH, size_t KV, size_t HD, struct CUstream_st *stream);
// Rows of several sequences packed together (layers.h's attention_packed, the device's
// form: best-eval --tasks): out, q (n, NH, HD), k, v (n, KV, HD), rotated at their own
// positions; vis (n, 3) in device memory: row t sees keys [vis[3t], vis[3t+1]) (its
// prefix's rows) and vis[3t+2] .. t (its segment's rows up to itself). The forward's
// kernel, whose key walk starts at the first key a block's rows see: a block of rows
// also walks the keys of the other segments between its prefix and itself (masked).
void attention_packed_cuda(float *out, const float *q, const float *k, const float *v, const int32_t *vis,
                           size_t n, size_t NH, size_t KV, size_t HD, struct CUstream_st *stream);
// One decoded token at the position *pos in device memory (a CUDA graph of the decode step
// serves every position): out (NH, HD) = attention_forward_cuda's for q (NH, HD) against
// keys and values kc, vc (*pos + 1 rows of KV * HD), with the keys spread over a block's
// threads instead of the forward's query tiles (sums in another order: fp32 rounding).
void attention_decode_cuda(float *out, const float *q, const float *kc, const float *vc,
                           const int32_t *pos, size_t NH, size_t KV, size_t HD,
                           struct CUstream_st *stream);
// attention_decode_cuda split over the keys (flash-decoding): chunks of ATT_DEC_CHUNK keys
// of a cache of T positions, a block each (NH x ceil(T / chunk) blocks, chunks past *pos
// empty), merged per head in chunk order; part: attention_decode_part_floats(T, NH, HD)
// floats of scratch (NULL: attention_decode_cuda's one block a head). The same function,
// its sums grouped by chunk.
void attention_decode_split_cuda(float *out, float *part, const float *q, const float *kc, const float *vc,
                                 const int32_t *pos, size_t T, size_t NH, size_t KV, size_t HD,
                                 struct CUstream_st *stream);
// attention_decode_cuda (part NULL) or attention_decode_split_cuda (part: its scratch) on a
// bf16 cache kc, vc (T, KVD) (BEST_KV=bf16: half the bytes a step reads).
void attention_decode_bf16_cuda(float *out, float *part, const float *q, const uint16_t *kc, const uint16_t *vc,
                                const int32_t *pos, size_t T, size_t NH, size_t KV, size_t HD,
                                struct CUstream_st *stream);
// Training shapes (Tq = Tk = T, pos0 = 0). dq (B, T, NH, HD), dk, dv (B, T, KV, HD)
// overwritten; dkh, dvh (B, NH, T, HD) scratch: per query head, then summed over each
// group in a fixed order (deterministic, no float atomics); dout, out (B, T, NH, HD);
// lse from the forward.
void attention_backward_cuda(float *dq, float *dk, float *dv, float *dkh, float *dvh,
                             const float *dout, const float *q, const float *k, const float *v,
                             const float *out, const float *lse, size_t B, size_t T, size_t NH,
                             size_t KV, size_t HD, struct CUstream_st *stream);
#endif

#ifdef __cplusplus
}
#endif

#endif
