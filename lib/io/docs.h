// docs.h: documents out of files, archives and stdin, one at a time.
//
// Built on libarchive, so any compression it knows (.gz, .zst, .xz, .bz2) is
// undone on the fly. Each input is read as what its name says once compression
// suffixes are stripped, never as what its bytes look like:
//   .tar .tgz .tbz2 .txz .tzst   a tar archive, walked member by member; each member
//                          is read by its own name the same way (a member may itself
//                          be compressed: a .tar of .jsonl.zst)
//   .jsonl .json .ndjson   one JSON object per line; the document is its string
//                          field (default "text"); blank lines are skipped
//   .txt .text .md         the whole file is one document
//   .parquet               one document per row of a string column (the field, default
//                          "text"; io/parquet.h); read from its path (the footer is at
//                          the end: not from stdin, nor inside an archive); null rows
//                          are skipped and counted (docs_nulls)
//   anything else, stdin   text, sniffed: first non-blank byte '{' means JSON lines;
//                          never a tar (DOC_TAR asks for one: stdin, another name)
// Only a name (or DOC_TAR) makes a tar: a .jsonl whose first blocks are zeros (a file
// after a crash) is not an empty tar, and a tar named .txt is not walked. Zip is not read.
// A name must keep its promise: a compression suffix the data does not match, a
// .tar that is not an archive, and a tar inside a tar are errors (never read as text).
// No text holds a NUL byte: one is an error naming the file (or file:member) and its
// offset in the decompressed bytes ("a.jsonl: a NUL byte at offset 0 (not text; ...)").
// Memory is bounded by the largest document, not by the input. Every document
// is checked to be valid UTF-8; errors name the file (and the line).
#ifndef BEST_DOCS_H
#define BEST_DOCS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

// DOC_AUTO: by name (above). DOC_TEXT, DOC_JSONL: every file or member read so (a .tar
// is still walked). DOC_TAR: the input is a tar whatever its name, its members by name.
typedef enum { DOC_AUTO = 0, DOC_TEXT, DOC_JSONL, DOC_TAR } DocFormat;

typedef struct DocReader DocReader;

// path "-" reads stdin. field: the JSON string field holding the text; "" for the
// whole record (each line must be a JSON object; the document is the line's text).
int docs_open(DocReader **r, const char *path, const char *field, DocFormat format);
// The same over a stream already open (a pipe, a FIFO, or shard_sniff's stream): name
// ("-" means stdin) is used in messages and to tell the format by its suffix. f is not
// closed by docs_close.
int docs_open_file(DocReader **r, const char *name, FILE *f, const char *field, DocFormat format);
// Next document: *text (valid until the next call, not NUL-terminated) and *len.
// Returns 1 for a document, 0 at the end, -1 on error (ERR set, naming file:line).
int docs_next(DocReader *r, const char **text, size_t *len);
// The line of the last document (JSON lines), for messages.
uint64_t docs_line(const DocReader *r);
// Parquet: decode up to n row groups at once, each on its own thread (memory: n row
// groups' text); the documents come in file order whatever n is. Default 1.
void docs_set_threads(DocReader *r, int n);
// Parquet: null rows skipped so far (0 for the other formats).
uint64_t docs_nulls(const DocReader *r);
// Bytes consumed from the input file so far (compressed), for progress.
uint64_t docs_bytes_read(const DocReader *r);
void docs_close(DocReader *r);

#endif
