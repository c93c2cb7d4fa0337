// shard.h: token shards, the files best-tokenize writes and best-train/best-eval read.
//
// Layout (all integers little-endian; docs/formats.md has it byte by byte):
//   0  char[8] magic "BESTSHRD"
//   8  u32 version (1)
//  12  u32 token width in bytes: 2 (uint16, when vocab_size <= 65536) or 4 (uint32)
//  16  u32 vocab size (every token < vocab size)
//  20  u32 flags: bit 0 BOS starts each document, bit 1 EOS ends each document
//  24  u64 token count
//  32  u64 document count
//  40  u64 xxh64 (seed 0) of the payload bytes
//  48  u64 tokenizer hash (xxh64 of the tokenizer file bytes)
//  56  u64 xxh64 (seed 0) of header bytes 0..55
//  64  payload: token count tokens of `width` bytes
// Readers check magic, version, width, header checksum, the file size and the
// payload checksum before handing out a single token.
#ifndef BEST_SHARD_H
#define BEST_SHARD_H

#include <stdint.h>
#include <stdio.h>
#include <xxhash.h>

#include "base/fileio.h" // defines: AFile, MappedFile

#define SHARD_MAGIC "BESTSHRD"
#define SHARD_VERSION 1
#define SHARD_HEADER_BYTES 64
#define SHARD_FLAG_BOS 1u
#define SHARD_FLAG_EOS 2u

typedef struct {
    uint32_t version, width, vocab_size, flags;
    uint64_t ntokens, ndocs, payload_hash, tokenizer_hash;
} ShardHeader;

typedef struct {
    AFile f;
    ShardHeader h;
    XXH64_state_t *xx;
    uint8_t *buf;        // staging for width conversion
    size_t buf_cap;
} ShardWriter;

// Writes to a temp name; the shard appears under `path` only at shard_writer_close.
int shard_writer_open(ShardWriter *w, const char *path, uint32_t vocab_size, uint32_t flags,
                      uint64_t tokenizer_hash);
// Appends one document's tokens (BOS/EOS already included by the caller).
int shard_writer_add_doc(ShardWriter *w, const int32_t *ids, size_t n);
int shard_writer_close(ShardWriter *w);  // header, fsync, rename
void shard_writer_abort(ShardWriter *w); // removes the temp file

typedef struct {
    MappedFile m;
    ShardHeader h;
    const uint8_t *tokens;  // (ntokens * width) bytes
    char *path;
} Shard;

// Maps and fully verifies a shard (header, size, checksum, every token < vocab).
int shard_open(Shard *s, const char *path);
// Reads tokens [start, start+n) as int32 into dst; the range must be inside the shard.
void shard_read(const Shard *s, int32_t *dst, uint64_t start, size_t n);
void shard_close(Shard *s);
// Opens an input that may be a token shard or something else (text, lines of ids) at
// the same place, reading it only once so that a pipe, a FIFO, /dev/stdin or "-"
// (stdin) work: its first 8 bytes are read and compared with the shard magic.
// 1: a shard, nothing left open (shard_open maps path, so a shard must be a regular
// file: one on a pipe is an ERR). 0: *fp is a stream of the whole input from its
// first byte (the sniffed bytes are given again), to read with docs_open_file or line
// by line and then fclose (unless it is stdin). -1 after ERR: cannot open or read.
int shard_sniff(const char *path, FILE **fp);
// Parses and checks a 64-byte header; `name` is used in messages.
int shard_header_parse(ShardHeader *h, const uint8_t *p, size_t n, const char *name);

#endif
