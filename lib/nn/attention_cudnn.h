// attention_cudnn.h: causal self-attention of the training step on tensor cores through
// cuDNN's fused scaled-dot-product attention (flash attention, forward and backward),
// loaded at run time: a machine without cuDNN runs attention.cu instead, and says so in
// one line. The operands are bf16 (the caller casts q, k, v, o and dout), the softmax
// statistics fp32; GQA (NH query heads over KV key/value heads), head dimensions that
// cuDNN takes (multiples of 8 up to 256: LLaMA-2's and Qwen3's 128).
//
// Layouts, as attention.cu's: q, o, dout, dq (B, T, NH, HD); k, v, dk, dv (B, T, KV, HD);
// stats (B, NH, T): log-sum-exp of each query's scaled scores (natural log).
//
// Built by g++ from C++ (the cuDNN frontend's graph API, header-only, with its dynamic
// loading of libcudnn.so.9: nothing links cuDNN) when the Makefile finds the frontend's
// headers (make cudnn-frontend) and cudnn.h; otherwise attn_cudnn_open says what is
// missing. Where the library is: BEST_CUDNN_LIB (a path), else the loader's search path.
// One device per process (DESIGN.md): one cuDNN handle, graphs cached per shape.
//
// NEVER RUN ON A GPU (2026-11-29): written against the frontend 1.32 headers and cuDNN
// 9.19's, compiled here; its first GPU run (tests/gpu/run.sh: test_kernels_gpu checks
// it against attention.cu) decides whether it works. Until then BEST_ATTN=own stays the
// default and BEST_ATTN=cudnn the way to try it (docs/cuda.md).
//
// Not here: the casts (layers.cu), the choice of kernel (model.cu).
#ifndef BEST_ATTENTION_CUDNN_H
#define BEST_ATTENTION_CUDNN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef BEST_CUDA // (tests/test_step.cpp's emulator has its own stand-ins, static)
struct CUstream_st;

// 0 when cuDNN's attention can be tried (the library loaded, a handle made); -1 after
// ERR saying why not (not built with the frontend, no libcudnn.so.9, ...). Once per
// process; later calls return the first answer.
int attn_cudnn_open(void);
// The loaded library's version (91900 for 9.19.0), 0 before it loaded.
long attn_cudnn_version(void);
// The forward and backward graphs of a shape described and checked by the frontend's
// validate() for an sm_90 GPU, which needs the library but no GPU or handle: 0, or -1 after ERR with the
// frontend's reason (tests/test_attn_cudnn.c runs it on machines without a GPU).
int attn_cudnn_validate(size_t B, size_t T, size_t NH, size_t KV, size_t HD, float scale);

// o (B, T, NH, HD) bf16 and stats (B, NH, T) fp32 = causal softmax(q k^T * scale) v.
// 0, or -1 after ERR (cuDNN has no engine for this shape, ...): nothing was enqueued.
int attn_cudnn_forward(uint16_t *o, float *stats, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                       size_t B, size_t T, size_t NH, size_t KV, size_t HD, float scale,
                       struct CUstream_st *stream);
// dq, dk, dv (bf16, overwritten) from dout and the forward's q, k, v, o, stats. With
// deterministic 1 the engine must be one that gives the same bits every run (ERR when
// cuDNN has none for this shape).
int attn_cudnn_backward(uint16_t *dq, uint16_t *dk, uint16_t *dv, const uint16_t *dout, const uint16_t *q,
                        const uint16_t *k, const uint16_t *v, const uint16_t *o, const float *stats, size_t B,
                        size_t T, size_t NH, size_t KV, size_t HD, float scale, int deterministic,
                        struct CUstream_st *stream);
// Builds the forward and backward graphs of a shape (attn_cudnn_backward's with
// deterministic) without running them: 0, or -1 after ERR when cuDNN has none (so that a
// caller can choose attention.cu before the first step).
int attn_cudnn_prepare(size_t B, size_t T, size_t NH, size_t KV, size_t HD, float scale, int deterministic);
#endif

#ifdef __cplusplus
}
#endif

#endif
