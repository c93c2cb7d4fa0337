// dist_nccl.h: the GPU ranks' collectives (NCCL) for the training step on the device
// (nn/model.cu, mask.cu): one NCCL communicator over the ranks of dist.h, started from
// rank 0's unique id sent over dist_bcast (MPI: mpirun starts the ranks, NCCL moves the
// device buffers), with a stream of its own, so that a layer's gradients are summed
// while the backward goes on to the layers below it.
//
// The block of n parameters is cut into the ranks' slices exactly as on the host
// (dist_slice): rank r owns Adam's moments and the mask of [lo_r, hi_r) and updates only
// those weights (ZeRO stage 1). Two collectives over a range [a, b) of a device block:
//   sum    each owner's part of [a, b) becomes the sum over the ranks (in place; the
//          other parts keep this rank's own values): one ncclReduce per owner, rooted
//          there, in one group. (ncclReduceScatter wants equal counts; the slices
//          differ by one element where n does not split.)
//   share  each owner's part of [a, b) is copied to every rank: one ncclBroadcast per
//          owner, in one group (an all-gather of unequal parts).
// Each is put on the communicator's stream behind all the work given so far to the
// stream `after` (an event), and devcomm_wait puts a stream behind all of the
// communicator's. NCCL's sums are its own order (ring or tree, per its tuning): the
// same on every rank and, on one machine with one NCCL, from run to run, but not the
// rank order of dist.h's host sums; one rank sums nothing and is bitwise a run without.
//
// In builds with CUDA. With BEST_NCCL=1 (the Makefile found nccl.h and libnccl beside
// the CUDA toolkit, or at NCCL_HOME) over NCCL; without, devcomm_init refuses in one line.
// tests/nccl_emu.h runs this file on the CPU with each collective made of dist.h's
// (tests/test_step.cpp). On a GPU: one rank only so far (an H200; docs/cuda.md).
#ifndef BEST_DIST_NCCL_H
#define BEST_DIST_NCCL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st; // cudaStream_t
typedef struct DevComm DevComm;

#ifdef BEST_CUDA
// *out = the communicator of all dist.h ranks on the current device (every rank calls
// it, after cudaSetDevice). 0, or -1 after ERR (NCCL's message).
int devcomm_init(DevComm **out);
void devcomm_free(DevComm *c); // NULL is fine
int devcomm_rank(const DevComm *c);
int devcomm_size(const DevComm *c);
// sum, as above: x (n floats, device) over [a, b), behind the work on `after` so far.
void devcomm_sum(DevComm *c, float *x, size_t n, size_t a, size_t b, struct CUstream_st *after);
// share, as above: x (device) holds elements a .. b - 1 of a block of n, elem bytes each
// (x[i - a] is element i).
void devcomm_share(DevComm *c, void *x, size_t elem, size_t n, size_t a, size_t b, struct CUstream_st *after);
// st waits (on the device) for everything put on the communicator so far.
void devcomm_wait(DevComm *c, struct CUstream_st *st);
// Payload bytes this rank has put into the collectives so far (its own parts of each
// sum's ranges and of each share's owned parts).
double devcomm_bytes(const DevComm *c);
#endif

#ifdef __cplusplus
}
#endif

#endif
