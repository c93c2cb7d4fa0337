// calib.h: one-shot pruning from calibration data, layer by layer (best-mask --method
// wanda|sparsegpt): the calibration windows, and the loop that feeds each block the
// outputs of the blocks before it, already pruned, as the references do.
//
// Windows (calib_windows), like the reference code's C4 loader: n times, a document of
// the shard longer than seq tokens, drawn uniformly, and a window of seq tokens at a
// uniform offset in it (our own generator, seeded: not Python's random, so not the
// reference's very windows). Documents are found by the shard's flags: with BOS, a
// document starts at each occurrence of the shard's first token; with only EOS, ends
// after each occurrence of its last token; with neither, the shard is one document.
//
// The loop (oneshot_prune): x (n, seq, C) = the windows' embeddings; then per block l:
//   1. every window through block l (model_block_forward), accumulating the statistics
//      of each Linear layer's input: Wanda the squared norm of every input feature,
//      SparseGPT the Hessian X^T X (fp32 BLAS ssyrk per window, summed in double); the
//      layers reading the same input share them (q, k, v; gate, up);
//   2. the block's seven Linear layers pruned to the sparsity, each on its own (uniform
//      per layer: these methods are layer-wise), from those statistics (wanda.h,
//      sparsegpt.h);
//   3. every window through the pruned (for SparseGPT also updated) block again: its
//      outputs are block l+1's inputs.
// Memory: x, one window's activations, and the statistics of one block (SparseGPT: two
// C x C, a Q x Q and an I x I matrix in double, and one factor in fp32: 1.4 GB for
// LLaMA-2-7B's down_proj alone), besides the model. Time: two forward passes of the
// calibration data, plus the methods' own work.
//
// Magnitude (no calibration) goes through here too, as mask.h's mask_compute with
// --group layer and prune_floor, so that best-mask runs every method through one call on
// the CPU or the device (engine.h's engine_oneshot).
//
// Not here: the mask file.
#ifndef BEST_CALIB_H
#define BEST_CALIB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus // calib.cu and the C++ tests include this
extern "C" {
#endif

#include "base/progress.h" // defines: Progress
#include "nn/model.h"      // defines: Model
#include "sparse/nm.h"     // defines: NMPattern

typedef enum { ONESHOT_WANDA, ONESHOT_SPARSEGPT, ONESHOT_MAGNITUDE } OneShotMethod;
int oneshot_method_parse(OneShotMethod *out, const char *name); // "wanda", "sparsegpt", "magnitude"; -1 (no ERR)
const char *oneshot_method_name(OneShotMethod m);
static inline int oneshot_calibrated(OneShotMethod m) { return m != ONESHOT_MAGNITUDE; } // needs windows

// windows (n, seq) drawn from the token shard at path with seed (above). ERR: an
// unreadable shard, no document longer than seq tokens (naming the longest).
int calib_windows(int32_t *windows, const char *path, int n, int seq, uint64_t seed);
// 0 when every token of windows (n, seq) is in m's vocabulary, else ERR naming the first.
int calib_check_windows(const Model *m, const int32_t *windows, int n, int seq);

typedef struct {
    OneShotMethod method;
    double sparsity;  // of every prunable tensor, in [0, 1)
    double percdamp;  // SparseGPT's dampening, as a fraction of the mean of diag(H) (0.01)
    int batch;        // on a GPU: windows a forward pass (0: as many as fit); the CPU takes one
    int fp32;         // on a GPU: the forward's products and X^T X in fp32 instead of on bf16
                      // operands (best-mask --precision fp32); the CPU is fp32 throughout
    NMPattern pattern; // N:M (nm.h): each method's scores choose M - N of every M weights of a
                      // row (sparsity unused); m = 0: unstructured. The CPU's only, for now
} OneShotSpec;

// Where a one-shot run's time went, in seconds of the host's clock, summed over the
// blocks: the blocks' forward passes (gathering the statistics, then the pruned block's
// outputs), the statistics (Wanda's squared norms, SparseGPT's X^T X), SparseGPT's
// factor (the damped Cholesky and inverse), and the pruning (with SparseGPT's update);
// and on a GPU the device memory the walk took: the bytes it allocated at most (its
// buffers: oneshot_cuda_bytes's figure) and the device's memory in use then
// (cudaMemGetInfo: with the CUDA context, cuBLASLt's workspace and cuSOLVER's).
typedef struct {
    double forward, stats, factor, update;
    double device_bytes, device_in_use; // 0 on the CPU
} OneShotStats;

// Prunes m's prunable weights in place (SparseGPT also updates the kept ones) from the
// windows (n, seq) (magnitude: none, windows NULL); mask (m->n_params) gets 1 = kept
// (non-prunable entries 1); st (may be NULL) the phases' seconds. pr (may be NULL) counts
// blocks. 0, or ERR (a token outside the vocabulary, a failed factorisation).
int oneshot_prune(uint8_t *mask, OneShotStats *st, Model *m, const OneShotSpec *spec, const int32_t *windows,
                  int n, int seq, Progress *pr);

#ifdef BEST_CUDA
struct CudaCtx;
// oneshot_prune on c's device (calib.cu): the same walk, block by block, with one block's
// weights on the device at a time (streamed from m's host block, which gets the pruned and
// updated weights back as on the CPU), the calibration activations of every window there
// (fp32, as x on the CPU), the forward in bf16 products with fp32 accumulation (the
// layers.cu kernels and cuBLASLt), the statistics of the products' own bf16 operands
// (X^T X summed in fp32 by cuBLASLt; Wanda's squared norms in double), the factor through
// cuSOLVER and the pruning by sparsegpt.cu and wanda.cu. Magnitude: each prunable tensor's
// mask by the device's selection (select.cu), the CPU's bit for bit. Never run on a GPU as
// of 2026-11-29. 0, or ERR (also: out of device memory, saying how much was asked).
int oneshot_prune_cuda(uint8_t *mask, OneShotStats *st, Model *m, const OneShotSpec *spec, const int32_t *windows,
                       int n, int seq, Progress *pr, struct CudaCtx *c);
// Bytes of device memory oneshot_prune_cuda allocates for m with n windows of seq tokens
// taken `batch` windows at a time (its buffers; the CUDA context and the libraries'
// workspaces not included); fp32 as OneShotSpec's. Needs no GPU (a CUDA build). batch 0: the batch the walk would choose with
// `free_bytes` free on the device, returned in *batch_out (may be NULL).
size_t oneshot_cuda_bytes(const Model *m, OneShotMethod method, int fp32, int n, int seq, int batch,
                          size_t free_bytes, int *batch_out);
#endif

#ifdef __cplusplus
}
#endif

#endif
