// pack.h: packed sparse checkpoints: one uncompressed tar whose members hold each
// tensor's nonzeros in a compact index encoding plus their values, readable in place
// from a memory map (every member's data starts at a multiple of 512 bytes).
//
// Members, in this order (docs/formats.md, "Packed checkpoints", byte by byte):
//   manifest.json        format "best-pack", version 2 to 4, quant, and per member its
//                        size and xxh64, per tensor its name, shape, original dtype,
//                        encoding, value type and nonzero count; it ends with its own
//                        xxh64 (,"xxh64":"<hex>"} over every byte before that tail)
//   config.json          and the tokenizer files of the source folder, verbatim
//   NAME                 dense tensor: values, row-major, in the value type
//   NAME.nnz             sparse tensor: (rows+1) u32, prefix count of stored elements
//                        (tiles: (panels+1), per panel of 32 rows)
//   NAME.index           bitmap: rows * ceil(cols/8) bytes, column c of a row in bit
//                        c%8 of byte c/8 (LSB first), 1 = stored.
//                        delta: per row, per stored element, its gap g (zeros skipped
//                        since the previous stored element of the row, or since the
//                        row's start) as g/255 escape bytes 255 then one byte g%255
//                        tiles: per stored element its column within its block of 32
//                        columns (0..31), in slot order (below)
//                        sell (version 3): per slot (below) 8 u16 columns
//   NAME.slots           tiles only: S u32 masks, then S u8 block steps. The rows are
//                        cut in panels of 32 and the columns in blocks of 32; a panel
//                        is a list of slots, each a block (the previous slot's block,
//                        or 0 at the panel's start, plus its step) and a mask (bit i:
//                        row 32p+i has one element in this slot, the next in the
//                        index and values). A row's elements come in column order.
//   NAME.ixptr           delta: (rows+1) u32, prefix byte count of the index;
//                        tiles: (panels+1) u32, prefix count of slots; sell:
//                        (slices+1) u32, prefix count of slots. Sell (sliced
//                        ELLPACK) cuts the rows in slices of 8; slice s has as many
//                        slots as its fullest row has elements, and slot j holds
//                        the j-th element of each of its 8 rows (lane i: row 8s+i),
//                        or padding (column 0, value 0) for a row with fewer.
//   NAME.values          stored elements in row-major order (tiles: slot order,
//                        within a slot by row; sell: 8 a slot, padding included):
//                        F32/BF16/F16 as in the
//                        model; I8 one signed byte each; I4 two per byte, element i in
//                        the low nibble of byte i/2 when i is even, signed [-7, 7]
//   NAME.scales          I8/I4 only: (rows) f32; weight = q * scale[row]
// nm (version 4), for N:M semi-structured tensors (every group of M consecutive columns
// of a row holds at most N stored elements; the manifest entry's "pattern": [N, M]):
// no row index, only NAME.index, per row cols/M*N positions of ceil(log2 M) bits, the
// group's N kept columns in increasing order, packed LSB first, each row padded with
// zero bits to a byte; and NAME.values, rows*cols/M*N values in the same order (a group
// with fewer than N elements keeps value +0.0 at its first unused positions), nnz =
// rows*cols/M*N. A 2:4 BF16 tensor takes (2 + 2*2/8) / (4*2) = 0.5625 of its dense bytes.
// A tensor is 2-D (rows, cols) = (out, in); a 1-D tensor has rows = 1. An element is
// stored when its bit pattern is not all zero (so -0.0 survives a round trip). The
// encoding is chosen per tensor (PackIndex): by default the one a decoder reads
// fastest, else the one with the fewest bytes; non-prunable tensors are always dense
// in the model's dtype. Sell holds F32, BF16 or F16 values only, and at most 65536
// columns. All integers are little-endian. Version 1 packs (no tiles), 2 (no sell) and
// 3 (no nm) are read as well.
//
// Reading maps the file, parses the tar headers (ours: ustar, strict), the manifest,
// and checks every stream's length and every index stream (bitmaps count to nnz,
// deltas stay inside their row and their ixptr range) and the members' order at open,
// so the kernels (spmv.h) can trust a PackTensor. pack_verify additionally hashes every
// member (pack_model.h's pack_check_model checks the config.json against the tensors).
//
// Not here: writing and unpacking (pack_write.h), computing with packed tensors
// (spmv.h), a model backed by a pack (pack_model.h), the decode benchmark (bench/).
#ifndef BEST_PACK_H
#define BEST_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "base/fileio.h"      // defines: MappedFile
#include "io/safetensors.h"   // defines: StDtype
#include "pack/pack_format.h" // defines: PackEnc, PackVal, PackQuant, TILE, PACK_VERSION

// How the writer picks a prunable tensor's encoding: SPEED, the least estimated
// decoding time (pack.c: pack_cost); SIZE, the fewest bytes; or always the one named
// (dense when the tensor has no stored element to spare).
typedef enum { INDEX_SPEED, INDEX_SIZE, INDEX_BITMAP, INDEX_DELTA, INDEX_TILES, INDEX_DENSE, INDEX_SELL, INDEX_NM } PackIndex;

int pack_quant_parse(PackQuant *out, const char *name); // none|bf16|int8|int4; -1 (no ERR)
int pack_index_parse(PackIndex *out, const char *name); // speed|size|bitmap|delta|tiles|dense|sell|nm; -1
const char *pack_quant_name(PackQuant q);               // "none", "bf16", "int8", "int4"
const char *pack_enc_name(PackEnc e);                   // "dense", "bitmap", "delta", "tiles", "sell", "nm"
const char *pack_val_name(PackVal v);                   // "F32", "BF16", "F16", "I8", "I4"

// One tensor as it lies in the mapped file (pointers into the map, aligned).
typedef struct {
    char name[96];             // HF name
    int ndim;                  // 1 or 2
    int64_t shape[2];
    size_t rows, cols;         // (out, in); 1-D: (1, n)
    StDtype dtype;             // of the tensor in the source model (restored by unpack)
    PackEnc enc;
    PackVal val;
    size_t nnz;                // stored elements (rows*cols when dense)
    const uint32_t *nnz_ptr;   // (rows+1) sparse only, else NULL; tiles: (panels+1)
    const uint32_t *ix_ptr;    // (rows+1) delta, else NULL; tiles: (panels+1), sell: (slices+1) slots
    const uint8_t *index;      // bitmap, delta, tiles or sell (u16 columns) stream, NULL when dense
    const uint32_t *masks;     // (slots) tiles only, else NULL
    const uint8_t *steps;      // (slots) tiles only
    size_t slots;              // tiles; sell: 8 columns and values each
    size_t index_bytes;
    const void *values;        // (nnz) in val (I4: (nnz+1)/2 bytes); sell: (8 slots)
    size_t values_bytes;
    const float *scales;       // (rows) I8/I4 only, else NULL
    int prunable;              // one of the seven Linear weights of a block (manifest)
    unsigned nm_n, nm_m;       // nm: N of every M columns (index: pack_nm_row_bytes a row), else 0
    int variant;               // the kernel variant spmv_forward runs, 0 unless pack_tune.h chose
                               // another: 1 = sell with AVX2 loading x lane by lane (no gather)
} PackTensor;

typedef struct {
    char name[100];            // tar member name
    size_t offset, size;       // of the data inside the file
    uint64_t xxh64;            // from the manifest (manifest.json: of itself but its tail)
} PackMember;

typedef struct {
    MappedFile map;
    int version;
    PackQuant quant;
    PackMember *members;       // (n_members) in file order, manifest.json first
    int n_members;
    PackTensor *t;             // (n) in the order of the source model's table
    int n;
    const char *config_json;   // into the map, config_len bytes (not NUL-terminated)
    size_t config_len;
    char *path;                // for messages
} Pack;

// Opens, parses and validates (not the hashes); errors name the file and the member.
int pack_open(Pack *p, const char *path);
// The same over a buffer (8-byte aligned) that must outlive p; name is for messages.
int pack_open_mem(Pack *p, const void *buf, size_t size, const char *name);
void pack_close(Pack *p);
// Hashes every member against the manifest; the first mismatch is an ERR.
int pack_verify(const Pack *p);
const PackTensor *pack_find(const Pack *p, const char *name);
const PackMember *pack_member(const Pack *p, const char *name);
// Bytes t takes in the pack: all its members' data, without tar headers and padding;
// also what spmv_forward reads of it (spmv.h). Inline, so that the kernels need no pack.o.
static inline size_t pack_tensor_bytes(const PackTensor *t) {
    size_t b = t->index_bytes + t->values_bytes + (t->scales ? 4 * t->rows : 0);
    switch (t->enc) {
    case PACK_DENSE: return b;
    case PACK_BITMAP: return b + 4 * (t->rows + 1);                            // nnz
    case PACK_DELTA: return b + 8 * (t->rows + 1);                             // nnz, ixptr
    case PACK_TILES: return b + 8 * ((t->rows + TILE - 1) / TILE + 1) + 5 * t->slots; // + slots
    case PACK_SELL: return b + 4 * (t->rows + 1) + 4 * ((t->rows + SELL - 1) / SELL + 1);
    case PACK_NM: return b;                                                    // no counts
    }
    return b;
}
// Rows [r0, r1) of t as dense fp32 (r1-r0, cols), dequantized, zeros where not stored.
void pack_decode_rows(float *out, const PackTensor *t, size_t r0, size_t r1);
// The nonzero weights of t: a sparse tensor's stored elements, a dense tensor's elements
// that are not zero (it stores its zeros), so that sparsity means one thing whatever the
// encoding.
size_t pack_tensor_nonzeros(const PackTensor *t);
// The prunable tensors of p in total: weights, nonzero weights, and bytes (pack_tensor_bytes:
// values, index, counts and scales).
typedef struct {
    size_t numel, nonzeros, bytes;
} PackTotals;
void pack_prunable_totals(PackTotals *s, const Pack *p);
// The one "bits per nonzero" every report prints: 8 bytes / nonzeros (the index and the
// counts included, over the weights that are not zero); 0 without nonzeros.
static inline double pack_bits_per_nonzero(size_t bytes, size_t nonzeros) {
    return nonzeros ? 8.0 * (double)bytes / (double)nonzeros : 0;
}
#endif
