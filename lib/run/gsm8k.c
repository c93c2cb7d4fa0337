// gsm8k.c: GSM8K as the harness's generate_until task (gsm8k.h).
#include "run/gsm8k.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/error.h"    // defines: ERR, TRY, xmalloc, xstrdup
#include "base/pyrandom.h" // defines: PyRandom, pyrandom_seed, pyrandom_sample
#include "base/utf8.h"     // defines: utf8_repair_py, utf8_py_strip
#include "base/vec.h"      // defines: ByteVec, IdVec
#include "io/docs.h"       // defines: docs_open, docs_next, docs_line
#include "run/eval.h"      // defines: eval_generate, GenOptions
#include "run/tasks.h"     // defines: task_find_file, TASK_FEWSHOT_SEED

static const char *const STOPS[] = {"Question:", "</s>", "<|im_end|>"}; // generation_kwargs.until
enum { N_STOPS = sizeof STOPS / sizeof *STOPS };


// --- records ------------------------------------------------------------------------------

typedef struct {
    char *q, *a;
} QA;

// DIR/NAME.jsonl (task_find_file): every record's question and answer into *out (n).
static int read_qa(QA **out, size_t *n, char **path_out, const char *dir, const char *name, size_t limit) {
    char *path;
    TRY(task_find_file(&path, dir, name));
    DocReader *r;
    if (docs_open(&r, path, "", DOC_JSONL) < 0) { free(path); return -1; }
    QA *v = NULL;
    size_t cap = 0, k = 0;
    const char *line;
    size_t len;
    int rc;
    while ((limit == 0 || k < limit) && (rc = docs_next(r, &line, &len)) == 1) {
        unsigned long long at = (unsigned long long)docs_line(r);
        json_error_t jerr;
        json_t *o = json_loadb(line, len, 0, &jerr);
        if (!o) { rc = ERR("%s:%llu: %s", path, at, jerr.text); break; }
        const char *q = json_string_value(json_object_get(o, "question"));
        const char *a = json_string_value(json_object_get(o, "answer"));
        if (!q || !a) {
            json_decref(o);
            rc = ERR("%s:%llu: no string field \"%s\"", path, at, q ? "answer" : "question");
            break;
        }
        if (k == cap) cap = cap ? 2 * cap : 256, v = xrealloc(v, cap * sizeof *v);
        v[k].q = xstrdup(q), v[k].a = xstrdup(a), k++;
        json_decref(o);
    }
    docs_close(r);
    if (rc >= 0 && k == 0) rc = ERR("%s: no records", path);
    if (rc < 0) {
        for (size_t i = 0; i < k; i++) free(v[i].q), free(v[i].a);
        free(v);
        free(path);
        return -1;
    }
    *out = v, *n = k;
    if (path_out) *path_out = path;
    else free(path);
    return 0;
}

int gsm8k_load(Gsm8kTask *t, const char *dir, size_t limit, int num_fewshot) {
    memset(t, 0, sizeof *t);
    t->num_fewshot = num_fewshot;
    QA *test = NULL, *train = NULL;
    size_t n = 0, ntrain = 0;
    TRY(read_qa(&test, &n, &t->path, dir, "gsm8k", limit));
    int rc = 0;
    if (num_fewshot > 0) {
        rc = read_qa(&train, &ntrain, NULL, dir, "gsm8k_train", 0);
        if (rc == 0 && ntrain < (size_t)num_fewshot)
            rc = ERR("%s: %zu train records (gsm8k_train), fewer than the %d examples asked for", dir, ntrain,
                     num_fewshot);
    }
    PyRandom rnd;
    pyrandom_seed(&rnd, TASK_FEWSHOT_SEED);
    size_t *pick = xmalloc(((size_t)num_fewshot + 1) * sizeof *pick);
    t->docs = xcalloc(n, sizeof *t->docs);
    for (size_t i = 0; i < n && rc == 0; i++) {
        ByteVec b = {0};
        if (num_fewshot > 0) {
            pyrandom_sample(pick, &rnd, ntrain, (size_t)num_fewshot);
            for (int k = 0; k < num_fewshot; k++) {
                const QA *e = &train[pick[k]];
                char *ex = xstrcat("Question: ", e->q, "\nAnswer:", " ", e->a, "\n\n", NULL);
                bytevec_append(&b, ex, strlen(ex));
                free(ex);
            }
        }
        char *q = xstrcat("Question: ", test[i].q, "\nAnswer:", NULL);
        bytevec_append(&b, q, strlen(q));
        bytevec_push(&b, '\0');
        free(q);
        t->docs[i].context = b.v;
        t->docs[i].target = test[i].a, test[i].a = NULL;
        t->n++;
    }
    free(pick);
    for (size_t i = 0; i < n; i++) free(test[i].q), free(test[i].a);
    for (size_t i = 0; i < ntrain; i++) free(train[i].q), free(train[i].a);
    free(test);
    free(train);
    if (rc < 0) { gsm8k_free(t); return -1; }
    return 0;
}

void gsm8k_free(Gsm8kTask *t) {
    for (size_t i = 0; i < t->n; i++) free(t->docs[i].context), free(t->docs[i].target);
    free(t->docs);
    free(t->path);
    memset(t, 0, sizeof *t);
}

// --- filters and the metric -------------------------------------------------------------

// pattern compiled once (the harness's Python patterns, in PCRE2's byte mode: they are
// ASCII, and "." with DOTALL takes any byte as Python's any character)
static pcre2_code *regex(const char *pattern) {
    int err;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, 0, &err, &off, NULL);
    if (!re) abort(); // (constant patterns: a failure is a bug here)
    return re;
}

char *gsm8k_extract(const char *text, size_t n, int flexible) {
    static pcre2_code *re[2];
    if (!re[0]) re[0] = regex("#### (\\-?[0-9\\.\\,]+)"), re[1] = regex("(-?[$0-9.,]{2,})|(-?[0-9]+)");
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re[flexible], NULL);
    size_t at = 0;
    char *found = NULL; // findall's pick: the first match (strict), the last (flexible)
    while (at <= n && pcre2_match(re[flexible], (PCRE2_SPTR)text, n, at, 0, md, NULL) >= 0) {
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        uint32_t groups = pcre2_get_ovector_count(md);
        // one group: findall gives it; two: the tuple, whose first non-empty group is taken
        char *g = NULL;
        for (uint32_t k = 1; k < groups && !g; k++)
            if (ov[2 * k] != PCRE2_UNSET && ov[2 * k + 1] > ov[2 * k]) {
                size_t len = ov[2 * k + 1] - ov[2 * k];
                g = xmalloc(len + 1);
                memcpy(g, text + ov[2 * k], len);
                g[len] = '\0';
            }
        free(found);
        found = g ? g : xstrdup(""); // (an empty tuple: the fallback below)
        at = ov[1] > ov[0] ? ov[1] : ov[0] + 1;
        if (!flexible) break;
    }
    pcre2_match_data_free(md);
    if (!found || !*found) {
        free(found);
        return xstrdup("[invalid]");
    }
    char *s = utf8_py_strip(found);
    free(found);
    return s;
}

// re.sub(pattern, "", s) for each of the metric's regexes_to_ignore, in turn.
static char *sub_all(pcre2_code *re, const char *s) {
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    size_t n = strlen(s), at = 0, last = 0;
    ByteVec b = {0};
    while (at <= n && pcre2_match(re, (PCRE2_SPTR)s, n, at, 0, md, NULL) >= 0) {
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        bytevec_append(&b, s + last, ov[0] - last);
        last = ov[1];
        at = ov[1] > ov[0] ? ov[1] : ov[0] + 1; // (these patterns never match empty)
    }
    bytevec_append(&b, s + last, n - last);
    bytevec_push(&b, '\0');
    pcre2_match_data_free(md);
    return b.v;
}

char *gsm8k_normalize(const char *s) {
    static pcre2_code *re[4];
    if (!re[0]) re[0] = regex(","), re[1] = regex("\\$"), re[2] = regex("(?s).*#### "), re[3] = regex("\\.$");
    char *x = xstrdup(s);
    for (int i = 0; i < 4; i++) {
        char *y = sub_all(re[i], x);
        free(x);
        x = y;
    }
    // lower case (numpy's char.lower: str.lower, one code point to one here)
    ByteVec b = {0};
    size_t n = strlen(x), at = 0;
    while (at < n) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)x + at, (utf8proc_ssize_t)(n - at), &c);
        if (k <= 0) { bytevec_push(&b, x[at++]); continue; }
        utf8proc_uint8_t enc[4];
        utf8proc_ssize_t m = utf8proc_encode_char(utf8proc_tolower(c), enc);
        bytevec_append(&b, enc, (size_t)m);
        at += (size_t)k;
    }
    bytevec_push(&b, '\0');
    free(x);
    return b.v;
}

// --- generation -------------------------------------------------------------------------

// The text of ids (n) without the special tokens (HF's decode(skip_special_tokens=True)),
// into out (raw bytes).
static int decode_plain(const Tokenizer *tok, ByteVec *out, const int32_t *ids, size_t n) {
    IdVec keep = {0};
    for (size_t i = 0; i < n; i++)
        if (!tok_is_special(tok, ids[i])) idvec_push(&keep, ids[i]);
    out->n = 0;
    int rc = tok_decode(tok, out, keep.v, keep.n);
    free(keep.v);
    return rc;
}

typedef struct {
    const Tokenizer *tok;
    ByteVec text;
} Watch;

// on_token: the new tokens decoded; stop once a stop string is in them.
static int watch_token(const IdVec *so_far, void *ctx) {
    Watch *w = ctx;
    if (decode_plain(w->tok, &w->text, so_far->v, so_far->n) < 0) return 1;
    size_t tn;
    char *t = utf8_repair_py(w->text.v ? w->text.v : "", w->text.n, &tn);
    int stop = 0;
    for (int s = 0; s < N_STOPS; s++) stop |= memmem(t, tn, STOPS[s], strlen(STOPS[s])) != NULL;
    free(t);
    return stop;
}

int gsm8k_generate(char **text, size_t *text_len, size_t *n_tokens, Engine *e, const Model *m,
                   const Tokenizer *tok, const char *context) {
    int ctx_max = m->cfg.max_position_embeddings - GSM8K_MAX_GEN;
    if (ctx_max <= 0)
        return ERR("gsm8k: the model's context of %d tokens leaves no room for a prompt and the %d new tokens the "
                   "harness allows", m->cfg.max_position_embeddings, GSM8K_MAX_GEN);
    IdVec ids = {0}, out = {0};
    if (tok->add_bos) idvec_push(&ids, tok->bos_id);
    TokEncoder enc;
    tok_encoder_init(&enc, tok);
    int rc = tok_encode(&enc, &ids, context, strlen(context));
    tok_encoder_free(&enc);
    size_t skip = ids.n > (size_t)ctx_max ? ids.n - (size_t)ctx_max : 0; // cut on the left
    int32_t stop[10];
    int n_stop = 0;
    for (int i = 0; i < m->cfg.n_eos && n_stop < 8; i++) stop[n_stop++] = m->cfg.eos_token_ids[i];
    if (tok->eos_id >= 0) stop[n_stop++] = tok->eos_id;
    GenOptions g = {0.0f, 1.0f, 0, GSM8K_MAX_GEN, stop, n_stop};
    Watch w = {tok, {0}};
    if (rc == 0) rc = eval_generate(&out, NULL, e, m, ids.v + skip, ids.n - skip, &g, watch_token, &w);
    // the new tokens but a final stop token, decoded, and cut at each stop string in turn
    size_t n = out.n;
    for (int s = 0; rc == 0 && n > 0 && s < n_stop; s++)
        if (out.v[n - 1] == stop[s]) { n--; break; }
    if (rc == 0) rc = decode_plain(tok, &w.text, out.v, n);
    if (rc == 0) {
        size_t tn;
        char *t = utf8_repair_py(w.text.v ? w.text.v : "", w.text.n, &tn);
        for (int s = 0; s < N_STOPS; s++) { // text.split(term)[0], each term in turn
            char *cut = memmem(t, tn, STOPS[s], strlen(STOPS[s]));
            if (cut) *cut = '\0', tn = (size_t)(cut - t);
        }
        *text = t;
        *text_len = tn;
        if (n_tokens) *n_tokens = n;
    }
    free(ids.v);
    free(out.v);
    free(w.text.v);
    return rc;
}
