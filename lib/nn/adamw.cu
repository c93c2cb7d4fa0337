// adamw.cu: the CUDA twin of adamw_update (adamw.h): masked AdamW over flat device
// arrays laid out like the parameter block. Each element is km_adamw (kernel_math.h),
// the function the CPU loop calls, with the step's scalars formed on the host by
// adamw_scalars exactly as for the CPU; so a step on the GPU gives the CPU's bits up
// to nvcc's fma contraction (docs/cuda.md).
//
// Not here: the gradient norm and clipping on the device (next, with the step), where
// the moments of pruned weights could be dropped (docs/cuda.md's list).
#include "nn/adamw.h"       // defines: adamw_scalars, the _cuda prototype (with BEST_CUDA)
#include "nn/cuda.h"        // defines: CUDA_CHECK, LAUNCH, BEST_KAPI
#include "nn/kernel_math.h" // defines: km_adamw, km_blocks

// mask (n) or NULL: uint8, 1 = keep.
static __global__ void adamw_kernel(float *w, float *m, float *v, const float *g,
                                    const uint8_t *mask, AdamWScalars k, size_t n) {
    for (size_t i = km_thread_index(blockIdx.x, blockDim.x, threadIdx.x); i < n;
         i += (size_t)gridDim.x * blockDim.x)
        km_adamw(w + i, m + i, v + i, g[i], !mask || mask[i], &k);
}

BEST_KAPI void adamw_update_cuda(float *w, float *m, float *v, const float *g,
                                 const uint8_t *mask, const AdamWHyper *h, int t, size_t n,
                                 cudaStream_t stream) {
    if (n == 0) return;
    AdamWScalars k = adamw_scalars(h, t);
    LAUNCH(adamw_kernel, km_blocks(n, KM_THREADS, KM_GRID_CAP), KM_THREADS, stream, w, m, v, g,
           mask, k, n);
    CUDA_CHECK(cudaGetLastError());
}
