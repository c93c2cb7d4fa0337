// oneshot_layer.c: one Linear layer through Wanda or SparseGPT (lib/sparse/wanda.c,
// sparsegpt.c) for tests/oneshot_ref.py, which compares the result with its own numpy
// implementation of each paper's algorithm (tests/t_oneshot.sh).
//
//   oneshot_layer wanda|sparsegpt SPARSITY ROWS COLS N W.f32 X.f32 OUT_W.f32 OUT_MASK.u8
//
// W (ROWS, COLS) and X (N, COLS) raw little-endian float32; OUT_W the pruned (SparseGPT:
// updated) weights, OUT_MASK one byte a weight (1 = kept). Exit 1 on an error. stderr:
// "seconds N" for the work after reading the inputs and "blas CONFIG", OpenBLAS's build and
// kernels (bench/sparsegpt_speed.py).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/blas.h"        // defines: blas_init
#include "base/error.h"       // defines: err_msg, xmalloc, xcalloc
#include "base/progress.h"    // defines: now_seconds
#include "sparse/sparsegpt.h" // defines: sparsegpt_accumulate, sparsegpt_factor, sparsegpt_prune
#include "sparse/wanda.h"     // defines: wanda_accumulate, wanda_prune

char *openblas_get_config(void); // OpenBLAS's (Debian's cblas.h may be the reference one)

static int rw(const char *path, void *buf, size_t n, int write) {
    FILE *f = fopen(path, write ? "wb" : "rb");
    size_t got = f ? (write ? fwrite(buf, 1, n, f) : fread(buf, 1, n, f)) : 0;
    if (f) fclose(f);
    if (got != n) fprintf(stderr, "oneshot_layer: %s: cannot %s %zu bytes\n", path, write ? "write" : "read", n);
    return got == n;
}

int main(int argc, char **argv) {
    blas_init(argv);
    if (argc != 10) {
        fprintf(stderr, "usage: oneshot_layer wanda|sparsegpt S ROWS COLS N W X OUT_W OUT_MASK\n");
        return 2;
    }
    int gpt = strcmp(argv[1], "sparsegpt") == 0;
    double s = atof(argv[2]);
    size_t rows = strtoul(argv[3], NULL, 10), cols = strtoul(argv[4], NULL, 10), N = strtoul(argv[5], NULL, 10);
    float *w = xmalloc(rows * cols * 4), *x = xmalloc(N * cols * 4);
    uint8_t *mask = xmalloc(rows * cols);
    if (!rw(argv[6], w, rows * cols * 4, 0) || !rw(argv[7], x, N * cols * 4, 0)) return 1;
    double t0 = now_seconds();
    if (gpt) {
        double *H = xcalloc(cols * cols, sizeof *H);
        float *tmp = xmalloc(cols * cols * sizeof *tmp);
        uint8_t *dead = xmalloc(cols);
        // in two halves of the rows, as windows are summed
        sparsegpt_accumulate(H, tmp, x, N / 2, cols);
        sparsegpt_accumulate(H, tmp, x + N / 2 * cols, N - N / 2, cols);
        if (sparsegpt_factor(tmp, dead, H, cols, 0.01, "the layer") < 0) {
            fprintf(stderr, "oneshot_layer: %s\n", err_msg());
            return 1;
        }
        sparsegpt_prune(w, mask, rows, cols, tmp, dead, s);
        free(H);
        free(tmp);
        free(dead);
    } else {
        double *colsq = xcalloc(cols, sizeof *colsq);
        wanda_accumulate(colsq, x, N, cols);
        wanda_prune(w, mask, rows, cols, colsq, s);
        free(colsq);
    }
    fprintf(stderr, "seconds %.6f\nblas %s\n", now_seconds() - t0, openblas_get_config());
    int ok = rw(argv[8], w, rows * cols * 4, 1) && rw(argv[9], mask, rows * cols, 1);
    free(w);
    free(x);
    free(mask);
    return ok ? 0 : 1;
}
