// test_blas.c: OpenBLAS's kernels chosen by the CPU's features (base/blas.h): the table
// of blas_coretype, then this program itself after blas_init: on a CPU with AVX-512 or
// AVX2 + FMA, OpenBLAS must not be left on one of its old fallbacks (it was, on an
// Intel Emerald Rapids with Debian 12's OpenBLAS 0.3.21: "Prescott", SSE3 kernels).
#include <stdlib.h>
#include <string.h>

#include "base/blas.h"
#include "test.h"

char *openblas_get_corename(void);

static int same(const char *a, const char *b) { return a == b || (a && b && strcmp(a, b) == 0); }

int main(int argc, char **argv) {
    // OPENBLAS_CORETYPE as the first run found it (blas_init may set it and run again)
    if (!getenv("TEST_BLAS_USER")) setenv("TEST_BLAS_USER", getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "", 1);
    blas_init(argv);
    const char *was = getenv("TEST_BLAS_USER");
    int user_set = *was != 0;
    T_OK(argc == 1 && strstr(argv[0], "test_blas"), "blas_init: the program runs again with its own arguments");

    T_OK(same(blas_coretype("Prescott", 1, 1), "SkylakeX"), "Prescott on an AVX-512 CPU: SkylakeX");
    T_OK(same(blas_coretype("prescott", 0, 1), "Haswell"), "Prescott on an AVX2 + FMA CPU: Haswell (any case)");
    T_OK(same(blas_coretype("Prescott", 0, 0), NULL), "Prescott on an SSE CPU: kept");
    T_OK(same(blas_coretype("Sandybridge", 1, 1), "SkylakeX"), "Sandybridge on an AVX-512 CPU: SkylakeX");
    T_OK(same(blas_coretype("Nehalem", 0, 1), "Haswell"), "Nehalem on an AVX2 CPU: Haswell");
    T_OK(same(blas_coretype("Haswell", 1, 1), NULL), "Haswell, a choice OpenBLAS made knowingly: kept");
    T_OK(same(blas_coretype("SkylakeX", 1, 1), NULL), "SkylakeX: kept");
    T_OK(same(blas_coretype("Zen", 1, 1), NULL), "Zen: kept");
    T_OK(same(blas_coretype("Cooperlake", 1, 1), NULL), "Cooperlake: kept");

    const char *core = openblas_get_corename();
#if defined(__x86_64__) && defined(__GNUC__)
    int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                 __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                 __builtin_cpu_supports("avx512vl");
    int avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (user_set)
        T_SKIP("OpenBLAS's kernels after blas_init: OPENBLAS_CORETYPE=%s was set before it ran", was);
    else
        T_OK(blas_coretype(core, avx512, avx2_fma) == NULL,
             "OpenBLAS's kernels after blas_init: %s (AVX-512 %s, AVX2 + FMA %s)", core, avx512 ? "yes" : "no",
             avx2_fma ? "yes" : "no");
#else
    T_SKIP("OpenBLAS's kernels after blas_init: not an x86-64 build (%s)", core);
#endif
    T_DONE();
}
