// wanda.cu: the device twins of Wanda's two steps (wanda.h), on device arrays.
//
//   wanda_accumulate_cuda  colsq (cols) += the column sums of squares of the bf16 operand x
//                          (N, cols), in double: a block takes 32 columns, its 8 warps
//                          rows g, g + 8, ... each (a lane a column: coalesced), and the
//                          8 partial sums are added in warp order. A fixed order, so the
//                          same bits every run; not the CPU's order (it sums each column
//                          in row order), so not its bits: close to 1e-16 relative.
//   wanda_prune_cuda       wanda_prune bit for bit: a block per row runs select_smallest
//                          (smallest_block, select_block.cuh) on the row's scores,
//                          computed on the fly from w and colsq exactly as the CPU
//                          computes them (in double, then rounded to float), so no
//                          scratch holds them; the selected (lowest) are set to 0 in w
//                          and in the mask, which is written whole.
//
// Written for tests/cuda_emu.h too (tests/test_oneshot_cuda.cpp includes this file and
// compares with wanda.c). Not here: the calibration loop that calls these (calib.h).
// Never run on a GPU (docs/cuda.md).
#include "sparse/wanda.h" // defines: the _cuda prototypes (BEST_CUDA)

#include <math.h>

#include "base/cuda.h"             // defines: CUDA_CHECK, LAUNCH, BEST_KAPI
#include "base/error.h"            // defines: CHECK
#include "nn/kernel_math.h"        // defines: km_float_from_bf16, km_blocks
#include "sparse/select_block.cuh" // defines: smallest_block

#define WANDA_COLS 32  // columns a block of the accumulation (a warp's lanes)
#define WANDA_GROUPS 8 // row groups a block (its warps)
#define WANDA_THREADS 256 // a row's block of the pruning

// An operand's value: bf16 bits, or fp32 (--precision fp32).
static __device__ __forceinline__ double operand_value(uint16_t x) { return km_float_from_bf16(x); }
static __device__ __forceinline__ double operand_value(float x) { return x; }

// colsq (cols) += sums of squares of x (N, cols) bf16 or fp32; blocks over groups of 32 columns.
template <class X>
static __global__ void wanda_accumulate_kernel(double *colsq, const X *x, size_t N, size_t cols) {
    __shared__ double part[WANDA_GROUPS][WANDA_COLS];
    unsigned lane = threadIdx.x % 32, g = threadIdx.x / 32;
    for (size_t c0 = (size_t)blockIdx.x * WANDA_COLS; c0 < cols; c0 += (size_t)gridDim.x * WANDA_COLS) {
        size_t c = c0 + lane;
        double s = 0;
        if (c < cols)
            for (size_t n = g; n < N; n += WANDA_GROUPS) {
                double v = operand_value(x[n * cols + c]);
                s += v * v; // (bf16: v * v is exact, 16 significant bits, so an fma changes nothing)
            }
        part[g][lane] = s;
        __syncthreads();
        if (g == 0 && c < cols) {
            double t = 0;
            for (unsigned h = 0; h < WANDA_GROUPS; h++) t += part[h][lane];
            colsq[c] += t;
        }
        __syncthreads(); // part is written again by the next group of columns
    }
}

BEST_KAPI void wanda_accumulate_cuda(double *colsq, const uint16_t *x, size_t N, size_t cols,
                                     cudaStream_t stream) {
    if (N == 0 || cols == 0) return;
    LAUNCH(wanda_accumulate_kernel<uint16_t>, km_blocks(cols, WANDA_COLS, KM_GRID_CAP), WANDA_COLS * WANDA_GROUPS,
           stream, colsq, x, N, cols);
    CUDA_CHECK(cudaGetLastError());
}

BEST_KAPI void wanda_accumulate_f32_cuda(double *colsq, const float *x, size_t N, size_t cols, cudaStream_t stream) {
    if (N == 0 || cols == 0) return;
    LAUNCH(wanda_accumulate_kernel<float>, km_blocks(cols, WANDA_COLS, KM_GRID_CAP), WANDA_COLS * WANDA_GROUPS,
           stream, colsq, x, N, cols);
    CUDA_CHECK(cudaGetLastError());
}

// A weight's score, as wanda_prune forms it: |w| * sqrt(colsq) in double, then float.
struct WandaScore {
    const float *w;       // (cols) the row
    const double *colsq;  // (cols)
    __device__ float operator()(size_t c) const { return (float)(fabs((double)w[c]) * sqrt(colsq[c])); }
};
// A selected weight is pruned: 0 in w and in the mask; the others keep theirs, mask 1.
struct WandaPut {
    float *w;       // (cols) the row
    uint8_t *mask;  // (cols) the row's
    __device__ void operator()(size_t c, int pruned) const {
        mask[c] = !pruned;
        if (pruned) w[c] = 0.0f; // (its score was read for the last time just before, by this thread)
    }
};

// Row blockIdx.x of w (rows, cols) and mask (rows, cols): its k lowest scores pruned.
static __global__ void wanda_prune_kernel(float *w, uint8_t *mask, const double *colsq, size_t cols, size_t k) {
    size_t at = (size_t)blockIdx.x * cols;
    smallest_block(cols, k, WandaScore{w + at, colsq}, WandaPut{w + at, mask + at});
}

BEST_KAPI void wanda_prune_cuda(float *w, uint8_t *mask, size_t rows, size_t cols, const double *colsq,
                                double sparsity, cudaStream_t stream) {
    if (rows == 0 || cols == 0) return;
    size_t k = (size_t)floor((double)cols * sparsity); // as wanda_prune
    CHECK(cols <= UINT32_MAX && rows <= INT32_MAX && k <= cols,
          "wanda_prune_cuda: (%zu, %zu) weights at sparsity %g: out of range", rows, cols, sparsity);
    LAUNCH(wanda_prune_kernel, (unsigned)rows, WANDA_THREADS, stream, w, mask, colsq, cols, k);
    CUDA_CHECK(cudaGetLastError());
}
