// adamw.cu: the CUDA twin of adamw_update (adamw.h): masked AdamW over flat device
// arrays laid out like the parameter block. Each element is km_adamw (kernel_math.h),
// the function the CPU loop calls, with the step's scalars formed on the host by
// adamw_scalars exactly as for the CPU; so a step on the GPU gives the CPU's bits up
// to nvcc's fma contraction (docs/cuda.md).
//
// Also here, the one-pass optimizer of a device step (adamw_fused_cuda): the clip
// coefficient formed on the device from the gradients' sum of squares, the mask, AdamW and
// the weights' bf16 copy in one kernel, 31 bytes a parameter where the passes it replaces
// (model.cu's masked fill, scale, adamw_update_cuda and cast) move 56.
//
// Not here: the sum of squares (model.cu's reductions), where the moments of pruned
// weights could be dropped (docs/cuda.md's list).
#include "nn/adamw.h"       // defines: adamw_scalars, the _cuda prototype (with BEST_CUDA)
#include "base/cuda.h"        // defines: CUDA_CHECK, LAUNCH, BEST_KAPI
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

// One element of the one-pass optimizer: g scaled by coef, masked AdamW, the bf16 copy.
static __device__ __forceinline__ void fused_one(float *w, float *m, float *v, uint16_t *wbf, float g,
                                                 int keep, float coef, const AdamWScalars *k) {
    km_adamw(w, m, v, g * coef, keep, k); // g * 1.0f is g: no branch on coef < 1
    *wbf = km_bf16_from_float(*w);
}

// The one-pass optimizer over n elements. *sumsq (on the device) is the gradients' sum of
// squares over every rank; a non-finite one leaves everything as it was (the host stops
// the run). VEC 4: four elements an iteration, w, m, v, g as float4, the mask as 4 bytes,
// the bf16 copy as 8 (the caller checks the alignment); n a multiple of 4. VEC 1: one.
template <int VEC>
static __global__ void adamw_fused_kernel(float *w, float *m, float *v, uint16_t *wbf, const float *g,
                                          const uint8_t *mask, const double *sumsq, double max_norm,
                                          AdamWScalars k, size_t n) {
    double s = *sumsq;
    if (!km_finite_d(s)) return;
    float coef = km_clip_coef(sqrt(s), max_norm);
    if constexpr (VEC == 1) {
        for (size_t i = km_thread_index(blockIdx.x, blockDim.x, threadIdx.x); i < n;
             i += (size_t)gridDim.x * blockDim.x)
            fused_one(w + i, m + i, v + i, wbf + i, g[i], !mask || mask[i], coef, &k);
    } else {
    for (size_t j = km_thread_index(blockIdx.x, blockDim.x, threadIdx.x); j < n / 4;
         j += (size_t)gridDim.x * blockDim.x) {
        float4 w4 = ((const float4 *)w)[j], m4 = ((const float4 *)m)[j], v4 = ((const float4 *)v)[j];
        float4 g4 = ((const float4 *)g)[j];
        uint32_t keep4 = mask ? ((const uint32_t *)mask)[j] : 0x01010101u; // byte e: element e
        float wa[4] = {w4.x, w4.y, w4.z, w4.w}, ma[4] = {m4.x, m4.y, m4.z, m4.w};
        float va[4] = {v4.x, v4.y, v4.z, v4.w}, ga[4] = {g4.x, g4.y, g4.z, g4.w};
        uint16_t ba[4];
        for (int e = 0; e < 4; e++)
            fused_one(wa + e, ma + e, va + e, ba + e, ga[e], (keep4 >> (8 * e)) & 0xffu, coef, &k);
        ((float4 *)w)[j] = float4{wa[0], wa[1], wa[2], wa[3]};
        ((float4 *)m)[j] = float4{ma[0], ma[1], ma[2], ma[3]};
        ((float4 *)v)[j] = float4{va[0], va[1], va[2], va[3]};
        ((uint64_t *)wbf)[j] = (uint64_t)ba[0] | (uint64_t)ba[1] << 16 | (uint64_t)ba[2] << 32 |
                               (uint64_t)ba[3] << 48;
    }
    }
}

static int aligned(const void *p, size_t bytes) { return p == NULL || (uintptr_t)p % bytes == 0; }

BEST_KAPI void adamw_fused_cuda(float *w, float *m, float *v, uint16_t *wbf, const float *g,
                                const uint8_t *mask, const double *sumsq, double max_norm,
                                const AdamWHyper *h, int t, size_t n, int vec, cudaStream_t stream) {
    if (n == 0) return;
    AdamWScalars k = adamw_scalars(h, t);
    size_t n4 = 0; // elements of the vector kernel: a whole number of 4s from the start
    if (vec == 4 && aligned(w, 16) && aligned(m, 16) && aligned(v, 16) && aligned(g, 16) && aligned(mask, 4) &&
        aligned(wbf, 8))
        n4 = n / 4 * 4;
    if (n4) {
        LAUNCH(adamw_fused_kernel<4>, km_blocks(n4 / 4, KM_THREADS, KM_GRID_CAP), KM_THREADS, stream, w, m, v,
               wbf, g, mask, sumsq, max_norm, k, n4);
        CUDA_CHECK(cudaGetLastError());
    }
    if (n4 < n) { // the rest (under 4 elements after the vector part; all of them unaligned)
        LAUNCH(adamw_fused_kernel<1>, km_blocks(n - n4, KM_THREADS, KM_GRID_CAP), KM_THREADS, stream, w + n4,
               m + n4, v + n4, wbf + n4, g + n4, mask ? mask + n4 : NULL, sumsq, max_norm, k, n - n4);
        CUDA_CHECK(cudaGetLastError());
    }
}
