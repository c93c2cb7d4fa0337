// bbpe.c: byte-level BPE (GPT-2, Qwen2/2.5/3) that gives the same ids as Hugging
// Face `tokenizers` 0.23 encode(text, add_special_tokens=False), and its decoder.
//
// Encoding follows HF's pipeline step by step, because every step can change ids:
//   1. added tokens with normalized=false are cut out of the raw text, leftmost-
//      longest (HF uses Aho-Corasick LeftmostLongest), honouring lstrip, rstrip
//      and single_word exactly as added_vocabulary.rs does;
//   2. each remaining piece is NFC-normalized when the file asks for NFC (text
//      below U+0300 is already NFC; otherwise only the spans around code points
//      that NFC may touch go through utf8proc, see nfc_table_init);
//   3. added tokens with normalized=true are cut out of the normalized pieces;
//   4. pre-tokenizer stages split the pieces: Split{Regex, Isolated} and
//      ByteLevel{add_prefix_space, use_regex}; the two regexes everyone uses
//      (GPT-2's and Qwen2's) run through hand-written splitters, any other regex
//      through PCRE2 (JIT) after a rewrite of its Unicode classes (below);
//   5. each pre-token is mapped to the byte-level alphabet (one symbol per byte)
//      and merged lowest rank first, leftmost on ties, as HF's Word::merge_all.
//      A per-encoder cache maps pre-token bytes to ids, so a word is merged once.
// Decoding maps each id back to bytes with HF's ByteLevel decoder rule.
//
// Unicode: HF's regexes run on Oniguruma (Unicode 16 tables) and its NFC on
// unicode-normalization-alignments (Unicode 9 tables); we link PCRE2 10.42
// (Unicode 14) and utf8proc 2.8 (Unicode 15). Measured differences and fixes:
//   - \p{L} and \p{N}: 9272 / 120 code points differ from PCRE2 (new letters and
//     digits). We carry Oniguruma's own sets (uni_ranges in unicode_tables.c,
//     dumped from HF by gen_unicode_tables.py) and feed them to both our
//     splitters and PCRE2 (the rewrite turns \p{L}, \p{N}, \s, \S into
//     explicit classes).
//   - \s: Oniguruma matches the 25 White_Space code points; PCRE2 with UCP also
//     matches U+180E. Same fix. (Rust's \s used for lstrip/rstrip is the same 25.)
//   - NFC: for code points assigned after Unicode 9 that have a combining class
//     or a canonical (de)composition in utf8proc, HF treats them as plain
//     starters. nfc_unsafe (unicode_tables.c) lists them (found by probing HF's
//     normalizer against utf8proc for every code point); text is normalized in segments
//     cut at those characters, which is exactly what HF's tables do. The table
//     is tied to utf8proc's Unicode 15.0: tests/test_bbpe.c checks the version.
//   - Case-insensitive "(?i:'s...)": both engines also accept U+017F (long s) for
//     s; the Qwen2 splitter does too.
//
// Supported tokenizer.json settings: model BPE (vocab, merges as "a b" strings or
// [a, b] pairs, unk_token, fuse_unk, ignore_merges; dropout null/0;
// continuing_subword_prefix and end_of_word_suffix empty; byte_fallback only when
// it can never fire); normalizer null, NFC or Sequence of NFC; pre_tokenizer
// ByteLevel or Sequence of Split{Regex|String, Isolated, invert false} and
// ByteLevel. Anything else is a load error naming the setting. Known gaps:
// single_word uses an approximation of Rust's Unicode \w (letters, marks, Nd,
// Nl, Pc, ZWJ/ZWNJ; misses Other_Alphabetic symbols such as circled letters);
// in regexes other than the two known ones, \P{..} and \S inside a character
// class, other Unicode properties (\p{Lu}, \d, \w) and Oniguruma's nested
// classes keep PCRE2's meaning. The decoder is always ByteLevel. Added-token ids
// are assigned as HF's deserializer does (see added_push), not read from the file.
//
// Size (about 1,340 lines, over our ~900): the loader (tokenizer.json, vocab.json +
// merges.txt, the regex rewrite, added-token sets) and the encoder (splitters, NFC,
// merge loop) still share this file. The Unicode tables are in unicode_tables.c and the
// maps, word cache and merge heap in tokmap.h, wordcache.h and mergeheap.h; the loader
// is the next cut (as spm_json.c was for spm.c), with struct Bbpe in a shared header.
//
// How it is checked: tests/test_bbpe.c (hand-derived ids, HF ids of tricky
// strings, the splitters against PCRE2 on C4 and WikiText), the fuzz targets
// tests/fuzz/fuzz_bbpe_encode.c (splitters == PCRE2, round trips) and
// fuzz_tokenizer_json.c, and the end-to-end oracle (best-tokenize --ids vs HF).
#include "tok/bbpe.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include "base/error.h"          // defines: ERR, TRY, xmalloc, xcalloc, xrealloc
#include "base/fileio.h"         // defines: file_read_all
#include "base/utf8.h"           // defines: utf8_valid
#include "tok/mergeheap.h"       // defines: MergeHeap, mergeheap_push, mergeheap_pop
#include "tok/tokmap.h"          // defines: StrMap, PairMap, tok_hash, RANK_NONE
#include "tok/unicode_tables.h"  // defines: uni_ranges, uni_ws, nfc_unsafe (generated)
#include "tok/wordcache.h"       // defines: WordCache, wordcache_get, wordcache_put

// ---------------------------------------------------------------------------
// Unicode classes as Oniguruma sees them

static uint8_t uni_bmp[0x10000];  // class of every BMP code point, filled once
// Bit c set: NFC may change text around code point c (see nfc_table_init).
static uint8_t nfc_bad[0x110000 / 8];
static pthread_once_t uni_once = PTHREAD_ONCE_INIT;

static inline int nfc_is_bad(uint32_t c) { return nfc_bad[c >> 3] >> (c & 7) & 1; }
static inline void nfc_set_bad(uint32_t c) { nfc_bad[c >> 3] |= (uint8_t)(1u << (c & 7)); }

// A code point is "boundary-safe" for NFC when it is a starter (ccc 0), NFC
// leaves it alone, it is never the second half of a composition (so it cannot
// join what precedes it), and its decomposition does not start with such a
// second half or a mark. Cutting text before every boundary-safe code point
// cuts it into pieces that NFC normalizes independently (UAX #15's quick
// check, made a little stricter), so only the pieces around the other code
// points need utf8proc. Built from utf8proc's own data so it follows its version.
static void nfc_table_init(void) {
    utf8proc_int32_t d[32];
    int bound;
    for (uint32_t pass = 0; pass < 2; pass++) {
        for (uint32_t c = 0x300; c < 0x110000; c++) {
            const utf8proc_property_t *p = utf8proc_get_property((utf8proc_int32_t)c);
            if (pass == 0 && p->combining_class) nfc_set_bad(c);
            if (p->decomp_seqindex == UINT16_MAX || p->decomp_type != 0) continue;  // no canonical decomposition
            bound = 0;
            utf8proc_ssize_t k = utf8proc_decompose_char((utf8proc_int32_t)c, d, 32, UTF8PROC_DECOMPOSE, &bound);
            if (k < 1 || k > 32) { nfc_set_bad(c); continue; }
            if (pass == 0) {  // second halves: every code point after the first
                for (utf8proc_ssize_t i = 1; i < k; i++) nfc_set_bad((uint32_t)d[i]);
                utf8proc_uint8_t u[4], *o = NULL;
                utf8proc_ssize_t n = utf8proc_encode_char((utf8proc_int32_t)c, u);
                utf8proc_ssize_t r = utf8proc_map(u, n, &o, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
                if (r != n || memcmp(o, u, (size_t)n) != 0) nfc_set_bad(c);  // singletons, exclusions
                free(o);
            } else if (nfc_is_bad((uint32_t)d[0])) {
                nfc_set_bad(c);
            }
        }
    }
    for (uint32_t c = 0x1161; c <= 0x1175; c++) nfc_set_bad(c);  // Hangul V and T jamo join
    for (uint32_t c = 0x11A8; c <= 0x11C2; c++) nfc_set_bad(c);  // algorithmically
}

static void uni_init(void) {
    for (size_t r = 0; r < n_uni_ranges; r++)
        for (uint32_t c = uni_ranges[r].lo; c <= uni_ranges[r].hi && c < 0x10000; c++)
            uni_bmp[c] = uni_ranges[r].cls;
    for (size_t r = 0; r < n_uni_ws; r++)
        for (uint32_t c = uni_ws[r][0]; c <= uni_ws[r][1]; c++) uni_bmp[c] = UWS;
    nfc_table_init();
}

static inline int uni_class(uint32_t c) {
    if (c < 0x10000) return uni_bmp[c];
    size_t lo = 0, hi = n_uni_ranges;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c < uni_ranges[mid].lo) hi = mid;
        else if (c > uni_ranges[mid].hi) lo = mid + 1;
        else return uni_ranges[mid].cls;
    }
    return 0;
}

static int nfc_is_unsafe(uint32_t c) {
    size_t lo = 0, hi = n_nfc_unsafe;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c < nfc_unsafe[mid][0]) hi = mid;
        else if (c > nfc_unsafe[mid][1]) lo = mid + 1;
        else return 1;
    }
    return 0;
}

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

static inline size_t utf8_len(uint8_t c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

// Text whose code points are all below U+0300 is already NFC (U+0300 is the
// first code point whose NFC_Quick_Check is not Yes). In UTF-8 that is: no byte
// >= 0xCC, since 0xCC is the lead byte of U+0300 and continuation bytes are < 0xC0.
static int maybe_not_nfc(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] >= 0xCC) return 1;
    return 0;
}

// bytevec_append with n == 0 may pass NULL to memcpy, which UBSan rejects.
static inline void append_bytes(ByteVec *o, const void *p, size_t n) {
    if (n) bytevec_append(o, p, n);
}

// Appends NFC(s) as HF computes it: utf8proc on the segments between the
// characters of nfc_unsafe, which are copied as they are (to HF they are
// starters that block reordering and never compose, so the cut is exact).
static int nfc_append(ByteVec *out, const uint8_t *s, size_t n) {
    size_t seg = 0, i = 0;
    for (;;) {
        size_t len = 0;
        int cut = i == n;
        if (!cut) {
            uint32_t c = utf8_decode(s + i, &len);
            cut = c >= 0x7FD && nfc_is_unsafe(c);
        }
        if (cut && i > seg) {
            utf8proc_uint8_t *dst = NULL;
            utf8proc_ssize_t r = utf8proc_map(s + seg, (utf8proc_ssize_t)(i - seg), &dst,
                                              UTF8PROC_STABLE | UTF8PROC_COMPOSE);
            if (r < 0) return ERR("NFC: %s", utf8proc_errmsg(r));
            append_bytes(out, dst, (size_t)r);
            free(dst);
        }
        if (i == n) return 0;
        if (cut) { append_bytes(out, s + i, len); seg = i + len; }
        i += len;
    }
}

// ---------------------------------------------------------------------------
// Byte-level alphabet (GPT-2's bytes_to_unicode): printable bytes stand for
// themselves, the other 68 map to U+0100.. in byte order.

static uint32_t bytelevel_cp(int byte) {
    static const int printable_lo[3] = {'!', 0xA1, 0xAE}, printable_hi[3] = {'~', 0xAC, 0xFF};
    int below = 0;  // non-printable bytes before this one
    for (int b = 0; b < byte; b++) {
        int p = 0;
        for (int r = 0; r < 3; r++) p |= b >= printable_lo[r] && b <= printable_hi[r];
        below += !p;
    }
    for (int r = 0; r < 3; r++)
        if (byte >= printable_lo[r] && byte <= printable_hi[r]) return (uint32_t)byte;
    return 256 + (uint32_t)below;
}

// ---------------------------------------------------------------------------
// The tokenizer

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
#define MAX_ID (1 << 24)  // ids beyond this are taken for a corrupt file

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

static Bbpe *bbpe_alloc(void) {
    pthread_once(&uni_once, uni_init);
    Bbpe *b = xcalloc(1, sizeof *b);
    b->unk_id = -1;
    b->max_id = -1;
    b->max_added = -1;
    return b;
}

void bbpe_free(Bbpe *b) {
    if (!b) return;
    strmap_free(&b->vocab);
    strmap_free(&b->raw);
    strmap_free(&b->added_map);
    pairmap_free(&b->merges);
    for (size_t i = 0; i < b->n_added; i++) {
        if (b->added[i].ns != b->added[i].s) free(b->added[i].ns);
        free(b->added[i].s);
    }
    free(b->added);
    free(b->raw_set.pat);
    free(b->norm_set.pat);
    for (int i = 0; i < b->n_stages; i++) pcre2_code_free(b->stages[i].re);
    free(b->dec_off);
    free(b->dec);
    free(b);
}

int32_t bbpe_vocab_size(const Bbpe *b) { return b->max_id + 1; }

int32_t bbpe_token_id(const Bbpe *b, const char *s) {
    size_t n = strlen(s);
    int32_t k = strmap_get(&b->added_map, s, n);
    return k >= 0 ? b->added[k].id : strmap_get(&b->vocab, s, n);
}

// ---------------------------------------------------------------------------
// Loading

static int vocab_load(Bbpe *b, const json_t *v, const char *path) {
    if (!json_is_object(v)) return ERR("%s: vocab is not a JSON object", path);
    strmap_init(&b->vocab, json_object_size(v));
    const char *k;
    json_t *val;
    json_object_foreach((json_t *)v, k, val) {
        if (!json_is_integer(val))
            return ERR("%s: vocab entry \"%.40s\" has no integer id", path, k);
        json_int_t id = json_integer_value(val);
        if (id < 0 || id >= MAX_ID)
            return ERR("%s: vocab entry \"%.40s\" has id %lld, outside [0, %d)", path, k,
                       (long long)id, MAX_ID);
        strmap_put(&b->vocab, k, strlen(k), (int32_t)id);
        if (id > b->max_id) b->max_id = (int32_t)id;
    }
    return 0;
}

// One merge "a b" of rank `rank`; where says where it came from for messages.
static int merge_add(Bbpe *b, ByteVec *tmp, const char *a, size_t al, const char *c, size_t cl,
                     uint32_t rank, const char *path, const char *where, size_t line) {
    int32_t ia = strmap_get(&b->vocab, a, al), ic = strmap_get(&b->vocab, c, cl);
    const char *miss = ia < 0 ? a : ic < 0 ? c : NULL;
    size_t mlen = ia < 0 ? al : cl;
    int32_t im = -1;
    if (!miss) {
        tmp->n = 0;
        append_bytes(tmp, a, al);
        append_bytes(tmp, c, cl);
        im = strmap_get(&b->vocab, tmp->v, tmp->n);
        if (im < 0) { miss = tmp->v; mlen = tmp->n; }
    }
    if (miss)
        return ERR("%s: %s %zu: token \"%.*s\" is not in the vocab", path, where, line,
                   (int)(mlen > 60 ? 60 : mlen), miss);
    pairmap_put(&b->merges, ia, ic, rank, im);
    return 0;
}

static int merges_load_json(Bbpe *b, const json_t *m, const char *path) {
    if (!json_is_array(m)) return ERR("%s: model.merges is not an array", path);
    pairmap_init(&b->merges, json_array_size(m));
    ByteVec tmp = {0};
    uint32_t rank = 0;
    int rc = 0;
    for (size_t i = 0; i < json_array_size(m) && rc == 0; i++) {
        const json_t *e = json_array_get(m, i);
        if (json_is_string(e)) {  // legacy "a b"
            const char *s = json_string_value(e);
            size_t n = json_string_length(e);
            if (n >= 8 && memcmp(s, "#version", 8) == 0) continue;
            const char *sp = memchr(s, ' ', n);
            if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - s)))
                rc = ERR("%s: merge %zu is not two tokens separated by one space", path, i);
            else
                rc = merge_add(b, &tmp, s, (size_t)(sp - s), sp + 1, n - (size_t)(sp + 1 - s), rank++,
                               path, "merge", i);
        } else if (json_is_array(e) && json_array_size(e) == 2 &&
                   json_is_string(json_array_get(e, 0)) && json_is_string(json_array_get(e, 1))) {
            const json_t *x = json_array_get(e, 0), *y = json_array_get(e, 1);
            rc = merge_add(b, &tmp, json_string_value(x), json_string_length(x), json_string_value(y),
                           json_string_length(y), rank++, path, "merge", i);
        } else {
            rc = ERR("%s: merge %zu is neither \"a b\" nor [\"a\", \"b\"]", path, i);
        }
    }
    bytevec_free(&tmp);
    return rc;
}

// merges.txt: one "a b" per line; lines starting with "#version" are skipped.
static int merges_load_txt(Bbpe *b, const char *buf, size_t n, const char *path) {
    size_t lines = 1;
    for (size_t i = 0; i < n; i++) lines += buf[i] == '\n';
    pairmap_init(&b->merges, lines);
    ByteVec tmp = {0};
    uint32_t rank = 0;
    size_t lineno = 0;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0;) {
        const char *s = buf + i, *nl = memchr(s, '\n', n - i);
        size_t len = nl ? (size_t)(nl - s) : n - i;
        i += len + (nl != NULL);
        lineno++;
        if (len > 0 && s[len - 1] == '\r') len--;  // Rust's lines() drops "\r\n" too
        if (len >= 8 && memcmp(s, "#version", 8) == 0) continue;
        const char *sp = memchr(s, ' ', len);
        if (!sp || memchr(sp + 1, ' ', len - (size_t)(sp + 1 - s)))
            rc = ERR("%s: line %zu is not two tokens separated by one space", path, lineno);
        else
            rc = merge_add(b, &tmp, s, (size_t)(sp - s), sp + 1, len - (size_t)(sp + 1 - s), rank++,
                           path, "line", lineno);
    }
    bytevec_free(&tmp);
    return rc;
}

static int json_flag(const json_t *o, const char *key, int dflt) {
    const json_t *v = json_object_get(o, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

// One added token from a tokenizer.json added_tokens entry or a
// tokenizer_config.json added_tokens_decoder entry. With hf_ids the id is the one
// HF's deserializer assigns, which ignores the file's id (it only warns when they
// differ): a content seen before keeps its id and takes the new flags, a content
// in the vocab takes the vocab id, anything else the next id after the largest
// added id, but at least the number of vocab entries.
static int added_push(Bbpe *b, const json_t *o, json_int_t id, int hf_ids, const char *path) {
    const json_t *c = json_object_get(o, "content");
    if (!json_is_string(c)) return ERR("%s: added token %lld has no string content", path, (long long)id);
    size_t len = json_string_length(c);
    const char *s = json_string_value(c);
    if (len == 0) return 0;  // HF ignores empty added tokens
    if (!b->added_map.tab) strmap_init(&b->added_map, 16);
    int32_t k = strmap_get(&b->added_map, s, len);
    Added *a = k >= 0 ? &b->added[k] : NULL;
    if (!a) {
        if (hf_ids) {
            int32_t max = b->max_added, nvocab = (int32_t)b->vocab.n;
            id = strmap_get(&b->vocab, s, len);
            if (id < 0) id = max < 0 ? nvocab : (max >= nvocab || nvocab == 0) ? max + 1 : nvocab;
        }
        if (id < 0 || id >= MAX_ID)
            return ERR("%s: added token id %lld outside [0, %d)", path, (long long)id, MAX_ID);
        if (b->n_added == b->cap_added) {
            b->cap_added = b->cap_added ? 2 * b->cap_added : 16;
            b->added = xrealloc(b->added, b->cap_added * sizeof *b->added);
        }
        a = &b->added[b->n_added++];
        memset(a, 0, sizeof *a);
        a->s = xmalloc(len + 1);
        memcpy(a->s, s, len + 1);
        a->len = len;
        a->id = (int32_t)id;
        strmap_put(&b->added_map, s, len, (int32_t)(b->n_added - 1));
        if (id > b->max_added) b->max_added = (int32_t)id;
        if (id > b->max_id) b->max_id = (int32_t)id;
    }
    a->single_word = (uint8_t)json_flag(o, "single_word", 0);
    a->lstrip = (uint8_t)json_flag(o, "lstrip", 0);
    a->rstrip = (uint8_t)json_flag(o, "rstrip", 0);
    a->special = (uint8_t)json_flag(o, "special", 0);
    a->normalized = (uint8_t)json_flag(o, "normalized", !a->special);
    return 0;
}

// Builds the escaped body of a character class (no brackets) for cls.
static void class_body(ByteVec *o, int cls) {
    char t[40];
    if (cls == UWS) {
        for (size_t r = 0; r < n_uni_ws; r++) {
            int k = snprintf(t, sizeof t, "\\x{%X}-\\x{%X}", uni_ws[r][0], uni_ws[r][1]);
            bytevec_append(o, t, (size_t)k);
        }
        return;
    }
    for (size_t r = 0; r < n_uni_ranges; r++) {
        if (uni_ranges[r].cls != cls) continue;
        int k = snprintf(t, sizeof t, "\\x{%X}-\\x{%X}", uni_ranges[r].lo, uni_ranges[r].hi);
        bytevec_append(o, t, (size_t)k);
    }
}

// Rewrites \p{L}, \p{N}, \pL, \pN, \s (anywhere) and \P{L}, \P{N}, \S (outside
// classes) into explicit classes of Oniguruma's sets, so that PCRE2's older
// Unicode tables and its wider \s do not leak in. Everything else is copied.
static void regex_rewrite(ByteVec *o, const char *p, size_t n) {
    int in_class = 0;
    for (size_t i = 0; i < n;) {
        char c = p[i];
        if (c == '\\' && i + 1 < n) {
            char d = p[i + 1];
            if (d == 'Q') {  // \Q...\E: literal text
                const char *e = memmem(p + i + 2, n - i - 2, "\\E", 2);
                size_t end = e ? (size_t)(e - p) + 2 : n;
                bytevec_append(o, p + i, end - i);
                i = end;
                continue;
            }
            int cls = 0, neg = 0;
            size_t len = 2;
            if (d == 's' || d == 'S') { cls = UWS; neg = d == 'S'; }
            else if ((d == 'p' || d == 'P') && i + 2 < n) {
                neg = d == 'P';
                if ((p[i + 2] == 'L' || p[i + 2] == 'N')) { cls = p[i + 2] == 'L' ? UL : UN; len = 3; }
                else if (i + 4 < n && p[i + 2] == '{' && (p[i + 3] == 'L' || p[i + 3] == 'N') &&
                         p[i + 4] == '}') { cls = p[i + 3] == 'L' ? UL : UN; len = 5; }
            }
            if (cls && !(neg && in_class)) {
                if (!in_class) bytevec_append(o, neg ? "[^" : "[", neg ? 2 : 1);
                class_body(o, cls);
                if (!in_class) bytevec_push(o, ']');
                i += len;
                continue;
            }
            // any other escape: copy it whole (\x{..}, \p{..} and friends included)
            size_t end = i + 2;
            if (end < n && p[end] == '{' && strchr("xpPgkoN", d)) {
                const char *cb = memchr(p + end, '}', n - end);
                if (cb) end = (size_t)(cb - p) + 1;
            }
            bytevec_append(o, p + i, end - i);
            i = end;
            continue;
        }
        if (in_class) {
            if (c == '[' && i + 1 < n && p[i + 1] == ':') {  // [:alpha:]
                const char *e = memmem(p + i + 2, n - i - 2, ":]", 2);
                size_t end = e ? (size_t)(e - p) + 2 : i + 1;
                bytevec_append(o, p + i, end - i);
                i = end;
                continue;
            }
            if (c == ']') in_class = 0;
            bytevec_push(o, c);
            i++;
            continue;
        }
        bytevec_push(o, c);
        i++;
        if (c == '[') {
            in_class = 1;
            if (i < n && p[i] == '^') bytevec_push(o, p[i++]);
            if (i < n && p[i] == ']') bytevec_push(o, p[i++]);  // a leading ] is literal
        }
    }
}

static int stage_add(Bbpe *b, int prefix_space, const char *pat, size_t len, int literal,
                     const char *path) {
    if (b->n_stages == MAX_STAGES) return ERR("%s: more than %d pre-tokenizer stages", path, MAX_STAGES);
    Stage *st = &b->stages[b->n_stages];
    memset(st, 0, sizeof *st);
    st->prefix_space = prefix_space;
    if (!pat) st->kind = SPLIT_NONE;
    else if (!literal && len == strlen(QWEN2_PATTERN) && memcmp(pat, QWEN2_PATTERN, len) == 0)
        st->kind = SPLIT_QWEN2;
    else if (!literal && len == strlen(GPT2_PATTERN) && memcmp(pat, GPT2_PATTERN, len) == 0)
        st->kind = SPLIT_GPT2;
    else {
        ByteVec re = {0};
        if (literal) append_bytes(&re, pat, len);
        else regex_rewrite(&re, pat, len);
        int errc;
        PCRE2_SIZE erroff;
        pcre2_compile_context *cc = pcre2_compile_context_create(NULL);
        pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
        // Oniguruma's default (Ruby) syntax: ^ and $ match at line breaks
        uint32_t opt = literal ? PCRE2_LITERAL | PCRE2_UTF : PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE;
        st->re = pcre2_compile((PCRE2_SPTR)(re.n ? re.v : ""), re.n, opt, &errc, &erroff, cc);
        pcre2_compile_context_free(cc);
        bytevec_free(&re);
        if (!st->re) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(errc, msg, sizeof msg);
            return ERR("%s: split regex \"%.60s\" does not compile: %s", path, pat, (char *)msg);
        }
        pcre2_jit_compile(st->re, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is absent
        st->kind = SPLIT_PCRE;
        b->has_pcre = 1;
    }
    if (st->kind != SPLIT_NONE || st->prefix_space) b->n_stages++;
    return 0;
}

static const char *json_type_str(const json_t *o) {
    const char *t = json_string_value(json_object_get(o, "type"));
    return t ? t : "(no type)";
}

static int normalizer_load(Bbpe *b, const json_t *n, const char *path) {
    if (!n || json_is_null(n)) return 0;
    const char *t = json_type_str(n);
    if (strcmp(t, "NFC") == 0) { b->nfc = 1; return 0; }
    if (strcmp(t, "Sequence") == 0) {
        const json_t *list = json_object_get(n, "normalizers");
        if (!json_is_array(list)) return ERR("%s: normalizer Sequence without a list", path);
        for (size_t i = 0; i < json_array_size(list); i++) TRY(normalizer_load(b, json_array_get(list, i), path));
        return 0;
    }
    return ERR("%s: normalizer %s is not supported (only NFC)", path, t);
}

static int pretok_load(Bbpe *b, const json_t *p, const char *path, int *seen_bytelevel) {
    const char *t = json_type_str(p);
    if (strcmp(t, "Sequence") == 0) {
        const json_t *list = json_object_get(p, "pretokenizers");
        if (!json_is_array(list)) return ERR("%s: pre_tokenizer Sequence without a list", path);
        for (size_t i = 0; i < json_array_size(list); i++)
            TRY(pretok_load(b, json_array_get(list, i), path, seen_bytelevel));
        return 0;
    }
    if (strcmp(t, "ByteLevel") == 0) {
        *seen_bytelevel = 1;
        int aps = json_flag(p, "add_prefix_space", 1), use_regex = json_flag(p, "use_regex", 1);
        return stage_add(b, aps, use_regex ? GPT2_PATTERN : NULL, use_regex ? strlen(GPT2_PATTERN) : 0,
                         0, path);
    }
    if (strcmp(t, "Split") == 0) {
        const json_t *pat = json_object_get(p, "pattern");
        const json_t *re = json_object_get(pat, "Regex"), *str = json_object_get(pat, "String");
        const char *beh = json_string_value(json_object_get(p, "behavior"));
        if (!json_is_string(re) && !json_is_string(str))
            return ERR("%s: Split pre_tokenizer without a Regex or String pattern", path);
        if (!beh || strcmp(beh, "Isolated") != 0)
            return ERR("%s: Split behavior %s is not supported (only Isolated)", path, beh ? beh : "(none)");
        if (json_flag(p, "invert", 0)) return ERR("%s: Split with invert=true is not supported", path);
        const json_t *s = json_is_string(re) ? re : str;
        return stage_add(b, 0, json_string_value(s), json_string_length(s), !json_is_string(re), path);
    }
    return ERR("%s: pre_tokenizer %s is not supported (ByteLevel, Split, Sequence)", path, t);
}

static int cmp_added(const void *x, const void *y) {
    const Added *a = *(const Added *const *)x, *b = *(const Added *const *)y;
    size_t al = a->nlen, bl = b->nlen;  // nlen == len for raw sets (see added_sets)
    uint8_t af = (uint8_t)a->ns[0], bf = (uint8_t)b->ns[0];
    if (af != bf) return af < bf ? -1 : 1;
    if (al != bl) return al > bl ? -1 : 1;
    return a < b ? -1 : a > b;  // earlier first among equals: qsort is not stable
}

// Splits the added tokens into HF's two sets and orders each for matching:
// specials first, then the others, each in file order (HF's pattern order),
// then grouped by first byte, longest first.
static int added_sets(Bbpe *b) {
    // matching text of each token: NFC(content) for normalized tokens under NFC
    for (size_t i = 0; i < b->n_added; i++) {
        Added *a = &b->added[i];
        a->ns = a->s;
        a->nlen = a->len;
        if (a->normalized && b->nfc && maybe_not_nfc((const uint8_t *)a->s, a->len)) {
            ByteVec v = {0};
            if (nfc_append(&v, (const uint8_t *)a->s, a->len) < 0) { bytevec_free(&v); return -1; }
            bytevec_push(&v, '\0');
            a->ns = v.v;
            a->nlen = v.n - 1;
        }
    }
    // order: specials first (HF chains special_tokens then added_tokens)
    Added *ord = xmalloc((b->n_added ? b->n_added : 1) * sizeof *ord);
    size_t k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < b->n_added; i++)
            if (b->added[i].special == (pass == 0)) ord[k++] = b->added[i];
    if (k) memcpy(b->added, ord, k * sizeof *ord);
    free(ord);
    strmap_free(&b->added_map);  // indices moved
    strmap_init(&b->added_map, b->n_added);
    for (size_t i = 0; i < b->n_added; i++) strmap_put(&b->added_map, b->added[i].s, b->added[i].len, (int32_t)i);
    for (int norm = 0; norm < 2; norm++) {
        AddedSet *set = norm ? &b->norm_set : &b->raw_set;
        set->norm = norm;
        set->pat = xmalloc((b->n_added ? b->n_added : 1) * sizeof *set->pat);
        for (size_t i = 0; i < b->n_added; i++)
            if (b->added[i].normalized == norm && b->added[i].nlen > 0) set->pat[set->n++] = &b->added[i];
        qsort(set->pat, set->n, sizeof *set->pat, cmp_added);
        set->single_first = -1;
        for (size_t i = 0; i < set->n; i++) {
            uint8_t f = (uint8_t)set->pat[i]->ns[0];
            if (set->count[f]++ == 0) set->start[f] = (uint32_t)i;
        }
        if (set->n > 0 && set->count[(uint8_t)set->pat[0]->ns[0]] == set->n)
            set->single_first = (uint8_t)set->pat[0]->ns[0];
    }
    return 0;
}

// Appends the bytes HF's ByteLevel decoder makes of token string t: the bytes
// of its byte-level characters, or t itself when any character is not one.
static void token_decode(ByteVec *o, const int16_t *byte_of, const char *t, size_t n) {
    size_t start = o->n;
    for (size_t i = 0; i < n;) {
        size_t len;
        uint32_t c = utf8_decode((const uint8_t *)t + i, &len);
        if (len > n - i || c >= 0x144 || byte_of[c] < 0) {  // not byte-level: keep the text
            o->n = start;
            append_bytes(o, t, n);
            return;
        }
        bytevec_push(o, (char)byte_of[c]);
        i += len;
    }
}

// Everything that depends on the whole vocab: byte symbols, decode table,
// ignore_merges map, added-token sets.
static int bbpe_finish(Bbpe *b, const char *path) {
    if (b->vocab.n == 0) return ERR("%s: empty vocab", path);
    int16_t byte_of[0x144];
    memset(byte_of, 0xFF, sizeof byte_of);
    for (int x = 0; x < 256; x++) {
        uint32_t cp = bytelevel_cp(x);
        byte_of[cp] = (int16_t)x;
        uint8_t u[4];
        size_t n = (size_t)utf8proc_encode_char((utf8proc_int32_t)cp, u);
        b->byte_id[x] = strmap_get(&b->vocab, (const char *)u, n);
    }
    // decode table: vocab strings, then added tokens over them (HF looks there first)
    size_t nid = (size_t)b->max_id + 1;
    uint32_t *src = xmalloc(nid * sizeof *src);  // StrEnt index + 1 per id, 0: none
    memset(src, 0, nid * sizeof *src);
    for (size_t i = 0; i <= b->vocab.mask; i++)
        if (b->vocab.tab[i].id >= 0) src[b->vocab.tab[i].id] = (uint32_t)i + 1;
    int32_t *from_added = xmalloc(nid * sizeof *from_added);
    for (size_t i = 0; i < nid; i++) from_added[i] = -1;
    for (size_t i = 0; i < b->n_added; i++) from_added[b->added[i].id] = (int32_t)i;
    ByteVec dec = {0};
    b->dec_off = xmalloc((nid + 1) * sizeof *b->dec_off);
    for (size_t id = 0; id < nid; id++) {
        b->dec_off[id] = (uint32_t)dec.n;
        if (from_added[id] >= 0) {
            const Added *a = &b->added[from_added[id]];
            token_decode(&dec, byte_of, a->s, a->len);
        } else if (src[id]) {
            const StrEnt *e = &b->vocab.tab[src[id] - 1];
            token_decode(&dec, byte_of, b->vocab.keys.v + e->off, e->len);
        }
        if (dec.n > UINT32_MAX / 2) { free(src); free(from_added); bytevec_free(&dec); return ERR("%s: vocab too large", path); }
    }
    b->dec_off[nid] = (uint32_t)dec.n;
    b->dec = dec.v;
    if (b->ignore_merges) {  // raw bytes -> id for the whole-word shortcut
        strmap_init(&b->raw, b->vocab.n);
        for (size_t id = 0; id < nid; id++)
            if (src[id]) strmap_put(&b->raw, b->dec + b->dec_off[id], b->dec_off[id + 1] - b->dec_off[id], (int32_t)id);
    }
    free(src);
    free(from_added);
    return added_sets(b);
}

static int model_load(Bbpe *b, const json_t *m, const char *path) {
    if (!json_is_object(m)) return ERR("%s: no model object", path);
    const char *t = json_string_value(json_object_get(m, "type"));
    if (t && strcmp(t, "BPE") != 0) return ERR("%s: model type %s is not BPE", path, t);
    const json_t *d = json_object_get(m, "dropout");
    if (d && !json_is_null(d) && !(json_is_number(d) && json_number_value(d) == 0.0))
        return ERR("%s: BPE dropout is not supported", path);
    const char *fix[2] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const json_t *v = json_object_get(m, fix[i]);
        if (v && !json_is_null(v) && !(json_is_string(v) && json_string_length(v) == 0))
            return ERR("%s: BPE %s is not supported", path, fix[i]);
    }
    TRY(vocab_load(b, json_object_get(m, "vocab"), path));
    TRY(merges_load_json(b, json_object_get(m, "merges"), path));
    b->fuse_unk = json_flag(m, "fuse_unk", 0);
    b->ignore_merges = json_flag(m, "ignore_merges", 0);
    const json_t *unk = json_object_get(m, "unk_token");
    if (json_is_string(unk)) b->unk_id = strmap_get(&b->vocab, json_string_value(unk), json_string_length(unk));
    return 0;
}

int bbpe_load_json(Bbpe **out, const json_t *root, const char *path) {
    *out = NULL;
    if (!json_is_object(root)) return ERR("%s: not a JSON object", path);
    Bbpe *b = bbpe_alloc();
    int seen_bl = 0;
    const json_t *pre = json_object_get(root, "pre_tokenizer"), *added = json_object_get(root, "added_tokens");
    if (model_load(b, json_object_get(root, "model"), path) < 0) goto fail;
    if (normalizer_load(b, json_object_get(root, "normalizer"), path) < 0) goto fail;
    if (!json_is_object(pre)) { ERR("%s: no pre_tokenizer: not a byte-level BPE tokenizer", path); goto fail; }
    if (pretok_load(b, pre, path, &seen_bl) < 0) goto fail;
    if (!seen_bl) { ERR("%s: pre_tokenizer has no ByteLevel: not a byte-level BPE tokenizer", path); goto fail; }
    if (added && !json_is_null(added)) {
        if (!json_is_array(added)) { ERR("%s: added_tokens is not an array", path); goto fail; }
        for (size_t i = 0; i < json_array_size(added); i++) {
            const json_t *o = json_array_get(added, i);
            if (!json_is_object(o)) { ERR("%s: added token %zu is not an object", path, i); goto fail; }
            if (added_push(b, o, (json_int_t)i, 1, path) < 0) goto fail;
        }
    }
    const json_t *bf = json_object_get(json_object_get(root, "model"), "byte_fallback");
    if (bbpe_finish(b, path) < 0) goto fail;
    if (json_is_true(bf))  // harmless only when every byte has its own token
        for (int x = 0; x < 256; x++)
            if (b->byte_id[x] < 0) { ERR("%s: byte_fallback with an incomplete byte alphabet is not supported", path); goto fail; }
    *out = b;
    return 0;
fail:
    bbpe_free(b);
    return -1;
}

static json_t *json_buf(const TokBuf *f) {
    json_error_t je;
    json_t *j = json_loadb(f->data, f->n, 0, &je);
    if (!j) ERR("%s:%d:%d: bad JSON: %s", f->name, je.line, je.column, je.text);
    return j;
}

int bbpe_load_buffers(Bbpe **out, const TokBuf *vf, const TokBuf *mf, const TokBuf *cf) {
    *out = NULL;
    Bbpe *b = bbpe_alloc();
    json_t *vocab = NULL, *config = NULL;
    int qwen = 0;
    if (!(vocab = json_buf(vf))) goto fail;
    if (vocab_load(b, vocab, vf->name) < 0) goto fail;
    if (merges_load_txt(b, mf->data, mf->n, mf->name) < 0) goto fail;
    if (cf) {
        if (!(config = json_buf(cf))) goto fail;
        if (!json_is_object(config)) { ERR("%s: not a JSON object", cf->name); goto fail; }
        const char *cls = json_string_value(json_object_get(config, "tokenizer_class"));
        qwen = cls && strncmp(cls, "Qwen2Tokenizer", 14) == 0;  // also Qwen2TokenizerFast
        const json_t *dec = json_object_get(config, "added_tokens_decoder");
        if (dec && !json_is_object(dec)) { ERR("%s: added_tokens_decoder is not an object", cf->name); goto fail; }
        const char *k;
        json_t *o;
        json_object_foreach((json_t *)dec, k, o) {
            char *end;
            long long id = strtoll(k, &end, 10);
            if (!*k || *end || !json_is_object(o)) { ERR("%s: bad added_tokens_decoder entry \"%.20s\"", cf->name, k); goto fail; }
            if (added_push(b, o, id, 0, cf->name) < 0) goto fail;
        }
    }
    b->nfc = qwen;
    const char *pat = qwen ? QWEN2_PATTERN : GPT2_PATTERN;
    if (stage_add(b, 0, pat, strlen(pat), 0, vf->name) < 0) goto fail;
    if (bbpe_finish(b, vf->name) < 0) goto fail;
    json_decref(vocab);
    json_decref(config);
    *out = b;
    return 0;
fail:
    json_decref(vocab);
    json_decref(config);
    bbpe_free(b);
    return -1;
}

int bbpe_load_files(Bbpe **out, const char *vocab_path, const char *merges_path, const char *config_path) {
    *out = NULL;
    const char *paths[3] = {vocab_path, merges_path, config_path};
    char *data[3] = {0};
    TokBuf f[3] = {{0}};
    int rc = 0;
    for (int i = 0; i < 3 && rc == 0 && paths[i]; i++) {
        rc = file_read_all(&data[i], &f[i].n, paths[i]);
        f[i].data = data[i], f[i].name = paths[i];
    }
    if (rc == 0) rc = bbpe_load_buffers(out, &f[0], &f[1], config_path ? &f[2] : NULL);
    for (int i = 0; i < 3; i++) free(data[i]);
    return rc;
}

// ---------------------------------------------------------------------------
// Encoder

// Words longer than CACHE_MAX_KEY bytes are rare in byte-level BPE (the regex cuts text
// at spaces and letter/digit changes) and not worth keeping; spm.c keeps longer ones,
// because its words are whole runs of text up to the next space.
#define CACHE_MAX_KEY 48
#define SCAN_MAX 48                // words up to this many symbols merge by linear scan

struct BbpeEncoder {
    const Bbpe *b;
    WordCache cache;               // pre-token bytes -> ids
    ByteVec norm;                  // NFC output of the current segment
    ByteVec pre[MAX_STAGES];       // prefix-space copies, one per stage
    size_t scap;                   // capacity of the merge scratch below
    int32_t *sym, *nxt, *prv, *pid;  // (scap,) symbols, links, merged id of pair at i
    uint32_t *rk;                  // (scap,) rank of the pair (i, nxt[i]), RANK_NONE if none
    MergeHeap heap;                // rank << 32 | position, for words over SCAN_MAX symbols
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jstack;
};

BbpeEncoder *bbpe_encoder_new(const Bbpe *b) {
    BbpeEncoder *e = xcalloc(1, sizeof *e);
    e->b = b;
    wordcache_init(&e->cache);
    if (b->has_pcre) {
        e->md = pcre2_match_data_create(1, NULL);
        e->mctx = pcre2_match_context_create(NULL);
        e->jstack = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, NULL);
        CHECK(e->md && e->mctx && e->jstack, "out of memory");
        pcre2_jit_stack_assign(e->mctx, NULL, e->jstack);
    }
    return e;
}

void bbpe_encoder_free(BbpeEncoder *e) {
    if (!e) return;
    wordcache_free(&e->cache);
    bytevec_free(&e->norm);
    for (int i = 0; i < MAX_STAGES; i++) bytevec_free(&e->pre[i]);
    free(e->sym); free(e->nxt); free(e->prv); free(e->pid); free(e->rk);
    mergeheap_free(&e->heap);
    pcre2_match_data_free(e->md);
    pcre2_match_context_free(e->mctx);
    pcre2_jit_stack_free(e->jstack);
    free(e);
}

static void scratch_reserve(BbpeEncoder *e, size_t n) {
    if (n <= e->scap) return;
    size_t cap = e->scap ? e->scap : 64;
    while (cap < n) cap *= 2;
    e->sym = xrealloc(e->sym, cap * sizeof *e->sym);
    e->nxt = xrealloc(e->nxt, cap * sizeof *e->nxt);
    e->prv = xrealloc(e->prv, cap * sizeof *e->prv);
    e->pid = xrealloc(e->pid, cap * sizeof *e->pid);
    e->rk = xrealloc(e->rk, cap * sizeof *e->rk);
    e->scap = cap;
}

// Rank and merged id of the pair starting at symbol i (RANK_NONE at the end).
static inline void pair_update(BbpeEncoder *e, int32_t i) {
    int32_t j = e->nxt[i];
    e->rk[i] = j < 0 ? RANK_NONE : pairmap_get(&e->b->merges, e->sym[i], e->sym[j], &e->pid[i]);
}

// Merges symbol i with the next one; returns the previous symbol (or -1).
static inline int32_t merge_at(BbpeEncoder *e, int32_t i) {
    int32_t j = e->nxt[i], k = e->nxt[j];
    e->sym[i] = e->pid[i];
    e->nxt[i] = k;
    if (k >= 0) e->prv[k] = i;
    e->rk[j] = RANK_NONE;
    pair_update(e, i);
    int32_t p = e->prv[i];
    if (p >= 0) pair_update(e, p);
    return p;
}

// BPE of one pre-token: one symbol per byte, then repeatedly the pair of lowest
// rank (leftmost among equals) is merged, which is what HF's heap of
// (rank, position) in Word::merge_all computes.
static void bpe_merge(BbpeEncoder *e, IdVec *out, const uint8_t *s, size_t n) {
    const Bbpe *b = e->b;
    scratch_reserve(e, n + 1);
    int32_t *sym = e->sym;
    size_t m = 0;
    int unk = 0;  // an unknown symbol is pending (HF adds it lazily to fuse runs)
    for (size_t i = 0; i < n; i++) {
        int32_t id = b->byte_id[s[i]];
        if (id >= 0) {
            if (unk) { sym[m++] = b->unk_id; unk = 0; }
            sym[m++] = id;
        } else if (b->unk_id >= 0) {
            if (unk && !b->fuse_unk) sym[m++] = b->unk_id;
            unk = 1;
        }
    }
    if (unk) sym[m++] = b->unk_id;
    if (m == 0) return;
    for (size_t i = 0; i < m; i++) {
        e->prv[i] = (int32_t)i - 1;
        e->nxt[i] = i + 1 < m ? (int32_t)i + 1 : -1;
    }
    for (size_t i = 0; i < m; i++) pair_update(e, (int32_t)i);
    if (m <= SCAN_MAX) {
        for (;;) {
            uint32_t best = RANK_NONE;
            int32_t bi = -1;
            for (int32_t i = 0; i >= 0; i = e->nxt[i])
                if (e->rk[i] < best) { best = e->rk[i]; bi = i; }
            if (bi < 0) break;
            merge_at(e, bi);
        }
    } else {
        MergeHeap *h = &e->heap;
        uint32_t aux;
        h->n = 0;
        for (size_t i = 0; i < m; i++)
            if (e->rk[i] != RANK_NONE) mergeheap_push(h, (uint64_t)e->rk[i] << 32 | i, 0);
        while (h->n > 0) {
            uint64_t top = mergeheap_pop(h, &aux);
            int32_t i = (int32_t)(uint32_t)top;
            // stale entries: the pair at i changed (ranks are unique per pair)
            if (e->rk[i] != (uint32_t)(top >> 32)) continue;
            int32_t p = merge_at(e, i);
            if (e->rk[i] != RANK_NONE) mergeheap_push(h, (uint64_t)e->rk[i] << 32 | (uint32_t)i, 0);
            if (p >= 0 && e->rk[p] != RANK_NONE) mergeheap_push(h, (uint64_t)e->rk[p] << 32 | (uint32_t)p, 0);
        }
    }
    for (int32_t i = 0; i >= 0; i = e->nxt[i]) idvec_push(out, sym[i]);
}

// Ids of one pre-token, through the word cache.
static void bpe_piece(BbpeEncoder *e, IdVec *out, const uint8_t *s, size_t n) {
    const Bbpe *b = e->b;
    if (n == 1 && b->byte_id[s[0]] >= 0) { idvec_push(out, b->byte_id[s[0]]); return; }
    if (b->ignore_merges) {
        int32_t id = strmap_get(&b->raw, (const char *)s, n);
        if (id >= 0) { idvec_push(out, id); return; }
    }
    if (n > CACHE_MAX_KEY) { bpe_merge(e, out, s, n); return; }
    uint64_t h = tok_hash(s, n);
    uint32_t at = 0;
    size_t nids = 0;
    const int32_t *ids = wordcache_get(&e->cache, &at, &nids, h, s, n);
    if (ids) {
        if (nids) {
            idvec_reserve(out, nids);
            memcpy(out->v + out->n, ids, nids * sizeof *out->v);
            out->n += nids;
        }
        return;
    }
    size_t start = out->n;
    bpe_merge(e, out, s, n);
    wordcache_put(&e->cache, at, h, s, n, out->v + start, out->n - start);
}

// ---- the two known split regexes, by hand ---------------------------------

static inline int class_at(const uint8_t *s, size_t i, uint32_t *c, size_t *len) {
    if (s[i] < 0x80) { *c = s[i]; *len = 1; return uni_bmp[s[i]]; }
    *c = utf8_decode(s + i, len);
    return uni_class(*c);
}

// End of the run of characters whose class is in mask (mask 0: class 0) from i.
static inline size_t run_end(const uint8_t *s, size_t n, size_t i, int mask) {
    while (i < n) {
        uint32_t c;
        size_t len;
        int k = class_at(s, i, &c, &len);
        if (mask ? !(k & mask) : k != 0) break;
        i += len;
    }
    return i;
}

static inline size_t crlf_end(const uint8_t *s, size_t n, size_t i) {
    while (i < n && (s[i] == '\r' || s[i] == '\n')) i++;
    return i;
}

// Length after the apostrophe of 's 't 're 've 'm 'll 'd; caseless as
// Oniguruma's (?i:...), where U+017F (long s) folds to s.
static inline size_t contraction_len(const uint8_t *s, size_t n, int caseless) {
    uint8_t c = s[0], d = n > 1 ? s[1] : 0;
    if (caseless) {
        if (c == 0xC5 && d == 0xBF) return 2;
        if (c >= 'A' && c <= 'Z') c += 32;
        if (d >= 'A' && d <= 'Z') d += 32;
    }
    if (c == 's' || c == 't' || c == 'm' || c == 'd') return 1;
    if (((c == 'r' || c == 'v') && d == 'e') || (c == 'l' && d == 'l')) return 2;
    return 0;
}

// Whitespace at i: the regex tail \s*[\r\n]+ | \s+(?!\S) | \s+ (with_crlf: Qwen2
// has the first alternative, GPT-2 does not).
static inline size_t split_space(const uint8_t *s, size_t n, size_t i, int with_crlf) {
    size_t j = i, last = i, nl = SIZE_MAX;
    while (j < n) {
        uint32_t c;
        size_t len;
        if (!(class_at(s, j, &c, &len) & UWS)) break;
        if (c == '\r' || c == '\n') nl = j;
        last = j;
        j += len;
    }
    if (with_crlf && nl != SIZE_MAX) return nl + 1;  // \s* backs off to the last line break
    if (j == n) return n;                              // \s+(?!\S) at the end
    if (last > i) return last;                         // \s+(?!\S): leave one for the next word
    return j;                                          // \s+
}

// End of the Qwen2 pre-token starting at i < n; see QWEN2_PATTERN.
static size_t split_qwen2(const uint8_t *s, size_t n, size_t i) {
    uint32_t c0, c1;
    size_t l0, l1;
    int k0 = class_at(s, i, &c0, &l0);
    size_t j = i + l0;
    if (c0 == '\'' && j < n) {
        size_t m = contraction_len(s + j, n - j, 1);
        if (m) return j + m;
    }
    if (k0 & UL) return run_end(s, n, j, UL);
    int k1 = j < n ? class_at(s, j, &c1, &l1) : -1;
    if (!(k0 & UN) && c0 != '\r' && c0 != '\n' && k1 >= 0 && (k1 & UL)) return run_end(s, n, j, UL);
    if (k0 & UN) return j;
    if (k0 == 0) return crlf_end(s, n, run_end(s, n, j, 0));
    if (c0 == ' ' && k1 == 0) return crlf_end(s, n, run_end(s, n, j, 0));
    return split_space(s, n, i, 1);
}

// End of the GPT-2 pre-token starting at i < n; see GPT2_PATTERN.
static size_t split_gpt2(const uint8_t *s, size_t n, size_t i) {
    uint32_t c0, c1;
    size_t l0, l1;
    int k0 = class_at(s, i, &c0, &l0);
    size_t j = i + l0;
    if (c0 == '\'' && j < n) {
        size_t m = contraction_len(s + j, n - j, 0);
        if (m) return j + m;
    }
    if (c0 == ' ' && j < n) {
        int k1 = class_at(s, j, &c1, &l1);
        if (k1 == UL || k1 == UN) return run_end(s, n, j, k1);
        if (k1 == 0) return run_end(s, n, j, 0);
    }
    if (k0 == UL || k0 == UN) return run_end(s, n, j, k0);
    if (k0 == 0) return run_end(s, n, j, 0);
    return split_space(s, n, i, 0);
}

// ---- pre-tokenizer stages --------------------------------------------------

static int run_stage(BbpeEncoder *e, IdVec *out, int k, const uint8_t *s, size_t n);

// HF's Split(Isolated) over Oniguruma's find_iter: matches and the gaps between
// them become pieces; after an empty match the search resumes one character
// later, and an empty match right where the previous match ended is skipped.
static int split_pcre(BbpeEncoder *e, IdVec *out, int k, const pcre2_code *re, const uint8_t *s, size_t n) {
    size_t prev = 0, pos = 0, last_end = SIZE_MAX;
    while (pos <= n) {
        int rc = pcre2_match(re, s, n, pos, PCRE2_NO_UTF_CHECK, e->md, e->mctx);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[120];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return ERR("split regex: %s", (char *)msg);
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md);
        size_t ms = ov[0], me = ov[1];
        if (ms == me) {
            pos = me < n ? me + utf8_len(s[me]) : n + 1;
            if (me == last_end) continue;
        } else {
            pos = me;
        }
        last_end = me;
        if (ms > prev) TRY(run_stage(e, out, k + 1, s + prev, ms - prev));
        if (me > ms) TRY(run_stage(e, out, k + 1, s + ms, me - ms));
        prev = me;
    }
    if (prev < n) TRY(run_stage(e, out, k + 1, s + prev, n - prev));
    return 0;
}

static int run_stage(BbpeEncoder *e, IdVec *out, int k, const uint8_t *s, size_t n) {
    const Bbpe *b = e->b;
    if (n == 0) return 0;
    if (k == b->n_stages) { bpe_piece(e, out, s, n); return 0; }
    const Stage *st = &b->stages[k];
    if (st->prefix_space && s[0] != ' ') {
        ByteVec *p = &e->pre[k];
        p->n = 0;
        bytevec_push(p, ' ');
        bytevec_append(p, s, n);
        s = (const uint8_t *)p->v;
        n = p->n;
    }
    int last = k + 1 == b->n_stages;
    switch (st->kind) {
    case SPLIT_NONE:
        return run_stage(e, out, k + 1, s, n);
    case SPLIT_QWEN2:
        for (size_t i = 0, j; i < n; i = j) {
            j = split_qwen2(s, n, i);
            if (last) bpe_piece(e, out, s + i, j - i);
            else TRY(run_stage(e, out, k + 1, s + i, j - i));
        }
        return 0;
    case SPLIT_GPT2:
        for (size_t i = 0, j; i < n; i = j) {
            j = split_gpt2(s, n, i);
            if (last) bpe_piece(e, out, s + i, j - i);
            else TRY(run_stage(e, out, k + 1, s + i, j - i));
        }
        return 0;
    case SPLIT_PCRE:
        return split_pcre(e, out, k, st->re, s, n);
    }
    return 0;
}

// ---- added tokens -----------------------------------------------------------

// Leftmost-longest match of set in s[from, n).
static int added_find(const AddedSet *set, const uint8_t *s, size_t n, size_t from, size_t *at,
                      const Added **tok) {
    for (size_t p = from; p < n; p++) {
        if (set->single_first >= 0) {
            const uint8_t *q = memchr(s + p, set->single_first, n - p);
            if (!q) return 0;
            p = (size_t)(q - s);
        }
        uint32_t cnt = set->count[s[p]];
        for (uint32_t i = set->start[s[p]]; cnt && i < set->start[s[p]] + cnt; i++) {
            const Added *a = set->pat[i];
            const char *t = set->norm ? a->ns : a->s;
            size_t len = set->norm ? a->nlen : a->len;
            if (len <= n - p && memcmp(s + p, t, len) == 0) { *at = p; *tok = a; return 1; }
        }
    }
    return 0;
}

// Rust's Unicode \w, approximately: letters, marks, decimal and letter numbers,
// connector punctuation, ZWNJ/ZWJ.
static int is_word(uint32_t c) {
    if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
    if (c == 0x200C || c == 0x200D || (uni_class(c) & UL)) return 1;
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
        return 1;
    default:
        return 0;
    }
}

static size_t char_start_before(const uint8_t *s, size_t i) {
    do i--; while (i > 0 && (s[i] & 0xC0) == 0x80);
    return i;
}

static int encode_segment(BbpeEncoder *e, IdVec *out, const uint8_t *s, size_t n, int maybe_nfc);

// HF's AddedVocabulary::find_matches + split: the tokens of set become ids, the
// text around them goes on (raw pieces to normalization, normalized pieces to
// the pre-tokenizer).
static int encode_added(BbpeEncoder *e, IdVec *out, const AddedSet *set, const uint8_t *s, size_t n,
                        int maybe_nfc) {
    size_t start_off = 0, scan = 0, at;
    const Added *a;
    while (scan < n && added_find(set, s, n, scan, &at, &a)) {
        size_t start = at, stop = at + (set->norm ? a->nlen : a->len);
        scan = stop;  // the automaton resumes after the match, whatever strip does
        if (a->single_word) {
            uint32_t c;
            size_t len;
            int word_before = start > 0 && is_word(utf8_decode(s + char_start_before(s, start), &len));
            int word_after = stop < n && (c = utf8_decode(s + stop, &len), is_word(c));
            if (word_before || word_after) continue;
        }
        if (a->lstrip) {
            size_t ns = start;
            while (ns > 0) {
                size_t p = char_start_before(s, ns), len;
                if (!(uni_class(utf8_decode(s + p, &len)) & UWS)) break;
                ns = p;
            }
            start = ns > start_off ? ns : start_off;
        }
        if (a->rstrip) {
            while (stop < n) {
                size_t len;
                if (!(uni_class(utf8_decode(s + stop, &len)) & UWS)) break;
                stop += len;
            }
        }
        if (start_off < start) {
            if (set->norm) TRY(run_stage(e, out, 0, s + start_off, start - start_off));
            else TRY(encode_segment(e, out, s + start_off, start - start_off, maybe_nfc));
        }
        idvec_push(out, a->id);
        start_off = stop;
    }
    if (start_off < n) {
        if (set->norm) return run_stage(e, out, 0, s + start_off, n - start_off);
        return encode_segment(e, out, s + start_off, n - start_off, maybe_nfc);
    }
    return 0;
}

// Appends NFC(s): boundary-safe stretches are copied, and only the spans from
// the last boundary-safe code point before a doubtful one to the next
// boundary-safe code point go through nfc_append.
static int nfc_fast(ByteVec *out, const uint8_t *s, size_t n) {
    size_t i = 0, safe = 0, copied = 0;  // safe: start of the last boundary-safe code point
    while (i < n) {
        if (s[i] < 0xCC) {  // below U+0300 (or a continuation byte): always boundary-safe
            if (s[i] < 0x80 || s[i] >= 0xC0) safe = i;
            i++;
            continue;
        }
        size_t len;
        uint32_t c = utf8_decode(s + i, &len);
        if (!nfc_is_bad(c)) { safe = i; i += len; continue; }
        size_t j = i + len;
        while (j < n) {
            if (s[j] < 0xCC) break;
            if (!nfc_is_bad(utf8_decode(s + j, &len))) break;
            j += len;
        }
        append_bytes(out, s + copied, safe - copied);
        TRY(nfc_append(out, s + safe, j - safe));
        copied = safe = i = j;
    }
    append_bytes(out, s + copied, n - copied);
    return 0;
}

// A piece of raw text between added tokens: normalize, then normalized added
// tokens, then the pre-tokenizer.
static int encode_segment(BbpeEncoder *e, IdVec *out, const uint8_t *s, size_t n, int maybe_nfc) {
    const Bbpe *b = e->b;
    if (b->nfc && maybe_nfc && maybe_not_nfc(s, n)) {
        e->norm.n = 0;
        TRY(nfc_fast(&e->norm, s, n));
        s = (const uint8_t *)e->norm.v;
        n = e->norm.n;
    }
    if (b->norm_set.n) return encode_added(e, out, &b->norm_set, s, n, 0);
    return run_stage(e, out, 0, s, n);
}

int bbpe_encode(BbpeEncoder *e, IdVec *out, const char *text, size_t len) {
    const uint8_t *s = (const uint8_t *)text;
    size_t bad;
    if (!utf8_valid(text, len, &bad)) return ERR("bbpe: input is not valid UTF-8 (byte %zu of %zu)", bad, len);
    int maybe_nfc = e->b->nfc && maybe_not_nfc(s, len);
    if (e->b->raw_set.n) return encode_added(e, out, &e->b->raw_set, s, len, maybe_nfc);
    return encode_segment(e, out, s, len, maybe_nfc);
}

int bbpe_decode(const Bbpe *b, ByteVec *out, const int32_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id > b->max_id)
            return ERR("bbpe: token id %d outside [0, %d)", (int)id, (int)b->max_id + 1);
        append_bytes(out, b->dec + b->dec_off[id], b->dec_off[id + 1] - b->dec_off[id]);
    }
    return 0;
}
