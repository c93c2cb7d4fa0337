// unicode_tables.h: the Unicode classes byte-level BPE (bbpe.c) must see as Hugging Face
// `tokenizers` sees them, not as our PCRE2 (Unicode 14) or utf8proc (Unicode 15) would.
// The data is generated into unicode_tables.c by lib/tok/gen_unicode_tables.py from the
// pinned tokenizers 0.23.3 and from utf8proc 2.8 (tests/t_unicode_tables.sh checks that
// it reproduces the committed file); bbpe.c's opening comment says what each difference
// is. This file only declares the tables; the lookups built on them are in bbpe.c.
#ifndef BEST_UNICODE_TABLES_H
#define BEST_UNICODE_TABLES_H

#include <stddef.h>
#include <stdint.h>

enum { UL = 1, UN = 2, UWS = 4 };  // \p{L}, \p{N}, \s; 0 = anything else
typedef struct { uint32_t lo, hi; uint8_t cls; } UniRange;

// \p{L} and \p{N} of Oniguruma inside HF tokenizers 0.23.3 (Unicode 16), sorted,
// disjoint, cls UL or UN.
extern const UniRange uni_ranges[];
extern const size_t n_uni_ranges;
// \s of Oniguruma (and of Rust's regex crate): Unicode White_Space, [lo, hi] pairs.
extern const uint32_t uni_ws[][2];
extern const size_t n_uni_ws;
// Code points for which utf8proc 2.8 (Unicode 15) and HF's NFC (Unicode 9 tables)
// disagree, [lo, hi] pairs, sorted: assigned after Unicode 9 with a nonzero combining
// class, plus the Dives Akuru pair U+11935 U+11930 -> U+11938 (a Unicode 13
// composition). HF treats all of them as starters that never compose.
extern const uint32_t nfc_unsafe[][2];
extern const size_t n_nfc_unsafe;

#endif
