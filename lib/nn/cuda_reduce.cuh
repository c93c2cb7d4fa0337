// cuda_reduce.cuh: sums and log-sum-exp states reduced over a warp and over a block,
// for the kernels of layers.cu (and later ones). Device code; tests/cuda_emu.h runs it
// on the CPU.
//
// Every lane (thread) ends with the same bits: the xor butterfly combines the same two
// values on both sides of each exchange, and km_lse_merge is symmetric in its result.
// So a block's threads need no broadcast, and the result does not depend on which
// thread reads it. Block versions need blockDim.x a multiple of 32, at most 1024, and
// every thread of the block must call them (they hold __syncthreads).
#ifndef BEST_CUDA_REDUCE_CUH
#define BEST_CUDA_REDUCE_CUH

#include "nn/kernel_math.h" // defines: km_lse_merge

#define FULL_MASK 0xffffffffu

// T: float, or double (model.cu's reductions of the gradient norm and the loss).
template <class T> static __device__ inline T warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

// The sum of v over the block, in every thread.
template <class T> static __device__ inline T block_sum(T v) {
    __shared__ T part[32];
    unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    v = warp_sum(v);
    if (lane == 0) part[warp] = v;
    __syncthreads();
    // every warp sums the partials itself (the same bits in each): no broadcast step
    v = warp_sum(lane < nwarps ? part[lane] : (T)0);
    __syncthreads(); // part is free again for the next call
    return v;
}

// Merges the online log-sum-exp states (m, s) of a warp's lanes.
static __device__ inline void warp_lse(float *m, float *s) {
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(FULL_MASK, *m, o), s2 = __shfl_xor_sync(FULL_MASK, *s, o);
        km_lse_merge(m, s, m2, s2);
    }
}

// Merges the states of the block's threads; every thread gets the block's state.
static __device__ inline void block_lse(float *m, float *s) {
    __shared__ float part_m[32], part_s[32];
    unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
    warp_lse(m, s);
    if (lane == 0) {
        part_m[warp] = *m;
        part_s[warp] = *s;
    }
    __syncthreads();
    *m = lane < nwarps ? part_m[lane] : -INFINITY;
    *s = lane < nwarps ? part_s[lane] : 0.0f;
    warp_lse(m, s);
    __syncthreads();
}

#endif
