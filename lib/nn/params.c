// params.c: checks on the values of a parameter table's tensors (see params.h).
#include "nn/params.h"

#include <math.h>

#include "base/error.h" // defines: ERR

int params_check_finite(const char *where, const ParamInfo *p, const float *w, size_t off, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(w[i]))
            return ERR("%s: tensor %s: weight %zu is %s", where, p->name, off + i, isnan(w[i]) ? "nan" : "inf");
    return 0;
}

int params_check_moments(const char *where, const char *name, const float *m, const float *v, size_t off, size_t n) {
    const char *dot = name ? "." : "";
    if (!name) name = "";
    for (size_t i = 0; m && i < n; i++)
        if (!isfinite(m[i]))
            return ERR("%s: tensor %s%sexp_avg: element %zu is %s", where, name, dot, off + i, isnan(m[i]) ? "nan" : "inf");
    for (size_t i = 0; v && i < n; i++)
        if (!isfinite(v[i]) || v[i] < 0.0f)
            return ERR("%s: tensor %s%sexp_avg_sq: element %zu is %s", where, name, dot, off + i,
                       isnan(v[i]) ? "nan" : isinf(v[i]) ? "inf" : "negative (Adam's second moment never is)");
    return 0;
}
