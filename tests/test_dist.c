// test_dist.c: the one-rank implementation of dist.h (lib/dist/dist_single.c): a run
// without MPI is rank 0 of 1, every sum over ranks is the value itself, and no rank
// comes before it (the exclusive prefix sum is 0).
#include <stdint.h>
#include <string.h>

#include "dist/dist.h" // defines: the API under test
#include "test.h"      // defines: T_OK, T_DONE

int main(void) {
    T_OK(dist_rank() == 0 && dist_size() == 1, "one rank: rank 0 of 1 (got %d of %d)", dist_rank(), dist_size());
    uint64_t u[3] = {7, 0, UINT64_MAX}, u0[3];
    memcpy(u0, u, sizeof u);
    dist_sum_u64(u, 3);
    T_OK(memcmp(u, u0, sizeof u) == 0, "dist_sum_u64 over one rank leaves the counts as they are");
    double d[2] = {0.1, -3e300}, d0[2];
    memcpy(d0, d, sizeof d);
    dist_sum_f64(d, 2);
    T_OK(memcmp(d, d0, sizeof d) == 0, "dist_sum_f64 over one rank leaves the bits as they are");
    T_OK(dist_exscan_u64(42) == 0, "no rank before rank 0: the exclusive prefix sum is 0");
    T_DONE();
}
