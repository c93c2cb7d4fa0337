// bench_model.c: tokens/s of the CPU model core (lib/nn/model.c), for bench/model.py to set
// against PyTorch in the same run.
//
// Two kinds of work, each on B x T windows of random token ids (fixed seed):
//   eval   model_eval with per-position nll (what best-eval's perplexity does)
//   train  model_zero_grad + model_forward + model_backward + adamw_step: one optimizer
//          step per batch (no clipping, no mask), as bench/model.py's PyTorch loop
// The model is a Hugging Face folder (--model) or a config.json (--config) given
// random weights from a fixed seed: normal(0, 0.02) for matrices and embeddings, 1 for
// norm weights, 0 for biases. --save writes that model, so that the PyTorch side can
// load exactly the same weights.
//
// Prints one JSON object on stdout: per-iteration seconds (median and best of the
// timed iterations), tokens/s from each, the first iteration's loss (a check that both
// sides did the same work) and the last one's (training: after all the steps, which must
// be the same bits on every run with the same thread count). Not here: the comparison
// (bench/model.py).
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/blas.h"   // defines: blas_init
#include "nn/adamw.h"   // defines: AdamW, adamw_step
#include "base/args.h"  // defines: ArgSpec, args_parse
#include "base/error.h" // defines: TRY_OR_DIE, DIE
#include "nn/layers.h"  // defines: layers_blas_info
#include "nn/model.h"   // defines: Model, ModelActs, model_eval, model_forward

// splitmix64: the same stream in bench/model.py gives the same token ids there.
static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Standard normal from two uniforms (Box-Muller); deterministic, thread-free.
static float randn(uint64_t *s) {
    double u1 = ((double)(splitmix64(s) >> 11) + 0.5) / 9007199254740992.0;
    double u2 = (double)(splitmix64(s) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

// Random weights: matrices and embeddings N(0, std), norm weights 1, biases 0.
static void init_random(Model *m, uint64_t seed, float std) {
    uint64_t s = seed;
    for (int i = 0; i < m->n_info; i++) {
        const ParamInfo *p = &m->info[i];
        float *w = m->params + p->offset;
        int is_norm = strstr(p->name, "norm") != NULL;
        for (size_t j = 0; j < p->numel; j++)
            w[j] = p->ndim == 2 ? std * randn(&s) : is_norm ? 1.0f : 0.0f;
    }
}

// Row b of the batch is T+1 consecutive draws: tokens are the first T, targets the
// last T (next-token prediction, every position has a target).
static void make_batch(int32_t *tokens, int32_t *targets, uint64_t seed, int B, int T, size_t V) {
    uint64_t s = seed;
    for (int b = 0; b < B; b++) {
        int32_t prev = (int32_t)(splitmix64(&s) % V);
        for (int t = 0; t < T; t++) {
            int32_t next = (int32_t)(splitmix64(&s) % V);
            tokens[(size_t)b * T + t] = prev;
            targets[(size_t)b * T + t] = next;
            prev = next;
        }
    }
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

int main(int argc, char **argv) {
    blas_init(argv);
    const char *model = NULL, *config = NULL, *mode = "eval", *save = NULL;
    int B = 8, T = 256, warmup = 2, iters = 10, threads = 0, seed = 1234;
    double init_std = 0.02;
    Option opts[] = {
        {"model", OPT_STRING, &model, "DIR", "Hugging Face model folder"},
        {"config", OPT_STRING, &config, "FILE", "or a config.json: random weights from --seed"},
        {"mode", OPT_STRING, &mode, "eval|train", "the work timed"},
        {"batch", OPT_INT, &B, "B", "windows per batch"},
        {"seq", OPT_INT, &T, "T", "tokens per window"},
        {"warmup", OPT_INT, &warmup, "N", "untimed iterations first"},
        {"iters", OPT_INT, &iters, "N", "timed iterations (0: only --save)"},
        {"threads", OPT_INT, &threads, "N", "OpenMP threads; 0 = all cores"},
        {"seed", OPT_INT, &seed, "S", "seed of the token ids and of --config's weights"},
        {"init-std", OPT_DOUBLE, &init_std, "X", "std of --config's random matrices"},
        {"save", OPT_STRING, &save, "DIR", "write the model (F32) to DIR before timing"},
        {NULL, 0, NULL, NULL, NULL},
    };
    ArgSpec spec = {"bench_model", "(--model DIR | --config FILE) [options]",
                    "Times model_eval or one training step (forward, backward, AdamW) "
                    "on random token ids and prints tokens/s as JSON.", opts};
    char **pos;
    args_parse(&pos, &spec, argc, argv);
    free(pos);
    err_set_prog("bench_model");
    if (!model == !config) args_usage_error(&spec, "give exactly one of --model and --config");
    int train = strcmp(mode, "train") == 0;
    if (!train && strcmp(mode, "eval") != 0) args_usage_error(&spec, "--mode is eval or train");
    if (B < 1 || T < 2 || warmup < 0 || iters < 0 || threads < 0)
        args_usage_error(&spec, "--batch >= 1, --seq >= 2, --warmup, --iters, --threads >= 0");
    if (threads > 0) omp_set_num_threads(threads);

    Model m;
    if (model) TRY_OR_DIE(model_load(&m, model));
    else {
        TRY_OR_DIE(model_create(&m, config));
        init_random(&m, (uint64_t)seed, (float)init_std);
    }
    if (save) TRY_OR_DIE(model_save(&m, save, ST_F32));
    fprintf(stderr, "bench_model: %s, %zu layers, dim %zu, %.2fM parameters, %s B=%d T=%d; %s\n",
            model ? model : config, m.L, m.C, (double)m.n_params / 1e6, mode, B, T,
            layers_blas_info());
    if (iters == 0) { model_free(&m); return 0; }

    size_t N = (size_t)B * (size_t)T;
    int32_t *tokens = xmalloc(N * sizeof *tokens), *targets = xmalloc(N * sizeof *targets);
    float *nll = xmalloc(N * sizeof *nll);
    make_batch(tokens, targets, (uint64_t)seed, B, T, m.V);
    ModelActs a;
    TRY_OR_DIE(model_acts_init(&a, &m, B, T, train));
    AdamW opt = {0};
    AdamWHyper hyp = {1e-4, 0.9, 0.999, 1e-8, 0.0};
    if (train) {
        model_grads_init(&m);
        adamw_init(&opt, m.n_params);
    }

    double *sec = xmalloc((size_t)iters * sizeof *sec), first_loss = NAN, last_loss = NAN;
    for (int it = 0; it < warmup + iters; it++) {
        double t0 = now(), loss;
        if (train) {
            model_zero_grad(&m);
            TRY_OR_DIE(model_forward(&m, &a, tokens, targets));
            model_backward(&m, &a, 1.0f);
            adamw_step(&opt, m.params, m.grads, NULL, &hyp);
            loss = a.loss;
        } else {
            TRY_OR_DIE(model_eval(NULL, nll, &m, &a, tokens, targets));
            double s = 0;
            for (size_t n = 0; n < N; n++) s += nll[n];
            loss = s / (double)N;
        }
        double dt = now() - t0;
        if (it == 0) first_loss = loss;
        last_loss = loss;
        if (it >= warmup) sec[it - warmup] = dt;
    }
    qsort(sec, (size_t)iters, sizeof *sec, cmp_double);
    double med = iters % 2 ? sec[iters / 2] : 0.5 * (sec[iters / 2 - 1] + sec[iters / 2]);
    printf("{\"impl\": \"best\", \"mode\": \"%s\", \"B\": %d, \"T\": %d, \"threads\": %d, "
           "\"params\": %zu, \"iters\": %d, \"sec_median\": %.6g, \"sec_best\": %.6g, "
           "\"tok_s_median\": %.1f, \"tok_s_best\": %.1f, \"first_loss\": %.6f, "
           "\"last_loss\": %.9g}\n",
           mode, B, T, omp_get_max_threads(), m.n_params, iters, med, sec[0], (double)N / med,
           (double)N / sec[0], first_loss, last_loss);

    free(sec);
    if (train) adamw_free(&opt);
    model_acts_free(&a);
    free(tokens);
    free(targets);
    free(nll);
    model_free(&m);
    return 0;
}
