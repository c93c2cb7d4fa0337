// sparsegpt.h: SparseGPT (Frantar & Alistarh 2023, "SparseGPT: Massive Language Models
// Can Be Accurately Pruned in One-Shot"): prune a Linear layer's weights W (rows, cols)
// and update the survivors to compensate, from the Hessian of the layer-wise
// reconstruction error H = 2 X^T X / N over the calibration inputs X (N, cols).
//
//   1. inputs never seen (H_jj = 0: a dead column) get H_jj = 1 and their weights 0;
//      H += damp * I, damp = percdamp (1%) of the mean of diag(H);
//   2. U = the upper Cholesky factor of H^-1 (H^-1 = U^T U), in fp32 as the reference,
//      from one LAPACK Cholesky of H with its order reversed and one triangular inverse
//      (sparsegpt.c says why that is U). A Cholesky that fails (H not positive definite
//      in floating point) is retried with ten times the dampening, up to 4 times, with a
//      warning on stderr; then an error;
//   3. the columns in blocks of 128: in each, the mask prunes exactly
//      floor(rows * 128 * S) weights with the lowest w^2 / U_jj^2 over the block
//      (the reference takes every score <= the one at that rank, one or a few more;
//      ties here go to the lower row, then column); then column by column, each row's
//      pruned weight q = 0 (kept: q = w) and err = (w - q) / U_jj updates the row's
//      later columns of the block, w_c -= err * U_jc (the Optimal Brain Surgeon update);
//      after the block, the columns right of it get -= Err @ U[block, right] (one sgemm).
// Rows are independent within a block (OpenMP over them); the lazy update is BLAS.
//
// H is shared by the layers that read the same input (q, k, v; gate, up): one factor
// serves them (sparsegpt_factor, then sparsegpt_prune for each).
//
// Not here: the layer-by-layer loop (calib.h). H's constant factor 2 / N is left out:
// the dampening is relative to diag(H), and nothing else depends on H's scale.
#ifndef BEST_SPARSEGPT_H
#define BEST_SPARSEGPT_H

#include <stddef.h>
#include <stdint.h>

#include "sparse/nm.h" // defines: NMPattern

#ifdef __cplusplus // sparsegpt.cu and the C++ kernel test include this
extern "C" {
#endif

#define SPARSEGPT_BLOCK 128
#define SPARSEGPT_RETRIES 4 // step 2's retries of the Cholesky (sparsegpt.c and sparsegpt.cu)

// H (d, d) += X^T X for x (N, d): the lower triangle only (row-major; what
// sparsegpt_factor reads), one fp32 BLAS ssyrk into tmp (d, d), then summed in double.
void sparsegpt_accumulate(double *H, float *tmp, const float *x, size_t N, size_t d);
// U (n, n) row-major, upper triangle (the rest zeroed) = the factor of step 2 from H
// (n, n), of which the lower triangle is read (sparsegpt_accumulate's) and all is
// destroyed; dead (n) = 1 for the dead columns of step
// 1. what names the layer in the warning and the error. 0, or ERR.
int sparsegpt_factor(float *U, uint8_t *dead, double *H, size_t n, double percdamp, const char *what);
// After the tries'th failed factorisation at dampening damp (mean: the mean of diag(H);
// info: LAPACK's or cuSOLVER's): 0 and a warning on stderr when another try is due (the
// caller takes 10 x damp), or ERR after the last (SPARSEGPT_RETRIES). Both factors' rule.
int sparsegpt_retry(int tries, double damp, double mean, int info, const char *what);
// w (rows, cols) pruned and updated in place (steps 1 and 3) with the factor of its
// inputs' H; mask (rows * cols) 0 where pruned, else 1.
void sparsegpt_prune(float *w, uint8_t *mask, size_t rows, size_t cols, const float *U, const uint8_t *dead,
                     double sparsity, const NMPattern *nm);

#ifdef BEST_CUDA
struct CudaCtx;
// The device twins (sparsegpt.cu), on device arrays, on c's stream.
//
// sparsegpt_factor_cuda: sparsegpt_factor from H (n, n) fp32 (X^T X summed by cuBLASLt in
// fp32: both triangles; its lower one is read, H is left as it was): the diagonal comes
// to the host for the dead columns and the dampening (the mean in double, as the CPU);
// the dampened H with its order reversed is formed on the device (in double, rounded to
// fp32 as the CPU rounds it); the Cholesky and the triangular inverse are cuSOLVER's
// (base/solver.h), retried with ten times the dampening as the CPU's, with its warning
// and its error; the involution and the zeroed lower triangle are a kernel. So from the
// same H (the CPU's H the doubles of these floats) the same U up to cuSOLVER's order of
// sums (bit for bit where LAPACK stands in for it: the emulator). dead (n) bytes. 0, or ERR.
int sparsegpt_factor_cuda(float *U, uint8_t *dead, const float *H, size_t n, double percdamp, const char *what,
                          struct CudaCtx *c);
// Bytes of device scratch sparsegpt_prune_cuda takes for a matrix of `rows` rows: one
// block of 128 columns' scores, pruned flags and errors, and select_smallest_cuda's.
size_t sparsegpt_prune_scratch(size_t rows);
// sparsegpt_prune on the device: the dead columns zeroed, then per block of 128 columns
// the scores w^2 / U_jj^2, its floor(rows * bc * S) smallest pruned (select_smallest_cuda:
// the CPU's keys, the same set), the rows' column-by-column updates (a kernel, the CPU's
// products and differences rounded as the CPU rounds them), and the columns right of the
// block updated by an fp32 cuBLASLt product (matmul_f32_cuda). Bit for bit the CPU's where
// a CPU product stands in for cuBLASLt's (the emulator); on a GPU the lazy product's order
// of sums differs. scratch: sparsegpt_prune_scratch(rows) bytes. nm (NULL or unstructured:
// the above) an N:M pattern as sparsegpt_prune's: a thread a row chooses each group at its
// first column (the CPU's keys and rounding) instead of the block's selection.
void sparsegpt_prune_cuda(float *w, uint8_t *mask, size_t rows, size_t cols, const float *U, const uint8_t *dead,
                          double sparsity, const NMPattern *nm, void *scratch, struct CudaCtx *c);
#endif

#ifdef __cplusplus
}
#endif

#endif
