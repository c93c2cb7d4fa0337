// spmv.h: products with one packed tensor read straight from its encoding (pack.h),
// for batch-1 decoding on the CPU: y = W x (+ b) for every encoding (dense, bitmap,
// delta, tiles, sell, nm) and every value type (F32, BF16, F16, I8, I4; sell: the first
// three), and embedding rows.
//
// Nothing is converted ahead of time: a packed model's weights are read once per
// token, in place in the map, so decoding moves as few bytes as the format allows.
// BF16 values become fp32 by a 16-bit shift as they are read, a bitmap is walked 64
// bits at a time, a delta stream byte by byte; I8/I4 rows are summed in the integer
// values and multiplied by the row's scale once. On CPUs with AVX-512 (F, BW, VL, DQ)
// the dense and bitmap kernels of F32, BF16 and I8 take 16 or 32 columns a step (a
// bitmap by expanding the values to their columns, BF16 with VBMI2, or by compressing
// x to the stored ones), and the tiles kernels 32 rows a slot (x of the slot's block
// in two registers, each lane's column picked by vpermt2ps); F16 and I4 use portable
// C. On CPUs with AVX2 (no AVX-512) every value type has 8-lane dense, bitmap and tiles
// kernels (tables of lane permutations stand in for compress and expand), and sell
// (8-row slices) an 8-lane kernel that gathers x (vgatherdps), which AVX-512 CPUs run
// too, and one that loads x lane by lane (PackTensor.variant 1, for CPUs with slow
// gathers; pack_tune.h picks it by timing). Delta streams use portable C on every CPU (lib/pack/spmv.c says what was measured).
// Nm (N:M) rows have portable, AVX2 and AVX-512 kernels (I4: AVX2 and portable); for 2:4,
// 4:8 and other patterns whose steps span few columns the x86 ones pick x from registers
// by lane permutes, other patterns gather it. On a CUDA device nm has its own kernel (a warp
// a row, every value type; NEVER RUN ON A GPU, 2026-11-29), or BF16 goes in the pairs
// layout (below) where that is asked for.
// The portable kernels, the choice of a set and the product are spmv.c's; the AVX-512
// and AVX2 kernels are spmv_avx512.c's and spmv_avx2.c's, with their measurements.
//
// Threads: OpenMP over chunks of rows (tiles: of 32-row panels; sell: of 8-row slices) cut by nonzero count (handed out dynamically,
// so that a thread on a busy core does not hold the others), every row summed by one
// thread in a fixed order: y is the same bits for any thread count, on one machine
// and kernel set. It is not the same bits as matmul_forward (BLAS sums in another
// order): model.c uses these kernels only for one-token decoding and keeps BLAS, on
// decoded weights, for anything that must match the dense model bit for bit.
//
// Not here: reading and validating the file (pack.h, whose checks at open are why
// these kernels trust a PackTensor's streams), where the products are used (model.c).
#ifndef BEST_SPMV_H
#define BEST_SPMV_H

#include <stddef.h>
#include <stdint.h>

#include "pack/pack.h" // defines: PackTensor

#ifdef __cplusplus // spmv.cu and the C++ tests include this
extern "C" {
#endif

// y (rows) = W x + b, or y += W x + b with acc; W = t (rows, cols), x (cols),
// b (rows) or NULL. y must not overlap x.
void spmv_forward(float *y, const float *x, const PackTensor *t, const float *b, int acc);
// x (N, cols) = rows tokens (N) of t (an embedding (V, C)) in fp32, dequantized,
// zeros where not stored; ids must already be in [0, rows). F32/BF16/F16 values
// convert exactly, so a dense embedding gives the bits the fp32 model holds.
void spmv_embed(float *x, const int32_t *tokens, const PackTensor *t, size_t N);

// (The bytes spmv_forward reads from t: pack.h's pack_tensor_bytes.)
// The kernel sets, by instruction set: portable C (the reference, every CPU), AVX2 (+ FMA,
// F16C, POPCNT, BMI2: x86-64 since Haswell and Zen) and AVX-512 (F, BW, VL, DQ; VBMI2 when
// present). The best the CPU has is chosen at the first product, unless the variable
// BEST_ISA=avx512|avx2|portable names one (a name the CPU lacks ends the program with one
// error line), so that every set can be tested and measured on one machine.
typedef enum { SPMV_PORTABLE, SPMV_AVX2, SPMV_AVX512 } SpmvIsa;
SpmvIsa spmv_isa(void);                    // the set in use (decides it on the first call)
int spmv_set_isa(SpmvIsa isa);             // 0, or -1 after ERR when the CPU lacks it
int spmv_isa_supported(SpmvIsa isa);
const char *spmv_isa_name(SpmvIsa isa);    // "avx2"
int spmv_isa_parse(SpmvIsa *out, const char *name); // -1 (no ERR) for an unknown name
// "delta/BF16 avx512": the kernel spmv_forward picks for t, for logs.
const char *spmv_kernel_name(const PackTensor *t);

// --- on a CUDA device (spmv.cu) -------------------------------------------------------------
// A packed tensor on the device (one allocation, `block`; device pointers), in one of two
// layouts:
//   DEVPACK_STREAMS  its streams copied as they are in the pack (NULL where t has none)
//   DEVPACK_PAIRS    made at upload from a sparse BF16 tensor of at most 65536 columns:
//                    each row's stored elements as 32-bit words {column in the low 16
//                    bits, bf16 value in the high 16}, in column order, padded with zero
//                    words to a multiple of 4 (one 16-byte load a lane); pair_off (rows + 1)
//                    counts 16-byte groups. A zero word (column 0, +0.0) adds nothing, as a
//                    stored +0.0 would (unless x[0] is not finite), and is skipped.
// Which one: BEST_SPMV_LAYOUT=streams (the default), pairs, or auto (both built, each
// timed on the device at upload, the faster kept); a tensor pairs cannot hold stays in
// streams. The pairs kernel gives a row 32, 16, 8 or 4 lanes of a warp: pairs takes the
// fewest lanes that cover a row's average 16-byte groups (at least 4), auto times all four. The pairs layout and auto have NEVER RUN ON A GPU (2026-11-29).
typedef enum { DEVPACK_STREAMS, DEVPACK_PAIRS } DevPackLayout;
typedef struct {
    size_t rows, cols, nnz, slots;
    PackEnc enc;
    PackVal val;
    const uint32_t *nnz_ptr, *ix_ptr, *masks;
    const uint8_t *index, *steps;
    const void *values;
    const float *scales;
    unsigned nm_n, nm_m, nm_bits; // nm: N of every M columns, pack_nm_bits(M) a position
    DevPackLayout layout;
    const uint32_t *pairs;     // DEVPACK_PAIRS: (pair_off[rows] * 4) words
    const uint32_t *pair_off;  // (rows + 1)
    int pair_lanes;            // lanes a row: 32, 16, 8 or 4 (rows a warp: 32 / pair_lanes)
    void *block;
    size_t bytes;              // of block: what the tensor takes on the device
} DevPackTensor;

// The words of t in the pairs layout (above): pair_off (rows + 1) and pairs (room for
// t->nnz + 3 t->rows words: every stored element and each row's padding), in one walk of
// the rows; returns the number of words written (pair_off[rows] * 4), 0 when t cannot take
// the layout (not sparse BF16, or more than 65536 columns). Host memory (spmv.cu).
size_t devpack_pairs_build(uint32_t *pair_off, uint32_t *pairs, const PackTensor *t);
// BEST_SPMV_LAYOUT's value: 0 streams (also unset or empty), 1 pairs, 2 auto, -1 another.
int devpack_layout_env(void);

#ifdef BEST_CUDA
// d = t on the current device, in the layout BEST_SPMV_LAYOUT asks (above). 0, or ERR
// (out of device memory, an unknown BEST_SPMV_LAYOUT).
int devpack_upload(DevPackTensor *d, const PackTensor *t);
// d = t in the given layout (DEVPACK_PAIRS: streams where t cannot take it).
int devpack_upload_layout(DevPackTensor *d, const PackTensor *t, DevPackLayout layout);
void devpack_free(DevPackTensor *d);
struct CUstream_st;
// spmv_forward on the device: y (rows), x (cols), b (rows) or NULL are device arrays; y
// must not overlap x. Asynchronous on stream.
void spmv_forward_cuda(float *y, const float *x, const DevPackTensor *t, const float *b, int acc,
                       struct CUstream_st *stream);
// out (n, cols) = rows ids[i] of dt (a DevPackTensor; ids: n device ints in [0, rows), or
// NULL: every row, n ignored) as pack_decode_rows gives them, in fp32 (bf16 0) or as bf16
// bits rounded to nearest even (bf16 1): embedding rows, and the operand of a bf16
// matrix product (evaluating a pack on the device). Asynchronous on stream.
void spmv_decode_cuda(void *out, int bf16, const int32_t *ids, size_t n, const void *dt,
                      struct CUstream_st *stream);
// nn/weight.h's dev_upload, dev_free, dev_matvec for a PackTensor: a DevPackTensor
// (devpack_upload) in its own host allocation.
int devpack_weight_upload(void **dt, size_t *bytes, const void *t);
void devpack_weight_free(void *dt);
void devpack_weight_matvec(float *y, const float *x, const void *dt, const float *b, int acc,
                           struct CUstream_st *stream);
// and dev_fused (nn/decode_fused.h): the job over dt[0..n) (DevPackTensors), 0, or -1 (no
// launch) unless every one is in the pairs layout (swiglu: gate and up at the same lanes)
// and the input fits DECODE_STAGE_MAX. NEVER RUN ON A GPU (2026-11-29).
struct DecodeJob;
int devpack_weight_fused(const struct DecodeJob *j, const void *const *dt, struct CUstream_st *stream);
#endif

#ifdef __cplusplus
}
#endif

#endif
