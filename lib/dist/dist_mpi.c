// dist_mpi.c: dist.h over MPI (OpenMPI) on MPI_COMM_WORLD, for CPU ranks started by
// mpirun. Built only when the Makefile finds mpicc, and linked into best-train ahead of
// libbest (whose dist_single.c then stays out of the link).
//
// Deterministic by construction: float and double sums are not left to MPI's reduction
// algorithms (which group the ranks' values by message size and topology); each rank
// receives every rank's values and adds them in rank order itself. Integer sums (the
// select histograms) use MPI_Allreduce: they are exact in any order.
//
// Big arrays go in rounds of at most 64 MiB per staging buffer (BEST_DIST_ROUND_BYTES
// sets another size: the tests make it small to run many rounds), so that MPI's int
// counts never overflow (7B parameters are 28 GB of floats) and the buffers stay small.
//
// A watchdog thread ends the process when one collective has waited longer than
// BEST_DIST_TIMEOUT seconds (dist.h). It calls no MPI function (MPI is initialized for
// the main thread only), just prints and _exits; mpirun then ends the other ranks.
#include "dist/dist.h"

#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h" // defines: ERR, CHECK, xmalloc

static size_t g_round = (size_t)64 << 20;
static int g_mpi, g_rank, g_size = 1;
static uint64_t g_bytes;
static double g_timeout = 900;
static char g_info[192] = "one rank (no MPI)";
static atomic_llong g_since;         // ms (monotonic) when the current collective began; 0: none
static const char *_Atomic g_what;   // its name

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *watchdog(void *arg) {
    (void)arg;
    for (;;) {
        usleep(200 * 1000);
        long long s = atomic_load(&g_since);
        if (s && (double)(now_ms() - s) > g_timeout * 1000) {
            fprintf(stderr, "rank %d of %d: error: waited %.0f s in %s for the other ranks (BEST_DIST_TIMEOUT): "
                    "a rank has hung or died; stopping\n", g_rank, g_size, g_timeout, atomic_load(&g_what));
            _exit(1);
        }
    }
    return NULL;
}

static void watch_begin(const char *what) {
    atomic_store(&g_what, what);
    atomic_store(&g_since, now_ms());
}
static void watch_end(void) { atomic_store(&g_since, 0); }

// MPI's default handler (MPI_ERRORS_ARE_FATAL) ends the job on a failed call, so a
// return other than MPI_SUCCESS is not expected; CHECK all the same. Inside a
// dist_watch span the span's timing goes on after the collective.
#define COLL(what, call)                                                            \
    do {                                                                            \
        long long outer_ = atomic_load(&g_since);                                   \
        const char *outer_what_ = atomic_load(&g_what);                             \
        watch_begin(what);                                                          \
        int rc_ = (call);                                                           \
        if (outer_) {                                                               \
            atomic_store(&g_what, outer_what_);                                     \
            atomic_store(&g_since, outer_);                                         \
        } else {                                                                    \
            watch_end();                                                            \
        }                                                                           \
        CHECK(rc_ == MPI_SUCCESS, "%s failed on rank %d (MPI error %d)", what, g_rank, rc_); \
    } while (0)

void dist_watch(const char *what) {
    if (g_size == 1) return; // no watchdog: nothing to wait for
    if (what) watch_begin(what);
    else watch_end();
}

int dist_init(int *argc, char ***argv) {
    // mpirun (OpenMPI) and other PMIx launchers set these; without them there is one
    // rank and no MPI call at all
    if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMIX_RANK") && !getenv("PMI_RANK")) return 0;
    const char *t = getenv("BEST_DIST_TIMEOUT");
    if (t) {
        char *end;
        g_timeout = strtod(t, &end);
        if (end == t || *end || !(g_timeout > 0))
            return ERR("BEST_DIST_TIMEOUT=%s: want a number of seconds > 0", t);
    }
    const char *rb = getenv("BEST_DIST_ROUND_BYTES");
    if (rb) {
        char *end;
        unsigned long long x = strtoull(rb, &end, 10);
        if (end == rb || *end || x < 1 || x > ((size_t)1 << 30))
            return ERR("BEST_DIST_ROUND_BYTES=%s: want a byte count in [1, 2^30]", rb);
        g_round = (size_t)x;
    }
    int provided;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return ERR("MPI_Init_thread failed");
    g_mpi = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len;
    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, ",\n")] = 0; // "Open MPI v4.1.4, package: ..." -> its first part
    snprintf(g_info, sizeof g_info, "MPI (%.64s), rank %d of %d", lib, g_rank, g_size);
    if (g_size > 1) {
        pthread_t th;
        CHECK(pthread_create(&th, NULL, watchdog, NULL) == 0, "cannot start the collective watchdog thread");
        pthread_detach(th);
    }
    return 0;
}

void dist_finalize(void) {
    if (g_mpi) MPI_Finalize();
    g_mpi = 0;
}

const char *dist_info(void) { return g_info; }
int dist_rank(void) { return g_rank; }
int dist_size(void) { return g_size; }
int dist_is_mpi(void) { return g_mpi; }
uint64_t dist_bytes(void) { return g_bytes; }

void dist_sum_u64(uint64_t *x, size_t n) {
    if (g_size == 1 || n == 0) return;
    CHECK(n <= INT_MAX, "dist_sum_u64: %zu values", n);
    COLL("MPI_Allreduce (counts)", MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD));
    g_bytes += n * sizeof *x;
}

void dist_sum_f64(double *x, size_t n) {
    if (g_size == 1 || n == 0) return;
    CHECK(n <= INT_MAX / (size_t)g_size, "dist_sum_f64: %zu values", n);
    double *all = xmalloc(n * (size_t)g_size * sizeof *all); // (size, n)
    COLL("MPI_Allgather (sums)", MPI_Allgather(x, (int)n, MPI_DOUBLE, all, (int)n, MPI_DOUBLE, MPI_COMM_WORLD));
    for (size_t i = 0; i < n; i++) {
        double s = all[i];
        for (int r = 1; r < g_size; r++) s += all[(size_t)r * n + i];
        x[i] = s;
    }
    free(all);
    g_bytes += n * sizeof *x;
}

uint64_t dist_exscan_u64(uint64_t x) {
    if (g_size == 1) return 0;
    uint64_t before = 0;
    COLL("MPI_Exscan (ties)", MPI_Exscan(&x, &before, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD));
    g_bytes += sizeof x;
    return g_rank == 0 ? 0 : before; // MPI leaves rank 0's undefined
}

// Of a slice of len elements, how many lie in the round [off, off + B).
static size_t in_round(size_t len, size_t off, size_t B) { return len > off ? (len - off < B ? len - off : B) : 0; }

// Elements per peer in one round of a collective over elements of elem bytes.
static size_t round_elems(size_t elem) {
    size_t b = g_round / elem / (size_t)g_size;
    return b ? b : 1;
}

void dist_reduce_scatter_f32(float *x, size_t n) {
    if (g_size == 1) return;
    size_t B = round_elems(sizeof(float)), lo, hi;
    dist_slice(&lo, &hi, n, g_rank, g_size);
    float *send = xmalloc(2 * B * (size_t)g_size * sizeof *send), *recv = send + B * (size_t)g_size; // (size, B)
    int *sc = xmalloc(4 * (size_t)g_size * sizeof *sc), *sd = sc + g_size, *rc = sd + g_size, *rd = rc + g_size;
    size_t most = n / (size_t)g_size + 1; // the longest slice
    for (size_t off = 0; off < most; off += B) {
        // to each rank r the part [off, off + B) of its slice; from each rank that part of mine
        size_t mine = in_round(hi - lo, off, B);
        for (int r = 0; r < g_size; r++) {
            size_t rlo, rhi;
            dist_slice(&rlo, &rhi, n, r, g_size);
            size_t c = in_round(rhi - rlo, off, B);
            memcpy(send + (size_t)r * B, x + rlo + off, c * sizeof *send);
            sc[r] = (int)c, sd[r] = (int)((size_t)r * B);
            rc[r] = (int)mine, rd[r] = (int)((size_t)r * B);
            if (r != g_rank) g_bytes += c * sizeof *send;
        }
        COLL("MPI_Alltoallv (gradients)",
             MPI_Alltoallv(send, sc, sd, MPI_FLOAT, recv, rc, rd, MPI_FLOAT, MPI_COMM_WORLD));
        for (size_t i = 0; i < mine; i++) { // in rank order: (r0 + r1) + r2 ...
            float s = recv[i];
            for (int r = 1; r < g_size; r++) s += recv[(size_t)r * B + i];
            x[lo + off + i] = s;
        }
    }
    free(send);
    free(sc);
}

void dist_gather(void *full, const void *mine, size_t n, size_t elem, int all) {
    if (g_size == 1) {
        if (full && full != mine) memcpy(full, mine, n * elem);
        return;
    }
    size_t B = round_elems(elem), lo, hi;
    dist_slice(&lo, &hi, n, g_rank, g_size);
    int root = g_rank == 0;
    char *recv = all || root ? xmalloc(B * elem * (size_t)g_size) : NULL, *out = full;
    const char *in = mine;
    int *cnt = xmalloc(2 * (size_t)g_size * sizeof *cnt), *dsp = cnt + g_size;
    size_t most = n / (size_t)g_size + 1;
    for (size_t off = 0; off < most; off += B) {
        size_t c_me = in_round(hi - lo, off, B);
        for (int r = 0; r < g_size; r++) {
            size_t rlo, rhi;
            dist_slice(&rlo, &rhi, n, r, g_size);
            size_t c = in_round(rhi - rlo, off, B);
            cnt[r] = (int)(c * elem), dsp[r] = (int)((size_t)r * B * elem);
        }
        if (all)
            COLL("MPI_Allgatherv", MPI_Allgatherv(in + off * elem, (int)(c_me * elem), MPI_BYTE, recv, cnt, dsp,
                                                  MPI_BYTE, MPI_COMM_WORLD));
        else
            COLL("MPI_Gatherv", MPI_Gatherv(in + off * elem, (int)(c_me * elem), MPI_BYTE, recv, cnt, dsp, MPI_BYTE,
                                            0, MPI_COMM_WORLD));
        g_bytes += c_me * elem;
        if (!all && !root) continue;
        for (int r = 0; r < g_size; r++) {
            size_t rlo, rhi;
            dist_slice(&rlo, &rhi, n, r, g_size);
            char *dst = out + (rlo + off) * elem;
            if (cnt[r] && dst != in + off * elem) memcpy(dst, recv + (size_t)dsp[r], (size_t)cnt[r]);
        }
    }
    free(recv);
    free(cnt);
}

void dist_bcast(void *buf, size_t bytes, int root) {
    if (g_size == 1) return;
    CHECK(bytes <= INT_MAX, "dist_bcast: %zu bytes", bytes);
    COLL("MPI_Bcast", MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD));
    if (g_rank == root) g_bytes += bytes;
}

int dist_agree(int rc) {
    if (g_size == 1) return rc < 0 ? -1 : 0;
    int mine = rc < 0 ? -1 : 0, all;
    COLL("MPI_Allreduce (agree)", MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    g_bytes += sizeof mine;
    if (all == 0) return 0;
    if (mine == 0) ERR("another rank failed (its message is above)");
    return -1;
}
