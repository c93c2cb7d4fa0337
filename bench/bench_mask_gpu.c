// bench_mask_gpu.c: BEST's mask update on a GPU at a real model's size: best-train
// --device cuda's DevModel for CONFIG (LLaMA-2-7B: 6.48e9 prunable weights) with random
// weights and moments, and mask_update_cuda (lib/sparse/mask.cu: second-order scores,
// the exact global select, the mask and weights changed in place) timed at the
// sparsities a cubic schedule passes through, each shrinking the last mask. The peer in
// the same process: a device-to-device copy of the fp32 weights (cudaMemcpyAsync), the
// floor of any pass over them; the update's time is printed as a multiple of it.
//
//   bench_mask_gpu [--layers L] [--json FILE] CONFIG.json
//
// --layers L overrides num_hidden_layers (LLaMA-2-7B's 19 bytes per parameter of
// DevModel need an H200's 141 GB; 16 layers fit an H100's 80 GB). Host memory: the
// weights and both moments in fp32 (81 GB for LLaMA-2-7B). Results:
// docs/benchmarks.md.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/error.h"    // defines: TRY_OR_DIE, DIE
#include "base/fileio.h"   // defines: file_read_all
#include "base/progress.h" // defines: now_seconds
#include "nn/adamw.h"      // defines: AdamW, adamw_init
#include "base/cuda.h"       // defines: CudaCtx, cuda_ctx_create, cuda_info
#include "nn/model.h"      // defines: Model, model_plan, model_alloc, DevModel
#include "sparse/mask.h"   // defines: MaskSpec, mask_update_cuda

#ifdef BEST_CUDA
#include <cuda_runtime.h> // the C API: the peer's copy

// mask_update_cuda on d's spans (the engine's call, lib/engine/engine_cuda.c)
static int mask_update_dev(DevModel *d, const MaskSpec *spec) {
    MaskSpans ms;
    mask_spans_of(&ms, d);
    return mask_update_cuda(&ms, spec);
}

#define RT_CHECK(call)                                                                           \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess) DIE("%s: %s", #call, cudaGetErrorString(e_));                     \
    } while (0)


// x (n) = uniform in [-a, a) (|.| with positive), from a counter hash: the same values
// for any thread count.
static void fill_random(float *x, size_t n, float a, int positive, uint64_t seed) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        uint64_t z = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
        z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
        z ^= z >> 29;
        float v = a * ((float)(z >> 40) / 8388608.0f - 1.0f);
        x[i] = positive && v < 0 ? -v : v;
    }
}
#endif

int main(int argc, char **argv) {
    err_set_prog("bench_mask_gpu");
#ifndef BEST_CUDA
    (void)argc;
    (void)argv;
    printf("bench_mask_gpu: built without CUDA (no nvcc): nothing to run\n");
    return 0;
#else
    int layers = 0, i = 1;
    const char *json_out = NULL;
    for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
        if (!strcmp(argv[i], "--layers")) layers = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--json")) json_out = argv[i + 1];
        else break;
    }
    if (i != argc - 1 || layers < 0) {
        fprintf(stderr, "usage: bench_mask_gpu [--layers L] [--json FILE] CONFIG.json\n");
        return 2;
    }
    const char *path = argv[i];
    char *text;
    size_t len;
    TRY_OR_DIE(file_read_all(&text, &len, path));
    if (layers > 0) { // the config with num_hidden_layers = layers
        json_error_t je;
        json_t *root = json_loadb(text, len, 0, &je);
        if (!root) DIE("%s: %s", path, je.text);
        json_object_set_new(root, "num_hidden_layers", json_integer(layers));
        free(text);
        text = json_dumps(root, 0);
        len = strlen(text);
        json_decref(root);
    }
    Model m;
    memset(&m, 0, sizeof m);
    TRY_OR_DIE(model_plan(&m, text, len, path, 0));
    free(text);
    model_alloc(&m);
    CudaCtx *c;
    TRY_OR_DIE(cuda_ctx_create(&c, 0, (size_t)32 << 20));
    printf("# device: %s\n", cuda_info());
    AdamW opt;
    adamw_init(&opt, m.n_params);
    double t0 = now_seconds();
    fill_random(m.params, m.n_params, 0.02f, 0, 1);
    fill_random(opt.m, m.n_params, 1e-3f, 0, 2);
    fill_random(opt.v, m.n_params, 1e-6f, 1, 3);
    printf("# %s: %d layers, %.3fB parameters, %.3fB prunable; random weights and moments (%.1f s)\n", path,
           (int)m.L, (double)m.n_params / 1e9, (double)m.n_prunable / 1e9, now_seconds() - t0);
    DevModel d;
    t0 = now_seconds();
    TRY_OR_DIE(devmodel_init(&d, c, &m, 1, 64, 0, 0));
    devmodel_upload(&d, m.params, &opt, NULL);
    printf("# DevModel: %.1f GB on the device, uploaded in %.1f s\n",
           (double)devmodel_bytes(NULL, &m, 1, 64, 0, 0, 0) / 1e9, now_seconds() - t0);
    // the peer: a copy of the fp32 weights (read + write of 4 bytes a parameter), best of 3
    double copy = 1e30;
    for (int r = 0; r < 3; r++) {
        RT_CHECK(cudaDeviceSynchronize());
        double t = now_seconds();
        RT_CHECK(cudaMemcpy(d.grads, d.params, m.n_params * sizeof(float), cudaMemcpyDeviceToDevice));
        RT_CHECK(cudaDeviceSynchronize());
        t = now_seconds() - t;
        if (t < copy) copy = t;
    }
    printf("# peer: device-to-device copy of the fp32 weights: %.4f s (%.0f GB/s read + write)\n", copy,
           2.0 * (double)m.n_params * 4 / copy / 1e9);
    FILE *jf = json_out ? fopen(json_out, "w") : NULL;
    if (json_out && !jf) DIE("%s: cannot write", json_out);
    if (jf)
        fprintf(jf, "{\"config\":\"%s\",\"layers\":%d,\"prunable\":%zu,\"device\":\"%s\",\"copy_s\":%.6f,\"updates\":[",
                path, (int)m.L, m.n_prunable, cuda_info(), copy);
    const double S[] = {0.3, 0.6, 0.8, 0.9, 0.95, 0.99};
    for (int k = 0; k < (int)(sizeof S / sizeof *S); k++) {
        MaskSpec spec = {SAL_SECOND, GROUP_GLOBAL, S[k], NULL, 0, 0, 0};
        double t = now_seconds();
        int rc = mask_update_dev(&d, &spec); // synchronises before it returns
        t = now_seconds() - t;
        if (rc != 0) DIE("mask_update_cuda returned %d at sparsity %g", rc, S[k]);
        double sp = devmodel_sparsity(&d);
        printf("mask update to %.2f: %.4f s (%.1f x the weights' copy), %.3f GScores/s; sparsity now %.6f\n", S[k], t,
               t / copy, (double)m.n_prunable / t / 1e9, sp);
        if (jf) fprintf(jf, "%s{\"sparsity\":%.2f,\"seconds\":%.6f,\"sparsity_after\":%.9f}", k ? "," : "", S[k], t, sp);
    }
    if (jf) {
        fprintf(jf, "]}\n");
        if (fclose(jf) != 0) DIE("%s: cannot write", json_out);
    }
    devmodel_free(&d);
    cuda_ctx_free(c);
    adamw_free(&opt);
    model_free(&m);
    return 0;
#endif
}
