// utf8.h: strict UTF-8 validation (no overlongs, no surrogates, nothing past U+10FFFF),
// and repair by replacement characters.
// Documents and tokenizer strings are checked with it before any tokenizer sees them.
#ifndef BEST_UTF8_H
#define BEST_UTF8_H

#include <stddef.h>

// Returns 1 when s[0..n) is valid UTF-8; else 0 and the offset of the first bad byte.
int utf8_valid(const char *s, size_t n, size_t *bad_at);
// A fresh NUL-terminated copy of s[0..n) with each byte that does not start a valid
// sequence replaced by U+FFFD, one per byte (Python's errors="replace" gives one per
// truncated sequence); *out_n gets its length. For generated text going into JSON.
char *utf8_repair(const char *s, size_t n, size_t *out_n);

#endif
