// blas.c: OpenBLAS's kernels chosen by the CPU's features (blas.h).
#include "base/blas.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

// OpenBLAS's (Debian's cblas.h may be the reference one, without them; we link -lopenblas)
char *openblas_get_corename(void);
char *openblas_get_config(void); // "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64"

const char *blas_coretype(const char *corename, int avx512, int avx2_fma) {
    // OpenBLAS's fallbacks for x86-64 CPUs it does not know (driver/others/dynamic.c)
    static const char *fallback[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Sandybridge"};
    int old = 0;
    for (size_t i = 0; i < sizeof fallback / sizeof *fallback; i++) old |= strcasecmp(corename, fallback[i]) == 0;
    if (avx512 && old) return "SkylakeX";
    if (avx2_fma && old) return "Haswell";
    return NULL;
}

const char *blas_describe(void) {
    static char s[128];
    const char *config = openblas_get_config(), *sp = strchr(config, ' ');
    if (sp) sp = strchr(sp + 1, ' '); // the library and its version: the first two words
    int lib = sp ? (int)(sp - config) : (int)strlen(config);
    snprintf(s, sizeof s, "%.*s, %s kernels%s", lib > 48 ? 48 : lib, config, openblas_get_corename(),
             getenv("OPENBLAS_CORETYPE") ? ", from OPENBLAS_CORETYPE" : "");
    return s;
}

void blas_init(char **argv) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (getenv("OPENBLAS_CORETYPE")) return; // the user's, or set by the run before this one
    __builtin_cpu_init();
    int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                 __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                 __builtin_cpu_supports("avx512vl");
    int avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const char *want = blas_coretype(openblas_get_corename(), avx512, avx2_fma);
    if (!want || setenv("OPENBLAS_CORETYPE", want, 1) != 0) return;
    execv("/proc/self/exe", argv);
    unsetenv("OPENBLAS_CORETYPE"); // no /proc: run on with OpenBLAS's choice
#else
    (void)argv;
#endif
}
