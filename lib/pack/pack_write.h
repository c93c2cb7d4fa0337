// pack_write.h: writing a packed checkpoint from a model, and unpacking one into a
// Hugging Face folder (the format: pack.h, docs/formats.md). Separate from the reader
// because both need a Model (nn/model.h), which reading a pack does not.
#ifndef BEST_PACK_WRITE_H
#define BEST_PACK_WRITE_H

#include "nn/model.h"  // defines: Model
#include "pack/pack.h" // defines: Pack, PackQuant, PackIndex
#include "pack/spmv.h" // defines: SpmvIsa

// Writes m (its weights as loaded, dtype m->dtype) to path (temp + rename; "-" is
// stdout). quant NONE keeps the model's dtype, BF16 turns the prunable tensors'
// F32/F16 values into bf16, INT8/INT4 quantize the stored elements of prunable
// tensors per row (round to nearest, scale = max|w| / 127 or / 7). config.json is
// m->config_json; the tokenizer files come from m->src_dir (when set).
int pack_write(const char *path, const Model *m, PackQuant quant, PackIndex index);
// pack_write, and what it planned (st may be NULL): the bytes of the prunable tensors in
// the encodings index chose, and in the fewest bytes of each (what --index size would take),
// so that a faster plan that is larger can say by how much.
typedef struct {
    double prunable_bytes, prunable_bytes_size;
} PackWriteStats;
int pack_write_stats(PackWriteStats *st, const char *path, const Model *m, PackQuant quant, PackIndex index);
// The kernel set (spmv.h) that index SPEED plans for: its encodings' decoding costs were
// measured apart (bench/decode_encodings.sh), as the fastest encoding differs (tiles with
// AVX-512, delta with AVX2 at high sparsity). Default: the set this machine decodes with
// (spmv_isa(): the best it has, or BEST_ISA's). A pack decodes on every CPU; it is fastest
// on the set it was planned for.
void pack_plan_isa(SpmvIsa isa);
// The N:M pattern (pack.h's nm encoding) the writer may use: by default (n = m = 0) each
// prunable tensor is tried at every M from 2 to 32 dividing its columns, N the most stored
// elements of any group, and nm is a candidate at the fewest bytes of those; with m set,
// only n:m (a tensor with more than n in a group is not nm).
void pack_plan_pattern(unsigned n, unsigned m);
// Rows [0, rows) of t (a 2-D tensor of a pack, F32, BF16 or F16 values; rows 0: all) in
// every encoding of the bit set encs (1 << PACK_BITMAP | ...) that can hold them, in
// memory: out[e] (PACK_N_ENC of them) with its streams in the allocation mem[e] (the
// caller frees each), NULL where encoding e cannot hold t (quantized values: none; sell
// past 65536 columns; nm when t is not N:M: a tensor with its own nm pattern keeps it,
// another takes the M of fewest bytes, as pack_write plans it). The same weights bit for
// bit (pack_decode_rows gives the same rows). Returns how many were made (t's own
// encoding among them), -1 after ERR.
int pack_tensor_encodings(PackTensor *out, void **mem, const PackTensor *t, size_t rows, unsigned encs);
// A Hugging Face folder with the tensors of the pack (dtype restored; with quant NONE
// bit-identical to the packed model), config.json and the tokenizer files. Only plain
// file names from the allow-list (config.json, generation_config.json, tokenizer.model,
// tokenizer.json, tokenizer_config.json, special_tokens_map.json, added_tokens.json,
// vocab.json, merges.txt) are ever written, inside dir; pack_open already refuses a
// pack holding any other member name.
int pack_unpack(const char *dir, const Pack *p);

#endif
