// nccl_emu.h: the part of NCCL's API that lib/dist/dist_nccl.cu calls, for running it on
// the CPU beside tests/cuda_emu.h (device memory is host memory there). Test-only, C++.
// Each rank is a process of dist.h (one without mpirun, N under it), and each NCCL
// collective is made of dist.h's: ncclReduce is dist_sum_f64 of the values as doubles,
// rounded back to float on the root; ncclBroadcast is dist_sum_u64 of the bytes, packed
// eight to a word, that only the root contributes (exact, so the copies are bitwise).
// Group calls only count their nesting: every rank makes the same calls in the same
// order, so that running each at once cannot deadlock. Checked where NCCL fails or is
// undefined: a communicator that does not match dist.h's ranks, a unique id that is not
// the one rank 0 made, a root outside the ranks, unbalanced groups, a type other than
// what dist_nccl.cu sends.
#ifndef BEST_NCCL_EMU_H
#define BEST_NCCL_EMU_H

#include <stdio.h>
#include <string.h>

#include <vector>

#include "dist/dist.h" // defines: dist_sum_f64, dist_sum_u64, dist_rank, dist_size

#define BEST_NCCL_EMU 1 // dist_nccl.cu then leaves out <nccl.h>

typedef enum { ncclSuccess = 0, ncclInvalidArgument = 4, ncclInvalidUsage = 5 } ncclResult_t;
typedef enum { ncclUint8 = 1, ncclFloat = 7 } ncclDataType_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;
typedef struct { char internal[128]; } ncclUniqueId;
struct EmuNcclComm {
    int rank, ranks;
};
typedef EmuNcclComm *ncclComm_t;

static int emu_nccl_group; // nesting of ncclGroupStart

static inline const char *ncclGetErrorString(ncclResult_t r) {
    return r == ncclSuccess ? "no error" : r == ncclInvalidArgument ? "invalid argument" : "invalid usage";
}

static inline ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "nccl-emu of rank %d", dist_rank());
    return ncclSuccess;
}

static inline ncclResult_t ncclCommInitRank(ncclComm_t *c, int ranks, ncclUniqueId id, int rank) {
    if (ranks != dist_size() || rank != dist_rank() || strcmp(id.internal, "nccl-emu of rank 0") != 0)
        return ncclInvalidArgument;
    *c = new EmuNcclComm{rank, ranks};
    return ncclSuccess;
}

static inline ncclResult_t ncclCommDestroy(ncclComm_t c) {
    delete c;
    return ncclSuccess;
}

static inline ncclResult_t ncclGroupStart(void) {
    emu_nccl_group++;
    return ncclSuccess;
}
static inline ncclResult_t ncclGroupEnd(void) { return emu_nccl_group-- > 0 ? ncclSuccess : ncclInvalidUsage; }

static inline ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                                      int root, ncclComm_t c, cudaStream_t) {
    if (type != ncclFloat || op != ncclSum || root < 0 || root >= c->ranks) return ncclInvalidArgument;
    std::vector<double> v(count);
    for (size_t i = 0; i < count; i++) v[i] = ((const float *)send)[i];
    dist_sum_f64(v.data(), count);
    if (c->rank == root)
        for (size_t i = 0; i < count; i++) ((float *)recv)[i] = (float)v[i];
    return ncclSuccess;
}

static inline ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type, int root,
                                         ncclComm_t c, cudaStream_t) {
    if ((type != ncclFloat && type != ncclUint8) || root < 0 || root >= c->ranks) return ncclInvalidArgument;
    size_t bytes = count * (type == ncclFloat ? 4 : 1);
    std::vector<uint64_t> w((bytes + 7) / 8, 0);
    if (c->rank == root) memcpy(w.data(), send, bytes);
    dist_sum_u64(w.data(), w.size());
    memcpy(recv, w.data(), bytes);
    return ncclSuccess;
}

#endif
