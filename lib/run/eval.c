// eval.c: perplexity over windows (the SparseGPT/Wanda protocol) and sampled generation.
#include "run/eval.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"    // defines: ERR, xmalloc
#include "base/progress.h" // defines: now_seconds

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

// targets (nb, seq): each window predicts its own tokens 1..seq-1 from x (nb, seq);
// the last position has none (-1).
static void ppl_targets(int32_t *targets, const int32_t *x, size_t nb, int seq) {
    for (size_t b = 0; b < nb; b++)
        for (int t = 0; t < seq; t++) targets[b * seq + t] = t + 1 < seq ? x[b * seq + t + 1] : -1;
}

int eval_perplexity(PplResult *r, Engine *e, const Model *m, const int32_t *tokens, size_t n, int seq, int batch,
                    Progress *pr) {
    memset(r, 0, sizeof *r);
    size_t nwin = 0; // (set by ppl_windows; gcc -O2 cannot tell)
    TRY(ppl_windows(&nwin, &seq, &batch, n));
    if (batch == 0) batch = engine_win_auto_batch(e, m, seq, nwin, EVAL_AUTO_BATCH_MAX);
    r->batch = batch;
    EngineWin w;
    TRY(engine_win_open(&w, e, m, batch, seq));
    r->device_bytes = engine_win_device_bytes(&w);
    int32_t *targets = xmalloc((size_t)batch * (size_t)seq * sizeof *targets);
    double total = 0;
    int rc = 0;
    for (size_t w0 = 0; w0 < nwin && rc == 0; w0 += (size_t)batch) {
        size_t nb = nwin - w0 < (size_t)batch ? nwin - w0 : (size_t)batch;
        const int32_t *x = tokens + w0 * (size_t)seq;
        ppl_targets(targets, x, nb, seq);
        if ((rc = engine_win_nll(&total, &w, x, targets, (int)nb)) < 0) break;
        if (pr) progress_update(pr, w0 + nb);
    }
    engine_win_close(&w);
    free(targets);
    TRY(rc);
    r->nll = total;
    r->windows = (int)nwin;
    r->seq = seq;
    r->tokens = (uint64_t)nwin * (uint64_t)(seq - 1);
    r->ppl = exp(total / (double)r->tokens);
    return 0;
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

// eval_generate's loop over the engine's steps, V the vocabulary; at temperature 0 over
// its greedy steps instead, when it has them (the same tokens: sample_token's pick).
static int generate_loop(IdVec *out, GenStats *st, size_t V, EngineDec *d, const int32_t *prompt, size_t n_prompt,
                         const GenOptions *o, int (*on_token)(const IdVec *so_far, void *ctx), void *ctx) {
    float *scratch = xmalloc(2 * V * sizeof *scratch);
    uint64_t rng = o->seed ? o->seed : 0x9E3779B97F4A7C15ull;
    const float *logits = NULL;
    int rc = 0, by_greedy = engine_dec_has_greedy(d) && o->temperature <= 0;
    int32_t picked = 0; // by_greedy: the last step's token
    double t0 = now_seconds(), t1 = t0;
    for (size_t i = 0; i < n_prompt && rc == 0; i++) {
        if (by_greedy) rc = engine_dec_greedy(d, prompt[i], (int)i, &picked);
        else if (!(logits = engine_dec_step(d, prompt[i], (int)i))) rc = -1;
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
            stop = on_token(out, ctx) != 0;
            t1 += now_seconds() - t2;
        }
        if (stop || k + 1 == o->max_new_tokens) break;
        if (by_greedy) rc = engine_dec_greedy(d, next, (int)(n_prompt + (size_t)k), &picked);
        else if (!(logits = engine_dec_step(d, next, (int)(n_prompt + (size_t)k)))) rc = -1;
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

int eval_generate(IdVec *out, GenStats *st, Engine *e, const Model *m, const int32_t *prompt, size_t n_prompt,
                  const GenOptions *o, int (*on_token)(const IdVec *so_far, void *ctx), void *ctx) {
    GenStats dummy;
    if (!st) st = &dummy;
    memset(st, 0, sizeof *st);
    size_t max_T = 0;
    TRY(generate_positions(&max_T, m, n_prompt, o));
    EngineDec d;
    TRY(engine_dec_open(&d, e, m, (int)max_T));
    int rc = generate_loop(out, st, m->V, &d, prompt, n_prompt, o, on_token, ctx);
    EngineDecStats ds;
    engine_dec_stats(&ds, &d);
    st->device_weight_bytes = ds.weight_bytes;
    st->device_bytes = ds.bytes;
    st->device_mem_before = ds.mem_before;
    st->device_mem_loaded = ds.mem_loaded;
    st->device_mem_after = ds.mem_now;
    st->cuda_graph = ds.cuda_graph;
    st->decode_fused = ds.fused;
    engine_dec_close(&d);
    return rc;
}
