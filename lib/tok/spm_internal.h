// spm_internal.h: what the four files of the SentencePiece tokenizer share, and nothing
// outside lib/tok/spm*.c includes: struct Spm (the loaded model), its piece table and
// lookups, and the few functions one file defines for another.
//
//   spm_pieces.c  the piece table: pieces pushed in id order, the maps built once all are
//                 in (with the checks sentencepiece makes at load), the trie, spm_free
//   spm_model.c   tokenizer.model (sentencepiece's ModelProto) -> Spm
//   spm_json.c    HF tokenizer.json of the LLaMA kind -> Spm
//   spm.c         the encoder (both rule sets) and the decoder, on a loaded Spm
//
// The lookups below are inline because the encoder's merge loop runs them per candidate.
#ifndef BEST_SPM_INTERNAL_H
#define BEST_SPM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/vec.h"  // defines: IdVec, ByteVec
#include "tok/tokmap.h" // defines: StrMap, PairMap, tok_hash, strmap_get_h, pairmap_get

enum { PIECE_NORMAL = 1, PIECE_UNKNOWN = 2, PIECE_CONTROL = 3, PIECE_USER = 4,
       PIECE_UNUSED = 5, PIECE_BYTE = 6 };                 // sentencepiece's enum values
enum { RULES_SPM = 1, RULES_HF = 2 };                      // whose encode we reproduce
enum { CUT_NONE = 0, CUT_RUNS = 1 };                       // how a word is cut for the cache
enum { META_ALWAYS = 0, META_FIRST = 1, META_NEVER = 2 };  // Metaspace prepend_scheme

static const char WS[] = "\xe2\x96\x81"; // U+2581 LOWER ONE EIGHTH BLOCK, the space symbol
#define WS_LEN 3
static const char REPLACEMENT_CHAR[] = "\xef\xbf\xbd"; // U+FFFD

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


static inline int32_t trie_child(const Trie *t, int32_t at, uint8_t b) {
    for (int32_t c = t->node[at].child; c >= 0; c = t->node[c].sibling)
        if (t->node[c].byte == b) return c;
    return -1;
}

// Adds key -> value (value >= 0); a key added twice keeps the last value.
void spm_trie_add(Trie *t, const uint8_t *key, size_t len, int32_t value);

// The value of the longest key that is a prefix of s[0..n), or -1; its length in *len.
static inline int32_t trie_longest(const Trie *t, const uint8_t *s, size_t n, size_t *len) {
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
    // reserved_id_map_: control, unknown, byte), looked up first by PieceToId. (One
    // piece may be in both, with two ids: two maps, not tokmap.h's one id per key.)
    StrMap norm_map, res_map;

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
    PairMap merges;                  // (left id, right id) -> (line of the merge, merged id)
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

static inline int32_t find_norm(const Spm *s, const char *p, size_t n) {
    return strmap_get(&s->norm_map, p, n);
}

// sentencepiece's PieceToId: reserved pieces first, then normal ones, else <unk>.
static inline int32_t piece_to_id(const Spm *s, const char *p, size_t n) {
    uint64_t h = tok_hash(p, n);
    int32_t id = strmap_get_h(&s->res_map, p, n, h);
    if (id < 0) id = strmap_get_h(&s->norm_map, p, n, h);
    return id >= 0 ? id : s->unk_id;
}

// A new, empty model that follows `rules` (RULES_SPM or RULES_HF); path is for messages.
Spm *spm_new(int rules, const char *path);
// Appends piece i (bytes p[0..len)) to the table; pieces are added in id order.
void spm_push_piece(Spm *s, const char *p, size_t len, float score, int type);
// Builds the lookup tables once all pieces are in. norm[i] says whether piece i goes to
// the "norm" map (see struct Spm). Checks what sentencepiece checks at load.
int spm_index(Spm *s, const uint8_t *norm);
// "<0xNN>" with two hex digits (upper case unless lower is allowed) -> NN, else -1.
int spm_parse_byte_piece(const char *p, size_t n, int allow_lower);
// Applies the tokenizer.json normalizer ops to p[0..n) into out (tmp is scratch); in
// spm.c, with the other normalizers.
void spm_hf_normalize(const Spm *s, ByteVec *out, ByteVec *tmp, const char *p, size_t n);

#endif
