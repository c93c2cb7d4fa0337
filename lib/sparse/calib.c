// calib.c: calibration windows and the layer-by-layer one-shot loop (calib.h).
#include "sparse/calib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"      // defines: ERR, TRY, xmalloc, xcalloc
#include "io/shard.h"        // defines: Shard, shard_open, shard_read
#include "sparse/mask.h"     // defines: mask_compute, mask_apply, MaskSpec
#include "sparse/sparsegpt.h" // defines: sparsegpt_accumulate, sparsegpt_factor, sparsegpt_prune
#include "sparse/wanda.h"    // defines: wanda_accumulate, wanda_prune

int oneshot_method_parse(OneShotMethod *out, const char *name) {
    if (name && strcmp(name, "wanda") == 0) *out = ONESHOT_WANDA;
    else if (name && strcmp(name, "sparsegpt") == 0) *out = ONESHOT_SPARSEGPT;
    else if (name && strcmp(name, "magnitude") == 0) *out = ONESHOT_MAGNITUDE;
    else return -1;
    return 0;
}

const char *oneshot_method_name(OneShotMethod m) {
    return m == ONESHOT_WANDA ? "wanda" : m == ONESHOT_SPARSEGPT ? "sparsegpt" : "magnitude";
}

// --- windows ------------------------------------------------------------------------------

static uint64_t rng_next(uint64_t *s) { // splitmix64
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// A uniform integer in [0, n), n > 0 (rejection: no modulo bias).
static uint64_t rng_below(uint64_t *s, uint64_t n) {
    uint64_t lim = UINT64_MAX - UINT64_MAX % n, v;
    do v = rng_next(s);
    while (v >= lim);
    return v % n;
}

int calib_windows(int32_t *windows, const char *path, int n, int seq, uint64_t seed) {
    Shard sh;
    TRY(shard_open(&sh, path));
    uint64_t nt = sh.h.ntokens;
    int32_t *tok = xmalloc((nt ? nt : 1) * sizeof *tok);
    shard_read(&sh, tok, 0, nt);
    // the documents longer than seq: [lo[i], hi[i])
    size_t nd = 0, nlong = 0, cap = 1024;
    uint64_t *lo = xmalloc(cap * sizeof *lo), *hi = xmalloc(cap * sizeof *hi), longest = 0, d0 = 0;
    for (uint64_t i = 1; i <= nt; i++) {
        int end = i == nt;
        if (!end && (sh.h.flags & SHARD_FLAG_BOS)) end = tok[i] == tok[0];
        else if (!end && (sh.h.flags & SHARD_FLAG_EOS)) end = tok[i - 1] == tok[nt - 1];
        if (!end) continue;
        uint64_t len = i - d0;
        nd++;
        if (len > longest) longest = len;
        if (len > (uint64_t)seq) {
            if (nlong == cap) {
                lo = xrealloc(lo, (cap *= 2) * sizeof *lo);
                hi = xrealloc(hi, cap * sizeof *hi);
            }
            lo[nlong] = d0;
            hi[nlong++] = i;
        }
        d0 = i;
    }
    int rc = 0;
    if (nlong == 0) {
        rc = ERR("%s: no document is longer than --seq %d tokens (the longest of %zu has %llu); a smaller --seq, "
                 "or a shard of longer documents", path, seq, nd, (unsigned long long)longest);
    } else {
        uint64_t rng = seed;
        for (int s = 0; s < n; s++) {
            size_t d = (size_t)rng_below(&rng, nlong);
            uint64_t off = lo[d] + rng_below(&rng, hi[d] - lo[d] - (uint64_t)seq); // [0, len - seq - 1]
            memcpy(windows + (size_t)s * (size_t)seq, tok + off, (size_t)seq * sizeof *tok);
        }
    }
    free(lo);
    free(hi);
    free(tok);
    shard_close(&sh);
    return rc;
}

int calib_check_windows(const Model *m, const int32_t *windows, int n, int seq) {
    for (size_t i = 0; i < (size_t)n * (size_t)seq; i++)
        if (windows[i] < 0 || (size_t)windows[i] >= m->V)
            return ERR("calibration token %d at position %zu is outside the model's vocabulary of %zu", windows[i], i,
                       m->V);
    return 0;
}

// --- the layer-by-layer loop --------------------------------------------------------------

// The seven Linear layers of a block and which of the block's four inputs each reads:
// 0 = xn1 (C), 1 = att (Q), 2 = xn2 (C), 3 = h (I).
static const ModelMatrix LINEARS[7] = {MW_Q, MW_K, MW_V, MW_O, MW_GATE, MW_UP, MW_DOWN};
static const int INPUT_OF[7] = {0, 0, 0, 1, 2, 2, 3};

int oneshot_prune(uint8_t *mask, OneShotStats *times, Model *m, const OneShotSpec *spec, const int32_t *windows,
                  int n, int seq, Progress *pr) {
    OneShotStats tm = {0, 0, 0, 0, 0, 0};
    double t;
    TRY(nm_check(&spec->pattern, m->info, m->n_info));
    if (spec->method == ONESHOT_MAGNITUDE && spec->pattern.m) { // N:M of |w|, tensor by tensor
        memset(mask, 1, m->n_params);
        for (int i = 0; i < m->n_info; i++) {
            const ParamInfo *p = &m->info[i];
            if (!p->prunable) continue;
            const float *w = m->params + p->offset;
            TRY(params_check_finite(m->src_dir ? m->src_dir : "the weights", p, w, 0, p->numel));
            nm_prune(m->params + p->offset, mask + p->offset, (size_t)p->shape[0], (size_t)p->shape[1], NULL,
                     &spec->pattern);
        }
        if (times) *times = tm;
        return 0;
    }
    if (spec->method == ONESHOT_MAGNITUDE) { // floor(S n) of each tensor: mask.h's --group layer
        MaskSpec ms = {SAL_MAGNITUDE, GROUP_LAYER, spec->sparsity, m->src_dir, 1, 0, 0};
        TRY(mask_compute(mask, &ms, m->info, m->n_info, m->params, m->n_params, NULL, NULL));
        mask_apply(m->params, mask, m->n_params);
        if (times) *times = tm;
        return 0;
    }
    memset(mask, 1, m->n_params);
    size_t T = (size_t)seq, C = m->C, dim[4] = {C, m->Q, C, m->I};
    TRY(calib_check_windows(m, windows, n, seq));
    ModelActs a;
    TRY(model_acts_init(&a, m, 1, seq, 0));
    int gpt = spec->method == ONESHOT_SPARSEGPT;
    size_t dmax = 0;
    for (int g = 0; g < 4; g++) dmax = dim[g] > dmax ? dim[g] : dmax;
    float *x = xmalloc((size_t)n * T * C * sizeof *x), *out = xmalloc(T * C * sizeof *out);
    double *stat[4];
    for (int g = 0; g < 4; g++) stat[g] = xmalloc((gpt ? dim[g] * dim[g] : dim[g]) * sizeof(double));
    float *tmp = gpt ? xmalloc(dmax * dmax * sizeof *tmp) : NULL; // one window's X^T X; then a factor
    uint8_t *dead = xmalloc(dmax);
    t = now_seconds();
    for (int s = 0; s < n; s++) model_embed(x + (size_t)s * T * C, m, windows + (size_t)s * T, T);
    tm.forward += now_seconds() - t;
    int rc = 0;
    for (size_t l = 0; l < m->L && rc == 0; l++) {
        for (int g = 0; g < 4; g++) memset(stat[g], 0, (gpt ? dim[g] * dim[g] : dim[g]) * sizeof(double));
        for (int s = 0; s < n; s++) {
            t = now_seconds();
            model_block_forward(m, &a, l, x + (size_t)s * T * C, out);
            double t1 = now_seconds();
            tm.forward += t1 - t;
            const float *in[4] = {a.layer[0].xn1, a.layer[0].att, a.layer[0].xn2, a.h};
            for (int g = 0; g < 4; g++) {
                size_t d = dim[g];
                if (!gpt) {
                    wanda_accumulate(stat[g], in[g], T, d);
                    continue;
                }
                sparsegpt_accumulate(stat[g], tmp, in[g], T, d);
            }
            tm.stats += now_seconds() - t1;
        }
        for (int g = 0; g < 4 && rc == 0; g++) {
            if (gpt) {
                char what[160];
                snprintf(what, sizeof what, "layer %zu, the Hessian of %s", l,
                         g == 0 ? "q/k/v_proj" : g == 1 ? "o_proj" : g == 2 ? "gate/up_proj" : "down_proj");
                t = now_seconds();
                rc = sparsegpt_factor(tmp, dead, stat[g], dim[g], spec->percdamp, what);
                tm.factor += now_seconds() - t;
                if (rc < 0) break;
            }
            t = now_seconds();
            for (int f = 0; f < 7; f++) {
                if (INPUT_OF[f] != g) continue;
                const ParamInfo *p = &m->info[model_matrix_index(m, LINEARS[f], l)];
                if (!p->prunable) continue;
                size_t rows = (size_t)p->shape[0], cols = (size_t)p->shape[1];
                float *w = m->params + p->offset;
                if (gpt) sparsegpt_prune(w, mask + p->offset, rows, cols, tmp, dead, spec->sparsity, &spec->pattern);
                else wanda_prune(w, mask + p->offset, rows, cols, stat[g], spec->sparsity, &spec->pattern);
            }
            tm.update += now_seconds() - t;
        }
        t = now_seconds();
        for (int s = 0; s < n && rc == 0; s++) // the pruned block's outputs: the next block's inputs
            model_block_forward(m, &a, l, x + (size_t)s * T * C, x + (size_t)s * T * C);
        tm.forward += now_seconds() - t;
        if (pr) {
            snprintf(pr->extra, sizeof pr->extra, "%.2f s a block", (now_seconds() - pr->t0) / (double)(l + 1));
            progress_update(pr, l + 1);
        }
    }
    for (int g = 0; g < 4; g++) free(stat[g]);
    free(tmp);
    free(dead);
    free(x);
    free(out);
    model_acts_free(&a);
    if (times) *times = tm;
    return rc;
}
