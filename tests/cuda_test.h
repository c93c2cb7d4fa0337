// cuda_test.h: what the C++ tests of the CUDA code share in both of their builds (the
// emulated one, after cuda_emu.h and cuda_shims.h; the _gpu one, after base/cuda.h):
// device memory (cudaMalloc on a GPU, host memory under the emulator) and a buffer type
// over it, the context the tests run in, random inputs, and the tiny model fixtures.
// Test-only.
#ifndef BEST_CUDA_TEST_H
#define BEST_CUDA_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "base/error.h" // defines: CHECK, err_msg
#include "nn/model.h"   // defines: Model, model_load
#include "test.h"       // defines: T_OK

#ifdef TEST_ON_GPU
[[maybe_unused]] static void *dev_alloc(size_t bytes) {
    void *p;
    CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
}
[[maybe_unused]] static void dev_free(void *p) { CUDA_CHECK(cudaFree(p)); }
[[maybe_unused]] static void to_dev(void *d, const void *h, size_t bytes) {
    CUDA_CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
}
[[maybe_unused]] static void to_host(void *h, const void *d, size_t bytes) {
    CUDA_CHECK(cudaDeviceSynchronize()); // a kernel's fault surfaces here
    CUDA_CHECK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
}
#else
[[maybe_unused]] static void *dev_alloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) abort();
    return p;
}
[[maybe_unused]] static void dev_free(void *p) { free(p); }
[[maybe_unused]] static void to_dev(void *d, const void *h, size_t bytes) { memcpy(d, h, bytes); }
[[maybe_unused]] static void to_host(void *h, const void *d, size_t bytes) { memcpy(h, d, bytes); }
#endif

// A device buffer of n T; the host vector it came from or goes to.
template <class T> struct Dev {
    T *p;
    size_t n;
    explicit Dev(size_t n_) : p((T *)dev_alloc(n_ * sizeof(T))), n(n_) {}
    explicit Dev(const std::vector<T> &h) : Dev(h.size()) { put(h); }
    ~Dev() { dev_free(p); }
    Dev(const Dev &) = delete;
    Dev &operator=(const Dev &) = delete;
    void put(const std::vector<T> &h) { to_dev(p, h.data(), n * sizeof(T)); }
    std::vector<T> get() const {
        std::vector<T> h(n);
        to_host(h.data(), p, n * sizeof(T));
        return h;
    }
    void poison() { // all bits set: NaN as a float or bf16, -1 as an int
        std::vector<T> h(n);
        memset(h.data(), 0xff, n * sizeof(T));
        put(h);
    }
};

#if defined(TEST_ON_GPU) || defined(BEST_CUDA_SHIMS_H) // (the emulator's CudaCtx is cuda_shims.h's)
// The context the tests run in: a real one on the GPU, a stream alone in the emulator.
[[maybe_unused]] static CudaCtx *ctx_get(void) {
#ifdef TEST_ON_GPU
    static CudaCtx *c;
    if (!c) CHECK(cuda_ctx_create(&c, 0, (size_t)32 << 20) == 0, "cuda_ctx_create: %s", err_msg());
    return c;
#else
    static CudaCtx c = {0};
    return &c;
#endif
}
#endif

// Test inputs: a xorshift generator, and floats uniform in [-a, a], never exactly 0.
static uint64_t rng = 0x243F6A8885A308D3ull;
[[maybe_unused]] static uint32_t rnd32() {
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (uint32_t)((rng * 2685821657736338717ull) >> 32);
}
[[maybe_unused]] static float rnd(float a) {
    float x = a * ((float)(rnd32() >> 8) / 8388608.0f - 1.0f);
    return x == 0.0f ? a * 0.5f : x;
}

// tests/fixtures/model/NAME into *m: 1, or 0 with a failed check.
[[maybe_unused]] static int load_fixture(Model *m, const char *name) {
    char dir[128];
    snprintf(dir, sizeof dir, "tests/fixtures/model/%s", name);
    return T_OK(model_load(m, dir) == 0, "%s: load %s", name, dir);
}

#endif
