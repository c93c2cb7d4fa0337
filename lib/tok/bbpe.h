// bbpe.h: byte-level BPE (GPT-2, Qwen2/2.5/3), id for id the same as Hugging Face
// `tokenizers` encode(text, add_special_tokens=False).
//
// Loads a HF tokenizer.json (model BPE, pre_tokenizer ByteLevel or
// Sequence[Split{Regex}..., ByteLevel]) or vocab.json + merges.txt (+ the
// tokenizer_config.json that says whether it is Qwen2 or GPT-2). The pipeline
// is HF's: added tokens are cut out of the raw text (leftmost-longest), the
// rest is NFC-normalized (when the file asks for it), split by the
// pre-tokenizer regex, mapped to the byte-level alphabet and merged by rank.
// What it does not do: training, offsets, truncation/padding, post-processors
// (BOS/EOS are the caller's job: lib/tok/tokenizer.c), normalizers other than NFC.
// Supported settings and the deliberate gaps are listed at the top of bbpe_load.c.
//
// A Bbpe is read-only after loading and can be shared by threads; each thread
// encodes through its own BbpeEncoder (word cache and scratch buffers).
#ifndef BEST_BBPE_H
#define BEST_BBPE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/vec.h" // defines: IdVec, ByteVec

struct Bbpe;
typedef struct Bbpe Bbpe;

// root: a parsed HF tokenizer.json; path is only used in messages.
int bbpe_load_json(Bbpe **out, const json_t *root, const char *path);
// A file's bytes, and its name for messages (a path, or PACK/NAME).
typedef struct {
    const char *data;
    size_t n;
    const char *name;
} TokBuf;

// vocab.json + merges.txt ("#version" lines are skipped). config may be NULL or a
// tokenizer_config.json: tokenizer_class "Qwen2Tokenizer" selects NFC and the Qwen2
// split regex, anything else GPT-2 (GPT-2 regex, no normalizer); the entries of
// added_tokens_decoder become added tokens in both cases.
int bbpe_load_buffers(Bbpe **out, const TokBuf *vocab, const TokBuf *merges, const TokBuf *config);
// The same from files (config_path may be NULL).
int bbpe_load_files(Bbpe **out, const char *vocab_path, const char *merges_path,
                    const char *config_path);
void bbpe_free(Bbpe *b);

int32_t bbpe_vocab_size(const Bbpe *b);               // max id + 1 over vocab and added tokens
int32_t bbpe_token_id(const Bbpe *b, const char *s);  // added tokens first, then vocab; -1 if absent

typedef struct BbpeEncoder BbpeEncoder;  // one per thread
BbpeEncoder *bbpe_encoder_new(const Bbpe *b);
void bbpe_encoder_free(BbpeEncoder *e);
// Appends the ids of text (len bytes, UTF-8; invalid UTF-8 is an error).
int bbpe_encode(BbpeEncoder *e, IdVec *out, const char *text, size_t len);
// Appends the bytes of ids: byte-level tokens map back to their bytes, added
// tokens to their text. Ids outside [0, vocab_size) are an error; ids inside
// that range that name no token decode to nothing (as HF skips them). Bytes are
// not re-validated: a cut in the middle of a character stays a cut (HF would
// print U+FFFD there).
int bbpe_decode(const Bbpe *b, ByteVec *out, const int32_t *ids, size_t n);
// 1 when id is an added token marked "special" (HF's decode(skip_special_tokens=True)
// leaves those out).
int bbpe_is_special(const Bbpe *b, int32_t id);

#endif
