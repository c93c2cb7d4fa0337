// nm.h: N:M semi-structured sparsity: of every M consecutive weights of a row along the
// input dimension (a Linear weight (rows, cols) as torch stores it: groups of M columns),
// N are kept and M - N pruned, the layout sparse tensor cores and N:M kernels expect
// (2:4: 50%, 4:8: 50%, 1:4: 75%).
//
// The rule inside a group, for every method: the M - N weights of lowest score are pruned,
// ties pruning the lower column first (select.h's select_key order, as Wanda's rows and
// SparseGPT's blocks). The scores are each method's own (magnitude |w|, Wanda
// |w| ||X_j||, SparseGPT w^2 / U_jj^2 at the group's first column, calib.h).
//
// Not here: which tensors are prunable (nn/params.h), the methods' scores.
#ifndef BEST_NM_H
#define BEST_NM_H

#include <stddef.h>
#include <stdint.h>

#include "nn/kernel_math.h" // defines: KM_HD
#include "nn/params.h"      // defines: ParamInfo

#ifdef __cplusplus // nm.cu and the C++ tests include this
extern "C" {
#endif

#define NM_MAX 32 // the largest M

typedef struct {
    int n, m; // n kept of every m; m = 0: unstructured (no pattern)
} NMPattern;

// "N:M" with 0 < N < M <= NM_MAX, or "unstructured" (m = 0) -> *out. -1 (no ERR) otherwise.
int nm_parse(NMPattern *out, const char *s);
// "2:4", or "unstructured"; buf holds at least 16 bytes.
const char *nm_name(char *buf, const NMPattern *p);
// The sparsity a pattern gives: (M - N) / M (0 when unstructured).
double nm_sparsity(const NMPattern *p);
// 0 when M divides the input dimension (cols) of every prunable tensor of info, else
// ERR naming the first that it does not ("model.layers.0.mlp.down_proj.weight: 11008
// columns are not a multiple of 32 (--pattern 4:32)").
int nm_check(const NMPattern *p, const ParamInfo *info, int n_info);
// mask (rows, cols) from scores (rows, cols), scores >= +0: in each group of m columns of a
// row the m - n lowest (score, column) keys 0, the others 1 (written whole).
void nm_mask_rows(uint8_t *mask, const float *scores, size_t rows, size_t cols, const NMPattern *p);
// keys (m <= NM_MAX) reordered so that its `drop` smallest come first, smallest first: a
// partial selection sort (m is small). The group's choice of nm_mask_rows and of the
// device's N:M kernels (nm.cu, sparsegpt.cu), host and device alike.
KM_HD void nm_drop_smallest(uint64_t *key, int m, int drop) {
    for (int a = 0; a < drop; a++) {
        int lo = a;
        for (int b = a + 1; b < m; b++)
            if (key[b] < key[lo]) lo = b;
        uint64_t t = key[a];
        key[a] = key[lo];
        key[lo] = t;
    }
}
// w (rows, cols) pruned in place to p (m > 0) and mask (rows, cols) written whole, by
// magnitude's scores fabsf(w) (colsq NULL) or Wanda's, (float)(|w| sqrt(colsq_j)) in double
// (colsq (cols) its squared norms): nm_mask_rows on them, the pruned weights set to 0.
void nm_prune(float *w, uint8_t *mask, size_t rows, size_t cols, const double *colsq, const NMPattern *p);
// The groups of mask (rows, cols) that keep more than n of their m (0: an N:M mask).
size_t nm_violations(const uint8_t *mask, size_t rows, size_t cols, const NMPattern *p);

#ifdef BEST_CUDA
struct CUstream_st; // cudaStream_t
// nm_prune on the device (nm.cu): the CPU's mask and weights bit for bit.
void nm_prune_cuda(float *w, uint8_t *mask, size_t rows, size_t cols, const double *colsq, const NMPattern *p,
                   struct CUstream_st *stream);
#endif

#ifdef __cplusplus
}
#endif

#endif
