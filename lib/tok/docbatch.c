// docbatch.c: parallel, order-preserving encoding of a batch of documents; ids as text.
#include "tok/docbatch.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h" // defines: ERR, xrealloc

void docbatch_add(DocBatch *b, const char *text, size_t len) {
    if (b->n + 2 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 1024;
        b->off = xrealloc(b->off, (cap + 1) * sizeof *b->off);
        b->ids = xrealloc(b->ids, cap * sizeof *b->ids);
        memset(b->ids + b->cap, 0, (cap - b->cap) * sizeof *b->ids);
        b->cap = cap;
    }
    if (b->n == 0) b->off[0] = 0;
    bytevec_append(&b->text, text, len);
    b->off[b->n + 1] = b->text.n;
    b->n++;
}

int docbatch_encode(DocBatch *b, TokEncoder *enc, int nthreads, int bos, int eos) {
    int failed = 0;
    char msg[512] = "";
    // dynamic: document lengths vary by orders of magnitude.
    #pragma omp parallel for schedule(dynamic, 1) num_threads(nthreads)
    for (size_t i = 0; i < b->n; i++) {
        IdVec *v = &b->ids[i];
        v->n = 0;
        if (bos >= 0) idvec_push(v, bos);
        if (tok_encode(&enc[omp_get_thread_num()], v, b->text.v + b->off[i], b->off[i + 1] - b->off[i]) < 0) {
            #pragma omp critical
            if (!failed) { failed = 1; snprintf(msg, sizeof msg, "%s", err_msg()); }
        }
        if (eos >= 0) idvec_push(v, eos);
    }
    if (failed) return ERR("%s", msg);
    return 0;
}

void docbatch_clear(DocBatch *b) {
    b->n = 0;
    b->text.n = 0;
}

void docbatch_free(DocBatch *b) {
    for (size_t i = 0; i < b->cap; i++) idvec_free(&b->ids[i]);
    free(b->ids);
    free(b->off);
    bytevec_free(&b->text);
    memset(b, 0, sizeof *b);
}

int ids_parse_line(IdVec *out, const char *s, size_t n, const char *name, unsigned long long line) {
    size_t i = 0;
    while (i < n) {
        while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')) i++;
        if (i == n) break;
        if (s[i] < '0' || s[i] > '9')
            return ERR("%s:%llu: expected token ids (decimal numbers), found '%c'", name, line, s[i]);
        long long x = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            x = x * 10 + (s[i++] - '0');
            if (x > INT32_MAX) return ERR("%s:%llu: token id too large", name, line);
        }
        if (i < n && s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            return ERR("%s:%llu: expected token ids (decimal numbers), found '%c'", name, line, s[i]);
        idvec_push(out, (int32_t)x);
    }
    return 0;
}

void ids_format_line(ByteVec *out, const int32_t *ids, size_t n) {
    bytevec_reserve(out, n * 12 + 1);
    char *p = out->v + out->n;
    for (size_t i = 0; i < n; i++) {
        char tmp[12];
        int k = 0;
        uint32_t x = (uint32_t)ids[i];
        do { tmp[k++] = (char)('0' + x % 10); x /= 10; } while (x);
        if (i) *p++ = ' ';
        while (k) *p++ = tmp[--k];
    }
    *p++ = '\n';
    out->n = (size_t)(p - out->v);
}
