// spm.h: SentencePiece BPE with byte fallback (the LLaMA-2 tokenizer), id for id the
// same as the references.
//
// Two sources, two sets of rules, one encoder:
//   tokenizer.model  sentencepiece's ModelProto (protobuf, parsed by hand). Encoding is
//                    sentencepiece's sp.encode(text): its normalizer (identity or a
//                    precompiled charsmap, dummy prefix, whitespace escaping), then BPE
//                    where the adjacent pair whose concatenation is a piece with the
//                    highest score merges first (ties to the left), then byte fallback.
//   tokenizer.json   a HF LlamaTokenizerFast layout (model BPE, byte_fallback, "▁"
//                    spaces through Prepend+Replace or Metaspace). Encoding is HF
//                    tokenizers' encode(text, add_special_tokens=False): added tokens
//                    are cut out first, and merges apply by merge rank, not by score.
// Decoding is sentencepiece's sp.decode(ids) for both: "▁" -> space, <0xNN> pieces ->
// bytes (invalid UTF-8 -> U+FFFD), control pieces -> nothing, and the space of the
// dummy prefix dropped.
//
// What it does not do: unigram/word/char models (a clear error), sampling, n-best,
// offsets, BOS/EOS (the caller's job: lib/tok/tokenizer.c), byte-level BPE (lib/tok/bbpe.c).
//
// An Spm is read-only after loading and can be shared by threads; each thread encodes
// through its own SpmEncoder (a cache of encoded words and scratch buffers).
#ifndef BEST_SPM_H
#define BEST_SPM_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/vec.h" // defines: IdVec, ByteVec

struct Spm;
typedef struct Spm Spm;

// data: the n bytes of a tokenizer.model; path is only used in messages. Every length
// is checked: a truncated or corrupt file is an error, never a crash.
int spm_load_model(Spm **out, const uint8_t *data, size_t n, const char *path);
// root: a parsed HF tokenizer.json of the LLaMA kind; path is only used in messages.
int spm_load_json(Spm **out, const json_t *root, const char *path);
void spm_free(Spm *s);

int32_t spm_vocab_size(const Spm *s);  // every id is in [0, vocab_size)
int32_t spm_bos_id(const Spm *s);      // -1 if none
int32_t spm_eos_id(const Spm *s);      // -1 if none

typedef struct SpmEncoder SpmEncoder;  // per-thread state: word cache, scratch buffers
SpmEncoder *spm_encoder_new(const Spm *s);
void spm_encoder_free(SpmEncoder *e);

// Appends the ids of text (len bytes of UTF-8) without BOS/EOS. Invalid UTF-8 is not
// an error: like sentencepiece, each bad byte becomes U+FFFD (tokenizer.model) or its
// <0xNN> byte piece (tokenizer.json).
int spm_encode(SpmEncoder *e, IdVec *out, const char *text, size_t len);
// Appends the text of ids, as sp.decode(ids). An id outside [0, vocab_size) is an error.
int spm_decode(const Spm *s, ByteVec *out, const int32_t *ids, size_t n);

#endif
