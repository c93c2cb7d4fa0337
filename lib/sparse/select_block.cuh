// select_block.cuh: selections done by one thread block, for the kernels of select.cu
// and wanda.cu. Device code; tests/cuda_emu.h runs it on the CPU.
//
//   block_exscan     the exclusive prefix sum of one value per thread, in thread order
//                    (select.cu's tie numbering, and smallest_block's).
//   smallest_block   select_smallest (select.h) on one segment: of len scores, the k
//                    with the smallest keys (score bits, place) are selected. A radix
//                    select on the bits, 8 at a time from the top (4 rounds: a 256-bucket
//                    histogram in shared memory each), finds the k-th smallest bit pattern
//                    T and how many of the places scoring exactly T are taken; then one
//                    pass marks: below T selected, at T the first ones in place order
//                    (numbered by block_exscan, tile by tile, only while some remain to
//                    take), above T not. The scores come from a functor (read once a
//                    round: up to 6 reads of each), so a caller can compute them on the
//                    fly instead of storing them (wanda.cu); the result goes to another
//                    functor, called once for every place.
//
// Every thread of the block must call these (barriers); blockDim.x a multiple of 32, at
// most 1024. Only static shared memory (the emulator has no dynamic shared memory).
// Speed: one block a segment reads the whole segment 5 to 6 times; fine for rows of a
// few thousand, slow for one segment of a million (sparsegpt.cu's block of columns).
#ifndef BEST_SELECT_BLOCK_CUH
#define BEST_SELECT_BLOCK_CUH

#include "nn/kernel_math.h" // defines: km_bits

// The exclusive prefix sum of v over the block's threads in index order (*pre), and
// the block's total.
static __device__ void block_exscan(unsigned v, unsigned *pre, unsigned *total) {
    __shared__ unsigned warp_total[32];
    unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, x = v;
    for (unsigned d = 1; d < 32; d <<= 1) { // inclusive scan within the warp
        unsigned y = __shfl_sync(0xffffffffu, x, (int)((lane - d) & 31));
        if (lane >= d) x += y;
    }
    if (lane == 31) warp_total[warp] = x;
    __syncthreads();
    unsigned before = 0, all = 0;
    for (unsigned w = 0; w < blockDim.x / 32; w++) {
        before += w < warp ? warp_total[w] : 0;
        all += warp_total[w];
    }
    __syncthreads(); // warp_total is written again by the next call
    *pre = before + x - v;
    *total = all;
}

// score(i) (a float; its bits are the key, so any bit pattern orders as select_key's)
// for places i < len (< 2^32); put(i, sel) for every place, sel = 1 for the k selected
// (k <= len). Each block calls this once (its shared state is not reset for a second).
template <class Score, class Put>
static __device__ void smallest_block(size_t len, size_t k, Score score, Put put) {
    __shared__ unsigned hist[256];
    __shared__ uint32_t s_prefix;
    __shared__ unsigned s_rank, s_ties;
    if (k == 0 || k >= len) { // none or all: no select (the whole block takes this path)
        for (size_t i = threadIdx.x; i < len; i += blockDim.x) put(i, k != 0);
        return;
    }
    // Invariant: the k-th smallest has the bits `prefix` under `known`, and is the
    // rank-th smallest (from 1) of the places that have them.
    uint32_t prefix = 0, known = 0;
    unsigned rank = (unsigned)k, ties = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (unsigned b = threadIdx.x; b < 256; b += blockDim.x) hist[b] = 0;
        __syncthreads();
        for (size_t i = threadIdx.x; i < len; i += blockDim.x) {
            uint32_t u = km_bits(score(i));
            if ((u & known) == prefix) atomicAdd(&hist[(u >> shift) & 255u], 1u);
        }
        __syncthreads();
        if (threadIdx.x == 0) { // the bucket where the rank-th falls (rank <= the bucket sum)
            unsigned b = 0, below = 0;
            while (below + hist[b] < rank) below += hist[b++];
            s_prefix = prefix | (uint32_t)b << shift;
            s_rank = rank - below;
            s_ties = hist[b];
        }
        __syncthreads(); // (hist and s_* are written again only after the next round's first barrier)
        prefix = s_prefix, rank = s_rank, ties = s_ties;
        known |= 255u << shift;
    }
    // prefix is the k-th smallest score's bits T; `ties` places score T, the first `rank`
    // of them (in place order) are selected. Number them while some remain to take.
    unsigned taken = 0;
    size_t t0 = 0;
    if (rank < ties)
        for (; t0 < len && taken < rank; t0 += blockDim.x) { // the same trips for every thread
            size_t i = t0 + threadIdx.x;
            uint32_t u = i < len ? km_bits(score(i)) : 0;
            unsigned tie = i < len && u == prefix, pre, total;
            block_exscan(tie, &pre, &total);
            if (i < len) put(i, u < prefix || (tie && taken + pre < rank));
            taken += total;
        }
    // the rest: every tie taken (rank == ties), or none left to take (taken >= rank)
    int tie_sel = rank == ties;
    for (size_t i = t0 + threadIdx.x; i < len; i += blockDim.x) {
        uint32_t u = km_bits(score(i));
        put(i, u < prefix || (u == prefix && tie_sel));
    }
}

#endif
