// test.h: the few macros C tests use. Each check prints one line that
// tests/run.sh counts: "ok - what", "not ok - what (file:line; BLAS)", "skip - what: why".
// A test program exits 1 if any check failed, so a crash or an early exit also counts.
// A failed line names the OpenBLAS kernels that ran (blas_describe): many checks compare
// two paths whose products round differently on different kernels, and the CPU, so the
// kernels OpenBLAS picks, changes from machine to machine.
#ifndef BEST_TEST_H
#define BEST_TEST_H

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/blas.h" // defines: blas_describe

static int test_failures;

static inline __attribute__((format(printf, 4, 5)))
int test_report(int cond, const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf(cond ? "ok - " : "not ok - ");
    vprintf(fmt, ap);
    va_end(ap);
    if (!cond) { printf(" (%s:%d; %s)", file, line, blas_describe()); test_failures++; }
    printf("\n");
    fflush(stdout);
    return cond;
}
#define T_OK(cond, ...) test_report(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define T_SKIP(...) do { printf("skip - "); printf(__VA_ARGS__); printf("\n"); } while (0)
#define T_DONE() return test_failures ? 1 : 0
// The first line of a GPU test's main (the _gpu builds of tests/*.cpp, base/cuda.h
// included): without a CUDA device, one skip line and exit 0; else the device's line.
#define T_CUDA_DEVICE_OR_SKIP()                                                             \
    do {                                                                                    \
        if (cuda_device_count() == 0) {                                                     \
            T_SKIP("no CUDA device (%s)", cuda_info());                                     \
            return 0;                                                                       \
        }                                                                                   \
        printf("# device: %s\n", cuda_info());                                              \
    } while (0)

// max|a - b| / max|b| over n values (NaN anywhere: infinity): how far a result
// is from its reference, relative to the reference's scale.
static inline double rel_err(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > num || isnan(d)) num = isnan(d) ? INFINITY : d;
        if (fabs(b[i]) > den) den = fabs(b[i]);
    }
    return den > 0 ? num / den : num;
}

// ../shared as seen from the repository root, or NULL (tests then skip and say so).
static inline const char *test_shared(void) {
    const char *s = getenv("SHARED");
    if (!s) s = "../shared";
    return access(s, R_OK) == 0 ? s : NULL;
}

#endif
