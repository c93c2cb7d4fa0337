// spmv_kernels.h: what the files of the packed products share, inside lib/pack (users
// include spmv.h): the kernels' signatures, the row kernel a set picks with its
// companions, the value reads of the scalar loops, and each x86 set's lookups.
//
// spmv.c holds the portable kernels (the reference), the choice of a kernel set and the
// product; spmv_avx512.c and spmv_avx2.c hold one instruction set's kernels each. Their
// functions are compiled for their instructions by target attributes, not by per-file
// flags, so that every build (plain, sanitizers, clang's fuzz build) compiles them with
// the same command line; the CPU check at run time (spmv_isa) decides which may run. Off
// x86-64 the two files give no kernels and report the CPU without their instructions.
#ifndef BEST_SPMV_KERNELS_H
#define BEST_SPMV_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "io/safetensors.h" // defines: st_f16_to_f32
#include "pack/pack.h"      // defines: PackTensor

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SPMV_X86 1
#endif

// Row r of t times x (dense, bitmap, delta): the row's dot product, unscaled.
typedef float (*RowFn)(const PackTensor *t, size_t r, const float *x);
// d (TILE or SELL) = the rows of panel or slice p of t times x (tiles, sell).
typedef void (*PanelFn)(float *d, const PackTensor *t, size_t p, const float *x);
// d (4) = rows r .. r+4 of t times x, each row the bits its RowFn gives alone.
typedef void (*Rows4Fn)(float *d, const PackTensor *t, size_t r, const float *x);

// A row kernel as a set gives it for one (encoding, value type).
typedef struct {
    RowFn row;     // NULL: the set has none (the portable one runs)
    Rows4Fn rows4; // four rows at once, or NULL
    int pairs;     // reads x in pairs (spmv.c's x_pairs), not as it is
} RowKernel;

static inline float f_of(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }
static inline float bf16_f(uint16_t h) { return f_of((uint32_t)h << 16); }
// I4 element i: low nibble of byte i/2 when i is even, high nibble when odd, 4-bit two's
// complement (pack.h: signed, [-7, 7]).
static inline float i4_f(const uint8_t *v, size_t i) {
    int q = (v[i >> 1] >> ((i & 1) * 4)) & 15;
    return (float)((q ^ 8) - 8);
}

// Element i of the values v as fp32, by value type.
#define VAL_F32(v, i) (((const float *)(v))[i])
#define VAL_BF16(v, i) bf16_f(((const uint16_t *)(v))[i])
#define VAL_F16(v, i) st_f16_to_f32(((const uint16_t *)(v))[i])
#define VAL_I8(v, i) ((float)((const int8_t *)(v))[i])
#define VAL_I4(v, i) i4_f((const uint8_t *)(v), (i))

// Nm (pack.h): the columns of a row's elements from element e on, in order; the positions
// come from a 64-bit window of the row's bit stream, refilled a byte at a time (never past
// the row's last byte). For the x86 sets' gathers and their tails.
typedef struct {
    const uint8_t *ix, *end; // the row's next byte and its end
    uint64_t win;            // have bits not yet used, LSB first
    unsigned have, bits, n, m, j; // j: the next element's place in its group
    int32_t base;            // the column of its group's first column
} NmWalk;

static inline void nm_walk_init(NmWalk *w, const PackTensor *t, size_t r, size_t e) {
    size_t stride = pack_nm_row_bytes(t->cols, t->nm_n, t->nm_m);
    w->bits = pack_nm_bits(t->nm_m);
    w->n = t->nm_n;
    w->m = t->nm_m;
    w->ix = t->index + r * stride + e * w->bits / 8;
    w->end = t->index + (r + 1) * stride;
    w->win = 0;
    w->have = 0;
    unsigned skip = (unsigned)(e * w->bits % 8);
    if (skip) w->win = *w->ix++ >> skip, w->have = 8 - skip;
    w->j = (unsigned)(e % w->n);
    w->base = (int32_t)(e / w->n * w->m);
}

// c (k) = the columns of the walk's next k elements.
static inline void nm_walk_cols(int32_t *c, NmWalk *w, size_t k) {
    unsigned mask = (1u << w->bits) - 1;
    for (size_t i = 0; i < k; i++) {
        while (w->have < w->bits && w->ix < w->end) w->win |= (uint64_t)*w->ix++ << w->have, w->have += 8;
        c[i] = w->base + (int32_t)(w->win & mask);
        w->win >>= w->bits;
        w->have -= w->bits;
        if (++w->j == w->n) w->j = 0, w->base += (int32_t)w->m;
    }
}

// The little-endian integer of the nb (1..4) bytes at p: constant-size loads, not a
// memcpy call per step.
static inline uint32_t nm_load_bytes(const uint8_t *p, unsigned nb) {
    uint32_t w = 0;
    switch (nb) {
    case 1: w = p[0]; break;
    case 2: { uint16_t h; memcpy(&h, p, 2); w = h; break; }
    case 3: { uint16_t h; memcpy(&h, p, 2); w = h | (uint32_t)p[2] << 16; break; }
    default: memcpy(&w, p, 4); break;
    }
    return w;
}

// The dense BF16 four-row kernels' software prefetch, bytes ahead in each row
// (spmv_avx512.c's dense512p4_bf16 says what was measured).
#ifndef DENSE_PF
#define DENSE_PF 8192 // bytes: four rows of 1024 bf16 ahead
#endif

// AVX-512 (F, BW, VL, DQ; VBMI2 where present): spmv_avx512.c.
int spmv_avx512_probe(void); // 1 when the CPU has it (and notes VBMI2); call before the picks
void spmv_avx512_pick_row(RowKernel *k, const PackTensor *t); // dense, bitmap and nm
PanelFn spmv_avx512_pick_tiles(const PackTensor *t);          // NULL: none for t's values

// AVX2 (+ FMA, F16C, POPCNT, BMI2): spmv_avx2.c. Its sell kernels serve AVX-512 CPUs too.
int spmv_avx2_probe(void); // 1 when the CPU has it; builds the lane tables either way
void spmv_avx2_pick_row(RowKernel *k, const PackTensor *t); // dense, bitmap and nm
PanelFn spmv_avx2_pick_tiles(const PackTensor *t);
PanelFn spmv_avx2_pick_sell(const PackTensor *t);

#endif
