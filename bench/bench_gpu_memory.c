// bench_gpu_memory.c: the device memory best-train --device cuda takes, per model and
// micro-batch, computed from the allocation code itself (devmodel_bytes in
// lib/nn/model.cu: the same layout devmodel_init carves), not measured: it needs no GPU
// and no weights, only config.json. For docs/best-train.md's memory table.
//
//   bench_gpu_memory [--seq T] [--ranks N] CONFIG.json...
//   bench_gpu_memory --oneshot N [--seq T] CONFIG.json...
//
// --oneshot N: instead, best-mask --method --device cuda's walk with N calibration windows
// (oneshot_cuda_bytes in lib/sparse/calib.cu: the same layout the walk carves): per
// method, the bytes at one window a batch, each further window's, and the batch the walk
// chooses on an 80 GB and a 141 GB GPU (half of what is free after the rest, at most 4 GiB
// of activations, 2 GiB left for the CUDA context and the libraries) with its total.
//
// --ranks N: each of N GPU ranks (ZeRO stage 1; the largest slice's), not one GPU.
// Per model, without and with --recompute (+rec): parameters; the 19 bytes per parameter
// of weights, gradients, moments, bf16 copy and mask; activation bytes per token; the total at micro-batch 1, 2, 4, 8 (plus
// the 32 MiB cuBLASLt workspace); the largest micro-batch that fits in 80 GB (H100) and
// 141 GB (H200) with 2 GiB left for the CUDA context and the allocator's slack (an
// estimate, not a measurement).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"  // defines: TRY_OR_DIE, DIE
#include "base/fileio.h" // defines: file_read_all
#include "nn/model.h"    // defines: Model, model_plan, devmodel_bytes (BEST_CUDA)
#include "sparse/calib.h" // defines: oneshot_cuda_bytes (BEST_CUDA)

#define GB 1e9
#define GIB ((double)(1 << 30))

#ifdef BEST_CUDA
// *m = the table of the model config.json at path describes (no weights); returns the
// file's name, *name_len its length without ".json" (the table's label).
static const char *config_plan(Model *m, int *name_len, const char *path) {
    char *text;
    size_t len;
    memset(m, 0, sizeof *m);
    TRY_OR_DIE(file_read_all(&text, &len, path));
    TRY_OR_DIE(model_plan(m, text, len, path, 0));
    free(text);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    const char *dot = strrchr(base, '.');
    *name_len = dot ? (int)(dot - base) : (int)strlen(base);
    return base;
}

// The one-shot walk's device memory (--oneshot), one line per model and method.
static int oneshot_table(char **configs, int n, int nsamples, int T) {
    const double reserve = 2 * GIB, gpus[2] = {80 * GB, 141 * GB};
    printf("one-shot walk (best-mask --method --device cuda), %d windows of %d tokens; computed from "
           "oneshot_cuda_bytes (the allocation code), not measured; GB = 1e9 bytes\n", nsamples, T);
    printf("%-16s %-10s %10s %12s  %s\n", "model", "method", "batch 1", "a window", "80 GB: batch, total; "
           "141 GB: batch, total");
    static const OneShotMethod METHODS[] = {ONESHOT_WANDA, ONESHOT_SPARSEGPT, ONESHOT_MAGNITUDE};
    for (int i = 0; i < n; i++) {
        Model m;
        int name_len;
        const char *base = config_plan(&m, &name_len, configs[i]);
        for (int k = 0; k < 3; k++) {
            OneShotMethod me = METHODS[k];
            int mag = me == ONESHOT_MAGNITUDE;
            double b1 = (double)oneshot_cuda_bytes(&m, me, 0, nsamples, T, 1, 0, NULL);
            double win = mag ? 0 : (double)oneshot_cuda_bytes(&m, me, 0, nsamples, T, 2, 0, NULL) - b1;
            printf("%-16.*s %-10s %8.2fGB %10.3fGB ", name_len < 16 ? name_len : 16, base, oneshot_method_name(me),
                   b1 / GB, win / GB);
            for (int g = 0; g < 2; g++) {
                int B = 0;
                double total = (double)oneshot_cuda_bytes(&m, me, 0, nsamples, T, 0, (size_t)(gpus[g] - reserve), &B);
                printf(" %4d %7.2fGB", B, total / GB);
            }
            printf("\n");
        }
        model_free(&m);
    }
    return 0;
}
#endif

int main(int argc, char **argv) {
    err_set_prog("bench_gpu_memory");
#ifndef BEST_CUDA
    (void)argc;
    (void)argv;
    printf("bench_gpu_memory: built without CUDA (no nvcc): nothing to compute\n");
    return 0;
#else
    int T = 2048, ranks = 0, oneshot = 0, i = 1;
    for (; i + 1 < argc && !strncmp(argv[i], "--", 2); i += 2) {
        if (!strcmp(argv[i], "--seq")) T = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--ranks")) ranks = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--oneshot")) oneshot = atoi(argv[i + 1]);
        else break;
    }
    if (i >= argc || !strncmp(argv[i], "--", 2) || T < 1 || ranks < 0 || oneshot < 0) {
        fprintf(stderr, "usage: bench_gpu_memory [--seq T] [--ranks N] CONFIG.json...\n"
                        "       bench_gpu_memory --oneshot N [--seq T] CONFIG.json...\n");
        return 2;
    }
    if (oneshot) return oneshot_table(argv + i, argc - i, oneshot, T);
    const double workspace = 32.0 * (1 << 20), reserve = 2 * GIB;
    const double gpus[2] = {80 * GB, 141 * GB};
    printf("seq %d, %s; computed from devmodel_bytes (the allocation code), not measured; GB = 1e9 bytes\n", T,
           ranks ? "each of --ranks GPU ranks" : "one GPU");
    if (ranks) printf("ranks %d\n", ranks);
    printf("%-21s %8s %10s %10s %8s %8s %8s %8s  %s\n", "model", "params", "states GB", "acts/tok",
           "mb 1", "mb 2", "mb 4", "mb 8", "largest micro-batch: 80 GB, 141 GB");
    for (; i < argc; i++) {
        Model m;
        int name_len;
        const char *base = config_plan(&m, &name_len, argv[i]);
        for (int rc = 0; rc < 2; rc++) { // without and with --recompute
            int flags = rc ? DEVMODEL_RECOMPUTE : 0;
            size_t acts1;
            size_t total1 = devmodel_bytes(&acts1, &m, 1, T, 0, flags, ranks);
            double states = (double)(total1 - acts1);
            char label[64];
            snprintf(label, sizeof label, "%.*s%s", name_len < 16 ? name_len : 16, base, rc ? " +rec" : "");
            printf("%-21s %7.2fB %10.1f %9.0fK", label, (double)m.n_params / 1e9, states / GB, (double)acts1 / T / 1e3);
            for (int b = 1; b <= 8; b *= 2)
                printf(" %7.1fG", ((double)devmodel_bytes(NULL, &m, b, T, 0, flags, ranks) + workspace) / GB);
            printf(" ");
            for (int g = 0; g < 2; g++) {
                int best = 0;
                for (int b = 1; b <= 256; b++)
                    if ((double)devmodel_bytes(NULL, &m, b, T, 0, flags, ranks) + workspace + reserve <= gpus[g]) best = b;
                printf(" %s", best ? "" : "none");
                if (best) printf("%d", best);
            }
            printf("\n");
        }
        model_free(&m);
    }
    return 0;
#endif
}
