// adamw.c: AdamW, gradient clipping and masks on flat arrays (see adamw.h).
//
// The update mirrors torch.optim.AdamW's _single_tensor_adamw operation by operation
// (including where torch rounds to fp32), so that three steps agree with PyTorch to a
// few ulps; one element is km_adamw (kernel_math.h), which adamw.cu's kernel calls too:
//   w *= 1 - lr*wd;  m = m*b1 + (1-b1)*g;  v = v*b2 + (1-b2)*g*g
//   w += -(lr / (1-b1^t)) * m / (sqrt(v) / sqrt(1-b2^t) + eps)
#include "nn/adamw.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h" // defines: xcalloc

#define PAR_MIN_WORK 32768 // below this a fork-join costs more than the loop

void adamw_init(AdamW *o, size_t n) {
    o->m = xcalloc(n ? n : 1, sizeof *o->m);
    o->v = xcalloc(n ? n : 1, sizeof *o->v);
    o->n = n;
    o->t = 0;
}

void adamw_free(AdamW *o) {
    free(o->m);
    free(o->v);
    memset(o, 0, sizeof *o);
}

AdamWScalars adamw_scalars(const AdamWHyper *h, int t) {
    // Python doubles, cast to float where they meet a tensor, as torch forms them.
    double bc1 = 1.0 - pow(h->beta1, (double)t), bc2 = 1.0 - pow(h->beta2, (double)t);
    AdamWScalars k = {
        .decay = (float)(1.0 - h->lr * h->weight_decay),
        .b1 = (float)h->beta1, .b2 = (float)h->beta2,
        .a1 = (float)(1.0 - h->beta1), .a2 = (float)(1.0 - h->beta2),
        .step = (float)(h->lr / bc1), .bc2s = (float)sqrt(bc2), .eps = (float)h->eps,
    };
    return k;
}

void adamw_update(float *w, float *m, float *v, const float *g, const uint8_t *mask,
                  const AdamWHyper *h, int t, size_t n) {
    AdamWScalars k = adamw_scalars(h, t);
#pragma omp parallel for schedule(static) if (n > PAR_MIN_WORK)
    for (size_t i = 0; i < n; i++) km_adamw(w + i, m + i, v + i, g[i], !mask || mask[i], &k);
}

void adamw_step(AdamW *o, float *w, const float *g, const uint8_t *mask, const AdamWHyper *h) {
    o->t++;
    adamw_update(w, o->m, o->v, g, mask, h, o->t, o->n);
}

double grad_sumsq(const float *g, size_t n) {
    // 256 fixed chunks summed in order: deterministic whatever the thread count (an
    // OpenMP reduction combines partial sums in an unspecified order).
    enum { NCHUNK = 256 };
    double part[NCHUNK];
    size_t chunk = (n + NCHUNK - 1) / NCHUNK;
#pragma omp parallel for schedule(static) if (n > PAR_MIN_WORK)
    for (int c = 0; c < NCHUNK; c++) {
        size_t lo = (size_t)c * chunk, hi = lo + chunk < n ? lo + chunk : n;
        double s = 0;
        for (size_t i = lo; i < hi; i++) s += (double)g[i] * g[i];
        part[c] = s;
    }
    double total = 0;
    for (int c = 0; c < NCHUNK; c++) total += part[c];
    return total;
}

float grad_clip_coef(double norm, double max_norm) { return km_clip_coef(norm, max_norm); }

void grad_scale(float *g, float s, size_t n) {
#pragma omp parallel for schedule(static) if (n > PAR_MIN_WORK)
    for (size_t i = 0; i < n; i++) g[i] *= s;
}

double grad_clip(float *g, double max_norm, size_t n) {
    double norm = sqrt(grad_sumsq(g, n));
    float c = grad_clip_coef(norm, max_norm);
    if (c < 1.0f) grad_scale(g, c, n); // torch multiplies by 1.0 too, which changes nothing
    return norm;
}
