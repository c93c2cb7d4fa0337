// cblas.h (stub): only for tests/gpu/run.sh's fallback build, on a device machine that
// lacks OpenBLAS and the other packages `make all` needs. It lets lib/nn/layers.c
// compile so that the kernel tests can compare with its kernels: cblas_sgemm is a plain
// loop, cblas_sgemv aborts (blas_stub.c). Never used by the Makefile.
#ifndef BEST_CBLAS_STUB_H
#define BEST_CBLAS_STUB_H

enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 };
enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112, CblasConjTrans = 113 };

void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m,
                 int n, int k, float alpha, const float *a, int lda, const float *b, int ldb,
                 float beta, float *c, int ldc);
void cblas_sgemv(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, int m, int n, float alpha,
                 const float *a, int lda, const float *x, int incx, float beta, float *y, int incy);

#endif
