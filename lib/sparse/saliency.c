// saliency.c: the three scores of saliency.h over flat arrays.
#include "sparse/saliency.h"

#include <math.h>
#include <string.h>

#include "base/error.h"      // defines: ERR
#include "nn/kernel_math.h"  // defines: km_saliency_* (one element, shared with saliency.cu)

static const char *const NAMES[] = {"magnitude", "first", "second"};

int saliency_parse(Saliency *out, const char *name) {
    for (int i = 0; i < 3; i++)
        if (strcmp(name, NAMES[i]) == 0) { *out = (Saliency)i; return 0; }
    return -1;
}

const char *saliency_name(Saliency s) { return (unsigned)s < 3 ? NAMES[s] : "?"; }

int saliency_needs_moments(Saliency s) { return s == SAL_FIRST || s == SAL_SECOND; }

// Finds the element that made a chunk fail, for the message (the slow path only).
static int bad_input(const char *what, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return ERR("element %zu: %s is %s", i, what, isnan(x[i]) ? "nan" : "inf");
    return 0;
}

int saliency_score(float *out, Saliency s, const float *w, const float *m, const float *v, size_t n) {
    // One branch-free pass that also accumulates "something was not finite": the
    // check costs nothing next to the memory traffic, and the rare failure is
    // located afterwards by bad_input.
    int bad = 0;
    switch (s) {
    case SAL_MAGNITUDE:
        for (size_t i = 0; i < n; i++) {
            out[i] = km_saliency_magnitude(w[i]);
            bad |= !isfinite(w[i]);
        }
        if (bad) return bad_input("weight", w, n);
        break;
    case SAL_FIRST:
        if (!m) return ERR("first-order saliency needs exp_avg");
        for (size_t i = 0; i < n; i++) {
            out[i] = km_saliency_first(w[i], m[i]);
            bad |= !isfinite(w[i]) | !isfinite(m[i]);
        }
        if (bad) { TRY(bad_input("weight", w, n)); return bad_input("exp_avg", m, n); }
        break;
    case SAL_SECOND:
        if (!v) return ERR("second-order saliency needs exp_avg_sq");
        for (size_t i = 0; i < n; i++) {
            out[i] = km_saliency_second(w[i], v[i]);
            bad |= !isfinite(w[i]) | !isfinite(v[i]) | (v[i] < 0.0f);
        }
        if (bad) {
            TRY(bad_input("weight", w, n));
            TRY(bad_input("exp_avg_sq", v, n));
            for (size_t i = 0; i < n; i++)
                if (v[i] < 0.0f) return ERR("element %zu: exp_avg_sq is negative (%g)", i, (double)v[i]);
        }
        break;
    default:
        return ERR("unknown saliency %d", (int)s);
    }
    return 0;
}
