// blas_stub.c: the BLAS and OpenBLAS functions layers.c calls, for tests/gpu/run.sh's
// fallback build only (see cblas.h beside this): naive row-major products, slow and
// plain, enough for the small shapes of the GPU tests (the CPU reference of the cuBLASLt
// checks in tests/test_kernels.cpp). Column-major calls abort: layers.c makes none.
#include <stdio.h>
#include <stdlib.h>

#include "cblas.h"

static void row_major_only(enum CBLAS_ORDER order, const char *what) {
    if (order == CblasRowMajor) return;
    fprintf(stderr, "%s: the fallback BLAS stub is row-major only\n", what);
    abort();
}

// C (m, n) = alpha op(A) op(B) + beta C, row-major; op(A) (m, k), op(B) (k, n).
void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m,
                 int n, int k, float alpha, const float *a, int lda, const float *b, int ldb,
                 float beta, float *c, int ldc) {
    row_major_only(order, "cblas_sgemm");
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float s = 0.0f;
            for (int l = 0; l < k; l++) {
                float x = ta == CblasNoTrans ? a[(size_t)i * lda + l] : a[(size_t)l * lda + i];
                float y = tb == CblasNoTrans ? b[(size_t)l * ldb + j] : b[(size_t)j * ldb + l];
                s += x * y;
            }
            float *o = &c[(size_t)i * ldc + j];
            *o = alpha * s + (beta != 0.0f ? beta * *o : 0.0f);
        }
}

// y (m or n) = alpha op(A) x + beta y, row-major A (m, n).
void cblas_sgemv(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, int m, int n, float alpha,
                 const float *a, int lda, const float *x, int incx, float beta, float *y, int incy) {
    row_major_only(order, "cblas_sgemv");
    int rows = ta == CblasNoTrans ? m : n, cols = ta == CblasNoTrans ? n : m;
    for (int i = 0; i < rows; i++) {
        float s = 0.0f;
        for (int j = 0; j < cols; j++) {
            float v = ta == CblasNoTrans ? a[(size_t)i * lda + j] : a[(size_t)j * lda + i];
            s += v * x[(size_t)j * incx];
        }
        float *o = &y[(size_t)i * incy];
        *o = alpha * s + (beta != 0.0f ? beta * *o : 0.0f);
    }
}

void openblas_set_num_threads(int n) { (void)n; }
int openblas_get_num_threads(void) { return 1; }
int openblas_get_parallel(void) { return 0; }
char *openblas_get_config(void) { return (char *)"naive BLAS stub (tests/gpu/run.sh fallback)"; }
