// spm.c: SentencePiece BPE (tokenizer.model) and its HF tokenizer.json twin; see spm.h.
//
// Order of this file: hashing and the small maps; struct Spm and the checks every
// model gets at load time; the protobuf reader (tokenizer.model); the tokenizer.json
// reader; the encoder (normalizers, the merge loop shared by both rule sets, the word
// cache); the decoder.
//
// Written from reading (not copying) sentencepiece v0.2 (normalizer.cc, bpe_model.cc,
// model_interface.cc, sentencepiece_processor.cc) and HF tokenizers (models/bpe,
// tokenizer/added_vocabulary.rs, normalizers, pre_tokenizers/metaspace.rs). Their
// quirks are kept on purpose, because the ids must be theirs: sentencepiece looks a
// piece up among control/byte/unknown pieces before normal ones, fuses runs of unknown
// pieces into one <unk> when there is no byte fallback, resegments UNUSED pieces with
// the last pair pushed for them, and treats an UNUSED piece that no merge formed as
// unknown (v0.2.3, the version the tests install, does; v0.2.1's source did not); HF
// flushes a pending <unk> only at the next known character, ranks merges by their
// line, prepends "▁" per added-token segment.
//
// Normalization follows the model's precompiled charsmap, so identity, nmt_nfkc,
// nfkc_cf and custom rules all work: the Darts double array in the file is walked
// directly, with every index bound-checked.
//
// Speed: a merge never crosses the start of a run of "▁" when no vocabulary piece has
// a "▁" after another character (checked at load; true for LLaMA). Text is then cut
// before each run of "▁", and each word is encoded alone and remembered in a per-thread
// cache. When the check fails, or the model has UNUSED pieces (whose resegmentation
// state spans the whole text), the whole text is one word: slower, still exact.
//
// Deliberate gaps, each an error at load rather than a silent difference: model types
// other than BPE, a denormalizer charsmap, tokenizer.json normalizers other than
// Prepend/Replace(String), pre-tokenizers other than Metaspace("▁"), BPE dropout,
// subword prefixes/suffixes. The ModelProto's self-test samples are not run.
#include "tok/spm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "base/error.h" // defines: ERR, TRY, xmalloc, xcalloc, xrealloc, xstrdup

enum { PIECE_NORMAL = 1, PIECE_UNKNOWN = 2, PIECE_CONTROL = 3, PIECE_USER = 4,
       PIECE_UNUSED = 5, PIECE_BYTE = 6 };                 // sentencepiece's enum values
enum { RULES_SPM = 1, RULES_HF = 2 };                      // whose encode we reproduce
enum { CUT_NONE = 0, CUT_RUNS = 1 };                       // how a word is cut for the cache
enum { META_ALWAYS = 0, META_FIRST = 1, META_NEVER = 2 };  // Metaspace prepend_scheme

static const char WS[] = "\xe2\x96\x81"; // U+2581 LOWER ONE EIGHTH BLOCK, the space symbol
#define WS_LEN 3
static const char REPLACEMENT_CHAR[] = "\xef\xbf\xbd"; // U+FFFD

#define CACHE_SLOTS (1u << 17)   // word cache: slots per encoder (power of two)
#define CACHE_MAX_WORD 256       // longer words are not cached (rare; encoded every time)

// ---------------------------------------------------------------------------------
// Hashing and UTF-8

static inline uint64_t mix64(uint64_t a, uint64_t b) {
    __uint128_t r = (__uint128_t)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

// A wyhash-like hash: pieces and words are short, so one multiply per 8 bytes.
static uint64_t hash_bytes(const void *data, size_t n) {
    const uint8_t *p = data;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xC2B2AE3D27D4EB4Full);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = mix64(h ^ w, 0xA0761D6478BD642Full);
        p += 8;
        n -= 8;
    }
    if (n) {
        uint64_t w = 0;
        memcpy(&w, p, n);
        h = mix64(h ^ w, 0xE7037ED1A0B428DBull);
    }
    return mix64(h, 0x8EBC6AF09C88C6E3ull);
}

static inline int is_trail(uint8_t c) { return (c & 0xC0) == 0x80; }

// Length (1..4) of the valid UTF-8 character at p, or 0 when the bytes there are not
// one. sentencepiece's rule (util.cc DecodeUTF8): no overlongs, no surrogates, nothing
// past U+10FFFF, and the character must fit in the n bytes left.
static size_t utf8_char_len(const uint8_t *p, size_t n) {
    uint8_t c = p[0];
    if (c < 0x80) return 1;
    if ((c & 0xE0) == 0xC0) {
        if (n >= 2 && is_trail(p[1]) && (((c & 0x1Fu) << 6) | (p[1] & 0x3Fu)) >= 0x80) return 2;
    } else if ((c & 0xF0) == 0xE0) {
        if (n >= 3 && is_trail(p[1]) && is_trail(p[2])) {
            uint32_t cp = ((c & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
            if (cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) return 3;
        }
    } else if ((c & 0xF8) == 0xF0) {
        if (n >= 4 && is_trail(p[1]) && is_trail(p[2]) && is_trail(p[3])) {
            uint32_t cp = ((c & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6)
                          | (p[3] & 0x3Fu);
            if (cp >= 0x10000 && cp <= 0x10FFFF) return 4;
        }
    }
    return 0;
}

// sentencepiece's OneCharLen: the length the lead byte announces, clipped to what is left.
static inline size_t one_char_len(const uint8_t *p, size_t n) {
    static const uint8_t len_of_nibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    size_t m = len_of_nibble[p[0] >> 4];
    return m < n ? m : n;
}

// bytevec_append that accepts n == 0 with p == NULL (memcpy does not).
static inline void append_bytes(ByteVec *b, const void *p, size_t n) {
    if (n) bytevec_append(b, p, n);
}

static inline int starts_ws(const char *p, size_t n) {
    return n >= WS_LEN && memcmp(p, WS, WS_LEN) == 0;
}

// ---------------------------------------------------------------------------------
// A byte trie for longest-prefix matches: sentencepiece's user-defined symbols and
// HF's added tokens. Small sets, so children are a linked list.

typedef struct { int32_t child, sibling, value; uint8_t byte; } TrieNode;
typedef struct {
    TrieNode *node;     // node 0 is the root; no nodes at all means an empty set
    int32_t n, cap;
    uint8_t first[32];  // bitmap of the first bytes of keys: most positions stop here
} Trie;

static int32_t trie_child(const Trie *t, int32_t at, uint8_t b) {
    for (int32_t c = t->node[at].child; c >= 0; c = t->node[c].sibling)
        if (t->node[c].byte == b) return c;
    return -1;
}

static int32_t trie_new_node(Trie *t, uint8_t b) {
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->node = xrealloc(t->node, (size_t)t->cap * sizeof *t->node);
    }
    t->node[t->n] = (TrieNode){.child = -1, .sibling = -1, .value = -1, .byte = b};
    return t->n++;
}

// Adds key -> value (value >= 0); a key added twice keeps the last value.
static void trie_add(Trie *t, const uint8_t *key, size_t len, int32_t value) {
    if (len == 0) return;
    if (t->n == 0) trie_new_node(t, 0);
    int32_t at = 0;
    for (size_t i = 0; i < len; i++) {
        int32_t c = trie_child(t, at, key[i]);
        if (c < 0) {
            c = trie_new_node(t, key[i]);
            t->node[c].sibling = t->node[at].child;
            t->node[at].child = c;
        }
        at = c;
    }
    t->node[at].value = value;
    t->first[key[0] >> 3] |= (uint8_t)(1u << (key[0] & 7));
}

// The value of the longest key that is a prefix of s[0..n), or -1; its length in *len.
static int32_t trie_longest(const Trie *t, const uint8_t *s, size_t n, size_t *len) {
    if (t->n == 0 || n == 0 || !(t->first[s[0] >> 3] & (1u << (s[0] & 7)))) return -1;
    int32_t at = 0, best = -1;
    for (size_t i = 0; i < n; i++) {
        at = trie_child(t, at, s[i]);
        if (at < 0) break;
        if (t->node[at].value >= 0) {
            best = t->node[at].value;
            *len = i + 1;
        }
    }
    return best;
}

// ---------------------------------------------------------------------------------
// The model

typedef struct { uint32_t tag; int32_t norm, res; } MapSlot;  // empty: norm < 0 && res < 0
typedef struct { uint64_t key; uint32_t rank; int32_t new_id; } MergeSlot;  // key ~0: empty
typedef struct { int32_t id; uint8_t single_word, lstrip, rstrip; } AddedTok;
typedef struct { int prepend; char *a, *b; size_t a_len, b_len; } NormOp;  // Prepend a | Replace a->b

struct Spm {
    int rules;               // RULES_SPM or RULES_HF
    char *path;              // for messages
    int32_t n;               // pieces; ids are [0, n)
    size_t n_cap, blob_cap;  // allocated pieces and blob bytes while loading
    char *blob;              // piece bytes back to back
    uint32_t *off;           // (n+1) piece i is blob[off[i] .. off[i+1])
    uint32_t *prio;          // (n) score as an unsigned key that sorts like the float
    uint8_t *type;           // (n) PIECE_*
    int16_t *byte_of;        // (n) the byte of a BYTE piece, else -1
    int32_t *dec_id;         // (n) the id whose type sp.decode uses (it looks the piece up again)

    // piece bytes -> ids. "norm": pieces merges may form (sentencepiece's pieces_: normal,
    // user-defined, unused; HF: the model vocab); "res": the rest (sentencepiece's
    // reserved_id_map_: control, unknown, byte), looked up first by PieceToId.
    MapSlot *map;
    uint64_t map_mask;

    int32_t unk_id, bos_id, eos_id;  // -1 when absent
    int32_t byte_id[256];            // id used for byte b by byte fallback, -1 if none
    int byte_fallback;
    int cut;                         // CUT_RUNS when words can be cut before runs of "▁"

    // sentencepiece normalizer and model
    int add_dummy_prefix, remove_extra_ws, escape_ws, ws_suffix, has_unused;
    uint32_t *cm_unit;               // precompiled charsmap: Darts double-array units
    size_t cm_n;
    char *cm_norm;                   // ... and the NUL-separated replacement strings
    size_t cm_norm_len;
    Trie user;                       // user-defined pieces -> id
    char *unk_surface;               // what sp.decode prints for <unk>
    size_t unk_surface_len;

    // HF tokenizer.json
    MergeSlot *merges;
    uint64_t merges_mask;
    int fuse_unk, ignore_merges, unk_missing;  // unk_missing: unk_token names no vocab entry
    NormOp *ops;
    int n_ops;
    int metaspace, meta_scheme, meta_split;
    AddedTok *added;
    int n_added;
    Trie added_raw, added_norm;      // content (raw text) / normalized content -> added index
};

static inline const char *piece_ptr(const Spm *s, int32_t id) { return s->blob + s->off[id]; }
static inline size_t piece_len(const Spm *s, int32_t id) { return s->off[id + 1] - s->off[id]; }

// The slot holding piece p[0..n), or the empty slot where it would go.
static MapSlot *map_slot(const Spm *s, const char *p, size_t n) {
    uint64_t h = hash_bytes(p, n);
    uint32_t tag = (uint32_t)(h >> 32);
    for (uint64_t i = h & s->map_mask;; i = (i + 1) & s->map_mask) {
        MapSlot *m = &s->map[i];
        if (m->norm < 0 && m->res < 0) return m;
        if (m->tag != tag) continue;
        int32_t id = m->norm >= 0 ? m->norm : m->res;
        if (piece_len(s, id) == n && memcmp(piece_ptr(s, id), p, n) == 0) return m;
    }
}

static inline int32_t find_norm(const Spm *s, const char *p, size_t n) {
    return map_slot(s, p, n)->norm;
}

// sentencepiece's PieceToId: reserved pieces first, then normal ones, else <unk>.
static inline int32_t piece_to_id(const Spm *s, const char *p, size_t n) {
    const MapSlot *m = map_slot(s, p, n);
    return m->res >= 0 ? m->res : m->norm >= 0 ? m->norm : s->unk_id;
}

static const MergeSlot *merge_find(const Spm *s, int32_t a, int32_t b) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (uint64_t i = hash_bytes(&key, 8) & s->merges_mask;; i = (i + 1) & s->merges_mask) {
        const MergeSlot *m = &s->merges[i];
        if (m->key == key) return m;
        if (m->key == UINT64_MAX) return NULL;
    }
}

// A float score as a key whose unsigned order is the float order (-0 == +0).
static uint32_t score_key(float f) {
    uint32_t u;
    if (f == 0.0f) f = 0.0f;
    memcpy(&u, &f, 4);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// "<0xNN>" with two hex digits (upper case unless lower is allowed) -> NN, else -1.
static int parse_byte_piece(const char *p, size_t n, int allow_lower) {
    if (n != 6 || memcmp(p, "<0x", 3) != 0 || p[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0'
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
              : allow_lower && c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

void spm_free(Spm *s) {
    if (!s) return;
    free(s->path);
    free(s->blob);
    free(s->off);
    free(s->prio);
    free(s->type);
    free(s->byte_of);
    free(s->dec_id);
    free(s->map);
    free(s->cm_unit);
    free(s->cm_norm);
    free(s->user.node);
    free(s->unk_surface);
    free(s->merges);
    for (int i = 0; i < s->n_ops; i++) {
        free(s->ops[i].a);
        free(s->ops[i].b);
    }
    free(s->ops);
    free(s->added);
    free(s->added_raw.node);
    free(s->added_norm.node);
    free(s);
}

static Spm *spm_new(int rules, const char *path) {
    Spm *s = xcalloc(1, sizeof *s);
    s->rules = rules;
    s->path = xstrdup(path);
    s->unk_id = s->bos_id = s->eos_id = -1;
    s->add_dummy_prefix = s->remove_extra_ws = s->escape_ws = 1;  // proto2 defaults
    return s;
}

// Appends piece i (bytes p[0..len)) to the table; pieces are added in id order.
static void spm_push_piece(Spm *s, const char *p, size_t len, float score, int type) {
    int32_t i = s->n++;
    if ((size_t)s->n + 1 > s->n_cap) {
        s->n_cap = s->n_cap ? 2 * s->n_cap : 1024;
        s->off = xrealloc(s->off, s->n_cap * sizeof *s->off);
        s->prio = xrealloc(s->prio, s->n_cap * sizeof *s->prio);
        s->type = xrealloc(s->type, s->n_cap);
    }
    if (i == 0) s->off[0] = 0;
    size_t at = s->off[i];
    if (at + len + 1 > s->blob_cap) {
        s->blob_cap = 2 * (at + len + 1) + 4096;
        s->blob = xrealloc(s->blob, s->blob_cap);
    }
    if (len) memcpy(s->blob + at, p, len);
    s->off[i + 1] = (uint32_t)(at + len);
    s->prio[i] = score_key(score);
    s->type[i] = (uint8_t)type;
}

// Builds the lookup tables once all pieces are in. norm[i] says whether piece i goes to
// the "norm" map (see struct Spm). Checks what sentencepiece checks at load.
static int spm_index(Spm *s, const uint8_t *norm) {
    const char *path = s->path;
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)s->n) cap *= 2;
    s->map = xmalloc(cap * sizeof *s->map);
    s->map_mask = cap - 1;
    for (uint64_t i = 0; i < cap; i++) s->map[i] = (MapSlot){0, -1, -1};
    for (int32_t i = 0; i < s->n; i++) {
        const char *p = piece_ptr(s, i);
        size_t len = piece_len(s, i);
        if (len == 0) return ERR("%s: piece %d is empty", path, i);
        MapSlot *m = map_slot(s, p, len);
        int32_t *slot = norm[i] ? &m->norm : &m->res;
        if (*slot >= 0)
            return ERR("%s: piece %d \"%.*s\" is already defined as piece %d", path, i,
                       (int)(len > 64 ? 64 : len), p, *slot);
        *slot = i;
        m->tag = (uint32_t)(hash_bytes(p, len) >> 32);
    }
    s->byte_of = xmalloc((size_t)s->n * sizeof *s->byte_of);
    s->dec_id = xmalloc((size_t)s->n * sizeof *s->dec_id);
    int cut_ok = 1;
    for (int32_t i = 0; i < s->n; i++) {
        const char *p = piece_ptr(s, i);
        size_t len = piece_len(s, i);
        s->byte_of[i] = -1;
        if (s->type[i] == PIECE_BYTE) {
            int b = parse_byte_piece(p, len, s->rules == RULES_HF);
            if (b < 0) return ERR("%s: byte piece %d \"%.*s\" is not <0xNN>", path, i,
                                  (int)(len > 64 ? 64 : len), p);
            s->byte_of[i] = (int16_t)b;
        }
        if (s->type[i] == PIECE_UNUSED) s->has_unused = 1;
        // Cutting before each run of "▁" is safe when no piece merges could form has
        // a "▁" after another character.
        if (norm[i]) {
            size_t k = 0;
            while (k < len && starts_ws(p + k, len - k)) k += WS_LEN;
            if (k < len && memmem(p + k, len - k, WS, WS_LEN)) cut_ok = 0;
        }
    }
    for (int32_t i = 0; i < s->n; i++) s->dec_id[i] = piece_to_id(s, piece_ptr(s, i), piece_len(s, i));
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        s->byte_id[b] = s->rules == RULES_SPM ? piece_to_id(s, name, 6) : find_norm(s, name, 6);
    }
    s->cut = cut_ok ? CUT_RUNS : CUT_NONE;
    return 0;
}

int32_t spm_vocab_size(const Spm *s) { return s->n; }
int32_t spm_bos_id(const Spm *s) { return s->bos_id; }
int32_t spm_eos_id(const Spm *s) { return s->eos_id; }

// ---------------------------------------------------------------------------------
// tokenizer.model: the protobuf wire format, read with every length checked

typedef struct {
    const uint8_t *base, *p, *end;  // base: start of the file, for byte offsets in messages
    const char *path;
} Pb;

static int pb_varint(Pb *r, uint64_t *v) {
    uint64_t x = 0;
    size_t at = (size_t)(r->p - r->base);
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) return ERR("%s: truncated varint at byte %zu", r->path, at);
        uint8_t b = *r->p++;
        x |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return ERR("%s: varint longer than 10 bytes at byte %zu", r->path, at);
}

// Reads a tag; wire types 0 (varint), 1 (fixed64), 2 (bytes) and 5 (fixed32) only.
static int pb_tag(Pb *r, uint32_t *field, int *wire) {
    size_t at = (size_t)(r->p - r->base);
    uint64_t tag;
    TRY(pb_varint(r, &tag));
    *field = (uint32_t)(tag >> 3);
    *wire = (int)(tag & 7);
    if (*field == 0 || tag >> 32) return ERR("%s: bad field number in tag at byte %zu", r->path, at);
    if (*wire != 0 && *wire != 1 && *wire != 2 && *wire != 5)
        return ERR("%s: unsupported wire type %d (field %u) at byte %zu", r->path, *wire, *field, at);
    return 0;
}

static int pb_bytes(Pb *r, const uint8_t **p, size_t *n) {
    size_t at = (size_t)(r->p - r->base);
    uint64_t len;
    TRY(pb_varint(r, &len));
    if (len > (uint64_t)(r->end - r->p))
        return ERR("%s: truncated or corrupt: length %llu at byte %zu runs past the end of its message "
                   "(%zu bytes left)", r->path, (unsigned long long)len, at, (size_t)(r->end - r->p));
    *p = r->p;
    *n = (size_t)len;
    r->p += len;
    return 0;
}

static int pb_fixed32(Pb *r, uint32_t *v) {
    if (r->end - r->p < 4)
        return ERR("%s: truncated fixed32 at byte %zu", r->path, (size_t)(r->p - r->base));
    *v = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 | (uint32_t)r->p[3] << 24;
    r->p += 4;
    return 0;
}

static int pb_skip(Pb *r, int wire) {
    uint64_t v;
    const uint8_t *p;
    size_t n;
    if (wire == 0) return pb_varint(r, &v);
    if (wire == 2) return pb_bytes(r, &p, &n);
    size_t k = wire == 1 ? 8 : 4;
    if ((size_t)(r->end - r->p) < k)
        return ERR("%s: truncated fixed%zu at byte %zu", r->path, 8 * k, (size_t)(r->p - r->base));
    r->p += k;
    return 0;
}

static Pb pb_sub(const Pb *r, const uint8_t *p, size_t n) {
    return (Pb){.base = r->base, .p = p, .end = p + n, .path = r->path};
}

typedef struct { const uint8_t *p; size_t n; } Str;

typedef struct {
    int model_type, byte_fallback, ws_suffix, has_unk_surface;
    Str unk_surface, unk_piece, bos_piece, eos_piece;
} TrainerSpec;

typedef struct {
    Str name, charsmap;
    int add_dummy_prefix, remove_extra_ws, escape_ws;
} NormSpec;

typedef struct { Str piece; float score; int type; } PieceMsg;

// A field the caller expects with wire type `want` but that came with another is an
// unknown field to protobuf: skipped, as libprotobuf does.
#define PB_EXPECT(want) if (wire != (want)) { TRY(pb_skip(&r, wire)); continue; }

static int pb_read_piece(const Pb *outer, const uint8_t *p, size_t n, PieceMsg *m) {
    Pb r = pb_sub(outer, p, n);
    *m = (PieceMsg){.type = PIECE_NORMAL};
    while (r.p < r.end) {
        uint32_t field;
        int wire;
        uint64_t v;
        uint32_t u = 0;
        TRY(pb_tag(&r, &field, &wire));
        if (field == 1) {
            PB_EXPECT(2);
            TRY(pb_bytes(&r, &m->piece.p, &m->piece.n));
        } else if (field == 2) {
            PB_EXPECT(5);
            TRY(pb_fixed32(&r, &u));
            memcpy(&m->score, &u, 4);
        } else if (field == 3) {
            PB_EXPECT(0);
            TRY(pb_varint(&r, &v));
            // proto2 keeps an unknown enum value out of the field: the type stays as it was
            if (v >= 1 && v <= 6) m->type = (int)v;
        } else {
            TRY(pb_skip(&r, wire));
        }
    }
    return 0;
}

// Fields we do not read are skipped; repeated singular fields merge (last value wins).
static int pb_read_trainer(const Pb *outer, const uint8_t *p, size_t n, TrainerSpec *t) {
    Pb r = pb_sub(outer, p, n);
    while (r.p < r.end) {
        uint32_t field;
        int wire;
        uint64_t v;
        TRY(pb_tag(&r, &field, &wire));
        Str *str = field == 44 ? &t->unk_surface : field == 45 ? &t->unk_piece
                 : field == 46 ? &t->bos_piece : field == 47 ? &t->eos_piece : NULL;
        if (str) {
            PB_EXPECT(2);
            TRY(pb_bytes(&r, &str->p, &str->n));
            if (field == 44) t->has_unk_surface = 1;
        } else if (field == 3 || field == 35 || field == 24) {
            PB_EXPECT(0);
            TRY(pb_varint(&r, &v));
            if (field == 3 && v >= 1 && v <= 4) t->model_type = (int)v;
            if (field == 35) t->byte_fallback = v != 0;
            if (field == 24) t->ws_suffix = v != 0;
        } else {
            TRY(pb_skip(&r, wire));
        }
    }
    return 0;
}

static int pb_read_normalizer(const Pb *outer, const uint8_t *p, size_t n, NormSpec *ns) {
    Pb r = pb_sub(outer, p, n);
    while (r.p < r.end) {
        uint32_t field;
        int wire;
        uint64_t v;
        TRY(pb_tag(&r, &field, &wire));
        if (field == 1 || field == 2) {
            PB_EXPECT(2);
            Str *str = field == 1 ? &ns->name : &ns->charsmap;
            TRY(pb_bytes(&r, &str->p, &str->n));
        } else if (field >= 3 && field <= 5) {
            PB_EXPECT(0);
            TRY(pb_varint(&r, &v));
            int *flag = field == 3 ? &ns->add_dummy_prefix : field == 4 ? &ns->remove_extra_ws
                                                                        : &ns->escape_ws;
            *flag = v != 0;
        } else {
            TRY(pb_skip(&r, wire));
        }
    }
    return 0;
}

// The precompiled charsmap blob: u32 trie size, the Darts double array, then the
// NUL-terminated replacement strings. Checked as sentencepiece checks it.
static int spm_set_charsmap(Spm *s, Str cm) {
    if (cm.n == 0) return 0;
    if (cm.n <= 4) return ERR("%s: normalizer charsmap of %zu bytes is broken", s->path, cm.n);
    uint32_t trie = (uint32_t)cm.p[0] | (uint32_t)cm.p[1] << 8 | (uint32_t)cm.p[2] << 16
                    | (uint32_t)cm.p[3] << 24;
    if (trie > cm.n - 4)
        return ERR("%s: normalizer charsmap trie of %u bytes exceeds its blob (%zu bytes)",
                   s->path, trie, cm.n);
    s->cm_n = trie / 4;
    s->cm_unit = xmalloc((s->cm_n ? s->cm_n : 1) * sizeof *s->cm_unit);
    for (size_t i = 0; i < s->cm_n; i++) {
        const uint8_t *q = cm.p + 4 + 4 * i;
        s->cm_unit[i] = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
    }
    s->cm_norm_len = cm.n - 4 - trie;
    s->cm_norm = xmalloc(s->cm_norm_len + 1);
    memcpy(s->cm_norm, cm.p + 4 + trie, s->cm_norm_len);
    s->cm_norm[s->cm_norm_len] = 0;
    if (s->cm_n == 0) {  // an empty trie maps nothing
        free(s->cm_unit);
        s->cm_unit = NULL;
    }
    return 0;
}

static const char *model_type_name(int t) {
    return t == 1 ? "unigram" : t == 2 ? "bpe" : t == 3 ? "word" : t == 4 ? "char" : "unknown";
}

int spm_load_model(Spm **out, const uint8_t *data, size_t n, const char *path) {
    *out = NULL;
    if (!path) path = "tokenizer.model";
    Pb r = {.base = data, .p = data, .end = data + n, .path = path};
    TrainerSpec ts = {.model_type = 1};  // proto2 default: UNIGRAM
    NormSpec ns = {.add_dummy_prefix = 1, .remove_extra_ws = 1, .escape_ws = 1};
    NormSpec dns = ns;
    PieceMsg *pieces = NULL;
    size_t n_pieces = 0, cap = 0;
    int rc = -1;
    Spm *s = NULL;
    uint8_t *norm = NULL;
    if (n == 0) {
        ERR("%s: empty file", path);
        goto done;
    }
    while (r.p < r.end) {
        uint32_t field;
        int wire;
        const uint8_t *p;
        size_t len;
        if (pb_tag(&r, &field, &wire) < 0) goto done;
        if (wire != 2 || field < 1 || field > 5) {
            if (pb_skip(&r, wire) < 0) goto done;
            continue;
        }
        if (pb_bytes(&r, &p, &len) < 0) goto done;
        if (field == 1) {
            if (n_pieces == cap) {
                cap = cap ? 2 * cap : 1024;
                pieces = xrealloc(pieces, cap * sizeof *pieces);
            }
            if (pb_read_piece(&r, p, len, &pieces[n_pieces++]) < 0) goto done;
        } else if (field == 2) {
            if (pb_read_trainer(&r, p, len, &ts) < 0) goto done;
        } else if (field == 3) {
            if (pb_read_normalizer(&r, p, len, &ns) < 0) goto done;
        } else if (field == 5) {
            if (pb_read_normalizer(&r, p, len, &dns) < 0) goto done;
        }  // field 4: self-test samples, not run
    }
    if (ts.model_type != 2) {
        ERR("%s: unsupported model type %s (only BPE is implemented)", path, model_type_name(ts.model_type));
        goto done;
    }
    if (dns.charsmap.n) {
        ERR("%s: a denormalizer charsmap is not supported", path);
        goto done;
    }
    if (n > UINT32_MAX) {  // piece offsets are 32-bit
        ERR("%s: file of %zu bytes is too large for a tokenizer.model", path, n);
        goto done;
    }
    s = spm_new(RULES_SPM, path);
    s->byte_fallback = ts.byte_fallback;
    s->ws_suffix = ts.ws_suffix;
    s->add_dummy_prefix = ns.add_dummy_prefix;
    s->remove_extra_ws = ns.remove_extra_ws;
    s->escape_ws = ns.escape_ws;
    if (spm_set_charsmap(s, ns.charsmap) < 0) goto done;
    norm = xmalloc(n_pieces ? n_pieces : 1);
    for (size_t i = 0; i < n_pieces; i++) {
        const PieceMsg *m = &pieces[i];
        spm_push_piece(s, (const char *)m->piece.p, m->piece.n, m->score, m->type);
        norm[i] = m->type == PIECE_NORMAL || m->type == PIECE_USER || m->type == PIECE_UNUSED;
        if (m->type == PIECE_UNKNOWN) {
            if (s->unk_id >= 0) {
                ERR("%s: unk is already defined (pieces %d and %zu)", path, s->unk_id, i);
                goto done;
            }
            s->unk_id = (int32_t)i;
        }
        if (m->type == PIECE_BYTE && !ts.byte_fallback) {
            ERR("%s: byte piece %zu is found although byte_fallback is false", path, i);
            goto done;
        }
    }
    if (s->n == 0) {  // spm_push_piece never ran: give the tables their one offset
        s->off = xcalloc(1, sizeof *s->off);
    }
    if (spm_index(s, norm) < 0) goto done;
    if (s->unk_id < 0) {
        ERR("%s: unk is not defined (no piece of type UNKNOWN)", path);
        goto done;
    }
    if (s->byte_fallback) {
        for (int b = 0; b < 256; b++) {
            if (s->type[s->byte_id[b]] != PIECE_BYTE) {
                ERR("%s: there are not 256 byte pieces although byte_fallback is true (no <0x%02X>)",
                    path, b);
                goto done;
            }
        }
    }
    // user-defined pieces, matched first in the normalizer and when splitting. Darts
    // keys are C strings, so a piece is matched up to its first NUL.
    for (int32_t i = 0; i < s->n; i++)
        if (s->type[i] == PIECE_USER)
            trie_add(&s->user, (const uint8_t *)piece_ptr(s, i), strnlen(piece_ptr(s, i), piece_len(s, i)), i);
    // bos/eos: the trainer's piece names, when they name a control piece
    Str names[2] = {ts.bos_piece, ts.eos_piece};
    const char *defaults[2] = {"<s>", "</s>"};
    for (int k = 0; k < 2; k++) {
        const char *p = names[k].n ? (const char *)names[k].p : defaults[k];
        size_t len = names[k].n ? names[k].n : strlen(defaults[k]);
        int32_t id = piece_to_id(s, p, len);
        *(k == 0 ? &s->bos_id : &s->eos_id) = s->type[id] == PIECE_CONTROL ? id : -1;
    }
    if (ts.has_unk_surface) {
        s->unk_surface_len = ts.unk_surface.n;
        s->unk_surface = xmalloc(ts.unk_surface.n + 1);
        memcpy(s->unk_surface, ts.unk_surface.p, ts.unk_surface.n);
    } else {
        s->unk_surface = xstrdup(" \xE2\x81\x87 ");
        s->unk_surface_len = strlen(s->unk_surface);
    }
    if (s->has_unused) s->cut = CUT_NONE;  // resegmentation state spans the whole text
    rc = 0;
done:
    free(pieces);
    free(norm);
    if (rc < 0) {
        spm_free(s);
        return -1;
    }
    *out = s;
    return 0;
}

// ---------------------------------------------------------------------------------
// tokenizer.json (HF), LLaMA layout

static int json_flag(const json_t *obj, const char *key, int dflt) {
    const json_t *v = json_object_get(obj, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

// A string member: its bytes and length, or NULL when absent or not a string.
static const char *json_str(const json_t *obj, const char *key, size_t *len) {
    const json_t *v = json_object_get(obj, key);
    if (!json_is_string(v)) return NULL;
    *len = json_string_length(v);
    return json_string_value(v);
}

static int hf_read_normalizer(Spm *s, const json_t *nj) {
    if (!nj || json_is_null(nj)) return 0;
    const char *type = json_string_value(json_object_get(nj, "type"));
    if (type && strcmp(type, "Sequence") == 0) {
        const json_t *list = json_object_get(nj, "normalizers");
        if (!json_is_array(list)) return ERR("%s: normalizer Sequence without a list", s->path);
        for (size_t i = 0; i < json_array_size(list); i++) TRY(hf_read_normalizer(s, json_array_get(list, i)));
        return 0;
    }
    NormOp op = {0};
    size_t la = 0, lb = 0;
    const char *a = NULL, *b = NULL;
    if (type && strcmp(type, "Prepend") == 0) {
        op.prepend = 1;
        a = json_str(nj, "prepend", &la);
        if (!a) return ERR("%s: normalizer Prepend without a string", s->path);
    } else if (type && strcmp(type, "Replace") == 0) {
        a = json_str(json_object_get(nj, "pattern"), "String", &la);
        b = json_str(nj, "content", &lb);
        if (!a || !b || la == 0)
            return ERR("%s: normalizer Replace: only a non-empty String pattern is supported", s->path);
    } else {
        return ERR("%s: unsupported normalizer %s (Prepend and Replace only)", s->path, type ? type : "?");
    }
    op.a = xmalloc(la + 1);
    memcpy(op.a, a, la);
    op.a_len = la;
    if (b) {
        op.b = xmalloc(lb + 1);
        memcpy(op.b, b, lb);
        op.b_len = lb;
    }
    s->ops = xrealloc(s->ops, (size_t)(s->n_ops + 1) * sizeof *s->ops);
    s->ops[s->n_ops++] = op;
    return 0;
}

static int hf_read_pretokenizer(Spm *s, const json_t *pj) {
    if (!pj || json_is_null(pj)) return 0;
    const char *type = json_string_value(json_object_get(pj, "type"));
    if (type && strcmp(type, "Sequence") == 0) {
        const json_t *list = json_object_get(pj, "pretokenizers");
        if (json_is_array(list) && json_array_size(list) == 1)
            return hf_read_pretokenizer(s, json_array_get(list, 0));
    }
    if (!type || strcmp(type, "Metaspace") != 0)
        return ERR("%s: unsupported pre_tokenizer %s (Metaspace only)", s->path, type ? type : "?");
    size_t len;
    const char *rep = json_str(pj, "replacement", &len);
    if (!rep || len != WS_LEN || memcmp(rep, WS, WS_LEN) != 0)
        return ERR("%s: Metaspace replacement must be \"\xe2\x96\x81\"", s->path);
    s->metaspace = 1;
    const char *scheme = json_string_value(json_object_get(pj, "prepend_scheme"));
    if (scheme) {
        if (strcmp(scheme, "always") == 0) s->meta_scheme = META_ALWAYS;
        else if (strcmp(scheme, "first") == 0) s->meta_scheme = META_FIRST;
        else if (strcmp(scheme, "never") == 0) s->meta_scheme = META_NEVER;
        else return ERR("%s: unknown Metaspace prepend_scheme \"%s\"", s->path, scheme);
    } else {  // older files: add_prefix_space
        s->meta_scheme = json_flag(pj, "add_prefix_space", 1) ? META_ALWAYS : META_NEVER;
    }
    s->meta_split = json_flag(pj, "split", 1);
    return 0;
}

// Applies the normalizer ops to p[0..n) into out (tmp is scratch).
static void hf_normalize(const Spm *s, ByteVec *out, ByteVec *tmp, const char *p, size_t n) {
    out->n = 0;
    append_bytes(out, p, n);
    for (int k = 0; k < s->n_ops; k++) {
        const NormOp *op = &s->ops[k];
        tmp->n = 0;
        if (op->prepend) {
            if (out->n == 0) continue;
            append_bytes(tmp, op->a, op->a_len);
            append_bytes(tmp, out->v, out->n);
        } else {
            size_t i = 0;
            while (i < out->n) {
                const char *q = memmem(out->v + i, out->n - i, op->a, op->a_len);
                size_t j = q ? (size_t)(q - out->v) : out->n;
                append_bytes(tmp, out->v + i, j - i);
                if (!q) break;
                append_bytes(tmp, op->b, op->b_len);
                i = j + op->a_len;
            }
        }
        ByteVec t = *out;
        *out = *tmp;
        *tmp = t;
    }
}

// merges: ["a b", ...] (lines starting "#version" skipped) or [["a", "b"], ...].
static int hf_read_merges(Spm *s, const json_t *merges, int32_t V) {
    size_t n = json_array_size(merges);
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)n) cap *= 2;
    s->merges = xmalloc(cap * sizeof *s->merges);
    s->merges_mask = cap - 1;
    for (uint64_t i = 0; i < cap; i++) s->merges[i].key = UINT64_MAX;
    char *buf = NULL;
    size_t buf_cap = 0;
    uint32_t rank = 0;
    int rc = -1;
    for (size_t i = 0; i < n; i++) {
        const json_t *m = json_array_get(merges, i);
        const char *a, *b;
        size_t la, lb;
        if (json_is_string(m)) {
            const char *line = json_string_value(m);
            size_t len = json_string_length(m);
            if (len >= 8 && memcmp(line, "#version", 8) == 0) continue;
            const char *sp = memchr(line, ' ', len);
            if (!sp || memchr(sp + 1, ' ', len - (size_t)(sp + 1 - line))) {
                ERR("%s: merge %zu is not two tokens separated by one space", s->path, i);
                goto done;
            }
            a = line, la = (size_t)(sp - line), b = sp + 1, lb = len - la - 1;
        } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0))
                   && json_is_string(json_array_get(m, 1))) {
            a = json_string_value(json_array_get(m, 0)), la = json_string_length(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1)), lb = json_string_length(json_array_get(m, 1));
        } else {
            ERR("%s: merge %zu is neither \"a b\" nor [\"a\", \"b\"]", s->path, i);
            goto done;
        }
        if (la + lb > buf_cap) {
            buf_cap = 2 * (la + lb);
            buf = xrealloc(buf, buf_cap);
        }
        memcpy(buf, a, la);
        memcpy(buf + la, b, lb);
        int32_t ia = find_norm(s, a, la), ib = find_norm(s, b, lb), inew = find_norm(s, buf, la + lb);
        if (ia < 0 || ib < 0 || inew < 0 || ia >= V || ib >= V || inew >= V) {
            const char *what = ia < 0 ? a : ib < 0 ? b : buf;
            size_t wl = ia < 0 ? la : ib < 0 ? lb : la + lb;
            ERR("%s: merge %zu: token \"%.*s\" is not in the vocab", s->path, i, (int)(wl > 64 ? 64 : wl), what);
            goto done;
        }
        uint64_t key = (uint64_t)(uint32_t)ia << 32 | (uint32_t)ib;
        uint64_t k = hash_bytes(&key, 8) & s->merges_mask;
        while (s->merges[k].key != UINT64_MAX && s->merges[k].key != key) k = (k + 1) & s->merges_mask;
        s->merges[k] = (MergeSlot){key, rank++, inew};  // a repeated pair keeps its last rank
    }
    rc = 0;
done:
    free(buf);
    return rc;
}

typedef struct { const char *p; size_t n; int single_word, lstrip, rstrip, normalized, special; } AddedJson;

int spm_load_json(Spm **out, const json_t *root, const char *path) {
    *out = NULL;
    if (!path) path = "tokenizer.json";
    const json_t *model = json_object_get(root, "model");
    if (!json_is_object(model)) return ERR("%s: no \"model\" object", path);
    const char *type = json_string_value(json_object_get(model, "type"));
    if (type && strcmp(type, "BPE") != 0) return ERR("%s: model type %s is not BPE", path, type);
    const json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
    if (!json_is_object(vocab) || !json_is_array(merges)) return ERR("%s: BPE model without vocab and merges", path);
    const json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout) && !(json_is_number(dropout) && json_number_value(dropout) == 0))
        return ERR("%s: BPE dropout is not supported", path);
    const char *keys[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int k = 0; k < 2; k++) {
        size_t len = 0;
        const json_t *v = json_object_get(model, keys[k]);
        if (v && !json_is_null(v) && (!json_str(model, keys[k], &len) || len))
            return ERR("%s: %s is not supported", path, keys[k]);
    }

    size_t V = json_object_size(vocab);
    if (V >= INT32_MAX / 2) return ERR("%s: vocab too large", path);
    Spm *s = spm_new(RULES_HF, path);
    const char **tok = xcalloc(V ? V : 1, sizeof *tok);
    size_t *tok_len = xcalloc(V ? V : 1, sizeof *tok_len);
    AddedJson *add = NULL;
    int32_t *add_id = NULL;
    uint8_t *norm = NULL;
    size_t n_add = 0, n_new = 0;
    int rc = -1;
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)vocab, key, val) {
        json_int_t id = json_is_integer(val) ? json_integer_value(val) : -1;
        if (id < 0 || (size_t)id >= V) {
            ERR("%s: vocab entry \"%.64s\" has id outside [0, %zu)", path, key, V);
            goto done;
        }
        if (tok[id]) {
            ERR("%s: vocab id %lld is given twice (\"%.64s\", \"%.64s\")", path, (long long)id, tok[id], key);
            goto done;
        }
        tok[id] = key;
        tok_len[id] = strlen(key);
    }
    const json_t *aj = json_object_get(root, "added_tokens");
    n_add = json_array_size(aj);
    add = xcalloc(n_add ? n_add : 1, sizeof *add);
    add_id = xcalloc(n_add ? n_add : 1, sizeof *add_id);
    for (size_t i = 0; i < n_add; i++) {
        const json_t *t = json_array_get(aj, i);
        AddedJson *a = &add[i];
        a->p = json_str(t, "content", &a->n);
        if (!a->p) {
            ERR("%s: added token %zu has no content", path, i);
            goto done;
        }
        a->single_word = json_flag(t, "single_word", 0);
        a->lstrip = json_flag(t, "lstrip", 0);
        a->rstrip = json_flag(t, "rstrip", 0);
        a->normalized = json_flag(t, "normalized", 1);
        a->special = json_flag(t, "special", 0);
    }

    // The pieces: the vocab in id order, then added tokens the vocab lacks.
    norm = xmalloc(V + n_add + 1);
    for (size_t i = 0; i < V; i++) {
        spm_push_piece(s, tok[i], tok_len[i], 0.0f, PIECE_NORMAL);
        norm[i] = 1;
    }
    // HF gives an added token the vocab's id when the vocab has its content, else the
    // next free id from V on; the "id" in the file is only checked by HF with a warning.
    // We need the map to ask the vocab, so index the vocab first, then rebuild.
    if (V == 0) s->off = xcalloc(1, sizeof *s->off);
    if (spm_index(s, norm) < 0) goto done;
    for (size_t i = 0; i < n_add; i++) {
        add_id[i] = -1;
        if (add[i].n == 0) continue;  // HF ignores empty tokens
        for (size_t j = 0; j < i; j++)
            if (add_id[j] >= 0 && add[j].n == add[i].n && memcmp(add[j].p, add[i].p, add[i].n) == 0) {
                add_id[i] = add_id[j];
                add_id[j] = -1;  // the later entry replaces the earlier one
            }
        if (add_id[i] >= 0) continue;
        int32_t id = find_norm(s, add[i].p, add[i].n);
        if (id < 0) {
            id = (int32_t)(V + n_new++);
            spm_push_piece(s, add[i].p, add[i].n, 0.0f, PIECE_USER);
            norm[id] = 0;
        }
        add_id[i] = id;
    }
    free(s->map);
    free(s->byte_of);
    free(s->dec_id);
    s->map = NULL, s->byte_of = NULL, s->dec_id = NULL;
    for (size_t i = 0; i < n_add; i++) {
        if (add_id[i] < 0) continue;
        s->type[add_id[i]] = add[i].special ? PIECE_CONTROL : PIECE_USER;
    }
    s->byte_fallback = json_flag(model, "byte_fallback", 0);
    for (size_t i = 0; i < V; i++)
        if (s->type[i] == PIECE_NORMAL && parse_byte_piece(tok[i], tok_len[i], 1) >= 0) s->type[i] = PIECE_BYTE;
    if (spm_index(s, norm) < 0) goto done;
    size_t ulen;
    const char *unk = json_str(model, "unk_token", &ulen);
    if (unk) {
        s->unk_id = find_norm(s, unk, ulen);
        if (s->unk_id >= 0) s->type[s->unk_id] = PIECE_UNKNOWN;
        else s->unk_missing = 1;
    }
    s->fuse_unk = json_flag(model, "fuse_unk", 0);
    s->ignore_merges = json_flag(model, "ignore_merges", 0);
    if (hf_read_merges(s, merges, (int32_t)V) < 0) goto done;
    if (hf_read_normalizer(s, json_object_get(root, "normalizer")) < 0) goto done;
    if (hf_read_pretokenizer(s, json_object_get(root, "pre_tokenizer")) < 0) goto done;
    if (s->metaspace && s->n_ops) {
        ERR("%s: a normalizer together with a Metaspace pre-tokenizer is not supported", path);
        goto done;
    }
    // The "▁" that starts words must be a vocab token for cuts to be safe: else it falls
    // back to bytes or <unk>, which could fuse or merge across the cut.
    if (find_norm(s, WS, WS_LEN) < 0) s->cut = CUT_NONE;
    // Added tokens: matched in the raw text, or (normalized) in the normalized text, whose
    // pattern is then the normalized content.
    s->added = xcalloc(n_add ? n_add : 1, sizeof *s->added);
    {
        ByteVec nb = {0}, tmp = {0};
        for (size_t i = 0; i < n_add; i++) {
            if (add_id[i] < 0) continue;
            AddedTok *t = &s->added[s->n_added];
            *t = (AddedTok){add_id[i], (uint8_t)add[i].single_word, (uint8_t)add[i].lstrip, (uint8_t)add[i].rstrip};
            if (add[i].normalized) {
                hf_normalize(s, &nb, &tmp, add[i].p, add[i].n);
                trie_add(&s->added_norm, (const uint8_t *)nb.v, nb.n, s->n_added);
            } else {
                trie_add(&s->added_raw, (const uint8_t *)add[i].p, add[i].n, s->n_added);
            }
            s->n_added++;
        }
        bytevec_free(&nb);
        bytevec_free(&tmp);
    }
    // decode as sp.decode would: drop the space of the prepended "▁"
    s->add_dummy_prefix = s->metaspace ? s->meta_scheme != META_NEVER : 0;
    for (int k = 0; k < s->n_ops; k++)
        if (s->ops[k].prepend && s->ops[k].a_len == WS_LEN && memcmp(s->ops[k].a, WS, WS_LEN) == 0)
            s->add_dummy_prefix = 1;
    s->remove_extra_ws = 0;
    s->unk_surface = xstrdup(" \xE2\x81\x87 ");
    s->unk_surface_len = strlen(s->unk_surface);
    {
        const MapSlot *m = map_slot(s, "<s>", 3);
        s->bos_id = m->norm >= 0 ? m->norm : m->res;
        m = map_slot(s, "</s>", 4);
        s->eos_id = m->norm >= 0 ? m->norm : m->res;
    }
    rc = 0;
done:
    free(tok);
    free(tok_len);
    free(add);
    free(add_id);
    free(norm);
    if (rc < 0) {
        spm_free(s);
        return -1;
    }
    *out = s;
    return 0;
}

// ---------------------------------------------------------------------------------
// The encoder

typedef struct { int32_t start, len, prev, next, id, freeze; } Sym;  // a symbol of one word
// A merge candidate: symbols left and right. prio: higher merges first (sentencepiece:
// the score key; HF: ~rank), ties to the smaller left. aux: sentencepiece: the length of
// the merged piece, to spot stale candidates; HF: the id the merge makes.
typedef struct { uint32_t prio; int32_t left, right; uint32_t aux; } Cand;
typedef struct { uint64_t h; uint32_t key_off, key_len, ids_off, ids_n; } CacheSlot;  // key_len 0: empty
typedef struct { size_t a, b; int32_t id; } Seg;  // text [a, b), an added token when id >= 0
typedef struct { Seg *v; size_t n, cap; } SegVec;

struct SpmEncoder {
    const Spm *s;
    ByteVec norm, tmp, pre;     // normalized text; scratch for HF normalizer and Metaspace
    Sym *sym;                   // symbols of the word being merged
    size_t sym_cap;
    Cand *heap;                 // binary heap of merge candidates
    size_t n_heap, heap_cap;
    IdVec word;                 // ids of one word, before they go to the cache and out
    int32_t *rev;               // (n) sentencepiece rev_merge: left length per UNUSED piece, -1 none
    IdVec rev_touched, stack;   // entries of rev to reset; resegmentation work stack
    CacheSlot *cache;           // word -> ids
    uint32_t cache_used;
    ByteVec cache_keys;
    IdVec cache_ids;
    SegVec seg1, seg2;          // HF added-token splits of the raw and of the normalized text
    size_t out_start;           // where this spm_encode call began appending
};

SpmEncoder *spm_encoder_new(const Spm *s) {
    SpmEncoder *e = xcalloc(1, sizeof *e);
    e->s = s;
    e->cache = xcalloc(CACHE_SLOTS, sizeof *e->cache);
    if (s->has_unused) {
        e->rev = xmalloc((size_t)s->n * sizeof *e->rev);
        for (int32_t i = 0; i < s->n; i++) e->rev[i] = -1;
    }
    return e;
}

void spm_encoder_free(SpmEncoder *e) {
    if (!e) return;
    bytevec_free(&e->norm);
    bytevec_free(&e->tmp);
    bytevec_free(&e->pre);
    free(e->sym);
    free(e->heap);
    idvec_free(&e->word);
    free(e->rev);
    idvec_free(&e->rev_touched);
    idvec_free(&e->stack);
    free(e->cache);
    bytevec_free(&e->cache_keys);
    idvec_free(&e->cache_ids);
    free(e->seg1.v);
    free(e->seg2.v);
    free(e);
}

static inline int cand_before(const Cand *a, const Cand *b) {
    return a->prio > b->prio || (a->prio == b->prio && a->left < b->left);
}

static void heap_push(SpmEncoder *e, Cand c) {
    if (e->n_heap == e->heap_cap) {
        e->heap_cap = e->heap_cap ? 2 * e->heap_cap : 256;
        e->heap = xrealloc(e->heap, e->heap_cap * sizeof *e->heap);
    }
    size_t i = e->n_heap++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!cand_before(&c, &e->heap[up])) break;
        e->heap[i] = e->heap[up];
        i = up;
    }
    e->heap[i] = c;
}

static Cand heap_pop(SpmEncoder *e) {
    Cand top = e->heap[0], last = e->heap[--e->n_heap];
    size_t n = e->n_heap, i = 0;
    if (n == 0) return top;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= n) break;
        size_t b = l + 1 < n && cand_before(&e->heap[l + 1], &e->heap[l]) ? l + 1 : l;
        if (!cand_before(&e->heap[b], &last)) break;
        e->heap[i] = e->heap[b];
        i = b;
    }
    e->heap[i] = last;
    return top;
}

static Sym *sym_reserve(SpmEncoder *e, size_t n) {
    if (n > e->sym_cap) {
        e->sym_cap = n < 256 ? 256 : n;
        free(e->sym);
        e->sym = xmalloc(e->sym_cap * sizeof *e->sym);
    }
    return e->sym;
}

// sentencepiece's MaybeAddNewSymbolPair.
static void spm_try_pair(SpmEncoder *e, const char *w, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const Sym *L = &e->sym[l], *R = &e->sym[r];
    if (L->freeze || R->freeze) return;
    const Spm *s = e->s;
    int32_t id = find_norm(s, w + L->start, (size_t)L->len + (size_t)R->len);
    if (id < 0) return;
    heap_push(e, (Cand){s->prio[id], l, r, (uint32_t)(L->len + R->len)});
    if (s->type[id] == PIECE_UNUSED) {  // rev_merge[piece] = (left, right), last push wins
        if (e->rev[id] < 0) idvec_push(&e->rev_touched, id);
        e->rev[id] = L->len;
    }
}

// One piece of sentencepiece's output (PopulateSentencePieceText): unknown pieces become
// their bytes under byte fallback, else runs of them fuse into one <unk>.
static int spm_emit(SpmEncoder *e, IdVec *out, const char *p, size_t n, int32_t id) {
    const Spm *s = e->s;
    if (s->type[id] == PIECE_UNKNOWN) {
        if (s->byte_fallback) {
            for (size_t i = 0; i < n; i++) idvec_push(out, s->byte_id[(uint8_t)p[i]]);
        } else if (!(out->n > 0 && out->v[out->n - 1] == s->unk_id)) {
            idvec_push(out, id);
        }
        return 0;
    }
    if (s->type[id] == PIECE_CONTROL)  // sentencepiece fails: the text is not consumed
        return ERR("%s: text maps to control piece %d, which sentencepiece refuses", s->path, id);
    idvec_push(out, id);
    return 0;
}

// sentencepiece's resegment: an UNUSED piece splits back into the pair that formed it.
static int spm_resegment(SpmEncoder *e, IdVec *out, const char *w, int32_t start, int32_t len) {
    const Spm *s = e->s;
    IdVec *st = &e->stack;
    st->n = 0;
    idvec_push(st, start);
    idvec_push(st, len);
    while (st->n) {
        int32_t l = st->v[--st->n], a = st->v[--st->n];
        int32_t id = piece_to_id(s, w + a, (size_t)l);
        if (s->type[id] != PIECE_UNUSED) {
            TRY(spm_emit(e, out, w + a, (size_t)l, id));
            continue;
        }
        int32_t left = e->rev[id];
        if (left <= 0 || left >= l) {  // never formed by a merge: v0.2.3 treats it as unknown
            TRY(spm_emit(e, out, w + a, (size_t)l, s->unk_id));
            continue;
        }
        idvec_push(st, a + left);  // right part, popped second
        idvec_push(st, l - left);
        idvec_push(st, a);
        idvec_push(st, left);
    }
    return 0;
}

// sentencepiece BPE of one word w[0..n) (bpe_model.cc SampleEncode without dropout).
static int spm_bpe(SpmEncoder *e, IdVec *out, const char *w, size_t n) {
    const Spm *s = e->s;
    const uint8_t *u = (const uint8_t *)w;
    Sym *sym = sym_reserve(e, n);
    int32_t k = 0;
    for (size_t i = 0; i < n; k++) {
        size_t len = 0;
        int freeze = s->user.n && trie_longest(&s->user, u + i, n - i, &len) >= 0;
        if (!freeze) len = one_char_len(u + i, n - i);
        sym[k] = (Sym){(int32_t)i, (int32_t)len, k - 1, k + 1, -1, freeze};
        i += len;
    }
    sym[k - 1].next = -1;
    e->n_heap = 0;
    for (int32_t i = 1; i < k; i++) spm_try_pair(e, w, i - 1, i);
    while (e->n_heap) {
        Cand c = heap_pop(e);
        Sym *L = &sym[c.left], *R = &sym[c.right];
        if (L->len == 0 || R->len == 0 || (uint32_t)(L->len + R->len) != c.aux) continue;  // stale
        L->len += R->len;
        L->next = R->next;
        if (R->next >= 0) sym[R->next].prev = c.left;
        R->len = 0;
        spm_try_pair(e, w, L->prev, c.left);
        spm_try_pair(e, w, c.left, L->next);
    }
    int rc = 0;
    for (int32_t i = 0; i != -1 && rc == 0; i = sym[i].next) {
        if (e->rev) rc = spm_resegment(e, out, w, sym[i].start, sym[i].len);
        else rc = spm_emit(e, out, w + sym[i].start, (size_t)sym[i].len,
                           piece_to_id(s, w + sym[i].start, (size_t)sym[i].len));
    }
    for (size_t i = 0; i < e->rev_touched.n; i++) e->rev[e->rev_touched.v[i]] = -1;
    e->rev_touched.n = 0;
    return rc;
}

static inline void hf_push_sym(Sym *sym, int32_t *k, int32_t id, int32_t len) {
    sym[*k] = (Sym){0, len, *k - 1, *k + 1, id, 0};
    (*k)++;
}

static void hf_try_pair(SpmEncoder *e, int32_t l) {
    const Sym *sym = e->sym;
    if (l < 0 || sym[l].next < 0) return;
    const MergeSlot *m = merge_find(e->s, sym[l].id, sym[sym[l].next].id);
    if (m) heap_push(e, (Cand){~m->rank, l, sym[l].next, (uint32_t)m->new_id});
}

// HF BPE of one word (models/bpe/model.rs merge_word + word.rs merge_all, no dropout).
static int hf_bpe(SpmEncoder *e, IdVec *out, const char *w, size_t n) {
    const Spm *s = e->s;
    const uint8_t *u = (const uint8_t *)w;
    Sym *sym = sym_reserve(e, n);
    int32_t k = 0, unk_len = 0;  // unk_len > 0: an <unk> waits for the next known character
    for (size_t i = 0; i < n;) {
        size_t len = utf8_char_len(u + i, n - i);
        if (len == 0) len = 1;  // not UTF-8 (HF never sees this): one byte, one character
        int32_t id = find_norm(s, w + i, len);
        if (id >= 0) {
            if (unk_len) hf_push_sym(sym, &k, s->unk_id, unk_len);
            unk_len = 0;
            hf_push_sym(sym, &k, id, (int32_t)len);
        } else {
            int all = s->byte_fallback;
            for (size_t j = 0; j < len && all; j++) all = s->byte_id[u[i + j]] >= 0;
            if (all) {
                for (size_t j = 0; j < len; j++) hf_push_sym(sym, &k, s->byte_id[u[i + j]], 1);
            } else if (s->unk_missing) {
                return ERR("%s: unk_token is not in the vocab", s->path);
            } else if (s->unk_id >= 0) {
                if (unk_len && !s->fuse_unk) hf_push_sym(sym, &k, s->unk_id, unk_len), unk_len = 0;
                unk_len += (int32_t)len;
            }  // no unk_token: the character is dropped, as HF does
        }
        i += len;
    }
    if (unk_len) hf_push_sym(sym, &k, s->unk_id, unk_len);
    if (k == 0) return 0;
    sym[k - 1].next = -1;
    e->n_heap = 0;
    for (int32_t i = 0; i + 1 < k; i++) hf_try_pair(e, i);
    while (e->n_heap) {
        Cand c = heap_pop(e);
        Sym *L = &sym[c.left];
        if (L->len == 0 || L->next < 0) continue;
        Sym *R = &sym[L->next];
        const MergeSlot *m = merge_find(s, L->id, R->id);
        if (!m || (uint32_t)m->new_id != c.aux) continue;  // stale
        L->id = m->new_id;
        L->len += R->len;
        L->next = R->next;
        R->len = 0;
        if (L->next >= 0) sym[L->next].prev = c.left;
        hf_try_pair(e, L->prev);
        hf_try_pair(e, c.left);
    }
    for (int32_t i = 0; i != -1; i = sym[i].next) idvec_push(out, sym[i].id);
    return 0;
}

// Appends the ids of one word; sentencepiece fuses an <unk> that follows an <unk>.
static void append_word(SpmEncoder *e, IdVec *out, const int32_t *ids, size_t n) {
    const Spm *s = e->s;
    if (n && s->rules == RULES_SPM && !s->byte_fallback && ids[0] == s->unk_id && out->n > e->out_start
        && out->v[out->n - 1] == s->unk_id) {
        ids++, n--;
    }
    if (n == 0) return;
    idvec_reserve(out, n);
    memcpy(out->v + out->n, ids, n * sizeof *ids);
    out->n += n;
}

static void cache_clear(SpmEncoder *e) {
    memset(e->cache, 0, CACHE_SLOTS * sizeof *e->cache);
    e->cache_used = 0;
    e->cache_keys.n = 0;
    e->cache_ids.n = 0;
}

// Encodes one word (a piece of text no merge crosses), through the cache.
static int encode_word(SpmEncoder *e, IdVec *out, const char *w, size_t n) {
    const Spm *s = e->s;
    CacheSlot *slot = NULL;
    uint64_t h = 0;
    if (n <= CACHE_MAX_WORD) {
        h = hash_bytes(w, n);
        for (uint32_t i = (uint32_t)h & (CACHE_SLOTS - 1);; i = (i + 1) & (CACHE_SLOTS - 1)) {
            slot = &e->cache[i];
            if (slot->key_len == 0) break;
            if (slot->h == h && slot->key_len == n && memcmp(e->cache_keys.v + slot->key_off, w, n) == 0) {
                append_word(e, out, e->cache_ids.v + slot->ids_off, slot->ids_n);
                return 0;
            }
        }
    }
    e->word.n = 0;
    TRY(s->rules == RULES_SPM ? spm_bpe(e, &e->word, w, n) : hf_bpe(e, &e->word, w, n));
    if (slot) {
        if (e->cache_used >= CACHE_SLOTS / 2 || e->cache_ids.n > (64u << 20)) {
            cache_clear(e);  // full: start over rather than evict (the words come back)
            for (uint32_t i = (uint32_t)h & (CACHE_SLOTS - 1);; i = (i + 1) & (CACHE_SLOTS - 1))
                if (e->cache[i].key_len == 0) {
                    slot = &e->cache[i];
                    break;
                }
        }
        *slot = (CacheSlot){h, (uint32_t)e->cache_keys.n, (uint32_t)n, (uint32_t)e->cache_ids.n,
                            (uint32_t)e->word.n};
        append_bytes(&e->cache_keys, w, n);
        if (e->word.n) {
            idvec_reserve(&e->cache_ids, e->word.n);
            memcpy(e->cache_ids.v + e->cache_ids.n, e->word.v, e->word.n * sizeof *e->word.v);
            e->cache_ids.n += e->word.n;
        }
        e->cache_used++;
    }
    append_word(e, out, e->word.v, e->word.n);
    return 0;
}

// The start of the next run of "▁" after the one (if any) at i, or n.
static size_t next_cut(const char *p, size_t n, size_t i) {
    while (starts_ws(p + i, n - i)) i += WS_LEN;
    while (i < n) {
        const char *q = memchr(p + i, 0xE2, n - i);
        if (!q) return n;
        size_t k = (size_t)(q - p);
        if (starts_ws(q, n - k)) return k;
        i = k + 1;
    }
    return n;
}

static int encode_words(SpmEncoder *e, IdVec *out, const char *p, size_t n) {
    if (n > INT32_MAX) return ERR("%s: text of %zu bytes is too long", e->s->path, n);
    for (size_t i = 0; i < n;) {
        size_t j = e->s->cut == CUT_RUNS ? next_cut(p, n, i) : n;
        TRY(encode_word(e, out, p + i, j - i));
        i = j;
    }
    return 0;
}

// sentencepiece's Normalizer::NormalizePrefix: the normalized form of the longest rule
// at the start of in[0..n) in (*out, *out_len); returns the input bytes it consumes.
static size_t charsmap_match(const Spm *s, const uint8_t *in, size_t n, const char **rep, size_t *rep_len);

static size_t spm_norm_prefix(const Spm *s, const uint8_t *in, size_t n, const char **out, size_t *out_len) {
    size_t m = 0;
    if (s->user.n && trie_longest(&s->user, in, n, &m) >= 0) {
        *out = (const char *)in, *out_len = m;
        return m;
    }
    if (s->cm_unit && (m = charsmap_match(s, in, n, out, out_len)) > 0) return m;
    m = utf8_char_len(in, n);
    if (m == 0) {  // malformed: U+FFFD for one byte
        *out = REPLACEMENT_CHAR, *out_len = 3;
        return 1;
    }
    *out = (const char *)in, *out_len = m;
    return m;
}

// Darts-clone commonPrefixSearch over the charsmap units, keeping the longest match.
// Out-of-range indices (a corrupt trie) end the search instead of reading past the end.
static size_t charsmap_match(const Spm *s, const uint8_t *in, size_t n, const char **rep, size_t *rep_len) {
    const uint32_t *unit = s->cm_unit;
    size_t best = 0, pos = 0;
    uint32_t value = 0, u = unit[0];
    pos ^= (size_t)((u >> 10) << ((u & (1u << 9)) >> 6));
    for (size_t i = 0; i < n; i++) {
        pos ^= in[i];
        if (pos >= s->cm_n) break;
        u = unit[pos];
        if ((u & ((1u << 31) | 0xFFu)) != in[i]) break;  // label
        pos ^= (size_t)((u >> 10) << ((u & (1u << 9)) >> 6));
        if ((u >> 8) & 1) {  // has a leaf: a rule ends here
            if (pos >= s->cm_n) break;
            best = i + 1;
            value = unit[pos] & 0x7FFFFFFFu;
        }
    }
    if (best == 0 || value >= s->cm_norm_len + 1) return 0;
    *rep = s->cm_norm + value;
    *rep_len = strlen(*rep);  // cm_norm ends with a NUL we added
    return best;
}

static inline void push_ws(const Spm *s, ByteVec *o) {
    if (s->escape_ws) append_bytes(o, WS, WS_LEN);
    else bytevec_push(o, ' ');
}

// sentencepiece's Normalizer::Normalize (without the offsets it also computes).
static void spm_normalize(const Spm *s, ByteVec *o, const char *text, size_t n) {
    const uint8_t *in = (const uint8_t *)text;
    o->n = 0;
    if (n == 0) return;
    if (!s->remove_extra_ws && !s->user.n && !s->cm_unit && s->escape_ws) {
        // identity with escaped spaces (LLaMA): one pass, ASCII fast
        bytevec_reserve(o, 3 * n + 2 * WS_LEN);
        char *q = o->v;
        if (s->add_dummy_prefix && !s->ws_suffix) memcpy(q, WS, WS_LEN), q += WS_LEN;
        for (size_t i = 0; i < n;) {
            uint8_t c = in[i];
            if (c < 0x80) {
                if (c == ' ') memcpy(q, WS, WS_LEN), q += WS_LEN;
                else *q++ = (char)c;
                i++;
                continue;
            }
            size_t m = utf8_char_len(in + i, n - i);
            if (m == 0) memcpy(q, REPLACEMENT_CHAR, 3), q += 3, i++;
            else memcpy(q, in + i, m), q += m, i += m;
        }
        if (s->add_dummy_prefix && s->ws_suffix) memcpy(q, WS, WS_LEN), q += WS_LEN;
        o->n = (size_t)(q - o->v);
        return;
    }
    size_t i = 0;
    const char *sp;
    size_t sl;
    if (s->remove_extra_ws) {  // leading spaces go
        while (i < n) {
            size_t c = spm_norm_prefix(s, in + i, n - i, &sp, &sl);
            if (!(sl == 1 && sp[0] == ' ')) break;
            i += c;
        }
        if (i == n) return;
    }
    if (s->add_dummy_prefix && !s->ws_suffix) push_ws(s, o);
    int prev_space = s->remove_extra_ws;
    while (i < n) {
        size_t c = spm_norm_prefix(s, in + i, n - i, &sp, &sl);
        while (prev_space && sl && sp[0] == ' ') sp++, sl--;
        if (sl) {
            for (size_t k = 0; k < sl; k++) {
                if (sp[k] == ' ' && s->escape_ws) append_bytes(o, WS, WS_LEN);
                else bytevec_push(o, sp[k]);
            }
            prev_space = sp[sl - 1] == ' ';
        }
        i += c;
        if (!s->remove_extra_ws) prev_space = 0;
    }
    if (s->remove_extra_ws) {  // trailing spaces go
        const char *w = s->escape_ws ? WS : " ";
        size_t wl = s->escape_ws ? WS_LEN : 1;
        while (o->n >= wl && memcmp(o->v + o->n - wl, w, wl) == 0) o->n -= wl;
    }
    if (s->add_dummy_prefix && s->ws_suffix) push_ws(s, o);
}

// Unicode classes for HF's added-token flags: Rust regex \w and \s.
static int is_word_cp(int32_t c) {
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
        return 1;
    default:  // Join_Control and the circled letters (Other_Alphabetic symbols)
        return c == 0x200C || c == 0x200D || (c >= 0x24B6 && c <= 0x24E9)
               || (c >= 0x1F130 && c <= 0x1F149) || (c >= 0x1F150 && c <= 0x1F169)
               || (c >= 0x1F170 && c <= 0x1F189);
    }
}

static int is_space_cp(int32_t c) {
    return (c >= 9 && c <= 13) || c == ' ' || c == 0x85 || c == 0xA0 || c == 0x1680
           || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F
           || c == 0x205F || c == 0x3000;
}

static int32_t cp_at(const char *p, size_t n, size_t *len) {
    utf8proc_int32_t c;
    utf8proc_ssize_t m = utf8proc_iterate((const utf8proc_uint8_t *)p, (utf8proc_ssize_t)n, &c);
    *len = m > 0 ? (size_t)m : 1;
    return m > 0 ? c : -1;
}

static size_t char_start_before(const char *p, size_t end) {
    size_t i = end - 1;
    while (i > 0 && end - i < 4 && is_trail((uint8_t)p[i])) i--;
    return i;
}

static void segs_push(SegVec *v, size_t a, size_t b, int32_t id) {
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 16;
        v->v = xrealloc(v->v, v->cap * sizeof *v->v);
    }
    v->v[v->n++] = (Seg){a, b, id};
}

// HF AddedVocabulary::find_matches: leftmost-longest matches of the added tokens in t,
// with their single_word / lstrip / rstrip rules; the text between them as id -1.
static void hf_find_added(const Spm *s, const Trie *t, SegVec *out, const char *p, size_t n) {
    out->n = 0;
    size_t start_offset = 0, i = 0, len = 0;
    while (i < n && t->n) {
        int32_t k = trie_longest(t, (const uint8_t *)p + i, n - i, &len);
        if (k < 0) {
            i++;
            continue;
        }
        const AddedTok *a = &s->added[k];
        size_t start = i, stop = i + len, cl;
        i = stop;  // the search goes on after the match, whatever happens to it
        if (a->single_word) {
            int word_before = start > 0 && is_word_cp(cp_at(p + char_start_before(p, start),
                                                            start - char_start_before(p, start), &cl));
            int word_after = stop < n && is_word_cp(cp_at(p + stop, n - stop, &cl));
            if (word_before || word_after) continue;
        }
        if (a->lstrip) {
            size_t ns = start;
            while (ns > 0) {
                size_t b = char_start_before(p, ns);
                if (!is_space_cp(cp_at(p + b, ns - b, &cl))) break;
                ns = b;
            }
            start = ns > start_offset ? ns : start_offset;
        }
        if (a->rstrip) {
            while (stop < n && is_space_cp(cp_at(p + stop, n - stop, &cl))) stop += cl;
        }
        if (start_offset < start) segs_push(out, start_offset, start, -1);
        segs_push(out, start, stop, a->id);
        start_offset = stop;
    }
    if (start_offset < n) segs_push(out, start_offset, n, -1);
}

// The BPE model on one pre-tokenized word (HF: ignore_merges first).
static int hf_model_word(SpmEncoder *e, IdVec *out, const char *p, size_t n) {
    if (n == 0) return 0;
    if (e->s->ignore_merges) {
        int32_t id = find_norm(e->s, p, n);
        if (id >= 0) {
            idvec_push(out, id);
            return 0;
        }
    }
    return encode_words(e, out, p, n);
}

// Metaspace (when present) on one normalized piece, then the model.
static int hf_pretokenize(SpmEncoder *e, IdVec *out, const char *p, size_t n, int at_origin) {
    const Spm *s = e->s;
    if (!s->metaspace) return hf_model_word(e, out, p, n);
    ByteVec *b = &e->pre;
    b->n = 0;
    int starts = n && (p[0] == ' ' || starts_ws(p, n));
    if (!starts && (s->meta_scheme == META_ALWAYS || (s->meta_scheme == META_FIRST && at_origin)))
        append_bytes(b, WS, WS_LEN);
    for (size_t i = 0; i < n;) {
        const char *q = memchr(p + i, ' ', n - i);
        size_t j = q ? (size_t)(q - p) : n;
        append_bytes(b, p + i, j - i);
        if (!q) break;
        append_bytes(b, WS, WS_LEN);
        i = j + 1;
    }
    if (!s->meta_split) return hf_model_word(e, out, b->v, b->n);
    for (size_t i = 0; i < b->n;) {  // cut before every "▁", which starts the next word
        size_t j = i + (starts_ws(b->v + i, b->n - i) ? WS_LEN : 0);
        const char *q = j < b->n ? memmem(b->v + j, b->n - j, WS, WS_LEN) : NULL;
        j = q ? (size_t)(q - b->v) : b->n;
        TRY(hf_model_word(e, out, b->v + i, j - i));
        i = j;
    }
    return 0;
}

// HF Tokenizer::encode: added tokens in the raw text, the normalizer per remaining
// piece, added tokens in the normalized text, then pre-tokenizer and model.
static int hf_encode(SpmEncoder *e, IdVec *out, const char *text, size_t n) {
    const Spm *s = e->s;
    hf_find_added(s, &s->added_raw, &e->seg1, text, n);
    for (size_t i = 0; i < e->seg1.n; i++) {
        Seg g = e->seg1.v[i];
        if (g.id >= 0) {
            idvec_push(out, g.id);
            continue;
        }
        hf_normalize(s, &e->norm, &e->tmp, text + g.a, g.b - g.a);
        hf_find_added(s, &s->added_norm, &e->seg2, e->norm.v, e->norm.n);
        for (size_t j = 0; j < e->seg2.n; j++) {
            Seg h = e->seg2.v[j];
            if (h.id >= 0) idvec_push(out, h.id);
            // Without a normalizer (the only case with Metaspace) offsets are the text's.
            else TRY(hf_pretokenize(e, out, e->norm.v + h.a, h.b - h.a, g.a + h.a == 0));
        }
    }
    return 0;
}

int spm_encode(SpmEncoder *e, IdVec *out, const char *text, size_t len) {
    e->out_start = out->n;
    if (len == 0) return 0;
    if (e->s->rules == RULES_HF) return hf_encode(e, out, text, len);
    spm_normalize(e->s, &e->norm, text, len);
    return encode_words(e, out, e->norm.v, e->norm.n);
}

// ---------------------------------------------------------------------------------
// The decoder (sentencepiece_processor.cc Decode)

// Byte pieces in a row decode as their bytes, each malformed one as U+FFFD.
static void decode_bytes(ByteVec *out, const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t m = utf8_char_len(b + i, n - i);
        if (m == 0) {
            append_bytes(out, REPLACEMENT_CHAR, 3);
            i++;
        } else {
            append_bytes(out, b + i, m);
            i += m;
        }
    }
}

int spm_decode(const Spm *s, ByteVec *out, const int32_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= s->n)
            return ERR("%s: token id %d is outside [0, %d)", s->path, ids[i], s->n);
    size_t start = out->n;
    int is_bos_ws = 1, bos_ws_seen = 0;
    uint8_t run[64];
    for (size_t i = 0; i < n;) {
        int32_t id = s->dec_id[ids[i]];
        if (s->type[id] == PIECE_BYTE) {
            size_t j = i;
            ByteVec big = {0};  // only for runs longer than `run`
            while (j < n && s->type[s->dec_id[ids[j]]] == PIECE_BYTE) {
                uint8_t b = (uint8_t)s->byte_of[s->dec_id[ids[j]]];
                if (j - i < sizeof run) run[j - i] = b;
                else {
                    if (big.n == 0) append_bytes(&big, run, sizeof run);
                    bytevec_push(&big, (char)b);
                }
                j++;
            }
            decode_bytes(out, big.n ? (const uint8_t *)big.v : run, j - i);
            bytevec_free(&big);
            i = j;
            continue;
        }
        if (bos_ws_seen || out->n > start) is_bos_ws = 0;
        const char *p = piece_ptr(s, ids[i]);
        size_t len = piece_len(s, ids[i]);
        bos_ws_seen = 0;
        if (s->type[id] == PIECE_CONTROL) {
            // invisible
        } else if (s->type[id] == PIECE_UNKNOWN) {
            append_bytes(out, s->unk_surface, s->unk_surface_len);
        } else {
            if (is_bos_ws && (s->add_dummy_prefix || s->remove_extra_ws) && starts_ws(p, len)) {
                p += WS_LEN, len -= WS_LEN;
                bos_ws_seen = !s->remove_extra_ws;  // then every leading "▁" goes
            }
            for (size_t k = 0; k < len;) {
                if (starts_ws(p + k, len - k)) {
                    bytevec_push(out, ' ');
                    k += WS_LEN;
                } else {
                    bytevec_push(out, p[k++]);
                }
            }
        }
        i++;
    }
    return 0;
}
