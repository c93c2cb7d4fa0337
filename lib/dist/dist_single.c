// dist_single.c: dist.h for a run of one rank, without MPI: every sum over ranks is the
// value itself, and no rank comes before this one.
#include "dist/dist.h"

int dist_rank(void) { return 0; }
int dist_size(void) { return 1; }

void dist_sum_u64(uint64_t *x, size_t n) { (void)x; (void)n; }
void dist_sum_f64(double *x, size_t n) { (void)x; (void)n; }

uint64_t dist_exscan_u64(uint64_t x) {
    (void)x;
    return 0;
}
