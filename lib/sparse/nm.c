// nm.c: N:M patterns (nm.h).
#include "sparse/nm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"    // defines: ERR, xmalloc
#include "sparse/select.h" // defines: select_key

int nm_parse(NMPattern *out, const char *s) {
    if (!s) return -1;
    if (strcmp(s, "unstructured") == 0) {
        out->n = out->m = 0;
        return 0;
    }
    int n = 0, m = 0, used = 0;
    if (sscanf(s, "%d:%d%n", &n, &m, &used) != 2 || s[used] || !(n > 0 && n < m && m <= NM_MAX)) return -1;
    if (s[0] < '0' || s[0] > '9' || strchr(s, '+') || strchr(s, ' ')) return -1; // digits only
    out->n = n, out->m = m;
    return 0;
}

const char *nm_name(char *buf, const NMPattern *p) {
    if (p->m == 0) snprintf(buf, 16, "unstructured");
    else snprintf(buf, 16, "%d:%d", p->n, p->m);
    return buf;
}

double nm_sparsity(const NMPattern *p) { return p->m ? (double)(p->m - p->n) / p->m : 0.0; }

int nm_check(const NMPattern *p, const ParamInfo *info, int n_info) {
    if (p->m == 0) return 0;
    for (int i = 0; i < n_info; i++) {
        if (!info[i].prunable) continue;
        int64_t cols = info[i].shape[1];
        if (cols % p->m)
            return ERR("%s: %lld columns are not a multiple of %d (--pattern %d:%d)", info[i].name, (long long)cols,
                       p->m, p->n, p->m);
    }
    return 0;
}

void nm_mask_rows(uint8_t *mask, const float *scores, size_t rows, size_t cols, const NMPattern *p) {
    size_t m = (size_t)p->m, drop = (size_t)(p->m - p->n);
#pragma omp parallel for schedule(static) if (rows * cols > (1 << 16))
    for (size_t r = 0; r < rows; r++) {
        uint64_t key[NM_MAX];
        for (size_t c0 = 0; c0 < cols; c0 += m) {
            const float *s = scores + r * cols + c0;
            uint8_t *mk = mask + r * cols + c0;
            for (size_t j = 0; j < m; j++) key[j] = select_key(s[j], j), mk[j] = 1;
            nm_drop_smallest(key, (int)m, (int)drop);
            for (size_t a = 0; a < drop; a++) mk[key[a] & 0xffffffffu] = 0;
        }
    }
}

void nm_prune(float *w, uint8_t *mask, size_t rows, size_t cols, const double *colsq, const NMPattern *p) {
    float *score = xmalloc(rows * cols * sizeof *score);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            float wv = w[r * cols + c];
            score[r * cols + c] = colsq ? (float)(fabs((double)wv) * sqrt(colsq[c])) : fabsf(wv);
        }
    nm_mask_rows(mask, score, rows, cols, p);
    for (size_t i = 0; i < rows * cols; i++)
        if (!mask[i]) w[i] = 0.0f;
    free(score);
}

size_t nm_violations(const uint8_t *mask, size_t rows, size_t cols, const NMPattern *p) {
    size_t bad = 0, m = (size_t)p->m;
    if (!m) return 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t c0 = 0; c0 + m <= cols; c0 += m) {
            int kept = 0;
            for (size_t j = 0; j < m; j++) kept += mask[r * cols + c0 + j] != 0;
            bad += kept > p->n;
        }
    return bad;
}
