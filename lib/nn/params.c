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
