// cuda_shims.h: test-only CPU stand-ins for the library calls the emulator (cuda_emu.h)
// cannot run: cuBLASLt's products (matmul.cu) and cuSOLVER's factorisations (solver.cu).
// Each reads the same operands the real call would (bf16 bits where the device's product
// takes them) and computes with the CPU path's own functions (layers.c's products,
// OpenBLAS, LAPACK), enqueued with emu_enqueue so that a stream capture records it as a
// launch. Included after cuda_emu.h by the emulated builds of tests/test_step.cpp,
// test_oneshot_cuda.cpp and test_calib_cuda.cpp (never by their _gpu builds, which call
// the real libraries), with the emulator's CudaCtx (a stream only: no handle to hold).
#ifndef BEST_CUDA_SHIMS_H
#define BEST_CUDA_SHIMS_H

#include <cblas.h>
#include <string.h>

#include <vector>

#include "nn/kernel_math.h" // defines: km_float_from_bf16
#include "nn/layers.h"      // defines: matmul_forward, matmul_backward (the CPU products)

extern "C" {
void spotrf_(const char *uplo, const int *n, float *a, const int *lda, int *info);
void strtri_(const char *uplo, const char *diag, const int *n, float *a, const int *lda, int *info);
}

// The emulator's context: a stream only.
struct CudaCtx {
    cudaStream_t stream;
};

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function" // each test uses some of them

static std::vector<float> shim_from_bf16(const uint16_t *x, size_t n) {
    std::vector<float> f(n);
    for (size_t i = 0; i < n; i++) f[i] = km_float_from_bf16(x[i]);
    return f;
}

// cuBLASLt's bf16 products: the operands are bf16 already; the CPU product in fp32.
static void matmul_forward_cuda(CudaCtx *, float *y, const uint16_t *x, const uint16_t *w, const float *b,
                                size_t N, size_t IC, size_t OC, int acc) {
    emu_enqueue([=] {
        std::vector<float> xf = shim_from_bf16(x, N * IC), wf = shim_from_bf16(w, OC * IC);
        matmul_forward(y, xf.data(), wf.data(), b, N, IC, OC, acc);
    });
}

// cuBLASLt's D = A B + C with C != D: the residual copied into y, then accumulated.
static void matmul_forward_add_cuda(CudaCtx *c, float *y, const uint16_t *x, const uint16_t *w, const float *b,
                                    const float *res, size_t N, size_t IC, size_t OC) {
    emu_enqueue([=] {
        if (y != res) memmove(y, res, N * OC * sizeof(float));
    });
    matmul_forward_cuda(c, y, x, w, b, N, IC, OC, 1);
}

static void matmul_backward_cuda(CudaCtx *, float *dx, float *dw, const uint16_t *dy, const uint16_t *x,
                                 const uint16_t *w, size_t N, size_t IC, size_t OC, int dx_acc) {
    emu_enqueue([=] {
        std::vector<float> dyf = shim_from_bf16(dy, N * OC), xf = shim_from_bf16(x, N * IC), wf;
        if (w) wf = shim_from_bf16(w, OC * IC);
        else wf.assign(OC * IC, 0.0f); // (dx unused then)
        std::vector<float> dw_unused;
        float *dwp = dw;
        if (!dwp) {
            dw_unused.assign(OC * IC, 0.0f);
            dwp = dw_unused.data();
        }
        matmul_backward(dx, dwp, NULL, dyf.data(), xf.data(), wf.data(), N, IC, OC, dx_acc);
    });
}

// cuBLASLt's fp32 product (matmul_f32_cuda): OpenBLAS's sgemm, row-major as declared, then
// the bias added to each row.
static void matmul_f32_cuda(CudaCtx *, float *C, const float *A, const float *B, const float *bias, size_t M,
                            size_t N, size_t K, size_t lda, size_t ldb, size_t ldc, int transa, int transb,
                            float alpha, float beta) {
    emu_enqueue([=] {
        if (M && N && K)
            cblas_sgemm(CblasRowMajor, transa ? CblasTrans : CblasNoTrans, transb ? CblasTrans : CblasNoTrans, (int)M,
                        (int)N, (int)K, alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
        if (bias)
            for (size_t i = 0; i < M; i++)
                for (size_t j = 0; j < N; j++) C[i * ldc + j] += bias[j];
    });
}

// cuSOLVER's Cholesky and triangular inverse (solver.h): LAPACK's, column-major lower.
static int solver_potrf_cuda(float *a, size_t n, int *info, CudaCtx *) {
    int ni = (int)n;
    spotrf_("L", &ni, a, &ni, info);
    return 0;
}
static int solver_trtri_cuda(float *a, size_t n, int *info, CudaCtx *) {
    int ni = (int)n;
    strtri_("L", "N", &ni, a, &ni, info);
    return 0;
}

#pragma GCC diagnostic pop

#endif
