// saliency.cu: the CUDA twin of saliency_score (saliency.h): one score per weight, on
// device arrays, by the same per-element functions as the CPU (km_saliency_*,
// kernel_math.h). Bad inputs (NaN or infinite weights or moments, a negative
// exp_avg_sq) are counted into a device counter instead of failing here: the caller
// reads it with the step's other scalars and, if it is not 0, finds the element on the
// CPU for the message (saliency_score does that).
//
// Not here: the threshold (select.cu), the mask update that calls both (mask.cu).
#include "sparse/saliency.h" // defines: Saliency, the _cuda prototype (with BEST_CUDA)

#include "base/cuda.h"        // defines: CUDA_CHECK, LAUNCH, BEST_KAPI
#include "nn/kernel_math.h" // defines: km_saliency_*, km_finite, km_blocks

static __global__ void saliency_kernel(float *out, unsigned long long *bad, Saliency s,
                                       const float *w, const float *m, const float *v, size_t n) {
    unsigned long long nbad = 0;
    for (size_t i = km_thread_index(blockIdx.x, blockDim.x, threadIdx.x); i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float wi = w[i];
        int ok = km_finite(wi);
        if (s == SAL_MAGNITUDE) {
            out[i] = km_saliency_magnitude(wi);
        } else if (s == SAL_FIRST) {
            out[i] = km_saliency_first(wi, m[i]);
            ok &= km_finite(m[i]);
        } else {
            out[i] = km_saliency_second(wi, v[i]);
            ok &= km_finite(v[i]) & (v[i] >= 0.0f);
        }
        nbad += !ok;
    }
    if (nbad) atomicAdd(bad, nbad); // counts commute: the total is exact
}

BEST_KAPI void saliency_score_cuda(float *out, unsigned long long *bad, Saliency s, const float *w,
                                   const float *m, const float *v, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    LAUNCH(saliency_kernel, km_blocks(n, KM_THREADS, KM_GRID_CAP), KM_THREADS, stream, out, bad,
           s, w, m, v, n);
    CUDA_CHECK(cudaGetLastError());
}
