// wanda.c: Wanda's per-row pruning (wanda.h).
#include "sparse/wanda.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"    // defines: xmalloc
#include "sparse/select.h" // defines: select_smallest

void wanda_accumulate(double *colsq, const float *x, size_t N, size_t cols) {
#pragma omp parallel for schedule(static) if (N * cols > (1 << 16))
    for (size_t c = 0; c < cols; c++) {
        double s = 0;
        for (size_t n = 0; n < N; n++) s += (double)x[n * cols + c] * x[n * cols + c];
        colsq[c] += s;
    }
}

void wanda_prune(float *w, uint8_t *mask, size_t rows, size_t cols, const double *colsq, double sparsity,
                 const NMPattern *nm) {
    size_t k = (size_t)floor((double)cols * sparsity);
    if (nm && nm->m) { // N:M: the same scores, chosen group by group
        nm_prune(w, mask, rows, cols, colsq, nm);
        return;
    }
    memset(mask, 1, rows * cols);
    double *norm = xmalloc(cols * sizeof *norm);
    for (size_t c = 0; c < cols; c++) norm[c] = sqrt(colsq[c]);
#pragma omp parallel
    {
        uint64_t *key = xmalloc(cols * sizeof *key); // score bits << 32 | column
#pragma omp for schedule(static)
        for (size_t r = 0; r < rows; r++) {
            float *wr = w + r * cols;
            for (size_t c = 0; c < cols; c++) key[c] = select_key((float)(fabs((double)wr[c]) * norm[c]), c);
            select_smallest(key, cols, k);
            for (size_t i = 0; i < k; i++) {
                size_t c = (size_t)(key[i] & 0xffffffffu);
                wr[c] = 0.0f;
                mask[r * cols + c] = 0;
            }
        }
        free(key);
    }
    free(norm);
}
