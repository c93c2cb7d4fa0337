// pack_format.h: the vocabulary of the packed checkpoint format (pack.h has its
// summary, docs/formats.md every byte), shared by the reader (pack.c), the writer
// (pack_write.c) and the kernels (spmv*.c): the version, the encodings, value types and
// quantizations, the tile and slice sizes, name limits, the member suffixes of a tensor, the
// allow-list of plain files, and the value types' sizes.
#ifndef BEST_PACK_FORMAT_H
#define BEST_PACK_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "io/safetensors.h" // defines: StDtype

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "packs are little-endian streams read and written in place"
#endif

// Version 3 added sell, 4 nm; a pack is written in the lowest version that holds its
// encodings (2 without sell and nm, 3 with sell but no nm), so that older readers read
// every pack they can.
#define PACK_VERSION 4

typedef enum { PACK_DENSE, PACK_BITMAP, PACK_DELTA, PACK_TILES, PACK_SELL, PACK_NM } PackEnc;
#define PACK_N_ENC 6
typedef enum { PACK_F32, PACK_BF16, PACK_F16, PACK_I8, PACK_I4 } PackVal;
typedef enum { QUANT_NONE, QUANT_BF16, QUANT_INT8, QUANT_INT4 } PackQuant;
#define TILE 32 // tiles: rows per panel and columns per block
#define SELL 8  // sell: rows per slice (the lanes of one AVX2 register)
#define SELL_COLS_MAX 65536 // sell: columns are u16
#define NM_M_MAX 32 // nm: groups of M columns, 0 < N < M <= 32 (sparse/nm.h's patterns)

#define MEMBER_NAME_MAX 99        // ustar name field without a prefix, NUL included
#define TENSOR_NAME_MAX 92        // + ".values" still fits MEMBER_NAME_MAX
#define MANIFEST_TAIL 28          // ,"xxh64":"<16 hex digits>"} ending the manifest

// Files besides tensors that a pack may hold, in the order they are written:
// config.json, generation_config.json, then the tokenizer's (tokenizer.h's
// TOKENIZER_FILES); nothing else is ever unpacked.
#define PACK_N_FILES 9 // 2 + TOKENIZER_N_FILES (pack.c checks it; this header is C++'s too)
const char *pack_file_name(int i);

// The members of one tensor, in the order they are written.
enum { S_DENSE, S_NNZ, S_INDEX, S_IXPTR, S_SLOTS, S_VALUES, S_SCALES, S_N };
extern const char *const PACK_SUFFIX[S_N]; // "", ".nnz", ".index", ...

static inline int pack_is_file_name(const char *s) {
    for (int i = 0; i < PACK_N_FILES; i++)
        if (strcmp(pack_file_name(i), s) == 0) return 1;
    return 0;
}

// Bytes of n stored values of type v.
static inline size_t pack_val_bytes(PackVal v, size_t n) {
    switch (v) {
    case PACK_F32: return 4 * n;
    case PACK_BF16: case PACK_F16: return 2 * n;
    case PACK_I8: return n;
    case PACK_I4: return (n + 1) / 2;
    }
    return 0;
}

// nm: the bits of one position inside a group of m columns, ceil(log2 m) (1..5).
static inline unsigned pack_nm_bits(unsigned m) { return m < 2 ? 1 : 32 - (unsigned)__builtin_clz(m - 1); }
// nm: bytes of one row's positions: cols/m groups of n positions, each pack_nm_bits(m)
// bits, packed LSB first, the row padded with zero bits to a whole byte.
static inline size_t pack_nm_row_bytes(size_t cols, unsigned n, unsigned m) {
    return (cols / m * n * pack_nm_bits(m) + 7) / 8;
}
// nm: position e of a row's positions row (pack_nm_row_bytes of them): bits
// [e*bits, (e+1)*bits) of the row, LSB first. Reads no byte past the position's last.
// (Host and device: spmv.cu's nm kernels read positions with it.)
#ifdef __CUDACC__
__host__ __device__
#endif
static inline unsigned pack_nm_pos(const uint8_t *row, size_t e, unsigned bits) {
    size_t at = e * bits, byte = at / 8;
    unsigned sh = (unsigned)(at % 8), v = row[byte];
    if (sh + bits > 8) v |= (unsigned)row[byte + 1] << 8;
    return (v >> sh) & ((1u << bits) - 1);
}

static inline int pack_val_is_quant(PackVal v) { return v == PACK_I8 || v == PACK_I4; }

static inline int pack_val_of_dtype(PackVal *v, StDtype d) {
    if (d == ST_F32) *v = PACK_F32;
    else if (d == ST_BF16) *v = PACK_BF16;
    else if (d == ST_F16) *v = PACK_F16;
    else return -1;
    return 0;
}

// The value type of a prunable tensor under quant (non-prunable ones keep dval).
static inline PackVal pack_val_of_quant(PackQuant q, PackVal dval) {
    return q == QUANT_BF16 ? PACK_BF16 : q == QUANT_INT8 ? PACK_I8 : q == QUANT_INT4 ? PACK_I4 : dval;
}

// Plain names only: [A-Za-z0-9._-], not starting with '.', no "..".
static inline int pack_name_ok(const char *s, size_t max) {
    size_t n = strlen(s);
    if (n == 0 || n > max || s[0] == '.' || strstr(s, "..")) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

#endif
