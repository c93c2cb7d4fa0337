// nm.cu: N:M pruning on the device (nm.h's rule) for magnitude and Wanda, the twin of
// nm.c's nm_prune: a thread a group of M columns of a row,
// the M - N lowest (score, column) keys pruned (the CPU's selection sort, so the same set),
// the weights set to 0 there and the mask written whole. Scores as the CPU forms them:
// magnitude fabsf(w); Wanda (float)(|w| sqrt(colsq_j)) in double (wanda.c). Bit for bit the
// CPU's from the same weights and norms.
//
// nm_protect_cuda: a thread a group too, nm_protect_group as the CPU runs it (nm.c), for the
// mask updates of BEST with an N:M target (mask.cu).
//
// Written for tests/cuda_emu.h too (tests/test_oneshot_cuda.cpp). Never run on a GPU.
#include "sparse/nm.h" // defines: NMPattern, NM_MAX, the _cuda prototype (BEST_CUDA)

#include <math.h>

#include "base/cuda.h"      // defines: CUDA_CHECK, LAUNCH, BEST_KAPI
#include "nn/kernel_math.h" // defines: km_bits, km_blocks, km_thread_index

static __global__ void nm_prune_kernel(float *w, uint8_t *mask, size_t rows, size_t cols, const double *colsq, int n,
                                       int m) {
    size_t groups = rows * (cols / (size_t)m);
    for (size_t g = km_thread_index(blockIdx.x, blockDim.x, threadIdx.x); g < groups;
         g += (size_t)gridDim.x * blockDim.x) {
        size_t at = g * (size_t)m, c0 = at % cols; // (groups are row-major: a row's cols / m of them)
        uint64_t key[NM_MAX];
        for (int t = 0; t < m; t++) {
            float wv = w[at + t];
            float s = colsq ? (float)(fabs((double)wv) * sqrt(colsq[c0 + t])) : fabsf(wv);
            key[t] = (uint64_t)km_bits(s) << 32 | (uint64_t)t;
            mask[at + t] = 1;
        }
        nm_drop_smallest(key, m, m - n); // the M - N smallest, as nm_mask_rows
        for (int a = 0; a < m - n; a++) {
            size_t x = at + (size_t)(key[a] & 0xffffffffu);
            mask[x] = 0;
            w[x] = 0.0f;
        }
    }
}

BEST_KAPI void nm_prune_cuda(float *w, uint8_t *mask, size_t rows, size_t cols, const double *colsq,
                             const NMPattern *p, cudaStream_t stream) {
    if (rows == 0 || cols == 0 || p->m == 0) return;
    size_t groups = rows * (cols / (size_t)p->m);
    LAUNCH(nm_prune_kernel, km_blocks(groups, KM_THREADS, KM_GRID_CAP), KM_THREADS, stream, w, mask, rows, cols, colsq,
           p->n, p->m);
    CUDA_CHECK(cudaGetLastError());
}

static __global__ void nm_protect_kernel(float *s, size_t groups, int m, int keep) {
    for (size_t g = km_thread_index(blockIdx.x, blockDim.x, threadIdx.x); g < groups;
         g += (size_t)gridDim.x * blockDim.x)
        nm_protect_group(s + g * (size_t)m, m, keep);
}

BEST_KAPI void nm_protect_cuda(float *s, size_t n, int m, int keep, cudaStream_t stream) {
    size_t groups = n / (size_t)m;
    if (groups == 0) return;
    LAUNCH(nm_protect_kernel, km_blocks(groups, KM_THREADS, KM_GRID_CAP), KM_THREADS, stream, s, groups, m, keep);
    CUDA_CHECK(cudaGetLastError());
}
