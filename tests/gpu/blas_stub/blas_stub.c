// blas_stub.c: the BLAS and OpenBLAS functions layers.c calls, for tests/gpu/run.sh's
// fallback build only (see cblas.h beside this): a product aborts with a message,
// since no test of that build multiplies matrices on the CPU.
#include <stdio.h>
#include <stdlib.h>

#include "cblas.h"

static void no_blas(const char *what) {
    fprintf(stderr, "%s: no BLAS in tests/gpu/run.sh's fallback build\n", what);
    abort();
}

void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m,
                 int n, int k, float alpha, const float *a, int lda, const float *b, int ldb,
                 float beta, float *c, int ldc) {
    (void)order, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda;
    (void)b, (void)ldb, (void)beta, (void)c, (void)ldc;
    no_blas("cblas_sgemm");
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
