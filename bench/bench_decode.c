// bench_decode.c: batch-1 decoding speed and memory of one model (a folder, decoded
// dense in fp32 through OpenBLAS, or a packed checkpoint, decoded with lib/pack/spmv.c
// straight from its encoding), and the machine's memory bandwidth, for
// bench/decode.sh to set side by side in one run.
//
//   --init CONFIG --out DIR   a model with random weights (normal(0, --init-std) for
//                             matrices and embeddings, 1 for norms, 0 for biases, from
//                             --seed), written in bf16: the input of best-mask/best-pack
//   --model DIR|PACK          decodes --prompt random ids, then --tokens greedy tokens,
//                             each timed alone; prints one JSON object: tokens/s (from
//                             the median token and from the total), bytes one token reads
//                             (model_token_bytes + the KV cache at the mean position),
//                             peak and current resident memory, the first greedy ids
//   --copy-bw MB              memcpy of MB MiB across --threads threads (best of 5): bytes
//                             copied per second, and twice that (read + written, STREAM's
//                             convention); and a read-only pass over the same MiB
//
// Each measurement is its own process so that peak RSS is that model's alone. Not
// here: pruning and packing (bin/best-mask, bin/best-pack), the table (decode.sh).
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "base/blas.h"        // defines: blas_init
#include "base/args.h"       // defines: ArgSpec, args_parse
#include "base/error.h"      // defines: TRY_OR_DIE, DIE, xmalloc
#include "nn/layers.h"       // defines: layers_blas_info
#include "nn/model.h"        // defines: Model, KVCache, model_forward_token
#include "pack/pack_model.h" // defines: model_open
#include "pack/pack_tune.h"  // defines: pack_model_tune
#include "pack/spmv.h"       // defines: spmv_isa, spmv_isa_name
#include "run/train.h"       // defines: train_init_random

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

// Resident memory now, MiB (VmRSS of /proc/self/status; 0 if unreadable).
static double rss_now_mb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0) kb = atof(line + 6);
    if (f) fclose(f);
    return kb / 1024;
}

static double rss_peak_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024; // KiB on Linux
}

static void init_model(const char *config, const char *out, uint64_t seed, float std) {
    Model m;
    TRY_OR_DIE(model_create(&m, config));
    train_init_random(&m, seed, std);  // best-train --init random's weights
    TRY_OR_DIE(model_save(&m, out, ST_BF16));
    fprintf(stderr, "bench_decode: %s: %.1fM parameters, random (std %g, seed %llu), bf16\n", out,
            (double)m.n_params / 1e6, std, (unsigned long long)seed);
    model_free(&m);
}

static void decode(const char *path, int n_prompt, int n_tokens, uint64_t seed, const char *kern) {
    double t0 = now();
    Model m;
    TRY_OR_DIE(model_open(&m, path));
    PackTune tune = {0}; // a pack's encodings timed for this CPU unless BEST_PACK_TUNE=0 (pack_tune.h)
    if (m.ext && pack_tune_enabled()) {
        pack_model_tune(&tune, &m);
        pack_tune_say(stderr, "bench_decode", &tune);
    }
    double load_s = now() - t0;
    KVCache c;
    TRY_OR_DIE(kvcache_init(&c, &m, n_prompt + n_tokens));
    uint64_t s = seed;
    int32_t tok = 1; // BOS, then random ids
    const float *logits = NULL;
    for (int i = 0; i < n_prompt; i++) {
        if (!(logits = model_forward_token(&m, &c, tok, i))) die_err();
        tok = (int32_t)(splitmix64(&s) % m.V);
    }
    double *sec = xmalloc((size_t)n_tokens * sizeof *sec), total = 0;
    int32_t ids[16];
    for (int k = 0; k < n_tokens; k++) {
        int32_t best = 0; // greedy
        for (size_t v = 1; v < m.V; v++)
            if (logits[v] > logits[best]) best = (int32_t)v;
        if (k < 16) ids[k] = best;
        double t1 = now();
        if (!(logits = model_forward_token(&m, &c, best, n_prompt + k))) die_err();
        sec[k] = now() - t1;
        total += sec[k];
    }
    qsort(sec, (size_t)n_tokens, sizeof *sec, cmp_double);
    double med = n_tokens % 2 ? sec[n_tokens / 2] : 0.5 * (sec[n_tokens / 2 - 1] + sec[n_tokens / 2]);
    // KV cache read by attention at the mean decoded position: keys and values of L layers
    double mean_pos = n_prompt + (n_tokens - 1) / 2.0 + 1;
    double kv = mean_pos * (double)(m.L * m.KVD * 2 * sizeof(float));
    size_t wbytes = model_token_bytes(&m);
    printf("{\"model\": \"%s\", \"packed\": %s, \"kernels\": \"%s\", \"isa\": \"%s\", \"threads\": %d, "
           "\"params\": %zu, \"prompt\": %d, \"tokens\": %d, \"load_s\": %.3f, "
           "\"sec_median\": %.6g, \"sec_best\": %.6g, \"tok_s\": %.3f, \"tok_s_total\": %.3f, "
           "\"weight_bytes\": %zu, \"kv_bytes\": %.0f, \"rss_peak_mb\": %.1f, \"rss_mb\": %.1f, "
           "\"tuned\": %d, \"tune_s\": %.3f, \"ids\": [",
           path, m.ext ? "true" : "false", m.ext ? kern : "openblas", kern,
           omp_get_max_threads(), model_numel(&m), n_prompt, n_tokens, load_s, med, sec[0],
           1.0 / med, n_tokens / total, wbytes, kv, rss_peak_mb(), rss_now_mb(), tune.changed, tune.seconds);
    for (int k = 0; k < n_tokens && k < 16; k++) printf(k ? ", %d" : "%d", ids[k]);
    printf("]}\n");
    free(sec);
    kvcache_free(&c);
    model_free(&m);
}

// The read-only pass: OR of all 64-bit words (a 1-cycle dependency, so that the loop
// is bound by memory, not by a chain of float adds), at the CPU's vector width.
__attribute__((target_clones("avx512f", "avx2", "default")))
static uint64_t or_all(const uint64_t *a, size_t n) {
    uint64_t acc = 0;
#pragma omp simd reduction(| : acc)
    for (size_t i = 0; i < n; i++) acc |= a[i];
    return acc;
}

// memcpy and read-only bandwidth over buffers of mb MiB, best of 5, threads slicing them.
// copy_gbs is bytes copied per second (what `b[:] = a` in numpy gives as size / time);
// copy_traffic_gbs counts them twice, read and written, as STREAM's Copy does.
static void copy_bw(int mb) {
    size_t n = (size_t)mb << 20, nw = n / sizeof(uint64_t);
    uint64_t *a = xmalloc(n), *b = xmalloc(n);
    memset(a, 1, n);
    memset(b, 2, n);
    double best_copy = 1e30, best_read = 1e30;
    uint64_t sink = 0;
    int nt = omp_get_max_threads();
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now();
#pragma omp parallel for schedule(static)
        for (int t = 0; t < nt; t++) {
            size_t lo = nw / (size_t)nt * (size_t)t, hi = t + 1 == nt ? nw : nw / (size_t)nt * (size_t)(t + 1);
            memcpy(b + lo, a + lo, (hi - lo) * sizeof *a);
        }
        double t1 = now();
        uint64_t acc = 0;
#pragma omp parallel for schedule(static) reduction(| : acc)
        for (int t = 0; t < nt; t++) {
            size_t lo = nw / (size_t)nt * (size_t)t, hi = t + 1 == nt ? nw : nw / (size_t)nt * (size_t)(t + 1);
            acc |= or_all(b + lo, hi - lo);
        }
        double t2 = now();
        sink |= acc;
        if (t1 - t0 < best_copy) best_copy = t1 - t0;
        if (t2 - t1 < best_read) best_read = t2 - t1;
    }
    printf("{\"copy_mb\": %d, \"isa\": \"%s\", \"threads\": %d, \"copy_gbs\": %.3f, \"copy_traffic_gbs\": %.3f, "
           "\"read_gbs\": %.3f, \"sink\": %llu}\n",
           mb, spmv_isa_name(spmv_isa()), nt, (double)n / best_copy / 1e9, 2.0 * (double)n / best_copy / 1e9,
           (double)n / best_read / 1e9, (unsigned long long)(sink & 1));
    free(a);
    free(b);
}

int main(int argc, char **argv) {
    blas_init(argv);
    const char *config = NULL, *out = NULL, *model = NULL;
    int prompt = 8, tokens = 32, threads = 0, seed = 1234, copy = 0;
    double init_std = 0.02;
    Option opts[] = {
        {"init", OPT_STRING, &config, "CONFIG", "write a random-weight model shaped by CONFIG to --out"},
        {"out", OPT_STRING, &out, "DIR", "folder for --init (bf16 safetensors)"},
        {"init-std", OPT_DOUBLE, &init_std, "X", "std of --init's random matrices"},
        {"model", OPT_STRING, &model, "DIR|PACK", "decode with this model and print the timing"},
        {"prompt", OPT_INT, &prompt, "N", "prompt tokens (BOS + random ids), not timed"},
        {"tokens", OPT_INT, &tokens, "N", "greedy tokens decoded, each timed"},
        {"copy-bw", OPT_INT, &copy, "MB", "measure memcpy bandwidth on MB MiB instead"},
        {"threads", OPT_INT, &threads, "N", "OpenMP threads; 0 = all cores"},
        {"seed", OPT_INT, &seed, "S", "seed of the weights and of the prompt"},
        {NULL, 0, NULL, NULL, NULL},
    };
    ArgSpec spec = {"bench_decode", "(--init CONFIG --out DIR | --model DIR|PACK | --copy-bw MB) [options]",
                    "Batch-1 decoding speed and memory of a model folder (fp32, OpenBLAS) or a packed\n"
                    "checkpoint (lib/pack/spmv.c), and memory bandwidth; JSON on stdout.", opts};
    char **pos;
    args_parse(&pos, &spec, argc, argv);
    free(pos);
    err_set_prog("bench_decode");
    if (!!config + !!model + !!copy != 1) args_usage_error(&spec, "give one of --init, --model, --copy-bw");
    if (config && !out) args_usage_error(&spec, "--init needs --out");
    if (prompt < 1 || tokens < 1 || threads < 0 || copy < 0)
        args_usage_error(&spec, "--prompt and --tokens >= 1, --threads and --copy-bw >= 0");
    if (threads > 0) omp_set_num_threads(threads);
    const char *kern = spmv_isa_name(spmv_isa()); // the best set the CPU has, or BEST_ISA's
    layers_init();
    if (config) init_model(config, out, (uint64_t)seed, (float)init_std);
    else if (model) decode(model, prompt, tokens, (uint64_t)seed, kern);
    else copy_bw(copy);
    return 0;
}
