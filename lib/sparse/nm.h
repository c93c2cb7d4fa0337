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

// --- BEST with an N:M target (best-train --pattern; docs/best-train.md, "N:M") ---------
// Each mask update of a run with a pattern first protects, in every group, the `keep`
// highest-scoring weights still alive: their scores become +inf, so the global selection
// (select.h) keeps them before anything else. The selection then prunes the rest down to
// the update's sparsity. A group always keeps at least `keep` weights; at the ramp's end
// the protected weights are exactly what is kept, an N:M mask.
//
// The ramps (what each update protects, and to what sparsity it prunes):
//   global  keep = N at every update, the sparsity S(t) of the schedule: one global
//           threshold on the second-order saliency decides which groups lose their spare
//           weights first; the last update (S = (M - N) / M) leaves exactly N per group.
//   group   keep n_j = M - floor((M - N) S(t) / S_f), sparsity 1 - n_j / M: every group
//           steps down together (4:4 -> 3:4 -> 2:4), the selection keeping exactly the
//           protected weights.
typedef enum { NM_RAMP_GLOBAL, NM_RAMP_GROUP } NMRamp;
int nm_ramp_parse(NMRamp *out, const char *name); // "global", "group"; -1 (no ERR) if unknown
const char *nm_ramp_name(NMRamp r);
// The update at scheduled sparsity S (0 <= S <= nm_sparsity(p)) under ramp r: the weights
// each group protects (*keep) and the sparsity the selection prunes to (*sparsity).
void nm_ramp_at(int *keep, double *sparsity, const NMPattern *p, NMRamp r, double S);

// One group: scores s (m <= NM_MAX; the sign bit set: pruned already, not a candidate);
// its `keep` highest candidates become +inf, ties to the higher column (nm_mask_rows'
// rule: the lower column is pruned first).
KM_HD void nm_protect_group(float *s, int m, int keep) {
    uint64_t key[NM_MAX];
    for (int t = 0; t < m; t++) {
        uint32_t b = km_bits(s[t]);
        key[t] = (uint64_t)(b >> 31 ? 0u : b + 1u) << 32 | (uint64_t)t; // not a candidate: below all
    }
    nm_drop_smallest(key, m, m - keep);
    for (int a = m - keep; a < m; a++)
        if (key[a] >> 32) s[key[a] & 0xffffffffu] = km_float(0x7f800000u); // +inf
}
// nm_protect_group on every group of s (n, a multiple of m, starting at a group).
void nm_protect(float *s, size_t n, int m, int keep);

// The groups that this rank's slice [lo, hi) of the parameter block (dist.h) shares with
// another rank: at most two, the one holding lo and the one holding hi - 1, when a rank
// boundary cuts them (a tensor's groups start at its offset; cols % m == 0). Each is
// protected from all its weights' scores, exchanged between the ranks (nm_edges_protect).
typedef struct {
    size_t at[2], len[2];  // the owned part of edge e: block elements [at, at + len); len 0: none
    size_t first[2];       // the group's first element (block)
    int tensor[2];         // the index in info of its tensor
    float s[2][NM_MAX];    // their scores, in: as scored; out: the protected ones +inf
} NMEdges;
// Finds this rank's edges (len 0 where a boundary cuts no group of a prunable tensor).
void nm_edges_find(NMEdges *e, const ParamInfo *info, int n_info, int m, size_t lo, size_t hi);
// Every rank calls it with its edges' scores filled in: the owned parts go to every rank
// (one dist_sum_f64 of a few hundred doubles a rank; nothing on one rank), and each edge
// group is protected as nm_protect_group would protect it whole.
void nm_edges_protect(NMEdges *e, int m, int keep);

#ifdef BEST_CUDA
struct CUstream_st; // cudaStream_t
// nm_prune on the device (nm.cu): the CPU's mask and weights bit for bit.
void nm_prune_cuda(float *w, uint8_t *mask, size_t rows, size_t cols, const double *colsq, const NMPattern *p,
                   struct CUstream_st *stream);
// nm_protect on the device: s (n) device scores, a multiple of m from a group's start.
void nm_protect_cuda(float *s, size_t n, int m, int keep, struct CUstream_st *stream);
#endif

#ifdef __cplusplus
}
#endif

#endif
