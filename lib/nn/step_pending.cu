// step_pending.cu: TEMPORARY (branch `step` only). Link stubs for the matrix-product and
// attention kernels that two other branches write, so that this branch's CUDA build links
// (model.cu calls them). Each stops the program with one clear line. DELETE this file when
// those branches merge, together with the TEMPORARY block at the end of layers.h's
// BEST_CUDA section: their real definitions replace these (a forgotten stub gives a
// duplicate-symbol link error, never a silent stub).
#include "nn/cuda.h"   // defines: BEST_KAPI, CudaCtx
#include "nn/layers.h" // defines: the prototypes

#include "base/error.h" // defines: die_

#define PENDING(name) die_(__FILE__, __LINE__, "%s: not in this build yet (branch `step` awaits its merge)", name)

BEST_KAPI void matmul_forward_cuda(CudaCtx *, float *, const uint16_t *, const uint16_t *, const float *, size_t,
                                   size_t, size_t, int) {
    PENDING("matmul_forward_cuda");
}
BEST_KAPI void matmul_backward_cuda(CudaCtx *, float *, float *, const uint16_t *, const uint16_t *,
                                    const uint16_t *, size_t, size_t, size_t, int) {
    PENDING("matmul_backward_cuda");
}
BEST_KAPI void bias_backward_cuda(float *, float *, const float *, size_t, size_t, cudaStream_t) {
    PENDING("bias_backward_cuda");
}
BEST_KAPI void attention_forward_cuda(float *, float *, const float *, const float *, const float *, size_t,
                                      size_t, size_t, size_t, size_t, size_t, size_t, cudaStream_t) {
    PENDING("attention_forward_cuda");
}
BEST_KAPI void attention_backward_cuda(float *, float *, float *, float *, float *, const float *,
                                       const float *, const float *, const float *, const float *,
                                       const float *, size_t, size_t, size_t, size_t, size_t, cudaStream_t) {
    PENDING("attention_backward_cuda");
}
