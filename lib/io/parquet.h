// parquet.h: the strings of one column of a Parquet file, row group by row group.
//
// A small, strict reader for what text corpora on the Hugging Face Hub are: a flat
// schema with a string column (BYTE_ARRAY, required or optional). What it reads:
//   - the footer (FileMetaData) and page headers in the Thrift compact protocol;
//   - data pages v1 and v2, and one dictionary page per column chunk;
//   - values PLAIN, or dictionary indices (RLE_DICTIONARY, PLAIN_DICTIONARY) over a
//     PLAIN dictionary; definition levels in the RLE / bit-packed hybrid;
//   - compression UNCOMPRESSED, SNAPPY (libsnappy), GZIP (zlib), ZSTD (libzstd).
// Anything else (a nested or repeated column, other encodings or codecs, encryption,
// column chunks in other files) is refused with an error naming the file, the column
// and what is not supported. Null rows are skipped and counted.
//
// Every length and offset read from the file is checked against the file, the column
// chunk and the page before use. The file is mapped, never read whole; the memory of
// parquet_read_group is one row group's strings and one page at a time. Row groups are
// independent: several threads may decode different ones at once (into their own
// ParquetText).
//
// Not here: turning the strings into documents (io/docs.h does: a path ending in
// .parquet is read through this), tokenizing.
#ifndef BEST_PARQUET_H
#define BEST_PARQUET_H

#include <stddef.h>
#include <stdint.h>

#include "base/fileio.h" // defines: MappedFile
#include "base/vec.h"    // defines: ByteVec

// Limits against inputs that would expand without bound (a few bytes of run-length
// levels can claim billions of values): the values and bytes of one page, the text of
// one row group. Real files stay far below (writers cut pages at about 1 MB); the fuzz
// build sets smaller ones (Makefile).
#ifndef PARQUET_MAX_PAGE_VALUES
#define PARQUET_MAX_PAGE_VALUES ((uint64_t)1 << 26)
#endif
#ifndef PARQUET_MAX_GROUP_TEXT
#define PARQUET_MAX_GROUP_TEXT ((size_t)1 << 31)
#endif
#ifndef PARQUET_MAX_PAGE_BYTES // a page's size, decompressed
#define PARQUET_MAX_PAGE_BYTES ((uint64_t)1 << 30)
#endif

typedef struct {
    uint64_t offset, size;   // the column chunk: its first page and its bytes
    uint64_t usize;          // its bytes decompressed (the footer's word: a hint for buffers)
    uint64_t n_values;       // values (= rows: the column is flat)
    uint64_t row0;           // the row group's first row in the file
    int codec;               // CompressionCodec
} ParquetChunk;

typedef struct {
    char *path;              // for messages
    char *column;
    MappedFile map;
    const uint8_t *data;     // (size) the whole file
    size_t size;
    int optional;            // the column may hold nulls (definition levels of 1 bit)
    int n_groups;
    ParquetChunk *chunks;    // (n_groups) the column's chunk in each row group
    uint64_t n_rows;
} Parquet;

// One row group's strings: string i is bytes [off[i], off[i + 1]) of text.
typedef struct {
    ByteVec text;
    size_t *off;             // (n + 1)
    size_t n, cap;
    uint64_t nulls;          // null rows skipped
    uint8_t *page;           // (page_cap) scratch: a page decompressed, kept for the next group
    size_t page_cap;
} ParquetText;

// Maps path and reads its footer; column names a top-level string column.
int parquet_open(Parquet *p, const char *path, const char *column);
// The same over bytes in memory (not copied; the fuzz target's way in).
int parquet_open_mem(Parquet *p, const void *data, size_t size, const char *name, const char *column);
void parquet_close(Parquet *p);
// Row group g's strings into t (cleared first), every one checked to be UTF-8 (an
// error names the row).
int parquet_read_group(ParquetText *t, const Parquet *p, int g);
void parquet_text_free(ParquetText *t);

#endif
