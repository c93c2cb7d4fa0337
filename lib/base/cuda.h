// cuda.h: what every CUDA file of libbest shares, and the little the C code needs to
// know about the GPU: whether one is there, one line describing it, and a context that
// holds the cuBLASLt handle, its workspace and the stream the work goes to.
//
// The C half is callable from C in every build. With nvcc (the Makefile's BEST_CUDA=1
// build) cuda.cu implements it; without, cuda.c answers 0 devices, so a caller asks
// `cuda_device_count()` instead of testing BEST_CUDA. Without a driver or a GPU (the
// toolkit alone, as on the build machines) the count is 0, never a crash.
//
// The CUDA half (under __CUDACC__: check macros, LAUNCH, the CudaCtx fields) is for
// .cu files. Kernels themselves live beside their CPU twins (layers.cu, adamw.cu,
// sparse/saliency.cu); the per-element arithmetic they share with the CPU path is in
// kernel_math.h, block reductions in cuda_reduce.cuh. tests/cuda_emu.h supplies its own
// CUDA_CHECK and LAUNCH to run the same kernels on the CPU (docs/cuda.md).
//
// Not here: matrix products (cuBLASLt descriptors come with the step, docs/cuda.md).
#ifndef BEST_CUDA_H
#define BEST_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// Visible CUDA devices: 0 when built without CUDA, without a driver, or without a GPU.
// Never fails; cuda_info says why there are none.
int cuda_device_count(void);
// One line for logs: the build, and device 0 ("NVIDIA H100 80GB HBM3, sm_90, 132 SMs,
// 79.1 GiB, CUDA runtime 13.0, driver 13.0") or why there is none.
const char *cuda_info(void);

// A device's context: its stream, a cuBLASLt handle and workspace (fields below, for .cu
// files; opaque to C).
typedef struct CudaCtx CudaCtx;
// *out = a context on `device` with workspace_bytes of cuBLASLt workspace. Returns 0, or
// -1 after ERR ("no CUDA device: ...", "built without CUDA", out of device memory).
int cuda_ctx_create(CudaCtx **out, int device, size_t workspace_bytes);
void cuda_ctx_free(CudaCtx *c); // NULL is fine
// Bytes in use on c's device now (cudaMemGetInfo: total - free: this process's
// allocations and CUDA context, and any other process's on that GPU); 0 without CUDA.
size_t cuda_mem_in_use(const CudaCtx *c);
// Bytes free on c's device now (cudaMemGetInfo's free); 0 without CUDA.
size_t cuda_mem_free(const CudaCtx *c);

#ifdef __cplusplus
}
#endif

// The linkage of the kernels' C API in .cu files: extern "C", except where
// tests/test_kernels.cpp includes the .cu files themselves to run them on the CPU (it
// makes them static).
#if defined(__cplusplus) && !defined(BEST_KAPI)
#define BEST_KAPI extern "C"
#endif

#ifdef __CUDACC__
#include <cublasLt.h>

#include "base/error.h" // defines: die_

struct CudaCtx {
    int device;
    int sm_count;              // multiprocessors, for persistent grids
    int cc;                    // compute capability, 10 * major + minor (90 = Hopper)
    cudaStream_t stream;       // all of the context's work, in order
    cublasLtHandle_t lt;
    void *workspace;           // (workspace_bytes) cuBLASLt's scratch
    size_t workspace_bytes;
};

// A hint for the errors a user can do something about; "" for the others (bugs).
static inline const char *cuda_hint_(cudaError_t e) {
    switch (e) {
    case cudaErrorInsufficientDriver:
        return ": no NVIDIA driver, or one older than this CUDA runtime (nvidia-smi shows it)";
    case cudaErrorNoDevice: return ": no GPU visible (CUDA_VISIBLE_DEVICES?)";
    case cudaErrorMemoryAllocation: return ": out of device memory (a smaller --micro-batch?)";
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
        return ": this build has sm_80 and sm_90a code and compute_90a PTX; the GPU or driver "
               "needs another (the Makefile's CUDA_ARCH)";
    case cudaErrorInvalidConfiguration:
    case cudaErrorLaunchOutOfResources: return ": a kernel's launch geometry is wrong (a bug)";
    case cudaErrorIllegalAddress: return ": a kernel read or wrote outside its buffers (a bug; "
                                         "compute-sanitizer finds it)";
    default: return "";
    }
}

// For CUDA runtime calls: on failure prints "prog: error: CALL: message (cudaErrorName):
// hint [file:line]" and exits 1. An error inside a kernel surfaces at the next call that
// synchronises; launches are checked with CUDA_CHECK(cudaGetLastError()).
#define CUDA_CHECK(call)                                                                      \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess)                                                                \
            die_(__FILE__, __LINE__, "%s: %s (%s)%s", #call, cudaGetErrorString(e_),          \
                 cudaGetErrorName(e_), cuda_hint_(e_));                                       \
    } while (0)

// The same for cuBLAS / cuBLASLt calls.
#define CUBLAS_CHECK(call)                                                                    \
    do {                                                                                      \
        cublasStatus_t s_ = (call);                                                           \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                      \
            die_(__FILE__, __LINE__, "%s: %s (%s)%s", #call, cublasLtGetStatusString(s_),      \
                 cublasLtGetStatusName(s_),                                                   \
                 s_ == CUBLAS_STATUS_NOT_SUPPORTED ? ": no cuBLASLt algorithm for these shapes, "\
                                                     "types or alignment"                     \
                                                   : "");                                     \
    } while (0)

// kernel<<<grid, block, 0, stream>>>(args): a macro so that tests/cuda_emu.h can run the
// same launch code on the CPU (g++ cannot parse <<< >>>).
#define LAUNCH(kernel, grid, block, stream, ...) kernel<<<(grid), (block), 0, (stream)>>>(__VA_ARGS__)
#endif // __CUDACC__

#endif
