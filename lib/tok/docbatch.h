// docbatch.h: a batch of documents tokenized in parallel, in input order.
//
// best-tokenize reads documents into a batch (bounded by count and bytes, so
// memory does not grow with the input), encodes the batch with one TokEncoder
// per thread, then writes the ids in the original order: the output bytes are
// the same for any number of threads.
#ifndef BEST_DOCBATCH_H
#define BEST_DOCBATCH_H

#include <stddef.h>

#include "tok/tokenizer.h" // defines: TokEncoder, IdVec, ByteVec

typedef struct {
    ByteVec text;   // all documents, back to back
    size_t *off;    // (n + 1) offsets into text
    IdVec *ids;     // (n) ids of each document after docbatch_encode
    size_t n, cap;
} DocBatch;

void docbatch_add(DocBatch *b, const char *text, size_t len);
// Encodes every document; enc holds nthreads encoders (one per thread).
// Adds BOS before / EOS after each document when bos >= 0 / eos >= 0.
int docbatch_encode(DocBatch *b, TokEncoder *enc, int nthreads, int bos, int eos);
void docbatch_clear(DocBatch *b);  // keeps the memory for the next batch
void docbatch_free(DocBatch *b);

// Parses one line of decimal ids separated by spaces/tabs into out (appending).
// Returns 0, or -1 with ERR naming `name` and the line number.
int ids_parse_line(IdVec *out, const char *s, size_t n, const char *name, unsigned long long line);
// Appends "id id id\n" to out.
void ids_format_line(ByteVec *out, const int32_t *ids, size_t n);

#endif
