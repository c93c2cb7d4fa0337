// bench_select.c: times the global radix select (lib/sparse/select.h) on raw float32 scores.
//
//   bench_select FILE K [REPEAT]
//
// FILE holds n little-endian float32 scores >= 0 (bench/select_speed.py writes it). The
// scores are read into memory first; the timed part is what a rank does to find the
// threshold: a sample pass (1/64 of the scores), one main pass (OpenMP, per-thread
// counts; scores inside the sample's bracket kept), the bucket choices. Prints one JSON line: threshold bit pattern, best seconds, threads.
#include <omp.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/error.h"    // defines: DIE, TRY_OR_DIE
#include "base/fileio.h"   // defines: mapped_open
#include "base/progress.h" // defines: now_seconds
#include "sparse/select.h" // defines: Select

int main(int argc, char **argv) {
    err_set_prog("bench_select");
    if (argc < 3) DIE("usage: bench_select FILE K [REPEAT]");
    unsigned long long k = strtoull(argv[2], NULL, 10);
    int repeat = argc > 3 ? atoi(argv[3]) : 3;
    MappedFile mf;
    TRY_OR_DIE(mapped_open(&mf, argv[1]));
    size_t n = mf.size / sizeof(float);
    // private copy: page faults are not part of the select. Transparent huge pages, as
    // numpy asks for its arrays (madvise MADV_HUGEPAGE on every allocation of 4 MB or more),
    // so both sides of bench/select_speed.py read memory through the same kind of pages.
    size_t bytes = (n * sizeof(float) + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1);
    float *x = aligned_alloc((size_t)2 << 20, bytes ? bytes : ((size_t)2 << 20));
    if (!x) DIE("out of memory for %zu scores", n);
    madvise(x, bytes, MADV_HUGEPAGE);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) x[i] = ((const float *)(const void *)mf.data)[i];
    mapped_close(&mf);
    double best = 1e30;
    uint32_t thr = 0;
    for (int r = 0; r < repeat; r++) {
        double t0 = now_seconds();
        Select s;
        select_init(&s, k);
        while (!s.done) {
            if (select_needs_data(&s)) select_count(&s, x, n);
            TRY_OR_DIE(select_advance(&s));
        }
        double t = now_seconds() - t0;
        if (t < best) best = t;
        thr = s.threshold;
        select_free(&s);
    }
    printf("{\"n\": %zu, \"k\": %llu, \"threshold_bits\": %u, \"seconds\": %.6f, \"threads\": %d}\n", n, k, thr, best,
           omp_get_max_threads());
    free(x);
    return 0;
}
