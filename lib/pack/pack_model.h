// pack_model.h: a model backed by a packed checkpoint (pack.h), and the one way the
// tools open a model: a Hugging Face folder or a pack.
//
// A packed model keeps its 2-D weights (the seven Linear families, lm_head, the
// embedding) in the file's memory map in their packed encoding, as a store of
// nn/weight.h: evaluation decodes each into fp32 for the same BLAS products as the
// folder's model (bitwise the unpacked model's results), one-token decoding multiplies
// straight from the encoding (spmv.h). Only the 1-D tensors (norms, biases) are copied
// into the model's fp32 block. The map stays open until model_free.
#ifndef BEST_PACK_MODEL_H
#define BEST_PACK_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "nn/model.h"  // defines: Model
#include "pack/pack.h" // defines: Pack
#include "tok/tokenizer.h" // defines: Tokenizer

// path a folder (model_load; a best-train output folder OUT, which holds no config.json
// but OUT/model, means OUT/model, and m->src_dir says so) or a packed checkpoint file
// (recognised by its tar header): mapped, validated, its tensors checked against its
// config.json as a folder's are. Errors name the file and the tensor.
int model_open(Model *m, const char *path);
// What model_open checks of an open pack beyond pack_open, without loading it: its
// config.json parses and is in range, and the tensors are exactly those of the
// parameter table it implies, with their shapes, in the table's order (best-pack
// --verify and --unpack run it).
int pack_check_model(const Pack *p);
// Makes the 2-D weights of a folder's model (m from model_open, no store yet) whose
// dtype is BF16 or F16 a store of dense tensors in that dtype, multiplied by spmv.h's
// dense kernels: one-token decoding then reads the 2 bytes a weight the model was saved
// in, not the 4 of the fp32 block (the fair dense baseline of sparse decoding, and what
// best-eval --generate does with such a folder). The values are the folder's: evaluation
// decodes them to the very fp32 the block held. A no-op for F32 models and packs.
void model_dense_store(Model *m);
// A file of the packed checkpoint m came from (config.json, tokenizer.json, ...): its
// bytes, inside the map, valid until model_free. -1 (no ERR) when m is not backed by a
// pack or the pack has no such member.
int pack_model_file(const uint8_t **data, size_t *len, const Model *m, const char *name);
// The tokenizer of m: its folder's files (m->src_dir), or those of the pack it came from,
// read from the pack's map (tokenizer.h's tokenizer_load_files; the same tokenizer and
// hash as from a folder of them). -1 after ERR, naming the folder or pack (for a pack
// without tokenizer files: "WHERE: no tokenizer.json, tokenizer.model or vocab.json +
// merges.txt in this pack").
int tokenizer_of_model(Tokenizer *t, const Model *m, const char *where);
// The packed tensor of table entry i of a model backed by a pack (as decoding multiplies
// it), or NULL: a folder's model, a 1-D entry.
const PackTensor *pack_model_tensor(const Model *m, int i);
// Entry i of a pack-backed model becomes t (a copy is kept), whose streams live in mem (the
// model frees it at model_free), or, mem NULL, in the pack's map (the same streams with
// another kernel variant): pack_tune.h re-encodes tensors so.
void pack_model_replace(Model *m, int i, const PackTensor *t, void *mem);
// Whether m has tokenizer files: a tokenizer.json, tokenizer.model or vocab.json in its
// folder or pack.
int model_has_tokenizer(const Model *m);

#endif
