// dist.h: the ranks of a run and the collectives that training needs, behind one seam.
//
// Implementations, chosen at link time: dist_single.c, one rank and no MPI, in libbest
// and so in every program; dist_mpi.c (OpenMPI, over MPI_COMM_WORLD), built when the
// Makefile finds mpicc and linked into best-train ahead of libbest, so that its symbols
// win. A run not started by mpirun is one rank in both and makes no MPI call at all:
// "without mpirun, one rank" is the same code with every collective a no-op.
//
// GPU ranks move their device buffers over NCCL (dist_nccl.h), whose communicator is
// started from an id that dist_bcast carries; the counts stay here.
//
// The flat block of n parameters is cut into one contiguous slice per rank, in rank
// order (dist_slice): ZeRO stage 1 gives each rank the Adam moments and the mask of its
// slice, and it updates only its slice of the weights.
//
// Every rank must call each collective in the same order with the same n. Results are
// the same bits on every rank and from run to run at a given rank count: integer sums
// are exact; float and double sums add the ranks' values in rank order (r0 + r1) + r2 ...
// A rank count changes how a sum is grouped, so N ranks and one rank agree to rounding,
// not bitwise (docs/best-train.md, "Many ranks").
//
// A collective that waits longer than BEST_DIST_TIMEOUT seconds (default 900) for the
// other ranks ends this process with exit 1 and a message naming the collective (a
// rank that hangs); mpirun then ends the others. A rank that dies ends the job through
// mpirun. Neither leaves a half-written state (train.h saves through temp + rename and
// a manifest written last).
#ifndef BEST_DIST_H
#define BEST_DIST_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus // sparse/select.cu calls these
extern "C" {
#endif

// Joins the run: MPI_Init when mpirun (or another PMIx launcher) started this process,
// else one rank. -1 after ERR: launched for several ranks by a build without MPI.
int dist_init(int *argc, char ***argv);
// Leaves the run (MPI_Finalize); call only on success: a rank that exits without it
// makes mpirun end the job.
void dist_finalize(void);
// One line for banners: "one rank (no MPI)", "MPI (Open MPI v4.1.4), rank 0 of 3", ...
const char *dist_info(void);

int dist_rank(void);  // this process's rank, 0 .. dist_size() - 1
int dist_size(void);  // ranks in the run
int dist_is_mpi(void); // 1 when this process joined a run over MPI (mpirun), even of one rank

// [*lo, *hi): rank r's slice of n elements among size ranks; the first n % size ranks
// get one more. Slices are contiguous and in rank order.
static inline void dist_slice(size_t *lo, size_t *hi, size_t n, int r, int size) {
    size_t q = n / (size_t)size, rem = n % (size_t)size, ur = (size_t)r;
    *lo = ur * q + (ur < rem ? ur : rem);
    *hi = *lo + q + (ur < rem);
}

// [*a, *b): the part of [lo, hi) inside the slice [slo, shi); a == b == slo when none (so
// that a - slo is always an offset into the slice).
static inline void dist_part(size_t *a, size_t *b, size_t lo, size_t hi, size_t slo, size_t shi) {
    *a = lo > slo ? lo : slo;
    *b = hi < shi ? hi : shi;
    if (*a >= *b) *a = *b = slo;
}

// x (n) = the sum of x over ranks, on every rank (all-reduce).
void dist_sum_u64(uint64_t *x, size_t n);
void dist_sum_f64(double *x, size_t n);
// The sum of x over the ranks before this one (exclusive prefix sum; 0 on rank 0).
uint64_t dist_exscan_u64(uint64_t x);
// x (n): each rank's values on entry; on return this rank's slice (dist_slice) holds the
// sum over ranks, the rest is unspecified (a reduce-scatter).
void dist_reduce_scatter_f32(float *x, size_t n);
// full (n elements of elem bytes) gets every rank's slice, from mine (this rank's slice,
// which may be inside full): on every rank (all = 1: an all-gather) or on rank 0 only
// (all = 0; full may then be NULL on the others).
void dist_gather(void *full, const void *mine, size_t n, size_t elem, int all);
// 0 when rc is 0 on every rank, else -1; a rank whose own rc was 0 then records ERR
// "another rank failed" (that rank printed why). Every rank learns of a failure
// together, so that none waits in a collective for a rank that has stopped.
int dist_agree(int rc);
// buf (bytes) on every rank = rank root's (a broadcast; small things: NCCL's unique id).
void dist_bcast(void *buf, size_t bytes, int root);
// Marks a wait on the other ranks that is not one of these collectives (the GPU ranks'
// NCCL work, which a stream synchronisation waits for): from dist_watch(what) to
// dist_watch(NULL) the watchdog times it as a collective named what (collectives inside
// keep it running).
void dist_watch(const char *what);
// Payload bytes this rank has put into collectives so far (what it contributed to each,
// not what the network carried): the difference across a step part is its traffic.
uint64_t dist_bytes(void);

#ifdef __cplusplus
}
#endif

#endif
