// eval.c: perplexity over windows (the SparseGPT/Wanda protocol) and sampled generation.
#include "run/eval.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"    // defines: ERR, xmalloc
#include "base/progress.h" // defines: now_seconds
#include "nn/cuda.h"       // defines: CudaCtx, cuda_ctx_create (BEST_CUDA)

// The windows of tokens (n) for --seq and --batch: *seq and *batch clamped, the count
// returned through *nwin; *batch 0 stays 0 (the caller chooses it). -1 after ERR.
static int ppl_windows(size_t *nwin, int *seq, int *batch, size_t n) {
    if (n < 2) return ERR("need at least 2 tokens to measure perplexity (got %zu)", n);
    if (*seq < 2) return ERR("--seq must be at least 2 (got %d)", *seq);
    if ((size_t)*seq > n) *seq = (int)n;
    *nwin = n / (size_t)*seq;
    if (*batch < 0) *batch = 1;
    if ((size_t)*batch > *nwin) *batch = (int)*nwin;
    return 0;
}

// An automatic batch: the most windows (at most EVAL_AUTO_BATCH_MAX and nwin) whose
// activations, bytes(b), fit budget; at least 1.
static int auto_batch(size_t (*bytes)(const Model *, int, int), const Model *m, int seq, size_t nwin,
                      double budget) {
    int b = EVAL_AUTO_BATCH_MAX;
    if ((size_t)b > nwin) b = (int)nwin;
    while (b > 1 && (double)bytes(m, b, seq) > budget) b--;
    return b < 1 ? 1 : b;
}

static size_t cpu_acts_bytes(const Model *m, int b, int seq) { return model_acts_bytes(m, b, seq, 0); }
#ifdef BEST_CUDA
static size_t dev_eval_bytes(const Model *m, int b, int seq) {
    return devmodel_bytes(NULL, m, b, seq, 0, DEVMODEL_EVAL, 0);
}
#endif

// targets (nb, seq): each window predicts its own tokens 1..seq-1 from x (nb, seq);
// the last position has none (-1).
static void ppl_targets(int32_t *targets, const int32_t *x, size_t nb, int seq) {
    for (size_t b = 0; b < nb; b++)
        for (int t = 0; t < seq; t++) targets[b * seq + t] = t + 1 < seq ? x[b * seq + t + 1] : -1;
}

static void ppl_finish(PplResult *r, double total, size_t nwin, int seq) {
    r->nll = total;
    r->windows = (int)nwin;
    r->seq = seq;
    r->tokens = (uint64_t)nwin * (uint64_t)(seq - 1);
    r->ppl = exp(total / (double)r->tokens);
}

int eval_perplexity(PplResult *r, const Model *m, const int32_t *tokens, size_t n, int seq,
                    int batch, Progress *pr) {
    memset(r, 0, sizeof *r);
    size_t nwin = 0; // (set by ppl_windows; gcc -O2 without CUDA cannot tell)
    TRY(ppl_windows(&nwin, &seq, &batch, n));
    if (batch == 0) // a quarter of the memory available now
        batch = auto_batch(cpu_acts_bytes, m, seq, nwin,
                           0.25 * (double)sysconf(_SC_AVPHYS_PAGES) * (double)sysconf(_SC_PAGESIZE));
    r->batch = batch;
    ModelActs a;
    TRY(model_acts_init(&a, m, batch, seq, 0));
    size_t N = (size_t)batch * (size_t)seq;
    int32_t *targets = xmalloc(N * sizeof *targets);
    float *nll = xmalloc(N * sizeof *nll);
    double total = 0;
    int rc = 0;
    for (size_t w0 = 0; w0 < nwin && rc == 0; w0 += (size_t)batch) {
        size_t nb = nwin - w0 < (size_t)batch ? nwin - w0 : (size_t)batch;
        if (nb < (size_t)batch) { // the last, smaller batch gets its own buffers
            model_acts_free(&a);
            if ((rc = model_acts_init(&a, m, (int)nb, seq, 0)) < 0) break;
        }
        const int32_t *x = tokens + w0 * (size_t)seq;
        ppl_targets(targets, x, nb, seq);
        if ((rc = model_eval(NULL, nll, m, &a, x, targets)) < 0) break;
        // Sum in double: 10^5 .. 10^7 terms.
        for (size_t i = 0; i < nb * (size_t)seq; i++) total += nll[i];
        if (pr) progress_update(pr, w0 + nb);
    }
    model_acts_free(&a);
    free(targets);
    free(nll);
    TRY(rc);
    ppl_finish(r, total, nwin, seq);
    return 0;
}

int eval_perplexity_cuda(PplResult *r, const Model *m, const int32_t *tokens, size_t n, int seq,
                         int batch, Progress *pr) {
    memset(r, 0, sizeof *r);
#ifndef BEST_CUDA
    (void)m, (void)tokens, (void)n, (void)seq, (void)batch, (void)pr;
    return ERR("--device cuda: this build has no CUDA (%s); use --device cpu", cuda_info());
#else
    size_t nwin = 0; // (set by ppl_windows; gcc -O2 without CUDA cannot tell)
    TRY(ppl_windows(&nwin, &seq, &batch, n));
    CudaCtx *c;
    TRY(cuda_ctx_create(&c, 0, (size_t)32 << 20));
    if (batch == 0) // half of the device's free memory (never run on a GPU, 2026-11-29)
        batch = auto_batch(dev_eval_bytes, m, seq, nwin, 0.5 * (double)cuda_mem_free(c));
    r->batch = batch;
    DevModel d;
    if (devmodel_init(&d, c, m, batch, seq, 0, DEVMODEL_EVAL) < 0) {
        cuda_ctx_free(c);
        return -1;
    }
    r->device_bytes = d.weight_bytes + d.acts_bytes;
    size_t N = (size_t)batch * (size_t)seq;
    int32_t *x = xmalloc(N * sizeof *x), *targets = xmalloc(N * sizeof *targets);
    double total = 0;
    int rc = 0;
    for (size_t w0 = 0; w0 < nwin && rc == 0; w0 += (size_t)batch) {
        size_t nb = nwin - w0 < (size_t)batch ? nwin - w0 : (size_t)batch;
        // a last, smaller batch is padded with copies of its first window, no targets
        memcpy(x, tokens + w0 * (size_t)seq, nb * (size_t)seq * sizeof *x);
        for (size_t b = nb; b < (size_t)batch; b++) memcpy(x + b * seq, x, (size_t)seq * sizeof *x);
        for (size_t i = 0; i < N; i++) targets[i] = -1;
        ppl_targets(targets, x, nb, seq);
        if ((rc = devmodel_forward(&d, x, targets)) < 0) break;
        total += d.nll_sum; // in double on the device, in a fixed order
        if (pr) progress_update(pr, w0 + nb);
    }
    devmodel_free(&d);
    cuda_ctx_free(c);
    free(x);
    free(targets);
    TRY(rc);
    ppl_finish(r, total, nwin, seq);
    return 0;
#endif
}

// xorshift64*: small, fast, and the same stream on every platform.
static uint64_t rng_next(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}
static float rng_uniform(uint64_t *s) { return (float)(rng_next(s) >> 40) / 16777216.0f; }

static int cmp_desc(const void *a, const void *b) {
    const float *x = a, *y = b; // pairs (prob, id)
    if (x[0] != y[0]) return x[0] < y[0] ? 1 : -1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

int32_t sample_token(const float *logits, int V, float temperature, float top_p, uint64_t *rng,
                     float *scratch) {
    int best = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    if (temperature <= 0) return best;
    // softmax(logits / T), as (prob, id) pairs.
    float *pairs = scratch;
    double sum = 0;
    for (int i = 0; i < V; i++) {
        float p = expf((logits[i] - logits[best]) / temperature);
        pairs[2 * i] = p;
        pairs[2 * i + 1] = (float)i;
        sum += p;
    }
    int n = V;
    if (top_p < 1.0f) { // the smallest prefix of the sorted probabilities reaching top_p
        qsort(pairs, (size_t)V, 2 * sizeof(float), cmp_desc);
        double cum = 0;
        for (n = 0; n < V;) {
            cum += pairs[2 * n++] / sum;
            if (cum >= top_p) break;
        }
        sum = 0;
        for (int i = 0; i < n; i++) sum += pairs[2 * i];
    }
    double u = rng_uniform(rng) * sum, cum = 0;
    for (int i = 0; i < n; i++) {
        cum += pairs[2 * i];
        if (u < cum) return (int32_t)pairs[2 * i + 1];
    }
    return (int32_t)pairs[2 * (n - 1) + 1]; // rounding left u at the very top
}

// One forward pass of generation: the logits (V) of token at position pos, or NULL
// after ERR. The CPU's (a KV cache of model.c) or the device's (DevModel).
typedef const float *(*StepFn)(void *step_ctx, int32_t token, int pos);
// A step that picks the greedy token itself (the device: only the token comes back):
// 0 with *next, or -1 after ERR.
typedef int (*GreedyFn)(void *step_ctx, int32_t token, int pos, int32_t *next);

// eval_generate's loop over a step function, V the vocabulary; at temperature 0 over
// greedy instead, when there is one (the same tokens: sample_token's pick).
static int generate_loop(IdVec *out, GenStats *st, size_t V, StepFn step, GreedyFn greedy, void *step_ctx,
                         const int32_t *prompt, size_t n_prompt, const GenOptions *o,
                         void (*on_token)(const IdVec *so_far, void *ctx), void *ctx) {
    float *scratch = xmalloc(2 * V * sizeof *scratch);
    uint64_t rng = o->seed ? o->seed : 0x9E3779B97F4A7C15ull;
    const float *logits = NULL;
    int rc = 0, by_greedy = greedy && o->temperature <= 0;
    int32_t picked = 0; // by_greedy: the last step's token
    double t0 = now_seconds(), t1 = t0;
    for (size_t i = 0; i < n_prompt && rc == 0; i++) {
        if (by_greedy) rc = greedy(step_ctx, prompt[i], (int)i, &picked);
        else if (!(logits = step(step_ctx, prompt[i], (int)i))) rc = -1;
    }
    st->prompt_seconds = now_seconds() - t0;
    for (int k = 0; k < o->max_new_tokens && rc == 0; k++) {
        if (k == 0) t1 = now_seconds();
        int32_t next = by_greedy ? picked : sample_token(logits, (int)V, o->temperature, o->top_p, &rng, scratch);
        idvec_push(out, next);
        int stop = 0;
        for (int s = 0; s < o->n_stop; s++) stop |= next == o->stop[s];
        if (on_token && !stop) { // streaming is not decoding: its time is left out; the stop
            double t2 = now_seconds(); // token (EOS) ends the text, it is not part of it
            on_token(out, ctx);
            t1 += now_seconds() - t2;
        }
        if (stop || k + 1 == o->max_new_tokens) break;
        if (by_greedy) rc = greedy(step_ctx, next, (int)(n_prompt + (size_t)k), &picked);
        else if (!(logits = step(step_ctx, next, (int)(n_prompt + (size_t)k)))) rc = -1;
        st->decode_tokens++;
    }
    if (st->decode_tokens) st->decode_seconds = now_seconds() - t1;
    free(scratch);
    return rc;
}

// The generation's length checked against the model's context: max_T positions.
static int generate_positions(size_t *max_T, const Model *m, size_t n_prompt, const GenOptions *o) {
    if (n_prompt < 1) return ERR("generation needs a prompt of at least one token (BOS for LLaMA)");
    *max_T = n_prompt + (size_t)o->max_new_tokens;
    if (*max_T > (size_t)m->cfg.max_position_embeddings)
        return ERR("prompt (%zu tokens) + --max-new-tokens (%d) exceed the model's context of %d",
                   n_prompt, o->max_new_tokens, m->cfg.max_position_embeddings);
    return 0;
}

typedef struct {
    const Model *m;
    KVCache c;
} CpuStep;

static const float *cpu_step(void *p, int32_t token, int pos) {
    CpuStep *s = p;
    return model_forward_token(s->m, &s->c, token, pos);
}

int eval_generate(IdVec *out, GenStats *st, const Model *m, const int32_t *prompt,
                  size_t n_prompt, const GenOptions *o,
                  void (*on_token)(const IdVec *so_far, void *ctx), void *ctx) {
    GenStats dummy;
    if (!st) st = &dummy;
    memset(st, 0, sizeof *st);
    size_t max_T = 0;
    TRY(generate_positions(&max_T, m, n_prompt, o));
    CpuStep s = {m, {0}};
    TRY(kvcache_init(&s.c, m, (int)max_T));
    int rc = generate_loop(out, st, m->V, cpu_step, NULL, &s, prompt, n_prompt, o, on_token, ctx);
    kvcache_free(&s.c);
    return rc;
}

#ifdef BEST_CUDA
typedef struct {
    DevModel d;
    float *logits; // (V) on the host
} DevStep;

static const float *dev_step(void *p, int32_t token, int pos) {
    DevStep *s = p;
    return devmodel_forward_token(s->logits, &s->d, token, (size_t)pos) < 0 ? NULL : s->logits;
}

static int dev_greedy(void *p, int32_t token, int pos, int32_t *next) {
    DevStep *s = p;
    return devmodel_forward_token_greedy(next, &s->d, token, (size_t)pos);
}
#endif

int eval_generate_cuda(IdVec *out, GenStats *st, const Model *m, const int32_t *prompt, size_t n_prompt,
                       const GenOptions *o, void (*on_token)(const IdVec *so_far, void *ctx), void *ctx) {
    GenStats dummy;
    if (!st) st = &dummy;
    memset(st, 0, sizeof *st);
#ifndef BEST_CUDA
    (void)out, (void)m, (void)prompt, (void)n_prompt, (void)o, (void)on_token, (void)ctx;
    return ERR("--device cuda: this build has no CUDA (%s); use --device cpu", cuda_info());
#else
    size_t max_T = 0;
    TRY(generate_positions(&max_T, m, n_prompt, o));
    CudaCtx *c;
    TRY(cuda_ctx_create(&c, 0, (size_t)32 << 20));
    DevStep s;
    st->device_mem_before = cuda_mem_in_use(c);
    if (devmodel_init(&s.d, c, m, 1, (int)max_T, 0, DEVMODEL_DECODE) < 0) {
        cuda_ctx_free(c);
        return -1;
    }
    st->device_mem_loaded = cuda_mem_in_use(c);
    st->device_weight_bytes = s.d.weight_bytes;
    st->device_bytes = s.d.weight_bytes + s.d.acts_bytes;
    s.logits = xmalloc(m->V * sizeof *s.logits);
    // greedy: the argmax on the device, 4 bytes back a token (BEST_GREEDY_LOGITS=1: the logits, as before)
    const char *gl = getenv("BEST_GREEDY_LOGITS");
    GreedyFn greedy = gl && strcmp(gl, "1") == 0 ? NULL : dev_greedy;
    int rc = generate_loop(out, st, m->V, dev_step, greedy, &s, prompt, n_prompt, o, on_token, ctx);
    st->device_mem_after = cuda_mem_in_use(c);
    st->cuda_graph = s.d.graph || s.d.graph_greedy;
    st->decode_fused = s.d.n_fused;
    free(s.logits);
    devmodel_free(&s.d);
    cuda_ctx_free(c);
    return rc;
#endif
}
