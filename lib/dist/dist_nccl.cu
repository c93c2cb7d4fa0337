// dist_nccl.cu: dist_nccl.h over NCCL. Written like the kernels' files so that
// tests/nccl_emu.h and tests/cuda_emu.h run it on the CPU (tests/test_step.cpp includes
// it): the API's linkage through base/cuda.h's BEST_KAPI, the CUDA calls checked by its
// CUDA_CHECK (the emulator brings its own), the NCCL calls by NCCL_CHECK below.
#include "dist/dist_nccl.h"

#include <stdint.h>
#include <stdlib.h>

#include "base/cuda.h"  // defines: BEST_KAPI, CUDA_CHECK
#include "base/error.h" // defines: ERR, die_, xcalloc
#include "dist/dist.h"  // defines: dist_rank, dist_size, dist_slice, dist_part, dist_bcast
#if defined(BEST_NCCL) && !defined(BEST_NCCL_EMU) // tests/nccl_emu.h stands in for it
#include <nccl.h>
#endif

#if defined(BEST_NCCL) || defined(BEST_NCCL_EMU)

struct DevComm {
    ncclComm_t nc;
    int rank, ranks;
    cudaStream_t stream; // the collectives' own
    cudaEvent_t ready;   // recorded on a caller's stream: the collective waits for it
    cudaEvent_t done;    // recorded on ours: devcomm_wait's callers wait for it
    double bytes;
};

// For NCCL calls: on failure "prog: error: CALL: NCCL's message [file:line]", exit 1.
#define NCCL_CHECK(call)                                                                      \
    do {                                                                                      \
        ncclResult_t r_ = (call);                                                             \
        if (r_ != ncclSuccess) die_(__FILE__, __LINE__, "%s: %s", #call, ncclGetErrorString(r_)); \
    } while (0)

BEST_KAPI int devcomm_init(DevComm **out) {
    *out = NULL;
    ncclUniqueId id;
    if (dist_rank() == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    dist_bcast(&id, sizeof id, 0);
    DevComm *c = (DevComm *)xcalloc(1, sizeof *c);
    c->rank = dist_rank();
    c->ranks = dist_size();
    ncclResult_t r = ncclCommInitRank(&c->nc, c->ranks, id, c->rank);
    if (r != ncclSuccess) {
        free(c);
        return ERR("NCCL: cannot join the %d ranks' communicator as rank %d: %s", dist_size(), dist_rank(),
                   ncclGetErrorString(r));
    }
    CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&c->ready, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming));
    *out = c;
    return 0;
}

BEST_KAPI void devcomm_free(DevComm *c) {
    if (!c) return;
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
    NCCL_CHECK(ncclCommDestroy(c->nc));
    CUDA_CHECK(cudaEventDestroy(c->ready));
    CUDA_CHECK(cudaEventDestroy(c->done));
    CUDA_CHECK(cudaStreamDestroy(c->stream));
    free(c);
}

BEST_KAPI int devcomm_rank(const DevComm *c) { return c->rank; }
BEST_KAPI int devcomm_size(const DevComm *c) { return c->ranks; }
BEST_KAPI double devcomm_bytes(const DevComm *c) { return c->bytes; }

// Our stream behind the work given to `after` so far.
static void comm_after(DevComm *c, cudaStream_t after) {
    CUDA_CHECK(cudaEventRecord(c->ready, after));
    CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->ready, 0));
}

// [*pa, *pb): owner r's part of [a, b) in a block of n.
static void owned_part(size_t *pa, size_t *pb, size_t n, size_t a, size_t b, int r, int ranks) {
    size_t lo, hi;
    dist_slice(&lo, &hi, n, r, ranks);
    dist_part(pa, pb, a, b, lo, hi);
}

BEST_KAPI void devcomm_sum(DevComm *c, float *x, size_t n, size_t a, size_t b, cudaStream_t after) {
    if (a >= b) return;
    comm_after(c, after);
    NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < c->ranks; r++) {
        size_t pa, pb;
        owned_part(&pa, &pb, n, a, b, r, c->ranks);
        if (pa < pb) NCCL_CHECK(ncclReduce(x + pa, x + pa, pb - pa, ncclFloat, ncclSum, r, c->nc, c->stream));
    }
    NCCL_CHECK(ncclGroupEnd());
    c->bytes += (double)(b - a) * sizeof *x;
}

BEST_KAPI void devcomm_share(DevComm *c, void *x, size_t elem, size_t n, size_t a, size_t b, cudaStream_t after) {
    if (a >= b) return;
    comm_after(c, after);
    NCCL_CHECK(ncclGroupStart());
    for (int r = 0; r < c->ranks; r++) {
        size_t pa, pb;
        owned_part(&pa, &pb, n, a, b, r, c->ranks);
        if (pa == pb) continue;
        char *p = (char *)x + (pa - a) * elem; // (a copy: its bytes, whatever the type)
        NCCL_CHECK(ncclBroadcast(p, p, (pb - pa) * elem, ncclUint8, r, c->nc, c->stream));
        if (r == c->rank) c->bytes += (double)(pb - pa) * (double)elem;
    }
    NCCL_CHECK(ncclGroupEnd());
}

BEST_KAPI void devcomm_wait(DevComm *c, cudaStream_t st) {
    CUDA_CHECK(cudaEventRecord(c->done, c->stream));
    CUDA_CHECK(cudaStreamWaitEvent(st, c->done, 0));
}

#else // a build without NCCL: one GPU rank

struct DevComm {
    int unused;
};

BEST_KAPI int devcomm_init(DevComm **out) {
    *out = NULL;
    return ERR("--device cuda with %d ranks: this build has no NCCL (the Makefile found no nccl.h and libnccl "
               "beside the CUDA toolkit; NCCL_HOME=DIR names another place)", dist_size());
}
// Never called: there is no communicator to call them with.
BEST_KAPI void devcomm_free(DevComm *c) { (void)c; }
BEST_KAPI int devcomm_rank(const DevComm *c) { (void)c; return 0; }
BEST_KAPI int devcomm_size(const DevComm *c) { (void)c; return 1; }
BEST_KAPI double devcomm_bytes(const DevComm *c) { (void)c; return 0; }
BEST_KAPI void devcomm_sum(DevComm *c, float *x, size_t n, size_t a, size_t b, cudaStream_t after) {
    (void)c, (void)x, (void)n, (void)a, (void)b, (void)after;
}
BEST_KAPI void devcomm_share(DevComm *c, void *x, size_t elem, size_t n, size_t a, size_t b, cudaStream_t after) {
    (void)c, (void)x, (void)elem, (void)n, (void)a, (void)b, (void)after;
}
BEST_KAPI void devcomm_wait(DevComm *c, cudaStream_t st) { (void)c, (void)st; }
#endif
