// cuda.c: cuda.h in a build without CUDA (no nvcc, NVCC=none, the sanitizer and fuzz
// builds): no devices, and a context cannot be made. With BEST_CUDA=1 cuda.cu is the
// implementation and this file compiles to nothing.
#include "base/cuda.h"

#ifndef BEST_CUDA
#include "base/error.h" // defines: ERR

int cuda_device_count(void) { return 0; }

const char *cuda_info(void) { return "built without CUDA (no nvcc, NVCC=none, or the sanitizer build)"; }

int cuda_ctx_create(CudaCtx **out, int device, size_t workspace_bytes) {
    (void)device;
    (void)workspace_bytes;
    *out = NULL;
    return ERR("no CUDA device: this build has no CUDA (make found no nvcc, NVCC=none, or the sanitizer build)");
}

void cuda_ctx_free(CudaCtx *c) { (void)c; }

size_t cuda_mem_in_use(const CudaCtx *c) {
    (void)c;
    return 0;
}

size_t cuda_mem_free(const CudaCtx *c) {
    (void)c;
    return 0;
}
#endif
