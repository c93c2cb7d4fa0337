// cuda.cu: device discovery and the CudaCtx of cuda.h, with the CUDA runtime and cuBLASLt.
//
// Discovery must be harmless on a machine with the toolkit and no driver (the build
// machines): cudaGetDeviceCount then fails with cudaErrorInsufficientDriver, which is
// not sticky; we clear it and count 0. The reason is kept for cuda_info.
#include "base/cuda.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/error.h" // defines: ERR, xcalloc

// Why the last count was 0 (empty when a device was found).
static char why_none[160];

int cuda_device_count(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        // what a user can act on: no driver at all, a driver too old, or another reason
        int drv = 0, rt = 0;
        if (cudaDriverGetVersion(&drv) != cudaSuccess) drv = 0;
        cudaRuntimeGetVersion(&rt);
        if ((e == cudaErrorInsufficientDriver && drv == 0) || e == cudaErrorNoDevice)
            snprintf(why_none, sizeof why_none, "no usable NVIDIA GPU or driver found (%s)", cudaGetErrorName(e));
        else if (e == cudaErrorInsufficientDriver)
            snprintf(why_none, sizeof why_none, "the NVIDIA driver supports CUDA %d.%d, older than the runtime %d.%d "
                     "these tools were built with: update the driver (%s)", drv / 1000, drv % 1000 / 10, rt / 1000,
                     rt % 1000 / 10, cudaGetErrorName(e));
        else
            snprintf(why_none, sizeof why_none, "no usable NVIDIA GPU: %s (%s)", cudaGetErrorString(e),
                     cudaGetErrorName(e));
        (void)cudaGetLastError(); // clear it: asking is not an error
        return 0;
    }
    if (n == 0) snprintf(why_none, sizeof why_none, "no NVIDIA GPU visible (CUDA_VISIBLE_DEVICES?)");
    else why_none[0] = 0;
    return n;
}

const char *cuda_info(void) {
    static char buf[800];
    int rt = 0, drv = 0;
    cudaRuntimeGetVersion(&rt);
    if (cudaDriverGetVersion(&drv) != cudaSuccess) drv = 0;
    if (cuda_device_count() == 0) {
        snprintf(buf, sizeof buf, "CUDA runtime %d.%d, no device: %s", rt / 1000, rt % 1000 / 10,
                 why_none);
        return buf;
    }
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(buf, sizeof buf, "CUDA runtime %d.%d, device 0 unreadable", rt / 1000, rt % 1000 / 10);
        return buf;
    }
    snprintf(buf, sizeof buf, "%s, sm_%d%d, %d SMs, %.1f GiB, CUDA runtime %d.%d, driver %d.%d",
             p.name, p.major, p.minor, p.multiProcessorCount, (double)p.totalGlobalMem / (1 << 30),
             rt / 1000, rt % 1000 / 10, drv / 1000, drv % 1000 / 10);
    return buf;
}

int cuda_ctx_create(CudaCtx **out, int device, size_t workspace_bytes) {
    *out = NULL;
    int n = cuda_device_count();
    if (n == 0) return ERR("no CUDA device: %s", why_none);
    if (device < 0 || device >= n) return ERR("CUDA device %d does not exist (%d visible)", device, n);
    CudaCtx *c = (CudaCtx *)xcalloc(1, sizeof *c);
    c->device = device;
    CUDA_CHECK(cudaSetDevice(device));
    cudaDeviceProp p;
    CUDA_CHECK(cudaGetDeviceProperties(&p, device));
    int cc = 10 * p.major + p.minor;
    if (cc < 80) {
        free(c);
        return ERR("CUDA device %d (%s) is sm_%d; this build needs sm_80 or later (A100, H100)",
                   device, p.name, cc);
    }
    c->sm_count = p.multiProcessorCount;
    c->cc = cc;
    CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasLtCreate(&c->lt));
    c->workspace_bytes = workspace_bytes;
    if (workspace_bytes) {
        cudaError_t e = cudaMalloc(&c->workspace, workspace_bytes);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            cuda_ctx_free(c);
            return ERR("CUDA device %d: cannot allocate %zu bytes of cuBLASLt workspace: %s",
                       device, workspace_bytes, cudaGetErrorString(e));
        }
    }
    *out = c;
    return 0;
}

size_t cuda_mem_in_use(const CudaCtx *c) {
    if (!c) return 0;
    size_t free_b = 0, total = 0;
    CUDA_CHECK(cudaSetDevice(c->device));
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total));
    return total - free_b;
}

size_t cuda_mem_free(const CudaCtx *c) {
    if (!c) return 0;
    size_t free_b = 0, total = 0;
    CUDA_CHECK(cudaSetDevice(c->device));
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total));
    return free_b;
}

void cuda_ctx_free(CudaCtx *c) {
    if (!c) return;
    if (c->workspace) CUDA_CHECK(cudaFree(c->workspace));
    if (c->lt) CUBLAS_CHECK(cublasLtDestroy(c->lt));
    if (c->stream) CUDA_CHECK(cudaStreamDestroy(c->stream));
    free(c);
}
