// spmv.cu: spmv_forward (spmv.h) on a CUDA device: y = W x (+ b) for one packed tensor
// whose streams were copied to the device as they are in the pack (devpack_upload), for
// batch-1 decoding on a GPU. Every encoding and value type of pack.h:
//
//   dense    a warp per row: the lanes take 16 bytes at a time (8 BF16 or 4 F32 values)
//            when the rows allow it, else every 32nd column; then a butterfly sum
//   tiles    a block per panel of 32 rows, its 32 warps each taking a run of the panel's
//            slots (a panel of a 4096-row tensor is 1/128 of it: one warp a panel would
//            leave a GPU mostly idle); lane i = row 32p + i: slot by slot, a lane whose
//            bit is set in the slot's mask finds its element at the popcount of the
//            mask's bits below it, reads its column within the block from the index byte
//            and adds value * x; the runs' partial sums added in run order
//   bitmap   a warp per row, 32 bitmap bytes (256 columns) at a time, each lane's first
//            element found by a prefix count over the lanes; a butterfly sum
//   delta    a thread per row, its gap stream decoded (the CPU's order, one running sum:
//            a gap stream has no random access; the writer picks delta only where rows
//            hold very few elements)
//   nm       a warp per row, no counts to read: a row's values and positions start at
//            fixed offsets. Two kernels (BEST_SPMV_NM, spmv_nm_choice): "vec" (the default
//            where it applies: BF16 or F16 values, a multiple of 8 values a row, 16-byte
//            aligned) has each lane take 8 values in one 16-byte load and their 8
//            positions (log2(M) bytes), the group of each followed by a counter; "lanes"
//            (every value type) has the lanes take the positions 32 at a time (position
//            k: group k / N, its column from pack_nm_pos). Each value times its x, a
//            butterfly sum. lanes ran on an H200 (2026-11-29): right, and a 2:4 pack
//            decoded at 0.43x our dense bf16 (a row of 2048 values is 64 dependent steps
//            of 2-byte loads per lane; vec makes it 8 steps of 16 bytes). vec has NEVER
//            RUN ON A GPU (bench_spmv_gpu --pattern 2:4 times both)
//
// Values are dequantized as they are read: BF16 by a shift, F16 by its bit fields, I8/I4
// as integers, the row's sum times its scale once (as the CPU). The epilogue is the
// CPU's: scale, then + y (acc), then + b. x is read from global memory: a tiles slot's
// lanes read 32 floats of one 32-column block, a bitmap step 256 consecutive columns, so
// x's lines stay in L1 (staging all of x in shared memory per block would read more than
// a 95%-sparse panel's own bytes). No float atomics, each row summed in a fixed order:
// the same bits on every run; not the CPU's order (results agree to fp32 rounding).
//
// Also here: spmv_decode_cuda (rows of a packed tensor, for embeddings and evaluation's
// bf16 operands) and nn/weight.h's device operations over DevPackTensors. Tested in the
// CPU emulator (tests/test_spmv_cuda.cpp) against spmv.c and pack_decode_rows, and on an
// H200 (test_spmv_cuda_gpu; the tiles kernel since changed, not yet run there); how fast:
// bench/bench_spmv_gpu, bench/decode_gpu.sh (docs/benchmarks.md).
#include "pack/spmv.h" // defines: DevPackTensor, the _cuda prototypes (BEST_CUDA)

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"     // defines: ERR, CHECK, xmalloc
#include "base/cuda.h"        // defines: CUDA_CHECK, LAUNCH, BEST_KAPI
#include "nn/decode_fused.cuh" // defines: decode_fused_kernel, DecodeJob
#include "nn/kernel_math.h" // defines: km_float_from_bf16, km_bf16_from_float, km_blocks, km_thread_index

#define SPMV_THREADS 256 // 8 warps a block
#define SPMV_WARPS (SPMV_THREADS / 32)
#ifdef __CUDACC__
#define SPMV_UNROLL(n) _Pragma(SPMV_STR(unroll n))
#define SPMV_STR(x) #x
#else
#define SPMV_UNROLL(n) // g++ (the emulator) unrolls or not; the result is the same
#endif

// IEEE half bits to float, exactly (subnormals, infinities and NaN payloads kept).
KM_HD float spmv_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 31u, man = h & 0x3ffu, u;
    if (e == 0) { // zero or subnormal: man * 2^-24, exact in float
        float f = (float)man * 5.9604644775390625e-08f;
        return sign ? -f : f;
    }
    if (e == 31) u = sign | 0x7f800000u | (man << 13);
    else u = sign | ((e + 112u) << 23) | (man << 13);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

// Stored element i of values v in type VAL, as fp32 (I8/I4 unscaled).
template <int VAL> static __device__ float value_at(const void *v, size_t i) {
    if (VAL == PACK_F32) return ((const float *)v)[i];
    if (VAL == PACK_BF16) return km_float_from_bf16(((const uint16_t *)v)[i]);
    if (VAL == PACK_F16) return spmv_f16_to_f32(((const uint16_t *)v)[i]);
    if (VAL == PACK_I8) return (float)((const int8_t *)v)[i];
    int q = (((const uint8_t *)v)[i >> 1] >> ((i & 1) * 4)) & 15; // I4: two's complement nibble
    return (float)((q ^ 8) - 8);
}

// y[r] from row r's sum s: spmv.c's y_put.
static __device__ void y_put(float *y, size_t r, float s, const float *scales, const float *b, int acc) {
    if (scales) s *= scales[r];
    if (acc) s = y[r] + s;
    if (b) s += b[r];
    y[r] = s;
}

// The global warp index and count of this launch.
static __device__ size_t warp_id(void) { return km_thread_index(blockIdx.x, blockDim.x, threadIdx.x) / 32; }
static __device__ size_t warp_count(void) { return (size_t)gridDim.x * blockDim.x / 32; }

// The inclusive prefix sum of v over the lanes of a warp (lane 0 first).
static __device__ unsigned warp_scan(unsigned v) {
    unsigned lane = threadIdx.x % 32;
    for (unsigned d = 1; d < 32; d <<= 1) {
        unsigned o = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += o;
    }
    return v;
}

// The sum of v over the lanes of a warp, in every lane (a butterfly: a fixed order).
static __device__ float warp_sum(float v) {
    for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(0xffffffffu, v, d);
    return v;
}

// The sum of x (8) weighted by the 8 bf16 values packed in u (element i in bits 16i of
// the little-endian 16 bytes), in order.
static __device__ float dot8_bf16(uint4 u, const float *x) {
    uint32_t w[4] = {u.x, u.y, u.z, u.w};
    float s = 0;
    for (int i = 0; i < 4; i++) {
        s += km_float_from_bf16((uint16_t)(w[i] & 0xffffu)) * x[2 * i];
        s += km_float_from_bf16((uint16_t)(w[i] >> 16)) * x[2 * i + 1];
    }
    return s;
}

// vec (BF16 rows of a multiple of 8 values, F32 of 4: every row starts 16-byte aligned, as
// the values do on the device): each lane loads 16 bytes at a time, 8 bf16 or 4 floats.
template <int VAL>
static __global__ void spmv_dense_kernel(float *y, const float *x, DevPackTensor t, const float *b, int acc,
                                         int vec) {
    unsigned lane = threadIdx.x % 32;
    for (size_t r = warp_id(); r < t.rows; r += warp_count()) { // the whole warp takes the same rows
        float s = 0;
        if (vec && VAL == PACK_BF16) {
            const uint4 *row = (const uint4 *)((const uint16_t *)t.values + r * t.cols);
            for (size_t c = lane; c < t.cols / 8; c += 32) s += dot8_bf16(row[c], x + 8 * c);
        } else if (vec && VAL == PACK_F32) {
            const float4 *row = (const float4 *)((const float *)t.values + r * t.cols);
            for (size_t c = lane; c < t.cols / 4; c += 32) {
                float4 v = row[c];
                const float *xc = x + 4 * c;
                s += v.x * xc[0] + v.y * xc[1] + v.z * xc[2] + v.w * xc[3];
            }
        } else {
            for (size_t c = lane; c < t.cols; c += 32) s += value_at<VAL>(t.values, r * t.cols + c) * x[c];
        }
        s = warp_sum(s);
        if (lane == 0) y_put(y, r, s, t.scales, b, acc);
    }
}

// A block per panel (grid-stride), its TILES_WARPS warps splitting the panel's slots into
// as many runs: a warp first counts its run's elements and block steps (lanes over the
// slots, a butterfly), the counts of the runs before give each warp where its run starts;
// then lane i walks the run for row 32p + i as the CPU does a whole row, and the runs'
// partial sums are added in run order (fixed: the same bits every run). The walk takes
// 32 slots at a time: lane j loads slot j's mask and step (one coalesced load each), and
// each slot's are handed to every lane by a shuffle, so the loads in the walk are only
// the elements' (a slot's mask and step loaded by the whole warp, one after another, made
// the walk a chain of load latencies: 8 warps a panel ran at 5 to 33 times the byte floor
// on an H200, docs/benchmarks.md). Barriers per panel: [A] the runs' counts posted; [B]
// the partial sums posted; [C] both read.
#define TILES_THREADS 1024 // 32 warps a panel: a panel of a 4096-row tensor is 1/128 of it
#define TILES_WARPS (TILES_THREADS / 32)
template <int VAL>
static __global__ void __launch_bounds__(TILES_THREADS)
spmv_tiles_kernel(float *y, const float *x, DevPackTensor t, const float *b, int acc) {
    __shared__ unsigned run_k[TILES_WARPS], run_b[TILES_WARPS];
    __shared__ float part[TILES_WARPS][32];
    const unsigned lane = threadIdx.x % 32, w = threadIdx.x / 32, full = 0xffffffffu;
    size_t panels = (t.rows + 31) / 32;
    for (size_t p = blockIdx.x; p < panels; p += gridDim.x) {
        size_t s0 = t.ix_ptr[p], ns = t.ix_ptr[p + 1] - s0;
        size_t lo = s0 + ns * w / TILES_WARPS, hi = s0 + ns * (w + 1) / TILES_WARPS;
        unsigned ck = 0, cb = 0;
        for (size_t sl = lo + lane; sl < hi; sl += 32) {
            ck += (unsigned)__popc(t.masks[sl]);
            cb += t.steps[sl];
        }
        for (int o = 16; o > 0; o >>= 1) {
            ck += __shfl_xor_sync(full, ck, o);
            cb += __shfl_xor_sync(full, cb, o);
        }
        if (lane == 0) {
            run_k[w] = ck;
            run_b[w] = cb;
        }
        __syncthreads(); // [A]
        size_t k = t.nnz_ptr[p], blk = 0; // the run's first element; the block before its first slot
        for (unsigned v = 0; v < w; v++) {
            k += run_k[v];
            blk += run_b[v];
        }
        float s = 0;
        for (size_t c = lo; c < hi; c += 32) { // 32 slots: lane j holds slot c + j's mask and step
            unsigned n = hi - c < 32 ? (unsigned)(hi - c) : 32u;
            uint32_t mj = lane < n ? t.masks[c + lane] : 0u;
            unsigned bj = lane < n ? t.steps[c + lane] : 0u;
            for (unsigned j = 0; j < n; j++) {
                uint32_t m = __shfl_sync(full, mj, j);
                blk += __shfl_sync(full, bj, j);
                if ((m >> lane) & 1u) {
                    size_t e = k + (size_t)__popc(m & ((1u << lane) - 1u));
                    s += value_at<VAL>(t.values, e) * x[blk * 32 + t.index[e]];
                }
                k += (size_t)__popc(m);
            }
        }
        part[w][lane] = s;
        __syncthreads(); // [B]
        size_t r = p * 32 + lane;
        if (w == 0 && r < t.rows) {
            float sum = 0;
            for (unsigned v = 0; v < TILES_WARPS; v++) sum += part[v][lane];
            y_put(y, r, sum, t.scales, b, acc);
        }
        __syncthreads(); // [C]
    }
}

// A warp per row: the lanes take 32 bytes of its bitmap (256 columns) at a time, each
// lane's first element found by a prefix count over the lanes (warp_scan); lane sums
// added by a butterfly.
template <int VAL>
static __global__ void spmv_bitmap_kernel(float *y, const float *x, DevPackTensor t, const float *b, int acc) {
    size_t nb = (t.cols + 7) / 8;
    unsigned lane = threadIdx.x % 32;
    for (size_t r = warp_id(); r < t.rows; r += warp_count()) {
        const uint8_t *bm = t.index + r * nb;
        size_t k = t.nnz_ptr[r];
        float s = 0;
        for (size_t j0 = 0; j0 < nb; j0 += 32) {
            size_t j = j0 + lane;
            unsigned byte = j < nb ? bm[j] : 0u, cnt = (unsigned)__popc(byte), incl = warp_scan(cnt);
            size_t e = k + incl - cnt;
            for (unsigned w = byte; w; w &= w - 1) s += value_at<VAL>(t.values, e++) * x[j * 8 + (size_t)(__ffs((int)w) - 1)];
            k += __shfl_sync(0xffffffffu, incl, 31);
        }
        s = warp_sum(s);
        if (lane == 0) y_put(y, r, s, t.scales, b, acc);
    }
}

// The column of a delta row's next element, next being the first column after the
// previous element (0 before the first; *p at the row's stream), *p moved past its gap
// (escape bytes of 255, then one byte; pack.h).
static __device__ size_t delta_next(const uint8_t **p, size_t next) {
    while (**p == 255) {
        next += 255;
        (*p)++;
    }
    return next + *(*p)++;
}

template <int VAL>
static __global__ void spmv_delta_kernel(float *y, const float *x, DevPackTensor t, const float *b, int acc) {
    for (size_t r = km_thread_index(blockIdx.x, blockDim.x, threadIdx.x); r < t.rows;
         r += (size_t)gridDim.x * blockDim.x) {
        const uint8_t *p = t.index + t.ix_ptr[r];
        size_t next = 0; // the first column after the previous element
        float s = 0;
        for (size_t k = t.nnz_ptr[r]; k < t.nnz_ptr[r + 1]; k++) {
            size_t col = delta_next(&p, next);
            s += value_at<VAL>(t.values, k) * x[col];
            next = col + 1;
        }
        y_put(y, r, s, t.scales, b, acc);
    }
}

// nm (pack.h): a warp per row, lane-strided over the row's cols / M * N positions.
template <int VAL>
static __global__ void spmv_nm_kernel(float *y, const float *x, DevPackTensor t, const float *b, int acc) {
    size_t per = t.cols / t.nm_m * t.nm_n, stride = (per * t.nm_bits + 7) / 8;
    unsigned lane = threadIdx.x % 32;
    for (size_t r = warp_id(); r < t.rows; r += warp_count()) {
        const uint8_t *ix = t.index + r * stride;
        float s = 0;
        for (size_t k = lane; k < per; k += 32)
            s += value_at<VAL>(t.values, r * per + k) * x[k / t.nm_n * t.nm_m + pack_nm_pos(ix, k, t.nm_bits)];
        s = warp_sum(s);
        if (lane == 0) y_put(y, r, s, t.scales, b, acc);
    }
}

// nm with 2-byte values (BF16, F16), 8 at a time: a warp per row, lane l taking chunks l,
// l + 32, ... of 8 values (one 16-byte load) and their 8 positions (the chunk's bits bytes,
// little-endian as pack_nm_pos reads them); the group of the chunk's first value by one
// division, the rest by a counter. Needs nm_vec_ok (per % 8 == 0, aligned values).
template <int VAL>
static __global__ void spmv_nm8_kernel(float *y, const float *x, DevPackTensor t, const float *b, int acc) {
    const unsigned N = t.nm_n, M = t.nm_m, bits = t.nm_bits, mask = (1u << bits) - 1;
    const unsigned per = (unsigned)(t.cols / M * N), chunks = per / 8;
    const size_t stride = (size_t)per * bits / 8;
    unsigned lane = threadIdx.x % 32;
    for (size_t r = warp_id(); r < t.rows; r += warp_count()) {
        const uint4 *vr = (const uint4 *)((const uint16_t *)t.values + r * per);
        const uint8_t *ix = t.index + r * stride;
        float s = 0;
        SPMV_UNROLL(2)
        for (unsigned c = lane; c < chunks; c += 32) {
            uint4 v = vr[c];
            const uint8_t *ib = ix + (size_t)c * bits;
            uint64_t pos = 0;
            for (unsigned i = 0; i < bits; i++) pos |= (uint64_t)ib[i] << (8 * i);
            unsigned g = c * 8 / N, j = c * 8 % N;
            uint32_t w[4] = {v.x, v.y, v.z, v.w};
            SPMV_UNROLL(8)
            for (int e = 0; e < 8; e++) {
                uint16_t h = (uint16_t)(w[e / 2] >> (16 * (e % 2)));
                float val = VAL == PACK_BF16 ? km_float_from_bf16(h) : spmv_f16_to_f32(h);
                s += val * x[(size_t)g * M + (unsigned)(pos >> (e * bits) & mask)];
                if (++j == N) j = 0, g++;
            }
        }
        s = warp_sum(s);
        if (lane == 0) y_put(y, r, s, t.scales, b, acc);
    }
}

// BEST_SPMV_NM in the environment: 0 lanes, 1 vec (also when unset), -1 another value
// (read at each launch, so that a benchmark can switch between them).
static int spmv_nm_choice(void) {
    const char *e = getenv("BEST_SPMV_NM");
    if (!e || !*e || !strcmp(e, "vec")) return 1;
    return !strcmp(e, "lanes") ? 0 : -1;
}

// spmv_nm8_kernel applies to t (else the lanes kernel runs).
static int nm_vec_ok(const DevPackTensor *t) {
    size_t per = t->cols / t->nm_m * t->nm_n;
    return (t->val == PACK_BF16 || t->val == PACK_F16) && per % 8 == 0 && per <= 0xffffffffu / 8 &&
           ((uintptr_t)t->values & 15) == 0 && t->nm_bits <= 8;
}

// Sell: a thread per row, walking lane r%8 of its slice's first n slots (so padding is
// never read); the threads of a slice read neighbouring entries.
template <int VAL>
static __global__ void spmv_sell_kernel(float *y, const float *x, DevPackTensor t, const float *b, int acc) {
    const uint16_t *ix = (const uint16_t *)t.index;
    for (size_t r = km_thread_index(blockIdx.x, blockDim.x, threadIdx.x); r < t.rows;
         r += (size_t)gridDim.x * blockDim.x) {
        size_t e = 8 * (size_t)t.ix_ptr[r / 8] + r % 8;
        float s = 0;
        for (size_t k = t.nnz_ptr[r]; k < t.nnz_ptr[r + 1]; k++, e += 8) s += value_at<VAL>(t.values, e) * x[ix[e]];
        y_put(y, r, s, t.scales, b, acc);
    }
}

// The pairs layout (spmv.h): a warp per row, each lane taking 16 bytes (4 words) at a time
// from the row's groups, every load of the row issued without waiting on another (x is
// read through L1, 16 to 44 KB for the model's shapes); the lanes' sums added by a butterfly.
static __device__ float pairs_dot(uint4 g, const float *x) {
    uint32_t w[4] = {g.x, g.y, g.z, g.w};
    float s = 0;
    for (int i = 0; i < 4; i++)
        if (w[i]) s += km_float_from_bf16((uint16_t)(w[i] >> 16)) * x[w[i] & 0xffffu];
    return s;
}

// LPR lanes a row (32 / LPR rows a warp, so that short rows keep the lanes busy): the
// butterfly stays inside each group of LPR lanes. Every lane runs the same number of
// iterations of the row loop (the warp's shuffles need them all).
template <int LPR>
static __global__ void spmv_pairs_kernel(float *y, const float *x, DevPackTensor t, const float *b, int acc) {
    unsigned lane = threadIdx.x % 32, sub = lane % LPR;
    const uint4 *g = (const uint4 *)t.pairs;
    size_t per = 32 / LPR, first = warp_id() * per, step = warp_count() * per;
    for (size_t r0 = first; r0 < t.rows; r0 += step) {
        size_t r = r0 + lane / LPR;
        float s = 0;
        if (r < t.rows)
            for (size_t k = t.pair_off[r] + sub; k < t.pair_off[r + 1]; k += LPR) s += pairs_dot(g[k], x);
        for (int d = LPR / 2; d > 0; d >>= 1) s += __shfl_xor_sync(0xffffffffu, s, d);
        if (sub == 0 && r < t.rows) y_put(y, r, s, NULL, b, acc);
    }
}

// The kernel of encoding ENC for value type VAL, launched.
template <int VAL>
static void launch_val(float *y, const float *x, const DevPackTensor *t, const float *b, int acc, cudaStream_t st) {
    size_t panels = (t->rows + 31) / 32;
    switch (t->enc) {
    case PACK_DENSE: {
        int vec = (VAL == PACK_BF16 && t->cols % 8 == 0) || (VAL == PACK_F32 && t->cols % 4 == 0);
        LAUNCH(spmv_dense_kernel<VAL>, km_blocks(t->rows, SPMV_WARPS, KM_GRID_CAP), SPMV_THREADS, st, y, x, *t, b, acc,
               vec);
        break;
    }
    case PACK_TILES:
        LAUNCH(spmv_tiles_kernel<VAL>, km_blocks(panels, 1, KM_GRID_CAP), TILES_THREADS, st, y, x, *t, b, acc);
        break;
    case PACK_BITMAP:
        LAUNCH(spmv_bitmap_kernel<VAL>, km_blocks(t->rows, SPMV_WARPS, KM_GRID_CAP), SPMV_THREADS, st, y, x, *t, b,
               acc);
        break;
    case PACK_DELTA:
        LAUNCH(spmv_delta_kernel<VAL>, km_blocks(t->rows, SPMV_THREADS, KM_GRID_CAP), SPMV_THREADS, st, y, x, *t, b,
               acc);
        break;
    case PACK_SELL:
        LAUNCH(spmv_sell_kernel<VAL>, km_blocks(t->rows, SPMV_THREADS, KM_GRID_CAP), SPMV_THREADS, st, y, x, *t, b,
               acc);
        break;
    case PACK_NM:
        if (VAL == PACK_BF16 || VAL == PACK_F16) {
            if (spmv_nm_choice() == 1 && nm_vec_ok(t)) {
                LAUNCH(spmv_nm8_kernel<VAL == PACK_F16 ? PACK_F16 : PACK_BF16>, km_blocks(t->rows, SPMV_WARPS,
                       KM_GRID_CAP), SPMV_THREADS, st, y, x, *t, b, acc);
                break;
            }
        }
        LAUNCH(spmv_nm_kernel<VAL>, km_blocks(t->rows, SPMV_WARPS, KM_GRID_CAP), SPMV_THREADS, st, y, x, *t, b, acc);
        break;
    }
    CUDA_CHECK(cudaGetLastError());
}

BEST_KAPI void spmv_forward_cuda(float *y, const float *x, const DevPackTensor *t, const float *b, int acc,
                                 cudaStream_t stream) {
    if (t->rows == 0) return;
    if (t->layout == DEVPACK_PAIRS) {
        unsigned blocks = km_blocks(t->rows, (size_t)SPMV_WARPS * (32 / t->pair_lanes), KM_GRID_CAP);
        switch (t->pair_lanes) {
        case 4: LAUNCH(spmv_pairs_kernel<4>, blocks, SPMV_THREADS, stream, y, x, *t, b, acc); break;
        case 8: LAUNCH(spmv_pairs_kernel<8>, blocks, SPMV_THREADS, stream, y, x, *t, b, acc); break;
        case 16: LAUNCH(spmv_pairs_kernel<16>, blocks, SPMV_THREADS, stream, y, x, *t, b, acc); break;
        default: LAUNCH(spmv_pairs_kernel<32>, blocks, SPMV_THREADS, stream, y, x, *t, b, acc); break;
        }
        CUDA_CHECK(cudaGetLastError());
        return;
    }
    switch (t->val) {
    case PACK_F32: launch_val<PACK_F32>(y, x, t, b, acc, stream); break;
    case PACK_BF16: launch_val<PACK_BF16>(y, x, t, b, acc, stream); break;
    case PACK_F16: launch_val<PACK_F16>(y, x, t, b, acc, stream); break;
    case PACK_I8: launch_val<PACK_I8>(y, x, t, b, acc, stream); break;
    case PACK_I4: launch_val<PACK_I4>(y, x, t, b, acc, stream); break;
    }
}

// --- rows of a packed tensor, decoded on the device ------------------------------------------

// v as element i of out: fp32, or bf16 bits rounded to nearest even (BF).
template <int BF> static __device__ void out_put(void *out, size_t i, float v) {
    if (BF) ((uint16_t *)out)[i] = km_bf16_from_float(v);
    else ((float *)out)[i] = v;
}

// out (n, cols): output row u = row ids[u] of t (ids NULL: row u), dequantized, zeros
// where not stored (pack_decode_rows on the device). A block is one warp and takes a
// row at a time: dense and bitmap rows are split over the lanes (a bitmap 32 bytes at a
// time, each lane's first element found by a prefix count over the lanes); a tiles row
// walks its panel's slots 32 at a time the same way (the lane of a slot whose mask has
// the row's bit writes that element); a sell row's elements are split over the lanes;
// a delta row is one stream, read by lane 0.
template <int VAL, int BF>
static __global__ void spmv_decode_kernel(void *out, const int32_t *ids, size_t n, DevPackTensor t) {
    unsigned lane = threadIdx.x;
    for (size_t u = blockIdx.x; u < n; u += gridDim.x) {
        size_t r = ids ? (size_t)ids[u] : u, base = u * t.cols;
        float sc = t.scales ? t.scales[r] : 1.0f;
        if (t.layout == DEVPACK_PAIRS) { // zeros, then the row's words, a lane each
            for (size_t c = lane; c < t.cols; c += 32) out_put<BF>(out, base + c, 0.0f);
            __syncthreads();
            for (size_t k = 4 * (size_t)t.pair_off[r] + lane; k < 4 * (size_t)t.pair_off[r + 1]; k += 32) {
                uint32_t w = t.pairs[k];
                if (w) out_put<BF>(out, base + (w & 0xffffu), km_float_from_bf16((uint16_t)(w >> 16)));
            }
            __syncthreads();
            continue;
        }
        if (t.enc == PACK_DENSE) {
            for (size_t c = lane; c < t.cols; c += 32) out_put<BF>(out, base + c, value_at<VAL>(t.values, r * t.cols + c) * sc);
            continue;
        }
        for (size_t c = lane; c < t.cols; c += 32) out_put<BF>(out, base + c, 0.0f);
        __syncthreads(); // the zeros are down before any lane writes an element
        if (t.enc == PACK_BITMAP) {
            size_t nb = (t.cols + 7) / 8, k = t.nnz_ptr[r];
            const uint8_t *bm = t.index + r * nb;
            for (size_t j0 = 0; j0 < nb; j0 += 32) {
                size_t j = j0 + lane;
                unsigned byte = j < nb ? bm[j] : 0u, cnt = (unsigned)__popc(byte), incl = warp_scan(cnt);
                size_t e = k + incl - cnt;
                for (unsigned w = byte; w; w &= w - 1)
                    out_put<BF>(out, base + j * 8 + (size_t)(__ffs((int)w) - 1), value_at<VAL>(t.values, e++) * sc);
                k += __shfl_sync(0xffffffffu, incl, 31);
            }
        } else if (t.enc == PACK_TILES) {
            size_t p = r / 32, k = t.nnz_ptr[p], blk = 0, end = t.ix_ptr[p + 1];
            unsigned bit = (unsigned)(r % 32);
            for (size_t s0 = t.ix_ptr[p]; s0 < end; s0 += 32) {
                size_t sl = s0 + lane;
                uint32_t m = sl < end ? t.masks[sl] : 0u;
                unsigned cnt = (unsigned)__popc(m), step = sl < end ? t.steps[sl] : 0u;
                unsigned incl = warp_scan(cnt), bincl = warp_scan(step);
                if ((m >> bit) & 1u) {
                    size_t e = k + incl - cnt + (size_t)__popc(m & ((1u << bit) - 1u));
                    out_put<BF>(out, base + (blk + bincl) * 32 + t.index[e], value_at<VAL>(t.values, e) * sc);
                }
                k += __shfl_sync(0xffffffffu, incl, 31);
                blk += __shfl_sync(0xffffffffu, bincl, 31);
            }
        } else if (t.enc == PACK_SELL) { // the row's j-th element: lane r%8 of its slice's slot j
            size_t e0 = 8 * (size_t)t.ix_ptr[r / 8] + r % 8, n = t.nnz_ptr[r + 1] - t.nnz_ptr[r];
            for (size_t j = lane; j < n; j += 32)
                out_put<BF>(out, base + ((const uint16_t *)t.index)[e0 + 8 * j], value_at<VAL>(t.values, e0 + 8 * j) * sc);
        } else if (t.enc == PACK_NM) { // the row's positions split over the lanes
            size_t per = t.cols / t.nm_m * t.nm_n, stride = (per * t.nm_bits + 7) / 8;
            for (size_t k = lane; k < per; k += 32)
                out_put<BF>(out, base + k / t.nm_n * t.nm_m + pack_nm_pos(t.index + r * stride, k, t.nm_bits),
                            value_at<VAL>(t.values, r * per + k) * sc);
        } else if (lane == 0) { // delta
            const uint8_t *q = t.index + t.ix_ptr[r];
            size_t next = 0;
            for (size_t k = t.nnz_ptr[r]; k < t.nnz_ptr[r + 1]; k++) {
                size_t col = delta_next(&q, next);
                out_put<BF>(out, base + col, value_at<VAL>(t.values, k) * sc);
                next = col + 1;
            }
        }
        __syncthreads(); // the row is done before the lanes zero the next one
    }
}

template <int VAL>
static void decode_val(void *out, int bf16, const int32_t *ids, size_t n, const DevPackTensor *t, cudaStream_t st) {
    unsigned blocks = km_blocks(n, 1, KM_GRID_CAP);
    if (bf16) LAUNCH((spmv_decode_kernel<VAL, 1>), blocks, 32, st, out, ids, n, *t);
    else LAUNCH((spmv_decode_kernel<VAL, 0>), blocks, 32, st, out, ids, n, *t);
    CUDA_CHECK(cudaGetLastError());
}

BEST_KAPI void spmv_decode_cuda(void *out, int bf16, const int32_t *ids, size_t n, const void *dt,
                                cudaStream_t stream) {
    const DevPackTensor *t = (const DevPackTensor *)dt;
    if (!ids) n = t->rows;
    if (n == 0 || t->cols == 0) return;
    switch (t->val) {
    case PACK_F32: decode_val<PACK_F32>(out, bf16, ids, n, t, stream); break;
    case PACK_BF16: decode_val<PACK_BF16>(out, bf16, ids, n, t, stream); break;
    case PACK_F16: decode_val<PACK_F16>(out, bf16, ids, n, t, stream); break;
    case PACK_I8: decode_val<PACK_I8>(out, bf16, ids, n, t, stream); break;
    case PACK_I4: decode_val<PACK_I4>(out, bf16, ids, n, t, stream); break;
    }
}

// --- the streams on the device ----------------------------------------------------------

// Copies n bytes of src to the next 256-byte aligned place of block (at *used), or
// only counts them when block is NULL; returns the device pointer (NULL for no data).
static void *put(char *block, size_t *used, const void *src, size_t n) {
    if (!src || n == 0) return NULL;
    size_t at = (*used + 255) & ~(size_t)255;
    *used = at + n;
    if (!block) return NULL;
    CUDA_CHECK(cudaMemcpy(block + at, src, n, cudaMemcpyHostToDevice));
    return block + at;
}

// d = t's streams (DEVPACK_STREAMS).
static int upload_streams(DevPackTensor *d, const PackTensor *t) {
    memset(d, 0, sizeof *d);
    size_t units = t->enc == PACK_TILES ? (t->rows + 31) / 32 : t->enc == PACK_SELL ? (t->rows + 7) / 8 : t->rows;
    size_t nnz_n = t->nnz_ptr ? ((t->enc == PACK_SELL ? t->rows : units) + 1) * 4 : 0;
    size_t ix_n = t->ix_ptr ? (units + 1) * 4 : 0;
    size_t scales_n = t->scales ? t->rows * 4 : 0;
    char *block = NULL;
    for (int pass = 0; pass < 2; pass++) { // measure, then copy
        size_t used = 0;
        d->nnz_ptr = (const uint32_t *)put(block, &used, t->nnz_ptr, nnz_n);
        d->ix_ptr = (const uint32_t *)put(block, &used, t->ix_ptr, ix_n);
        d->masks = (const uint32_t *)put(block, &used, t->masks, t->slots * 4);
        d->steps = (const uint8_t *)put(block, &used, t->steps, t->slots);
        d->index = (const uint8_t *)put(block, &used, t->index, t->index_bytes);
        d->values = put(block, &used, t->values, t->values_bytes);
        d->scales = (const float *)put(block, &used, t->scales, scales_n);
        if (pass == 0) {
            d->bytes = used;
            if (cudaMalloc((void **)&block, used ? used : 1) != cudaSuccess) {
                (void)cudaGetLastError();
                return ERR("CUDA: cannot allocate %.1f MiB of device memory for %s", (double)used / (1 << 20), t->name);
            }
        }
    }
    d->block = block;
    d->rows = t->rows;
    d->cols = t->cols;
    d->nnz = t->nnz;
    d->slots = t->slots;
    d->enc = t->enc;
    d->val = t->val;
    d->nm_n = t->nm_n, d->nm_m = t->nm_m, d->nm_bits = t->enc == PACK_NM ? pack_nm_bits(t->nm_m) : 0;
    return 0;
}

BEST_KAPI void devpack_free(DevPackTensor *d) {
    if (d->block) CUDA_CHECK(cudaFree(d->block));
    memset(d, 0, sizeof *d);
}

// d = t in the pairs layout; 1 (d untouched) when t cannot take it.
static int upload_pairs(DevPackTensor *d, const PackTensor *t) {
    uint32_t *off = (uint32_t *)xmalloc((t->rows + 1) * sizeof *off);
    uint32_t *w = (uint32_t *)xmalloc((t->nnz + 3 * t->rows) * sizeof *w);
    size_t words = devpack_pairs_build(off, w, t);
    if (words == 0) {
        free(off);
        free(w);
        return 1;
    }
    memset(d, 0, sizeof *d);
    char *block = NULL;
    int rc = 0;
    for (int pass = 0; pass < 2 && rc == 0; pass++) { // measure, then copy
        size_t used = 0;
        d->pair_off = (const uint32_t *)put(block, &used, off, (t->rows + 1) * sizeof *off);
        d->pairs = (const uint32_t *)put(block, &used, w, words * sizeof *w);
        if (pass == 0) {
            d->bytes = used;
            if (cudaMalloc((void **)&block, used) != cudaSuccess) {
                (void)cudaGetLastError();
                rc = ERR("CUDA: cannot allocate %.1f MiB of device memory for %s", (double)used / (1 << 20), t->name);
            }
        }
    }
    free(off);
    free(w);
    if (rc < 0) return -1;
    d->block = block;
    d->layout = DEVPACK_PAIRS;
    // the fewest lanes (of 32, 16, 8, 4) that cover a row's average groups
    size_t avg = (words / 4 + t->rows - 1) / t->rows;
    d->pair_lanes = 4;
    while (d->pair_lanes < 32 && (size_t)d->pair_lanes < avg) d->pair_lanes *= 2;
    d->rows = t->rows, d->cols = t->cols, d->nnz = t->nnz, d->enc = t->enc, d->val = t->val;
    return 0;
}

// The device time of one product with d, in ms: the median of 5 after 2 untimed, on x = 0.
static float time_product(const DevPackTensor *d, float *x, float *y, cudaStream_t st) {
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    float t[5];
    for (int i = 0; i < 7; i++) {
        CUDA_CHECK(cudaEventRecord(e0, st));
        spmv_forward_cuda(y, x, d, NULL, 0, st);
        CUDA_CHECK(cudaEventRecord(e1, st));
        CUDA_CHECK(cudaEventSynchronize(e1));
        if (i >= 2) CUDA_CHECK(cudaEventElapsedTime(&t[i - 2], e0, e1));
    }
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    for (int i = 1; i < 5; i++) // insertion sort of 5
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            float s = t[j];
            t[j] = t[j - 1], t[j - 1] = s;
        }
    return t[2];
}

BEST_KAPI int devpack_upload_layout(DevPackTensor *d, const PackTensor *t, DevPackLayout layout) {
    if (layout == DEVPACK_PAIRS) {
        int rc = upload_pairs(d, t);
        if (rc <= 0) return rc;
    }
    return upload_streams(d, t);
}

BEST_KAPI int devpack_upload(DevPackTensor *d, const PackTensor *t) {
    int want = devpack_layout_env();
    if (want < 0) return ERR("BEST_SPMV_LAYOUT=%s in the environment: expected streams, pairs or auto",
                             getenv("BEST_SPMV_LAYOUT"));
    if (spmv_nm_choice() < 0) return ERR("BEST_SPMV_NM=%s in the environment: expected vec or lanes", getenv("BEST_SPMV_NM"));
    if (want < 2) return devpack_upload_layout(d, t, want ? DEVPACK_PAIRS : DEVPACK_STREAMS);
    // auto: both, timed on this device, the faster kept (the streams on a tie)
    DevPackTensor p;
    int rc = upload_pairs(&p, t);
    if (rc < 0) return -1;
    if (upload_streams(d, t) < 0) {
        if (rc == 0) devpack_free(&p);
        return -1;
    }
    if (rc == 1) return 0; // t cannot take pairs
    float *x, *y;
    if (cudaMalloc((void **)&x, (t->cols + t->rows) * sizeof(float)) != cudaSuccess) {
        (void)cudaGetLastError();
        devpack_free(&p);
        return 0; // no room to time: the streams
    }
    y = x + t->cols;
    cudaStream_t st = 0;
    CUDA_CHECK(cudaMemset(x, 0, t->cols * sizeof(float)));
    float ms_streams = time_product(d, x, y, st), ms_pairs = INFINITY;
    int best_lanes = p.pair_lanes;
    for (int lanes = 4; lanes <= 32; lanes *= 2) { // each width of the pairs kernel
        p.pair_lanes = lanes;
        float ms = time_product(&p, x, y, st);
        if (ms < ms_pairs) ms_pairs = ms, best_lanes = lanes;
    }
    p.pair_lanes = best_lanes;
    CUDA_CHECK(cudaFree(x));
    if (ms_pairs < ms_streams) {
        devpack_free(d);
        *d = p;
    } else {
        devpack_free(&p);
    }
    return 0;
}

// --- nn/weight.h's device operations over DevPackTensors --------------------------------------

BEST_KAPI int devpack_weight_upload(void **dt, size_t *bytes, const void *t) {
    DevPackTensor *d = (DevPackTensor *)xmalloc(sizeof *d);
    if (devpack_upload(d, (const PackTensor *)t) < 0) {
        free(d);
        return -1;
    }
    *dt = d;
    *bytes = d->bytes;
    return 0;
}

BEST_KAPI void devpack_weight_free(void *dt) {
    devpack_free((DevPackTensor *)dt);
    free(dt);
}

BEST_KAPI void devpack_weight_matvec(float *y, const float *x, const void *dt, const float *b, int acc,
                                     cudaStream_t stream) {
    spmv_forward_cuda(y, x, (const DevPackTensor *)dt, b, acc, stream);
}

// decode_fused.h's source of a pack's tensors in the pairs layout: spmv_pairs_kernel's row
// dot at the tensor's lanes, x from the staged operand.
struct PairsSrc {
    const uint4 *g[DECODE_SEG_MAX];
    const uint32_t *off[DECODE_SEG_MAX];
    __device__ float dot(int t, size_t r, unsigned sub, unsigned L, const uint16_t *xs) const {
        float s = 0;
        for (size_t k = off[t][r] + sub; k < off[t][r + 1]; k += L) {
            uint4 u = g[t][k];
            uint32_t w[4] = {u.x, u.y, u.z, u.w};
            for (int i = 0; i < 4; i++)
                if (w[i]) s += km_float_from_bf16((uint16_t)(w[i] >> 16)) * km_float_from_bf16(xs[w[i] & 0xffffu]);
        }
        return s;
    }
};

BEST_KAPI int devpack_weight_fused(const DecodeJob *j, const void *const *dt, cudaStream_t stream) {
    if (j->IC > DECODE_STAGE_MAX) return -1;
    DecodeJob job = *j;
    PairsSrc src = {};
    for (int i = 0; i < j->n; i++) {
        const DevPackTensor *t = (const DevPackTensor *)dt[i];
        if (t->layout != DEVPACK_PAIRS || t->cols != j->IC || t->rows != j->rows[i]) return -1;
        src.g[i] = (const uint4 *)t->pairs;
        src.off[i] = t->pair_off;
        job.lanes[i] = (unsigned)t->pair_lanes;
    }
    if (j->swiglu && job.lanes[1] != job.lanes[0]) return -1; // a row of each at one width
    unsigned threads = decode_fused_threads(j->IC);
    LAUNCH(decode_fused_kernel<PairsSrc>, decode_fused_blocks(&job, threads), threads, stream, job, src);
    CUDA_CHECK(cudaGetLastError());
    return 0;
}
