// dist_single.c: dist.h for a run of one rank, without MPI: every sum over ranks is the
// value itself, no rank comes before this one, and the one slice is the whole block.
#include "dist/dist.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h" // defines: ERR

int dist_init(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    // mpirun sets these in every process it starts: N copies of a one-rank run would each
    // train alone and write the same files
    const char *n = getenv("OMPI_COMM_WORLD_SIZE");
    if (!n) n = getenv("PMIX_SIZE");
    if (n && atoi(n) > 1)
        return ERR("started by mpirun for %s ranks, but this build has no MPI (no mpicc was found when it was "
                   "built): run 'make deps' and rebuild, or run without mpirun", n);
    return 0;
}

void dist_finalize(void) {}
const char *dist_info(void) { return "one rank (no MPI)"; }
int dist_rank(void) { return 0; }
int dist_size(void) { return 1; }
int dist_is_mpi(void) { return 0; }

void dist_sum_u64(uint64_t *x, size_t n) { (void)x; (void)n; }
void dist_sum_f64(double *x, size_t n) { (void)x; (void)n; }
uint64_t dist_exscan_u64(uint64_t x) {
    (void)x;
    return 0;
}
void dist_reduce_scatter_f32(float *x, size_t n) { (void)x; (void)n; }

void dist_gather(void *full, const void *mine, size_t n, size_t elem, int all) {
    (void)all;
    if (full && full != mine) memcpy(full, mine, n * elem);
}

void dist_bcast(void *buf, size_t bytes, int root) { (void)buf, (void)bytes, (void)root; }

void dist_watch(const char *what) { (void)what; }

int dist_agree(int rc) { return rc < 0 ? -1 : 0; }
uint64_t dist_bytes(void) { return 0; }
