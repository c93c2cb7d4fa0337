// solver.cu: solver.h's Cholesky and triangular inverse through cuSOLVER, loaded at run
// time (dlopen) so that no program links it: the first call opens libcusolver.so.12 (the
// CUDA 12 and 13 toolkits' soname), else libcusolver.so, and looks up the six functions
// used; a handle is made per call (a factorisation per layer and input: microseconds
// against milliseconds) on the context's stream.
//
// Never run on a GPU as of 2026-11-29.
#include "base/solver.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cusolverDn.h>

#include "base/cuda.h"  // defines: CudaCtx, CUDA_CHECK
#include "base/error.h" // defines: ERR, TRY, xmalloc

// The functions used, as cusolverDn.h declares them.
static struct {
    int tried, ok;
    char why[256];
    cusolverStatus_t (*create)(cusolverDnHandle_t *);
    cusolverStatus_t (*destroy)(cusolverDnHandle_t);
    cusolverStatus_t (*set_stream)(cusolverDnHandle_t, cudaStream_t);
    cusolverStatus_t (*potrf_size)(cusolverDnHandle_t, cublasFillMode_t, int, float *, int, int *);
    cusolverStatus_t (*potrf)(cusolverDnHandle_t, cublasFillMode_t, int, float *, int, float *, int, int *);
    cusolverStatus_t (*trtri_size)(cusolverDnHandle_t, cublasFillMode_t, cublasDiagType_t, int64_t, cudaDataType,
                                   void *, int64_t, size_t *, size_t *);
    cusolverStatus_t (*trtri)(cusolverDnHandle_t, cublasFillMode_t, cublasDiagType_t, int64_t, cudaDataType, void *,
                              int64_t, void *, size_t, void *, size_t, int *);
} cs;

// 0 once cuSOLVER is loaded, or ERR saying why not (the same answer every call).
static int solver_load(void) {
    if (!cs.tried) {
        cs.tried = 1;
        void *h = dlopen("libcusolver.so.12", RTLD_NOW | RTLD_LOCAL);
        if (!h) h = dlopen("libcusolver.so", RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            snprintf(cs.why, sizeof cs.why, "%s", dlerror());
        } else {
            struct { void **fn; const char *name; } want[] = {
                {(void **)&cs.create, "cusolverDnCreate"},
                {(void **)&cs.destroy, "cusolverDnDestroy"},
                {(void **)&cs.set_stream, "cusolverDnSetStream"},
                {(void **)&cs.potrf_size, "cusolverDnSpotrf_bufferSize"},
                {(void **)&cs.potrf, "cusolverDnSpotrf"},
                {(void **)&cs.trtri_size, "cusolverDnXtrtri_bufferSize"},
                {(void **)&cs.trtri, "cusolverDnXtrtri"},
            };
            cs.ok = 1;
            for (size_t i = 0; i < sizeof want / sizeof want[0] && cs.ok; i++) {
                *want[i].fn = dlsym(h, want[i].name);
                if (!*want[i].fn) {
                    snprintf(cs.why, sizeof cs.why, "libcusolver has no %s (too old a cuSOLVER)", want[i].name);
                    cs.ok = 0;
                }
            }
        }
    }
    if (!cs.ok)
        return ERR("cuSOLVER: %s; install the CUDA toolkit's cuSOLVER (libcusolver) or use --device cpu", cs.why);
    return 0;
}

// ERR for a cuSOLVER call that did not succeed.
static int solver_fail(const char *call, cusolverStatus_t s) {
    return ERR("cuSOLVER: %s failed (status %d)%s", call, (int)s,
               s == CUSOLVER_STATUS_ALLOC_FAILED ? ": out of device memory" : "");
}

// A handle on c's stream, and the device's info word.
static int solver_open(cusolverDnHandle_t *h, int **dinfo, CudaCtx *c) {
    TRY(solver_load());
    cusolverStatus_t s = cs.create(h);
    if (s != CUSOLVER_STATUS_SUCCESS) return solver_fail("cusolverDnCreate", s);
    cs.set_stream(*h, c->stream);
    if (cudaMalloc((void **)dinfo, sizeof(int)) != cudaSuccess) {
        (void)cudaGetLastError();
        cs.destroy(*h);
        return ERR("cuSOLVER: out of device memory for its info word");
    }
    return 0;
}

// *info from the device, the handle and the buffers freed.
static void solver_close(cusolverDnHandle_t h, int *dinfo, void *work, int *info, CudaCtx *c) {
    CUDA_CHECK(cudaMemcpyAsync(info, dinfo, sizeof(int), cudaMemcpyDeviceToHost, c->stream));
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
    CUDA_CHECK(cudaFree(dinfo));
    if (work) CUDA_CHECK(cudaFree(work));
    cs.destroy(h);
}

extern "C" int solver_potrf_cuda(float *a, size_t n, int *info, CudaCtx *c) {
    if (n > 46340) return ERR("cuSOLVER: a Cholesky of order %zu: more than its int indices hold", n);
    cusolverDnHandle_t h;
    int *dinfo;
    TRY(solver_open(&h, &dinfo, c));
    int lwork = 0;
    cusolverStatus_t s = cs.potrf_size(h, CUBLAS_FILL_MODE_LOWER, (int)n, a, (int)n, &lwork);
    float *work = NULL;
    if (s == CUSOLVER_STATUS_SUCCESS && cudaMalloc((void **)&work, (size_t)(lwork > 0 ? lwork : 1) * sizeof(float)) !=
                                            cudaSuccess) {
        (void)cudaGetLastError();
        s = CUSOLVER_STATUS_ALLOC_FAILED;
    }
    if (s == CUSOLVER_STATUS_SUCCESS) s = cs.potrf(h, CUBLAS_FILL_MODE_LOWER, (int)n, a, (int)n, work, lwork, dinfo);
    solver_close(h, dinfo, work, info, c);
    return s == CUSOLVER_STATUS_SUCCESS ? 0 : solver_fail("cusolverDnSpotrf", s);
}

extern "C" int solver_trtri_cuda(float *a, size_t n, int *info, CudaCtx *c) {
    cusolverDnHandle_t h;
    int *dinfo;
    TRY(solver_open(&h, &dinfo, c));
    size_t dev_bytes = 0, host_bytes = 0;
    cusolverStatus_t s = cs.trtri_size(h, CUBLAS_FILL_MODE_LOWER, CUBLAS_DIAG_NON_UNIT, (int64_t)n, CUDA_R_32F, a,
                                       (int64_t)n, &dev_bytes, &host_bytes);
    void *work = NULL, *host = NULL;
    if (s == CUSOLVER_STATUS_SUCCESS && cudaMalloc(&work, dev_bytes ? dev_bytes : 1) != cudaSuccess) {
        (void)cudaGetLastError();
        s = CUSOLVER_STATUS_ALLOC_FAILED;
    }
    if (s == CUSOLVER_STATUS_SUCCESS && host_bytes) host = xmalloc(host_bytes);
    if (s == CUSOLVER_STATUS_SUCCESS)
        s = cs.trtri(h, CUBLAS_FILL_MODE_LOWER, CUBLAS_DIAG_NON_UNIT, (int64_t)n, CUDA_R_32F, a, (int64_t)n, work,
                     dev_bytes, host, host_bytes, dinfo);
    solver_close(h, dinfo, work, info, c);
    free(host);
    return s == CUSOLVER_STATUS_SUCCESS ? 0 : solver_fail("cusolverDnXtrtri", s);
}
