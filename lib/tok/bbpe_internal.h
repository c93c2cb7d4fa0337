// bbpe_internal.h: what the two files of the byte-level BPE tokenizer share, and nothing
// outside lib/tok/bbpe*.c includes: struct Bbpe (the loaded tokenizer) with its added
// tokens and pre-tokenizer stages, the UTF-8 and NFC helpers both use, and the two
// functions bbpe.c defines for bbpe_load.c.
//
//   bbpe_load.c  tokenizer.json, or vocab.json + merges.txt + tokenizer_config.json -> Bbpe
//   bbpe.c       the Unicode classes and NFC, the encoder and the decoder, on a loaded Bbpe
//
// A Bbpe is read-only once loaded; the encoder's per-thread state (struct BbpeEncoder)
// is bbpe.c's alone.
#ifndef BEST_BBPE_INTERNAL_H
#define BEST_BBPE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/vec.h"     // defines: IdVec, ByteVec, bytevec_append
#include "tok/tokmap.h"   // defines: StrMap, PairMap

// ---------------------------------------------------------------------------
// The loaded tokenizer

typedef struct {
    char *s;              // content, as written in the file
    size_t len;
    char *ns;             // content as matched: NFC(content) when normalized and the normalizer is NFC
    size_t nlen;
    int32_t id;
    uint8_t single_word, lstrip, rstrip, normalized, special;
} Added;

// Patterns of one Aho-Corasick set of HF, grouped by first byte, longest first.
typedef struct {
    const Added **pat;
    size_t n;
    uint32_t start[256], count[256];
    int single_first;     // the only first byte when all patterns share it, else -1
    int norm;             // match ns/nlen instead of s/len
} AddedSet;

typedef enum { SPLIT_NONE, SPLIT_QWEN2, SPLIT_GPT2, SPLIT_PCRE } SplitKind;
typedef struct {
    int prefix_space;     // ByteLevel add_prefix_space: prepend ' ' to pieces that lack one
    SplitKind kind;
    pcre2_code *re;       // SPLIT_PCRE
} Stage;
#define MAX_STAGES 8

// The two split regexes everyone uses: a stage whose regex is one of them, byte for byte,
// runs through bbpe.c's hand-written splitter (SPLIT_QWEN2, SPLIT_GPT2) instead of PCRE2.
static const char QWEN2_PATTERN[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

struct Bbpe {
    StrMap vocab;           // token string (byte-level alphabet) -> id
    StrMap raw;             // token bytes -> id; only built for ignore_merges
    PairMap merges;
    int32_t byte_id[256];   // id of the one-symbol token of each byte, -1 if absent
    int32_t unk_id;         // -1: unknown symbols are dropped (HF without unk_token)
    int fuse_unk, ignore_merges, nfc;
    Added *added;
    size_t n_added, cap_added;
    StrMap added_map;       // content -> index into added
    int32_t max_added;      // largest added id, -1 when none
    AddedSet raw_set, norm_set;
    Stage stages[MAX_STAGES];
    int n_stages;
    int has_pcre;
    int32_t max_id;         // -1 when empty
    uint32_t *dec_off;      // (max_id + 2,) offsets into dec
    char *dec;              // decoded bytes of every id, back to back
};

// ---------------------------------------------------------------------------
// UTF-8 and NFC, for both files

// Decodes one code point of valid UTF-8 (checked by utf8_valid beforehand).
static inline uint32_t utf8_decode(const uint8_t *s, size_t *len) {
    uint8_t c = s[0];
    if (c < 0x80) { *len = 1; return c; }
    if (c < 0xE0) { *len = 2; return ((uint32_t)(c & 0x1F) << 6) | (s[1] & 0x3F); }
    if (c < 0xF0) {
        *len = 3;
        return ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    }
    *len = 4;
    return ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
           ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
}

// Text whose code points are all below U+0300 is already NFC (U+0300 is the
// first code point whose NFC_Quick_Check is not Yes). In UTF-8 that is: no byte
// >= 0xCC, since 0xCC is the lead byte of U+0300 and continuation bytes are < 0xC0.
static inline int maybe_not_nfc(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] >= 0xCC) return 1;
    return 0;
}

// bytevec_append with n == 0 may pass NULL to memcpy, which UBSan rejects.
static inline void append_bytes(ByteVec *o, const void *p, size_t n) {
    if (n) bytevec_append(o, p, n);
}

// Fills bbpe.c's Unicode class and NFC tables, once (pthread_once); bbpe_load.c calls it
// before it makes a Bbpe, so the encoder only reads them.
void bbpe_unicode_init(void);
// Appends NFC(s[0..n)) as HF computes it (see bbpe.c); -1 with the error set if utf8proc fails.
int bbpe_nfc_append(ByteVec *out, const uint8_t *s, size_t n);

#endif
