// dist.h: the ranks of a run and the collectives that the CPU math needs, behind one
// seam. The math is written for ranks already: a rank sums the squares of its slice of
// the gradients and the ranks add theirs before the square root (grad-norm clipping);
// the global threshold is found from bucket counts that the ranks add, and ties are
// broken by the count of ties on the ranks before (sparse/select.h). These functions
// are where the adding happens.
//
// Implementations: dist_single.c, one rank and no MPI, always built, so that a run
// without mpirun is literally the one-rank case of the same code. An MPI implementation
// (the multi-rank issue: mpirun, MPI_Allreduce, MPI_Exscan over MPI_COMM_WORLD) and
// NCCL for device buffers go beside it in lib/dist/, chosen at build time.
//
// Every rank must call each collective in the same order with the same n. Sums are
// exact for integers; for doubles the ranks' values are added in rank order, so every
// rank gets the same bits.
#ifndef BEST_DIST_H
#define BEST_DIST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus // sparse/select.cu calls these
extern "C" {
#endif

int dist_rank(void);  // this process's rank, 0 .. dist_size() - 1
int dist_size(void);  // ranks in the run

// x (n) = the sum of x over ranks, on every rank (all-reduce).
void dist_sum_u64(uint64_t *x, size_t n);
void dist_sum_f64(double *x, size_t n);
// The sum of x over the ranks before this one (exclusive prefix sum; 0 on rank 0).
uint64_t dist_exscan_u64(uint64_t x);

#ifdef __cplusplus
}
#endif

#endif
