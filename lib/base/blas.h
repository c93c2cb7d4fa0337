// blas.h: OpenBLAS's kernels chosen by what the CPU can do, not by its model number.
//
// Debian 12's OpenBLAS (0.3.21, built DYNAMIC_ARCH) picks its kernels when it loads, by
// the CPU's family and model; a model newer than the library falls back to its oldest
// x86-64 kernels ("Prescott", SSE3). Intel Emerald Rapids (family 6, model 207) is one:
// there sgemm ran 4.3x slower than with the SkylakeX kernels the CPU can run (measured,
// docs/benchmarks.md). OpenBLAS reads OPENBLAS_CORETYPE only when it loads, so
// blas_init, called first in main, sets it and runs the program again (execv of
// /proc/self/exe with the same arguments) when OpenBLAS took a fallback the CPU is well
// past: SkylakeX for AVX-512 (F, CD, BW, DQ, VL), Haswell for AVX2 with FMA. A
// OPENBLAS_CORETYPE the user set is left alone; so is every CPU OpenBLAS knows.
#ifndef BEST_BLAS_H
#define BEST_BLAS_H

#ifdef __cplusplus // C++ tests name the kernels too (tests/test.h)
extern "C" {
#endif

// The OPENBLAS_CORETYPE to ask for, or NULL to keep corename: OpenBLAS's choice (its
// openblas_get_corename()) on a CPU with or without AVX-512 and AVX2 + FMA.
const char *blas_coretype(const char *corename, int avx512, int avx2_fma);
// "OpenBLAS 0.3.21, SkylakeX kernels" (", from OPENBLAS_CORETYPE" when the environment
// chose them): the library and kernels the matrix products run on, which decide their
// rounding. --version prints it, and a test that compares two paths' results names it
// beside a failure, so that a failure on a new CPU names its kernels.
const char *blas_describe(void);
// Returns when OpenBLAS's choice stands (or the run again failed, which only costs speed);
// else it does not return. argv as main got it.
void blas_init(char **argv);

#ifdef __cplusplus
}
#endif

#endif
