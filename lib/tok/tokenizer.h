// tokenizer.h: one front for the two tokenizer families best-tokenize supports.
//
//   SentencePiece BPE with byte fallback (LLaMA-2): lib/tok/spm.c, from tokenizer.model
//     or from a HF tokenizer.json of that kind (model BPE + byte_fallback, "▁" spaces).
//   Byte-level BPE (GPT-2, Qwen2/2.5/3): lib/tok/bbpe.c, from a HF tokenizer.json or from
//     vocab.json + merges.txt (+ tokenizer_config.json for the Qwen2 regex and specials).
//
// This file only finds the files, recognises the kind, hashes the bytes and
// dispatches. Encoding is thread-safe through one TokEncoder per thread (each holds
// its own caches); the Tokenizer itself is read-only after loading.
#ifndef BEST_TOKENIZER_H
#define BEST_TOKENIZER_H

#include <stdint.h>

#include "base/vec.h" // defines: IdVec, ByteVec

typedef enum { TOK_SPM = 1, TOK_BBPE = 2 } TokKind;

struct Spm;
struct Bbpe;

typedef struct {
    TokKind kind;
    int32_t vocab_size;  // every id is in [0, vocab_size)
    int32_t bos_id;      // -1 when the tokenizer has none
    int32_t eos_id;      // -1 when none; Qwen: <|endoftext|> 151643
    int add_bos;         // per-document convention: LLaMA puts BOS before each document
    int add_eos;         // Qwen puts <|endoftext|> after each document
    uint64_t hash;       // xxh64 of the tokenizer file bytes (all files, in load order)
    char *path;          // the file (or folder) it came from, for messages
    struct Spm *spm;     // set when kind == TOK_SPM
    struct Bbpe *bbpe;   // set when kind == TOK_BBPE
} Tokenizer;

// path: a tokenizer.model, a tokenizer.json, a vocab.json (merges.txt beside it),
// or a folder holding one of them (tokenizer.json preferred, then tokenizer.model,
// then vocab.json + merges.txt).
int tokenizer_load(Tokenizer *t, const char *path);

// The names of a model's tokenizer files, the one list: what model_save copies beside the
// weights, what a pack stores (pack_format.h), what a pack's tokenizer is read from.
#define TOKENIZER_N_FILES 7
extern const char *const TOKENIZER_FILES[TOKENIZER_N_FILES];

// Where a model's tokenizer files come from, by name (a pack's members: pack_model.h's
// tokenizer_of_model). read gives a file's bytes in *data (malloc'd, the caller frees)
// and returns 0, 1 when there is no such file, -1 after ERR; where names the source in
// messages (WHERE/NAME).
typedef struct {
    int (*read)(void *ctx, const char *name, char **data, size_t *n);
    void *ctx;
    const char *where;
} TokFiles;
// The tokenizer of f's files, chosen as in a folder (tokenizer.json, then tokenizer.model,
// then vocab.json + merges.txt); the same tokenizer and hash as from a folder of them.
int tokenizer_load_files(Tokenizer *t, const TokFiles *f);
void tokenizer_free(Tokenizer *t);

typedef struct {
    const Tokenizer *tok;
    void *impl;          // SpmEncoder or BbpeEncoder
} TokEncoder;

void tok_encoder_init(TokEncoder *e, const Tokenizer *t);
void tok_encoder_free(TokEncoder *e);
// Appends the ids of text (len bytes of valid UTF-8) to out, with no BOS/EOS.
// Matches the reference tokenizer's encode(text) exactly.
int tok_encode(TokEncoder *e, IdVec *out, const char *text, size_t len);
// Appends the text of ids to out, as the reference decode does (SentencePiece
// drops the dummy-prefix space; control tokens decode to nothing).
int tok_decode(const Tokenizer *t, ByteVec *out, const int32_t *ids, size_t n);
// 1 when id is a special token that HF's decode(skip_special_tokens=True) leaves out: a
// byte-level BPE's added tokens marked special (SentencePiece's control tokens already
// decode to nothing).
int tok_is_special(const Tokenizer *t, int32_t id);

#endif
