// zeroshot.c: lm-evaluation-harness's loglikelihoods and accuracies (zeroshot.h).
#include "run/zeroshot.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h" // defines: ERR, TRY, xmalloc, xcalloc
#include "base/vec.h"   // defines: IdVec, ByteVec

// One request as the model reads it: full = (ctx + continuation)[-(L+1):], the input is
// full[:-1], and the last cont tokens of full are scored.
typedef struct {
    IdVec full;
    int cont;
} Req;

// Python's str.isspace for ASCII (rstrip's set, with \x1c-\x1f).
static int py_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

// The harness's _encode_pair, then its left truncation to max_length + 1 tokens.
static int request_tokens(Req *q, TokEncoder *enc, const Tokenizer *tok, const char *ctx, const char *cont,
                          int max_length) {
    size_t nc = strlen(ctx), ns = 0;
    while (ns < nc && py_space((unsigned char)ctx[nc - 1 - ns])) ns++;
    ByteVec whole = {0};
    bytevec_append(&whole, ctx, nc); // ctx + cont, whatever the whitespace's side
    bytevec_append(&whole, cont, strlen(cont));
    nc -= ns; // the context without its trailing whitespace
    IdVec c = {0};
    q->full.n = 0;
    int rc = 0;
    if (nc == 0) { // the harness's empty-context path: [BOS or EOS] + encode(continuation)
        int32_t prefix = tok->bos_id >= 0 ? tok->bos_id : tok->eos_id;
        if (prefix < 0) rc = ERR("an empty context needs a tokenizer with a BOS or EOS token");
        else {
            idvec_push(&q->full, prefix);
            c.n = 1;
            rc = tok_encode(enc, &q->full, whole.v, whole.n);
        }
    } else {
        if (tok->add_bos) idvec_push(&c, tok->bos_id), idvec_push(&q->full, tok->bos_id);
        rc = tok_encode(enc, &c, ctx, nc);
        if (rc == 0) rc = tok_encode(enc, &q->full, whole.v, whole.n);
    }
    size_t n = q->full.n, nctx = c.n;
    idvec_free(&c);
    bytevec_free(&whole);
    TRY(rc);
    if (n <= nctx) return ERR("the continuation \"%s\" adds no token to its context", cont);
    if (n - nctx > (size_t)max_length)
        return ERR("a continuation of %zu tokens is longer than the model's context (%d)", n - nctx, max_length);
    q->cont = (int)(n - nctx);
    if (n > (size_t)max_length + 1) { // keep the last max_length + 1
        size_t drop = n - (size_t)max_length - 1;
        memmove(q->full.v, q->full.v + drop, (n - drop) * sizeof *q->full.v);
        q->full.n = n - drop;
    }
    return 0;
}

// log softmax(z)[y] for one row of V logits, summed in double.
static double log_prob(const float *z, size_t V, int32_t y) {
    float mx = z[0];
    for (size_t i = 1; i < V; i++) mx = z[i] > mx ? z[i] : mx;
    double s = 0;
    for (size_t i = 0; i < V; i++) s += exp((double)z[i] - mx);
    return (double)z[y] - mx - log(s);
}

// The lls of a document's requests q (n) with the cache c (prefix shared, then each rest).
static int doc_lls(double *lls, const Model *m, KVCache *c, const Req *q, int n) {
    // p: the tokens every input shares, and before the first row any request scores
    size_t p = q[0].full.n - 1;
    for (int i = 0; i < n; i++) {
        size_t in = q[i].full.n - 1, first = in - (size_t)q[i].cont, k = 0;
        while (k < p && k < in && q[i].full.v[k] == q[0].full.v[k]) k++;
        p = k < first ? k : first;
    }
    size_t chunk = (size_t)c->max_chunk;
    for (size_t a = 0; a < p; a += chunk) {
        size_t b = a + chunk < p ? a + chunk : p;
        if (!model_forward_chunk(m, c, q[0].full.v + a, (int)(b - a), (int)a, 0)) return -1;
    }
    for (int i = 0; i < n; i++) {
        size_t in = q[i].full.n - 1, first = in - (size_t)q[i].cont;
        double ll = 0;
        for (size_t a = p; a < in; a += chunk) {
            size_t b = a + chunk < in ? a + chunk : in;
            const float *z = model_forward_chunk(m, c, q[i].full.v + a, (int)(b - a), (int)a, b > first);
            if (!z) return -1;
            for (size_t r = a > first ? a : first; r < b; r++) ll += log_prob(z + (r - a) * m->V, m->V, q[i].full.v[r + 1]);
        }
        lls[i] = ll;
    }
    return 0;
}

int zeroshot_score(double **lls, const Model *m, const Tokenizer *tok, const Task *t, int max_length, Progress *pr) {
    if (max_length <= 0) max_length = m->cfg.max_position_embeddings;
    // every request's tokens first: the cache is sized for the longest
    size_t nreq = 0;
    for (size_t d = 0; d < t->n; d++) nreq += (size_t)t->docs[d].n;
    Req *q = xcalloc(nreq ? nreq : 1, sizeof *q);
    size_t *start = xmalloc((t->n + 1) * sizeof *start);
    int rc = 0;
    TokEncoder enc;
    tok_encoder_init(&enc, tok);
    size_t k = 0, longest = 1;
    for (size_t d = 0; d < t->n && rc == 0; d++) {
        start[d] = k;
        for (int i = 0; i < t->docs[d].n && rc == 0; i++, k++) {
            rc = request_tokens(&q[k], &enc, tok, t->docs[d].ctx[i], t->docs[d].cont[i], max_length);
            if (rc < 0) err_prefix("%s:%zu: choice %d: ", t->path, d + 1, i);
            else if (q[k].full.n - 1 > longest) longest = q[k].full.n - 1;
        }
    }
    start[t->n] = k;
    tok_encoder_free(&enc);
    // documents in parallel, one cache each (the kernels inside run on one thread then)
    int chunk = longest < 128 ? (int)longest : 128;
    size_t done = 0;
    int threads = omp_get_max_threads(), failed = 0;
    if ((size_t)threads > t->n) threads = (int)(t->n ? t->n : 1);
    char why[512] = ""; // the first failing thread's message (ERR's is per thread)
    if (rc == 0) {
#pragma omp parallel num_threads(threads)
        {
            KVCache c;
            int ok = kvcache_init_chunked(&c, m, (int)longest, chunk) == 0;
#pragma omp for schedule(dynamic, 1)
            for (size_t d = 0; d < t->n; d++) {
                int stop;
#pragma omp atomic read
                stop = failed;
                if (stop || !ok) continue;
                if (doc_lls(lls[d], m, &c, q + start[d], t->docs[d].n) < 0) {
                    ok = 0;
                    continue;
                }
#pragma omp atomic
                done += (size_t)t->docs[d].n;
                if (pr && omp_get_thread_num() == 0) progress_update(pr, done);
            }
            if (!ok) {
#pragma omp critical(zeroshot_err)
                if (!failed) {
                    snprintf(why, sizeof why, "%s", err_msg());
#pragma omp atomic write
                    failed = 1;
                }
            }
            kvcache_free(&c); // (also after a failed init: it leaves c empty)
        }
        if (failed) rc = ERR("%s", why);
    }
    if (pr && rc == 0) progress_update(pr, done);
    for (size_t i = 0; i < nreq; i++) idvec_free(&q[i].full);
    free(q);
    free(start);
    return rc;
}

// The mean of x (n) and its standard error (sample standard deviation over sqrt(n)).
static void mean_stderr(double *mean, double *se, const double *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += x[i];
    *mean = n ? s / (double)n : NAN;
    if (n < 2) { *se = NAN; return; }
    double v = 0;
    for (size_t i = 0; i < n; i++) v += (x[i] - *mean) * (x[i] - *mean);
    *se = sqrt(v / (double)(n - 1)) / sqrt((double)n);
}

// The first index of the largest of x (n) / div (div NULL: 1), as numpy's argmax.
static int argmax(const double *x, const double *div, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if ((div ? x[i] / div[i] : x[i]) > (div ? x[best] / div[best] : x[best])) best = i;
    return best;
}

void zeroshot_metrics(ZsResult *r, int *pred, int *pred_norm, const Task *t, double *const *lls) {
    memset(r, 0, sizeof *r);
    r->n = t->n;
    double *acc = xcalloc(t->n ? t->n : 1, sizeof *acc), *accn = xcalloc(t->n ? t->n : 1, sizeof *accn);
    for (size_t d = 0; d < t->n; d++) {
        const TaskDoc *doc = &t->docs[d];
        r->requests += (size_t)doc->n;
        int p = argmax(lls[d], NULL, doc->n), pn = t->acc_norm ? argmax(lls[d], doc->len, doc->n) : -1;
        acc[d] = p == doc->gold;
        accn[d] = pn == doc->gold;
        if (pred) pred[d] = p;
        if (pred_norm) pred_norm[d] = pn;
    }
    mean_stderr(&r->acc, &r->acc_stderr, acc, t->n);
    if (t->acc_norm) mean_stderr(&r->acc_norm, &r->acc_norm_stderr, accn, t->n);
    else r->acc_norm = r->acc_norm_stderr = NAN;
    free(acc);
    free(accn);
}
