// nm.c: N:M patterns (nm.h).
#include "sparse/nm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"    // defines: ERR, xmalloc
#include "dist/dist.h"     // defines: dist_size, dist_rank, dist_sum_f64
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

// --- BEST with an N:M target ------------------------------------------------------------

int nm_ramp_parse(NMRamp *out, const char *name) {
    if (strcmp(name, "global") == 0) { *out = NM_RAMP_GLOBAL; return 0; }
    if (strcmp(name, "group") == 0) { *out = NM_RAMP_GROUP; return 0; }
    return -1;
}

const char *nm_ramp_name(NMRamp r) { return r == NM_RAMP_GLOBAL ? "global" : r == NM_RAMP_GROUP ? "group" : "?"; }

void nm_ramp_at(int *keep, double *sparsity, const NMPattern *p, NMRamp r, double S) {
    double Sf = nm_sparsity(p);
    if (r == NM_RAMP_GLOBAL) {
        *keep = p->n;
        *sparsity = S < Sf ? S : Sf;
        return;
    }
    // the groups' count steps down by whole weights, never ahead of the schedule: n_j =
    // M - floor((M - N) S / S_f), N exactly at S = S_f (1e-9: S_f's own rounding)
    double f = Sf > 0 ? S / Sf : 1.0;
    int drop = (int)floor((double)(p->m - p->n) * f + 1e-9);
    if (drop > p->m - p->n) drop = p->m - p->n;
    if (drop < 0) drop = 0;
    *keep = p->m - drop;
    *sparsity = (double)drop / p->m;
}

void nm_protect(float *s, size_t n, int m, int keep) {
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (size_t g = 0; g < n / (size_t)m; g++) nm_protect_group(s + g * (size_t)m, m, keep);
}

// The prunable tensor of info holding block element x, or -1.
static int tensor_at(const ParamInfo *info, int n_info, size_t x) {
    for (int i = 0; i < n_info; i++)
        if (info[i].prunable && info[i].offset <= x && x - info[i].offset < info[i].numel) return i;
    return -1;
}

void nm_edges_find(NMEdges *e, const ParamInfo *info, int n_info, int m, size_t lo, size_t hi) {
    memset(e, 0, sizeof *e);
    if (lo >= hi || m <= 0) return;
    size_t um = (size_t)m;
    int t = tensor_at(info, n_info, lo);
    if (t >= 0 && (lo - info[t].offset) % um) { // a boundary inside the group holding lo
        size_t first = lo - (lo - info[t].offset) % um, end = first + um < hi ? first + um : hi;
        e->at[0] = lo, e->len[0] = end - lo, e->first[0] = first, e->tensor[0] = t;
    }
    t = tensor_at(info, n_info, hi - 1);
    if (t >= 0 && (hi - info[t].offset) % um) { // a boundary inside the group holding hi - 1
        size_t first = hi - (hi - info[t].offset) % um, at = first > lo ? first : lo;
        if (!(e->len[0] && e->first[0] == first)) // (the same group as the first edge: that one)
            e->at[1] = at, e->len[1] = hi - at, e->first[1] = first, e->tensor[1] = t;
    }
}

void nm_edges_protect(NMEdges *e, int m, int keep) {
    int ranks = dist_size(), me = dist_rank();
    // slot (rank, edge, j): block position + 1 (0: empty) and the score's bits, both exact
    // in a double; every slot is one rank's, so the sum over ranks is that rank's value
    size_t per = 2 * NM_MAX * 2, nbuf = (size_t)ranks * per;
    double *buf = xcalloc(nbuf, sizeof *buf);
    for (int k = 0; k < 2; k++)
        for (size_t j = 0; j < e->len[k]; j++) {
            double *slot = buf + (size_t)me * per + ((size_t)k * NM_MAX + j) * 2;
            slot[0] = (double)(e->at[k] + j) + 1.0;
            slot[1] = (double)km_bits(e->s[k][j]);
        }
    if (ranks > 1) dist_sum_f64(buf, nbuf);
    for (int k = 0; k < 2; k++) {
        if (!e->len[k]) continue;
        float g[NM_MAX];
        for (int j = 0; j < m; j++) g[j] = km_float(0xbf800000u); // -1: filled below, every element has an owner
        for (size_t x = 0; x < nbuf; x += 2) {
            if (buf[x] == 0) continue;
            size_t pos = (size_t)buf[x] - 1;
            if (pos >= e->first[k] && pos - e->first[k] < (size_t)m)
                g[pos - e->first[k]] = km_float((uint32_t)buf[x + 1]);
        }
        nm_protect_group(g, m, keep);
        for (size_t j = 0; j < e->len[k]; j++) e->s[k][j] = g[e->at[k] + j - e->first[k]];
    }
    free(buf);
}
