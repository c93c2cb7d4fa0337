// decode_fused.cuh: the device half of decode_fused.h, shared by its two weight sources
// (the folder's bf16 rows in layers.cu, a pack's pairs in pack/spmv.cu): the staging of
// the input, the walk over the job's rows, the outputs. A source is a struct with
//   float dot(int g, size_t r, unsigned sub, unsigned lanes, const uint16_t *xs)
// lane sub's share (of lanes a row: the job's lanes[g]) of row r of weight g times xs.
// Device code; tests/cuda_emu.h runs it on the CPU.
#ifndef BEST_DECODE_FUSED_CUH
#define BEST_DECODE_FUSED_CUH

#include "nn/cuda_reduce.cuh"  // defines: block_sum, FULL_MASK
#include "nn/decode_fused.h"   // defines: DecodeJob, DECODE_STAGE_MAX
#include "nn/kernel_math.h"    // defines: km_rmsnorm_rstd, km_rmsnorm_y, km_bf16_from_float, km_swiglu_forward

// Threads a block: rmsnorm_forward_kernel's for a row of IC (so that the norm's sum takes
// the same order, bit for bit).
static inline unsigned decode_fused_threads(size_t IC) { return km_row_threads(IC, KM_ROW_THREADS_MAX); }

// xs (IC) = the job's bf16 operand, by every thread of the block: bf16(rmsnorm(x)) as
// rmsnorm_forward_bf16_cuda rounds it, or bf16(x) as cast_bf16_cuda does.
static __device__ void decode_stage(uint16_t *xs, const DecodeJob &j) {
    const float *x = j.x;
    if (j.norm_w) {
        float ss = 0.0f;
        for (size_t c = threadIdx.x; c < j.IC; c += blockDim.x) ss += x[c] * x[c];
        float r = km_rmsnorm_rstd(block_sum(ss) / (float)j.IC, j.eps);
        for (size_t c = threadIdx.x; c < j.IC; c += blockDim.x) xs[c] = km_bf16_from_float(km_rmsnorm_y(x[c], r, j.norm_w[c]));
    } else {
        for (size_t c = threadIdx.x; c < j.IC; c += blockDim.x) xs[c] = km_bf16_from_float(x[c]);
    }
    __syncthreads();
}

// Row r of weight g from its sum s (swiglu: s of gate, u of up): as the unfused kernels
// finish a row (res first, then the bias; SwiGLU on the biased values).
static __device__ void decode_put(const DecodeJob &j, int g, size_t r, float s, float u) {
    if (j.swiglu) {
        if (j.b[0]) s += j.b[0][r];
        if (j.b[1]) u += j.b[1][r];
        uint16_t h = km_bf16_from_float(km_swiglu_forward(s, u));
        j.hb[r] = h;
        j.hr[r] = km_float_from_bf16(h);
        return;
    }
    if (j.res[g]) s = j.res[g][r] + s;
    if (j.b[g]) s += j.b[g][r];
    j.y[g][r] = s;
}

// The job over the source's weights: the block stages x, then its warps take the row
// groups (32 / lanes rows a warp) of each weight in turn, weight g's first group at the
// warp after weight g - 1's first (so that a grid sized for all the groups gives each warp
// about one). Every lane runs the same iterations (the butterfly's shuffles need them
// all). swiglu: a row of gate and the same row of up together, at gate's lanes (the
// launcher checks that up has the same).
template <class Src> static __global__ void decode_fused_kernel(DecodeJob j, Src src) {
    __shared__ uint4 stage[DECODE_STAGE_MAX / 8]; // 16-byte aligned: a lane reads 8 values at once
    uint16_t *xs = (uint16_t *)stage;
    decode_stage(xs, j);
    unsigned lane = threadIdx.x % 32;
    size_t warps = (size_t)gridDim.x * blockDim.x / 32, base = 0;
    size_t warp = km_thread_index(blockIdx.x, blockDim.x, threadIdx.x) / 32;
    for (int g = 0; g < (j.swiglu ? 1 : j.n); g++) {
        unsigned L = j.lanes[g], sub = lane % L, per = 32 / L;
        size_t rows = j.rows[g], groups = (rows + per - 1) / per;
        for (size_t k = (warp + warps - base % warps) % warps; k < groups; k += warps) {
            size_t r = k * per + lane / L;
            float s = 0.0f, u = 0.0f;
            if (r < rows) {
                s = src.dot(g, r, sub, L, xs);
                if (j.swiglu) u = src.dot(1, r, sub, L, xs);
            }
            for (unsigned d = L / 2; d > 0; d >>= 1) {
                s += __shfl_xor_sync(FULL_MASK, s, d);
                if (j.swiglu) u += __shfl_xor_sync(FULL_MASK, u, d);
            }
            if (sub == 0 && r < rows) decode_put(j, g, r, s, u);
        }
        base += groups;
    }
}

// Blocks for the job (its lanes set) at threads a block: a warp for each row group of all
// its weights (at most KM_GRID_CAP; the loops take the rest).
static inline unsigned decode_fused_blocks(const DecodeJob *j, unsigned threads) {
    size_t groups = 0;
    for (int g = 0; g < (j->swiglu ? 1 : j->n); g++) groups += (j->rows[g] + 32 / j->lanes[g] - 1) / (32 / j->lanes[g]);
    return km_blocks(groups, threads / 32, KM_GRID_CAP);
}

#endif
