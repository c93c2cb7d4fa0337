// sparsegpt.cu: the device twins of SparseGPT's factor and pruning (sparsegpt.h), the
// same steps as sparsegpt.c on device arrays, on the context's stream.
//
//   factor  the diagonal of H (n, n) comes to the host: the dead columns and the
//           dampening there, as the CPU forms them (the mean in double); a kernel writes
//           U's upper triangle = J H J dampened (J reverses the order; in double, rounded
//           to float, the lower triangle 0); cuSOLVER's Cholesky and triangular inverse
//           (base/solver.h: column-major lower = our row-major upper), retried with ten
//           times the dampening as the CPU does; a kernel swaps the upper triangle into
//           R[i][j] = V^-1[n-1-j][n-1-i] (one thread a pair) and zeroes the lower one.
//   prune   the dead columns zeroed and the mask set to 1; then per block of 128 columns
//           c0..c1: the scores w^2 / U_jj^2 (rows, bc) in float as the CPU; the
//           floor(rows * bc * S) smallest by select_smallest_cuda, the block as one
//           segment with place r * bc + j (the CPU's keys: the same set); a kernel with a
//           warp per row does the row's column-by-column update inside the block
//           (sparsegpt.c's loop: the same products and differences, never contracted
//           into an fma, so rounded as the CPU rounds them), with the block's upper
//           triangle of U staged in shared memory (128 * 129 / 2 floats, 33 KB), and
//           writes the errors Err (rows, bc); then W[:, c1:] -= Err @ U[c0:c1, c1:]
//           (matmul_f32_cuda, fp32 cuBLASLt).
//
// So where LAPACK and a CPU product stand in for cuSOLVER and cuBLASLt (the emulated
// tests/test_oneshot_cuda.cpp) U, the mask and the weights are the CPU's bit for bit; on a
// GPU the libraries' orders of sums differ. Speed unmeasured: the select runs a block's
// rows * 128 scores on one thread block (select_block.cuh).
//
// Not here: H (X^T X on the device is a product), the calibration loop (calib.h).
// Never run on a GPU (docs/cuda.md).
#include "sparse/sparsegpt.h" // defines: SPARSEGPT_BLOCK, SPARSEGPT_RETRIES, the _cuda prototypes

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/cuda.h"      // defines: CudaCtx, CUDA_CHECK, LAUNCH, BEST_KAPI
#include "base/error.h"     // defines: ERR, CHECK, xmalloc
#include "base/solver.h"    // defines: solver_potrf_cuda, solver_trtri_cuda
#include "nn/kernel_math.h" // defines: km_blocks, km_thread_index
#include "nn/layers.h"      // defines: matmul_f32_cuda
#include "sparse/select.h"  // defines: select_smallest_cuda

#define SGPT_ROWS 8 // rows (warps) a block of the update kernel
#define SGPT_TRI (SPARSEGPT_BLOCK * (SPARSEGPT_BLOCK + 1) / 2)

// --- the factor ---------------------------------------------------------------------------

// diag (n) = the diagonal of H (n, n).
static __global__ void sgpt_diag_kernel(float *diag, const float *H, size_t n) {
    for (size_t j = km_thread_index(blockIdx.x, blockDim.x, threadIdx.x); j < n; j += (size_t)gridDim.x * blockDim.x)
        diag[j] = H[j * n + j];
}

// U (n, n) = the upper triangle of J H J, the diagonal dampened (a dead one taken as 1),
// as sparsegpt_factor forms it; the lower triangle 0. H's lower triangle is read.
static __global__ void sgpt_build_kernel(float *U, const float *H, const uint8_t *dead, size_t n, double damp) {
    for (size_t x = km_thread_index(blockIdx.x, blockDim.x, threadIdx.x); x < n * n;
         x += (size_t)gridDim.x * blockDim.x) {
        size_t i = x / n, j = x % n, a = n - 1 - i, b = n - 1 - j; // H[a][b], a >= b
        if (j < i) {
            U[x] = 0.0f;
            continue;
        }
        double h = i == j && dead[a] ? 1.0 : (double)H[a * n + b];
        U[x] = (float)(h + (i == j ? damp : 0.0)); // (+ 0.0 too: -0 becomes +0 as on the CPU)
    }
}

// U (n, n) upper = V^-1 upper: R[i][j] = V^-1[n-1-j][n-1-i], each pair swapped by the
// thread of its first element (the partner of an upper element is upper too); lower 0.
static __global__ void sgpt_flip_kernel(float *U, size_t n) {
    for (size_t x = km_thread_index(blockIdx.x, blockDim.x, threadIdx.x); x < n * n;
         x += (size_t)gridDim.x * blockDim.x) {
        size_t i = x / n, j = x % n, a = n - 1 - j, b = n - 1 - i;
        if (j < i) {
            U[x] = 0.0f;
            continue;
        }
        if (a <= i) continue; // the partner's thread does the pair (a < i), or a fixed point (a == i: b == j)
        float t = U[x];
        U[x] = U[a * n + b];
        U[a * n + b] = t;
    }
}

static void copy_wait(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
}

BEST_KAPI int sparsegpt_factor_cuda(float *U, uint8_t *dead, const float *H, size_t n, double percdamp,
                                    const char *what, CudaCtx *c) {
    if (n > 46340) return ERR("%s: %zu inputs: too many for one LAPACK call", what, n);
    cudaStream_t s = c->stream;
    unsigned grid = km_blocks(n * n, KM_THREADS, KM_GRID_CAP);
    // the diagonal, through U's first n floats (U is written whole below)
    float *diag = (float *)xmalloc((n ? n : 1) * sizeof *diag);
    uint8_t *hdead = (uint8_t *)xmalloc(n ? n : 1);
    LAUNCH(sgpt_diag_kernel, km_blocks(n, KM_THREADS, KM_GRID_CAP), KM_THREADS, s, U, H, n);
    CUDA_CHECK(cudaGetLastError());
    copy_wait(diag, U, n * sizeof *diag, cudaMemcpyDeviceToHost, s);
    double mean = 0; // sparsegpt_factor's, in the same order
    for (size_t j = 0; j < n; j++) {
        hdead[j] = diag[j] == 0.0f;
        mean += hdead[j] ? 1.0 : (double)diag[j];
    }
    mean /= (double)n;
    copy_wait(dead, hdead, n, cudaMemcpyHostToDevice, s);
    free(diag);
    free(hdead);
    double damp = percdamp * mean;
    int info = 0;
    for (int tries = 0;; tries++) {
        LAUNCH(sgpt_build_kernel, grid, KM_THREADS, s, U, H, (const uint8_t *)dead, n, damp);
        CUDA_CHECK(cudaGetLastError());
        TRY(solver_potrf_cuda(U, n, &info, c)); // V
        if (info == 0) TRY(solver_trtri_cuda(U, n, &info, c)); // V^-1
        if (info == 0) break;
        TRY(sparsegpt_retry(tries, damp, mean, info, what));
        damp *= 10;
    }
    LAUNCH(sgpt_flip_kernel, grid, KM_THREADS, s, U, n);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}

// --- the pruning --------------------------------------------------------------------------

// w (rows, cols): the dead columns' weights 0.
static __global__ void sgpt_dead_kernel(float *w, const uint8_t *dead, size_t rows, size_t cols) {
    for (size_t x = km_thread_index(blockIdx.x, blockDim.x, threadIdx.x); x < rows * cols;
         x += (size_t)gridDim.x * blockDim.x)
        if (dead[x % cols]) w[x] = 0.0f;
}

// scores (rows, bc) = w^2 / U_cc^2 of the block's columns c = c0 + j, as sparsegpt_prune.
static __global__ void sgpt_score_kernel(float *scores, const float *w, const float *U, size_t rows, size_t cols,
                                         size_t c0, size_t bc) {
    for (size_t x = km_thread_index(blockIdx.x, blockDim.x, threadIdx.x); x < rows * bc;
         x += (size_t)gridDim.x * blockDim.x) {
        size_t r = x / bc, c = c0 + x % bc;
        float wv = w[r * cols + c], d = U[c * cols + c];
        scores[x] = wv * wv / (d * d);
    }
}

// Row j of the staged triangle starts here (rows of SPARSEGPT_BLOCK, SPARSEGPT_BLOCK - 1,
// ... floats): element (j, t), t >= j, is tri[tri_at(j) + t - j].
static __device__ inline unsigned tri_at(unsigned j) { return j * SPARSEGPT_BLOCK - j * (j - 1) / 2; }

// The block's columns c0 .. c0 + bc - 1 of each row, a warp a row, column by column as
// sparsegpt_prune's loop: q = the weight if kept (flags 0), else 0; e = (w_c - q) / U_cc;
// the row's later columns of the block w_t -= e U_ct; w_c = q; err (rows, bc) = e. The
// lanes hold the row's block, lane l columns l, l + 32, l + 64, l + 96; the column being
// done is broadcast by a shuffle. The mask gets its 0s here.
static __global__ void sgpt_update_kernel(float *w, uint8_t *mask, float *err, const uint8_t *flags, const float *U,
                                          size_t rows, size_t cols, size_t c0, unsigned bc) {
    __shared__ float tri[SGPT_TRI]; // U[c0 + j][c0 + t], t >= j
    for (unsigned x = threadIdx.x; x < bc * bc; x += blockDim.x) {
        unsigned j = x / bc, t = x % bc;
        if (t >= j) tri[tri_at(j) + t - j] = U[(c0 + j) * cols + c0 + t];
    }
    __syncthreads(); // the only barrier: after it the warps go their own ways
    unsigned lane = threadIdx.x % 32;
    for (size_t r = (size_t)blockIdx.x * SGPT_ROWS + threadIdx.x / 32; r < rows; r += (size_t)gridDim.x * SGPT_ROWS) {
        float *wr = w + r * cols + c0;
        float v[SPARSEGPT_BLOCK / 32];
        for (unsigned m = 0; m < SPARSEGPT_BLOCK / 32; m++) v[m] = lane + 32 * m < bc ? wr[lane + 32 * m] : 0.0f;
        for (unsigned j = 0; j < bc; j++) {
            float wj = 0.0f;
            for (unsigned m = 0; m < SPARSEGPT_BLOCK / 32; m++)
                if (m == j / 32) wj = v[m]; // (unrolled, constant indices: v stays in registers)
            wj = __shfl_sync(0xffffffffu, wj, (int)(j % 32));
            int pruned = flags[r * bc + j];
            const float *u = tri + tri_at(j) - j; // u[t] = U[c0 + j][c0 + t]
            float q = pruned ? 0.0f : wj, e = (wj - q) / u[j];
            if (e != 0.0f) // (the same for every lane)
                for (unsigned m = 0; m < SPARSEGPT_BLOCK / 32; m++) {
                    unsigned t = lane + 32 * m;
                    if (t > j && t < bc) v[m] = __fsub_rn(v[m], __fmul_rn(e, u[t]));
                }
            for (unsigned m = 0; m < SPARSEGPT_BLOCK / 32; m++)
                if (m == j / 32 && lane == j % 32) v[m] = q;
            if (lane == 0) {
                err[r * bc + j] = e;
                if (pruned) mask[r * cols + c0 + j] = 0;
            }
        }
        for (unsigned m = 0; m < SPARSEGPT_BLOCK / 32; m++)
            if (lane + 32 * m < bc) wr[lane + 32 * m] = v[m];
    }
}

// N:M (nm.h): the block's columns c0 .. c0 + bc - 1 of each row, a thread a row, column by
// column as sparsegpt_prune's loop with its N:M choice: at each group's first column the
// group's M - N lowest keys (w^2 / U_cc^2 as the row's weights then are, column in the group)
// pruned (the mask's 0s), then q, e = (w_c - q) / U_cc, w_t -= e U_ct (rounded as the CPU's:
// no fma), err (rows, bc) = e. The row's block stays in the L1 cache; U's row is the same for
// every thread.
static __global__ void sgpt_nm_update_kernel(float *w, uint8_t *mask, float *err, const float *U, size_t rows,
                                             size_t cols, size_t c0, unsigned bc, int n, int m) {
    for (size_t r = km_thread_index(blockIdx.x, blockDim.x, threadIdx.x); r < rows;
         r += (size_t)gridDim.x * blockDim.x) {
        float *wr = w + r * cols;
        uint8_t *mr = mask + r * cols;
        for (unsigned j = 0; j < bc; j++) {
            size_t c = c0 + j;
            if (j % (unsigned)m == 0) {
                uint64_t key[NM_MAX];
                for (int t = 0; t < m; t++) {
                    float wv = wr[c + t], d = U[(c + t) * cols + c + t];
                    key[t] = (uint64_t)km_bits(wv * wv / (d * d)) << 32 | (uint64_t)t;
                }
                nm_drop_smallest(key, m, m - n); // the M - N smallest (the set sparsegpt.c's select gives)
                for (int a = 0; a < m - n; a++) mr[c + (key[a] & 0xffffffffu)] = 0;
            }
            float q = mr[c] ? wr[c] : 0.0f, e = (wr[c] - q) / U[c * cols + c];
            const float *u = U + c * cols + c0;
            if (e != 0.0f)
                for (unsigned t = j + 1; t < bc; t++) wr[c0 + t] = __fsub_rn(wr[c0 + t], __fmul_rn(e, u[t]));
            wr[c] = q;
            err[r * bc + j] = e;
        }
    }
}

// The scratch, carved: scores, errors (rows * 128 floats each), flags (rows * 128 bytes).
static size_t sgpt_round(size_t b) { return (b + 255) & ~(size_t)255; }

BEST_KAPI size_t sparsegpt_prune_scratch(size_t rows) {
    size_t nb = rows * SPARSEGPT_BLOCK;
    return 2 * sgpt_round(nb * sizeof(float)) + sgpt_round(nb);
}

BEST_KAPI void sparsegpt_prune_cuda(float *w, uint8_t *mask, size_t rows, size_t cols, const float *U,
                                    const uint8_t *dead, double sparsity, const NMPattern *nm, void *scratch,
                                    CudaCtx *c) {
    int m = nm ? nm->m : 0;
    const size_t B = m ? SPARSEGPT_BLOCK / (size_t)m * (size_t)m : SPARSEGPT_BLOCK; // as sparsegpt_prune
    if (rows == 0 || cols == 0) return;
    CHECK(rows * B <= UINT32_MAX, "sparsegpt_prune_cuda: %zu rows: a block's places pass 2^32", rows);
    cudaStream_t s = c->stream;
    float *scores = (float *)scratch, *err = (float *)((char *)scratch + sgpt_round(rows * B * sizeof(float)));
    uint8_t *flags = (uint8_t *)((char *)scratch + 2 * sgpt_round(rows * B * sizeof(float)));
    LAUNCH(sgpt_dead_kernel, km_blocks(rows * cols, KM_THREADS, KM_GRID_CAP), KM_THREADS, s, w, dead, rows, cols);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemsetAsync(mask, 1, rows * cols, s));
    for (size_t c0 = 0; c0 < cols; c0 += B) {
        size_t bc = cols - c0 < B ? cols - c0 : B, c1 = c0 + bc;
        size_t nb = rows * bc, k = (size_t)floor((double)nb * sparsity); // as sparsegpt_prune
        if (m) {
            LAUNCH(sgpt_nm_update_kernel, km_blocks(rows, KM_THREADS, KM_GRID_CAP), KM_THREADS, s, w, mask, err, U, rows,
                   cols, c0, (unsigned)bc, nm->n, m);
            CUDA_CHECK(cudaGetLastError());
        } else {
            LAUNCH(sgpt_score_kernel, km_blocks(nb, KM_THREADS, KM_GRID_CAP), KM_THREADS, s, scores, (const float *)w, U,
                   rows, cols, c0, bc);
            CUDA_CHECK(cudaGetLastError());
            select_smallest_cuda(flags, scores, 1, nb, k, s);
            LAUNCH(sgpt_update_kernel, km_blocks(rows, SGPT_ROWS, KM_GRID_CAP), SGPT_ROWS * 32, s, w, mask, err,
                   (const uint8_t *)flags, U, rows, cols, c0, (unsigned)bc);
            CUDA_CHECK(cudaGetLastError());
        }
        // the columns right of the block: W[:, c1:] -= Err (rows, bc) @ U[c0:c1, c1:]
        if (c1 < cols) matmul_f32_cuda(c, w + c1, err, U + c0 * cols + c1, NULL, rows, cols - c1, bc, bc, cols, cols, 0, 0,
                                    -1.0f, 1.0f);
    }
}
