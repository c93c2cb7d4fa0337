// utf8.h: strict UTF-8 validation (no overlongs, no surrogates, nothing past U+10FFFF).
// Documents and tokenizer strings are checked with it before any tokenizer sees them.
#ifndef BEST_UTF8_H
#define BEST_UTF8_H

#include <stddef.h>

// Returns 1 when s[0..n) is valid UTF-8; else 0 and the offset of the first bad byte.
int utf8_valid(const char *s, size_t n, size_t *bad_at);

#endif
