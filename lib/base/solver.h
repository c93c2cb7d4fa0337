// solver.h: the two dense factorisations SparseGPT needs on a GPU, from cuSOLVER, which
// is loaded at run time (dlopen of libcusolver.so.12, then libcusolver.so) the first time
// one is asked for: only best-mask --method sparsegpt --device cuda needs it, so no
// program links it and a machine without it fails that one run in one line
// ("libcusolver.so.12: cannot open shared object file; install the CUDA toolkit's
// cuSOLVER (libcusolver) or use --device cpu").
//
// Matrices are column-major fp32 device arrays (n, n), lower triangle, as LAPACK's
// spotrf_("L") and strtri_("L", "N"): a row-major caller's upper triangle.
//
// The emulated tests (tests/test_oneshot_cuda.cpp) stand LAPACK in for these two.
// Never run on a GPU as of 2026-11-29.
#ifndef BEST_SOLVER_H
#define BEST_SOLVER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef BEST_CUDA
struct CudaCtx;
// a (n, n) = L, the lower Cholesky factor of a's lower triangle (the upper one is not
// touched), on c's stream; *info = cuSOLVER's (0, or the order of the leading minor that
// is not positive definite), waited for. 0, or ERR (cuSOLVER missing, out of memory).
int solver_potrf_cuda(float *a, size_t n, int *info, struct CudaCtx *c);
// a (n, n) = the inverse of its lower triangle (non-unit diagonal), in place; *info as
// LAPACK's (0, or the index of a zero on the diagonal). 0, or ERR.
int solver_trtri_cuda(float *a, size_t n, int *info, struct CudaCtx *c);
#endif

#ifdef __cplusplus
}
#endif

#endif
