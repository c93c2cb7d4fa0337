// spmv.cu: spmv_forward (spmv.h) on a CUDA device: y = W x (+ b) for one packed tensor
// whose streams were copied to the device as they are in the pack (devpack_upload), for
// batch-1 decoding on a GPU. Every encoding and value type of pack.h:
//
//   dense    a warp per row: the lanes take every 32nd column, then a butterfly sum
//   tiles    a warp per panel of 32 rows, lane i = row 32p + i: slot by slot, a lane
//            whose bit is set in the slot's mask finds its element at the popcount of
//            the mask's bits below it, reads its column within the block from the index
//            byte and adds value * x; a row's elements in the CPU's order (left to
//            right), so the sum is the CPU's portable kernel's, operation for operation
//   bitmap   a thread per row, its bitmap walked byte by byte (the CPU's order)
//   delta    a thread per row, its gap stream decoded (the CPU's order, one running sum)
//
// Values are dequantized as they are read: BF16 by a shift, F16 by its bit fields, I8/I4
// as integers, the row's sum times its scale once (as the CPU). The epilogue is the
// CPU's: scale, then + y (acc), then + b. x is read from global memory (its lines stay
// in L1/L2 across the warps); no float atomics, each row summed by one thread or one
// warp in a fixed order: the same bits on every run.
//
// What this is not yet: fast. The bitmap and delta kernels give a row to a thread (a
// sequential stream); none of them stages x in shared memory or uses 16-byte loads; the
// decode step is not a CUDA graph. They are the reference that a faster kernel (issue
// 14) will be checked against on a GPU, and they run in the CPU emulator (tests/
// test_spmv_cuda.cpp) against spmv.c. None of this has run on a GPU yet (docs/cuda.md).
#include "pack/spmv.h" // defines: DevPackTensor, the _cuda prototypes (BEST_CUDA)

#include <string.h>

#include "base/error.h"     // defines: ERR, CHECK
#include "nn/cuda.h"        // defines: CUDA_CHECK, LAUNCH, BEST_KAPI
#include "nn/kernel_math.h" // defines: km_float_from_bf16, km_blocks, km_thread_index

#define SPMV_THREADS 256 // 8 warps a block
#define SPMV_WARPS (SPMV_THREADS / 32)

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

template <int VAL>
static __global__ void spmv_dense_kernel(float *y, const float *x, DevPackTensor t, const float *b, int acc) {
    unsigned lane = threadIdx.x % 32;
    for (size_t r = warp_id(); r < t.rows; r += warp_count()) { // the whole warp takes the same rows
        float s = 0;
        for (size_t c = lane; c < t.cols; c += 32) s += value_at<VAL>(t.values, r * t.cols + c) * x[c];
        for (int d = 16; d > 0; d >>= 1) s += __shfl_xor_sync(0xffffffffu, s, d);
        if (lane == 0) y_put(y, r, s, t.scales, b, acc);
    }
}

template <int VAL>
static __global__ void spmv_tiles_kernel(float *y, const float *x, DevPackTensor t, const float *b, int acc) {
    unsigned lane = threadIdx.x % 32;
    size_t panels = (t.rows + 31) / 32;
    for (size_t p = warp_id(); p < panels; p += warp_count()) {
        size_t k = t.nnz_ptr[p], blk = 0; // the slot's first element, its block
        float s = 0;
        for (size_t sl = t.ix_ptr[p]; sl < t.ix_ptr[p + 1]; sl++) {
            uint32_t m = t.masks[sl];
            blk += t.steps[sl];
            if ((m >> lane) & 1u) {
                size_t e = k + (size_t)__popc(m & ((1u << lane) - 1u));
                s += value_at<VAL>(t.values, e) * x[blk * 32 + t.index[e]];
            }
            k += (size_t)__popc(m);
        }
        size_t r = p * 32 + lane;
        if (r < t.rows) y_put(y, r, s, t.scales, b, acc);
    }
}

template <int VAL>
static __global__ void spmv_bitmap_kernel(float *y, const float *x, DevPackTensor t, const float *b, int acc) {
    size_t nb = (t.cols + 7) / 8;
    for (size_t r = km_thread_index(blockIdx.x, blockDim.x, threadIdx.x); r < t.rows;
         r += (size_t)gridDim.x * blockDim.x) {
        const uint8_t *bm = t.index + r * nb;
        size_t k = t.nnz_ptr[r];
        float s = 0;
        for (size_t j = 0; j < nb; j++)
            for (unsigned w = bm[j]; w; w &= w - 1) s += value_at<VAL>(t.values, k++) * x[j * 8 + (size_t)(__ffs(w) - 1)];
        y_put(y, r, s, t.scales, b, acc);
    }
}

template <int VAL>
static __global__ void spmv_delta_kernel(float *y, const float *x, DevPackTensor t, const float *b, int acc) {
    for (size_t r = km_thread_index(blockIdx.x, blockDim.x, threadIdx.x); r < t.rows;
         r += (size_t)gridDim.x * blockDim.x) {
        const uint8_t *p = t.index + t.ix_ptr[r];
        size_t col = 0;
        float s = 0;
        for (size_t k = t.nnz_ptr[r]; k < t.nnz_ptr[r + 1]; k++) {
            while (*p == 255) {
                col += 255;
                p++;
            }
            col += *p++;
            s += value_at<VAL>(t.values, k) * x[col++];
        }
        y_put(y, r, s, t.scales, b, acc);
    }
}

// The kernel of encoding ENC for value type VAL, launched.
template <int VAL>
static void launch_val(float *y, const float *x, const DevPackTensor *t, const float *b, int acc, cudaStream_t st) {
    size_t panels = (t->rows + 31) / 32;
    switch (t->enc) {
    case PACK_DENSE:
        LAUNCH(spmv_dense_kernel<VAL>, km_blocks(t->rows, SPMV_WARPS, KM_GRID_CAP), SPMV_THREADS, st, y, x, *t, b, acc);
        break;
    case PACK_TILES:
        LAUNCH(spmv_tiles_kernel<VAL>, km_blocks(panels, SPMV_WARPS, KM_GRID_CAP), SPMV_THREADS, st, y, x, *t, b, acc);
        break;
    case PACK_BITMAP:
        LAUNCH(spmv_bitmap_kernel<VAL>, km_blocks(t->rows, SPMV_THREADS, KM_GRID_CAP), SPMV_THREADS, st, y, x, *t, b,
               acc);
        break;
    case PACK_DELTA:
        LAUNCH(spmv_delta_kernel<VAL>, km_blocks(t->rows, SPMV_THREADS, KM_GRID_CAP), SPMV_THREADS, st, y, x, *t, b,
               acc);
        break;
    }
    CUDA_CHECK(cudaGetLastError());
}

BEST_KAPI void spmv_forward_cuda(float *y, const float *x, const DevPackTensor *t, const float *b, int acc,
                                 cudaStream_t stream) {
    if (t->rows == 0) return;
    switch (t->val) {
    case PACK_F32: launch_val<PACK_F32>(y, x, t, b, acc, stream); break;
    case PACK_BF16: launch_val<PACK_BF16>(y, x, t, b, acc, stream); break;
    case PACK_F16: launch_val<PACK_F16>(y, x, t, b, acc, stream); break;
    case PACK_I8: launch_val<PACK_I8>(y, x, t, b, acc, stream); break;
    case PACK_I4: launch_val<PACK_I4>(y, x, t, b, acc, stream); break;
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

BEST_KAPI int devpack_upload(DevPackTensor *d, const PackTensor *t) {
    memset(d, 0, sizeof *d);
    size_t units = t->enc == PACK_TILES ? (t->rows + 31) / 32 : t->rows;
    size_t nnz_n = t->nnz_ptr ? (units + 1) * 4 : 0, ix_n = t->ix_ptr ? (units + 1) * 4 : 0;
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
    return 0;
}

BEST_KAPI void devpack_free(DevPackTensor *d) {
    if (d->block) CUDA_CHECK(cudaFree(d->block));
    memset(d, 0, sizeof *d);
}
