// wanda.h: Wanda (Sun et al. 2023, "A Simple and Effective Pruning Approach for LLMs"):
// a weight's score is |W_ij| * ||X_j||_2, the norm of its input feature j over the
// calibration tokens, and each output row keeps its largest scores: exactly
// floor(cols * S) weights of every row are pruned, ties going to the lower column.
//
// Not here: the calibration windows and the layer-by-layer loop (calib.h).
#ifndef BEST_WANDA_H
#define BEST_WANDA_H

#include <stddef.h>
#include <stdint.h>

#include "sparse/nm.h" // defines: NMPattern

#ifdef __cplusplus // wanda.cu and the C++ kernel test include this
extern "C" {
#endif

// colsq (cols) += the column sums of squares of x (N, cols), in double.
void wanda_accumulate(double *colsq, const float *x, size_t N, size_t cols);
// w (rows, cols) pruned in place with colsq from wanda_accumulate: per row the
// floor(cols * sparsity) lowest |w_ij| * sqrt(colsq_j) set to 0 and 0 in mask (rows *
// cols, 1 = kept; written whole). nm (NULL or unstructured: that rule) an N:M pattern
// instead: in each group of M columns of a row the M - N lowest (nm.h; sparsity unused).
void wanda_prune(float *w, uint8_t *mask, size_t rows, size_t cols, const double *colsq, double sparsity,
                 const NMPattern *nm);

#ifdef BEST_CUDA
struct CUstream_st; // cudaStream_t
// The device twins (wanda.cu), on device arrays. wanda_accumulate_cuda: colsq (cols) +=
// the column sums of squares of the bf16 operand x (N, cols) (the products' own input on
// the device), in double, in a fixed order (the same bits every run). wanda_prune_cuda:
// wanda_prune's result bit for bit from the same w and colsq (the same scores, rounded
// as the CPU rounds them, and the same ties: the lower column pruned first).
void wanda_accumulate_cuda(double *colsq, const uint16_t *x, size_t N, size_t cols, struct CUstream_st *stream);
void wanda_prune_cuda(float *w, uint8_t *mask, size_t rows, size_t cols, const double *colsq, double sparsity,
                      struct CUstream_st *stream);
// wanda_accumulate_cuda of an fp32 operand (the walk's --precision fp32).
void wanda_accumulate_f32_cuda(double *colsq, const float *x, size_t N, size_t cols, struct CUstream_st *stream);
#endif

#ifdef __cplusplus
}
#endif

#endif
