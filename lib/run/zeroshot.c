// zeroshot.c: lm-evaluation-harness's loglikelihoods and accuracies (zeroshot.h).
#include "run/zeroshot.h"

#include <math.h>
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

// The tokens a document's requests q (n) share, and before the first row any of them scores.
static size_t doc_prefix(const Req *q, int n) {
    size_t p = q[0].full.n - 1;
    for (int i = 0; i < n; i++) {
        size_t in = q[i].full.n - 1, first = in - (size_t)q[i].cont, k = 0;
        while (k < p && k < in && q[i].full.v[k] == q[0].full.v[k]) k++;
        p = k < first ? k : first;
    }
    return p;
}

// The rows of a document in a packed batch: its prefix once, then each request's rest.
static size_t doc_rows(const Req *q, int n) {
    size_t p = doc_prefix(q, n), rows = p;
    for (int i = 0; i < n; i++) rows += q[i].full.n - 1 - p;
    return rows;
}

// One packed batch (rows of whole documents) and where its scores go.
typedef struct {
    IdVec tok, pos;             // per row
    IdVec seg;                  // (segments, 4): layers.h's attention_packed
    IdVec score_row, target;    // the rows that score, the token each predicts
    size_t *score_req;          // and the request (global index) each adds to
    size_t n_score, cap_score;
} Batch;

static void batch_add_doc(Batch *b, const Req *q, int n, size_t req0) {
    size_t p = doc_prefix(q, n), o = b->tok.n;
    if (p) {
        int32_t sg[4] = {(int32_t)o, (int32_t)p, (int32_t)o, 0};
        for (int k = 0; k < 4; k++) idvec_push(&b->seg, sg[k]);
    }
    for (size_t j = 0; j < p; j++) idvec_push(&b->tok, q[0].full.v[j]), idvec_push(&b->pos, (int32_t)j);
    for (int i = 0; i < n; i++) {
        size_t in = q[i].full.n - 1, first = in - (size_t)q[i].cont;
        int32_t sg[4] = {(int32_t)b->tok.n, (int32_t)(in - p), (int32_t)o, (int32_t)p};
        for (int k = 0; k < 4; k++) idvec_push(&b->seg, sg[k]);
        for (size_t j = p; j < in; j++) {
            if (j >= first) { // this row predicts token j + 1, one of the continuation's
                if (b->n_score == b->cap_score) {
                    b->cap_score = b->cap_score ? 2 * b->cap_score : 1024;
                    b->score_req = xrealloc(b->score_req, b->cap_score * sizeof *b->score_req);
                }
                b->score_req[b->n_score++] = req0 + (size_t)i;
                idvec_push(&b->score_row, (int32_t)b->tok.n);
                idvec_push(&b->target, q[i].full.v[j + 1]);
            }
            idvec_push(&b->tok, q[i].full.v[j]), idvec_push(&b->pos, (int32_t)j);
        }
    }
}

static void batch_clear(Batch *b) {
    b->tok.n = b->pos.n = b->seg.n = b->score_row.n = b->target.n = 0;
    b->n_score = 0;
}

static void batch_free(Batch *b) {
    idvec_free(&b->tok), idvec_free(&b->pos), idvec_free(&b->seg);
    idvec_free(&b->score_row), idvec_free(&b->target);
    free(b->score_req);
}

// Every request's tokens: q (nreq) in document order, start (t->n + 1) the first request
// of each document. 0, or -1 with q and start freed.
typedef struct {
    Req *q;
    size_t *start, nreq;
} Requests;

static void requests_free(Requests *r) {
    for (size_t i = 0; i < r->nreq; i++) idvec_free(&r->q[i].full);
    free(r->q);
    free(r->start);
    memset(r, 0, sizeof *r);
}

static int requests_tokenize(Requests *r, const Tokenizer *tok, const Task *t, int max_length) {
    r->nreq = 0;
    for (size_t d = 0; d < t->n; d++) r->nreq += (size_t)t->docs[d].n;
    r->q = xcalloc(r->nreq ? r->nreq : 1, sizeof *r->q);
    r->start = xmalloc((t->n + 1) * sizeof *r->start);
    int rc = 0;
    TokEncoder enc;
    tok_encoder_init(&enc, tok);
    size_t k = 0;
    for (size_t d = 0; d < t->n && rc == 0; d++) {
        r->start[d] = k;
        for (int i = 0; i < t->docs[d].n && rc == 0; i++, k++) {
            rc = request_tokens(&r->q[k], &enc, tok, t->docs[d].ctx[i], t->docs[d].cont[i], max_length);
            if (rc < 0) err_prefix("%s:%zu: choice %d: ", t->path, d + 1, i);
        }
    }
    r->start[t->n] = k;
    tok_encoder_free(&enc);
    if (rc < 0) requests_free(r);
    return rc;
}

// lls[d][i] = ll[start[d] + i]
static void lls_scatter(double **lls, const double *ll, const Requests *r, const Task *t) {
    for (size_t d = 0; d < t->n; d++)
        for (int i = 0; i < t->docs[d].n; i++) lls[d][i] = ll[r->start[d] + (size_t)i];
}

// rows (t->n + 1): each document's rows in a packed batch (0 after the last); *longest
// the most of them; w (may be NULL) the task's work.
static size_t *docs_rows(size_t *longest, ZsWork *w, const Requests *r, const Task *t) {
    size_t *rows = xmalloc((t->n + 1) * sizeof *rows);
    ZsWork all = {0, 0};
    *longest = 1;
    for (size_t d = 0; d < t->n; d++) {
        rows[d] = doc_rows(r->q + r->start[d], t->docs[d].n);
        if (rows[d] > *longest) *longest = rows[d];
        all.rows += rows[d];
    }
    for (size_t i = 0; i < r->nreq; i++) all.inputs += r->q[i].full.n - 1;
    rows[t->n] = 0;
    if (w) *w = all;
    return rows;
}

// ll (r->nreq) = each request's loglikelihood: the documents of t in order, whole, packed
// into batches of at most max_rows rows (rows: docs_rows'), each scored by the engine.
static int batches_score(double *ll, const Requests *r, const Task *t, const size_t *rows, size_t max_rows,
                         EngineRows *er, Progress *pr) {
    Batch b = {0};
    size_t done = 0, d0 = 0;
    int rc = 0;
    for (size_t d = 0; d <= t->n && rc == 0; d++) {
        if (b.tok.n && (d == t->n || b.tok.n + rows[d] > max_rows)) { // run what is gathered
            EngineBatch eb = {b.tok.v, b.pos.v, b.tok.n, b.seg.v, b.seg.n / 4, b.score_row.v, b.target.v, b.score_req,
                              b.n_score};
            if ((rc = engine_rows_score(er, ll, &eb)) < 0) break;
            for (; d0 < d; d0++) done += (size_t)t->docs[d0].n;
            if (pr) progress_update(pr, done);
            batch_clear(&b);
        }
        if (d < t->n) batch_add_doc(&b, r->q + r->start[d], t->docs[d].n, r->start[d]);
    }
    batch_free(&b);
    return rc;
}

int zeroshot_score(double **lls, ZsWork *w, EngineRows *er, const Model *m, const Tokenizer *tok, const Task *t,
                   int max_length, Progress *pr) {
    if (max_length <= 0) max_length = m->cfg.max_position_embeddings;
    Requests r;
    TRY(requests_tokenize(&r, tok, t, max_length));
    size_t longest, max_rows = 0, *rows = docs_rows(&longest, w, &r, t); // a document's rows bound its segments' keys
    double *ll = xcalloc(r.nreq ? r.nreq : 1, sizeof *ll);
    int rc = engine_rows_reserve(er, longest, &max_rows);
    if (rc == 0) rc = batches_score(ll, &r, t, rows, max_rows, er, pr);
    if (rc == 0) lls_scatter(lls, ll, &r, t);
    free(ll);
    free(rows);
    requests_free(&r);
    return rc;
}

// --- one request a row: the plain forward, the reference of the packed batches ---------------

// Requests by length, longest first (then in order: the same batches every run).
static const Req *g_by_len;
static int by_len(const void *a, const void *b) {
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    size_t li = g_by_len[i].full.n, lj = g_by_len[j].full.n;
    if (li != lj) return li > lj ? -1 : 1;
    return i < j ? -1 : i > j;
}

int zeroshot_score_rows(double **lls, const Model *m, const Tokenizer *tok, const Task *t, int max_length,
                        Progress *pr) {
    if (max_length <= 0) max_length = m->cfg.max_position_embeddings;
    Requests r;
    TRY(requests_tokenize(&r, tok, t, max_length));
    size_t T = 1; // the longest input, and the rows of a batch of about 16k tokens
    for (size_t i = 0; i < r.nreq; i++)
        if (r.q[i].full.n - 1 > T) T = r.q[i].full.n - 1;
    size_t B = ((size_t)1 << 14) / T;
    B = B < 1 ? 1 : B > r.nreq ? (r.nreq ? r.nreq : 1) : B;
    size_t *order = xmalloc((r.nreq ? r.nreq : 1) * sizeof *order), N = B * T, done = 0;
    for (size_t i = 0; i < r.nreq; i++) order[i] = i;
    g_by_len = r.q;
    qsort(order, r.nreq, sizeof *order, by_len);
    int32_t *x = xmalloc(N * sizeof *x), *targets = xmalloc(N * sizeof *targets);
    float *nll = xmalloc(N * sizeof *nll);
    double *ll = xcalloc(r.nreq ? r.nreq : 1, sizeof *ll);
    ModelActs a;
    int rc = model_acts_init(&a, m, (int)B, (int)T, 0), have_acts = rc == 0;
    for (size_t k0 = 0; k0 < r.nreq && rc == 0; k0 += B) { // each row padded on the right (causal)
        size_t nb = r.nreq - k0 < B ? r.nreq - k0 : B;
        for (size_t i = 0; i < N; i++) x[i] = 0, targets[i] = -1;
        for (size_t b = 0; b < nb; b++) {
            const Req *q = &r.q[order[k0 + b]];
            size_t in = q->full.n - 1;
            memcpy(x + b * T, q->full.v, in * sizeof *x);
            for (size_t j = in - (size_t)q->cont; j < in; j++) targets[b * T + j] = q->full.v[j + 1];
        }
        if ((rc = model_eval(NULL, nll, m, &a, x, targets)) < 0) break;
        for (size_t b = 0; b < nb; b++) {
            const Req *q = &r.q[order[k0 + b]];
            size_t in = q->full.n - 1;
            for (size_t j = in - (size_t)q->cont; j < in; j++) ll[order[k0 + b]] -= nll[b * T + j];
        }
        done += nb;
        if (pr) progress_update(pr, done);
    }
    if (have_acts) model_acts_free(&a);
    if (rc == 0) lls_scatter(lls, ll, &r, t);
    free(x), free(targets), free(nll), free(order), free(ll);
    requests_free(&r);
    return rc;
}

void zeroshot_mean_stderr(double *mean, double *se, const double *x, size_t n) {
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
    zeroshot_mean_stderr(&r->acc, &r->acc_stderr, acc, t->n);
    if (t->acc_norm) zeroshot_mean_stderr(&r->acc_norm, &r->acc_norm_stderr, accn, t->n);
    else r->acc_norm = r->acc_norm_stderr = NAN;
    free(acc);
    free(accn);
}

void zeroshot_pool(ZsResult *r, const ZsResult *parts, int k) {
    memset(r, 0, sizeof *r);
    double sum = 0, var = 0;
    for (int i = 0; i < k; i++) {
        double n = (double)parts[i].n;
        r->n += parts[i].n;
        r->requests += parts[i].requests;
        sum += parts[i].acc * n;
        var += (n - 1) * parts[i].acc_stderr * parts[i].acc_stderr * n; // NaN stays NaN
    }
    double N = (double)r->n;
    r->acc = N > 0 ? sum / N : NAN;
    r->acc_stderr = N > (double)k ? sqrt(var / (N - (double)k) / N) : NAN;
    r->acc_norm = r->acc_norm_stderr = NAN;
}
