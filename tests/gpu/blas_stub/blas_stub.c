// blas_stub.c: the BLAS and OpenBLAS functions layers.c calls, for tests/gpu/run.sh's
// fallback build only (see cblas.h beside this). cblas_sgemm is a plain loop, row-major
// only, because the GPU tests' references use it (layers.c's attention); it is slow and
// sums in another order than OpenBLAS, which the tests' tolerances allow. cblas_sgemv
// aborts with a message: no test of that build calls it.
#include <stdio.h>
#include <stdlib.h>

#include "cblas.h"

static void no_blas(const char *what) {
    fprintf(stderr, "%s: no BLAS in tests/gpu/run.sh's fallback build\n", what);
    abort();
}

// c (m, n) = alpha op(a) (m, k) @ op(b) (k, n) + beta c; beta = 0 ignores what c holds.
void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m,
                 int n, int k, float alpha, const float *a, int lda, const float *b, int ldb,
                 float beta, float *c, int ldc) {
    if (order != CblasRowMajor) no_blas("cblas_sgemm (column-major)");
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float s = 0.0f;
            for (int p = 0; p < k; p++)
                s += (ta == CblasNoTrans ? a[(size_t)i * lda + p] : a[(size_t)p * lda + i]) *
                     (tb == CblasNoTrans ? b[(size_t)p * ldb + j] : b[(size_t)j * ldb + p]);
            float *cij = c + (size_t)i * ldc + j;
            *cij = beta == 0.0f ? alpha * s : alpha * s + beta * *cij;
        }
}

void cblas_sgemv(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, int m, int n, float alpha,
                 const float *a, int lda, const float *x, int incx, float beta, float *y, int incy) {
    (void)order, (void)ta, (void)m, (void)n, (void)alpha, (void)a, (void)lda, (void)x, (void)incx;
    (void)beta, (void)y, (void)incy;
    no_blas("cblas_sgemv");
}

void openblas_set_num_threads(int n) { (void)n; }
int openblas_get_num_threads(void) { return 1; }
int openblas_get_parallel(void) { return 0; }
char *openblas_get_config(void) { return (char *)"no BLAS (tests/gpu/run.sh fallback stub)"; }
