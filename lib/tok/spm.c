// spm.c: the encoder and decoder of SentencePiece BPE (tokenizer.model) and of its HF
// tokenizer.json twin; see spm.h. The model they run on (struct Spm, spm_internal.h) is
// read by spm_model.c (tokenizer.model) or spm_json.c (tokenizer.json) into the piece
// table of spm_pieces.c.
//
// Order of this file: UTF-8; the encoder (the merge loop of each rule set, the word
// cache, the normalizers, HF's added tokens and pre-tokenizer); the decoder.
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
// The deliberate gaps (model types other than BPE, tokenizer.json settings we do not
// implement) are errors at load: see spm_model.c and spm_json.c.
#include "tok/spm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "base/error.h"       // defines: ERR, TRY, xmalloc, xcalloc, xrealloc
#include "tok/mergeheap.h"    // defines: MergeHeap, mergeheap_push, mergeheap_pop
#include "tok/spm_internal.h" // defines: struct Spm, WS, find_norm, piece_to_id
#include "tok/tokmap.h"       // defines: tok_hash, pairmap_get, RANK_NONE
#include "tok/wordcache.h"    // defines: WordCache, wordcache_get, wordcache_put

// Longer words are not cached (rare; encoded every time). Longer than bbpe.c's: a word
// here is a whole run of text up to the next "▁", not a regex pre-token.
#define CACHE_MAX_WORD 256

// ---------------------------------------------------------------------------------
// UTF-8

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

// ---------------------------------------------------------------------------------
// The encoder

typedef struct { int32_t start, len, prev, next, id, freeze; } Sym;  // a symbol of one word
// A merge candidate in the heap (mergeheap.h): key = order << 32 | left symbol, smaller
// first, where order is sentencepiece's ~score key (higher scores first) or HF's rank;
// ties go to the smaller left. The right symbol is the left one's next when it pops (if
// either merged since, the lengths or ids below no longer match). aux: sentencepiece:
// the length of the merged piece, to spot stale candidates; HF: the id the merge makes.
static inline uint64_t cand_key(uint32_t order, int32_t left) {
    return (uint64_t)order << 32 | (uint32_t)left;
}
typedef struct { size_t a, b; int32_t id; } Seg;  // text [a, b), an added token when id >= 0
typedef struct { Seg *v; size_t n, cap; } SegVec;

struct SpmEncoder {
    const Spm *s;
    ByteVec norm, tmp, pre;     // normalized text; scratch for HF normalizer and Metaspace
    Sym *sym;                   // symbols of the word being merged
    size_t sym_cap;
    MergeHeap heap;             // merge candidates (cand_key)
    IdVec word;                 // ids of one word, before they go to the cache and out
    int32_t *rev;               // (n) sentencepiece rev_merge: left length per UNUSED piece, -1 none
    IdVec rev_touched, stack;   // entries of rev to reset; resegmentation work stack
    WordCache cache;            // word -> ids
    SegVec seg1, seg2;          // HF added-token splits of the raw and of the normalized text
    size_t out_start;           // where this spm_encode call began appending
};

SpmEncoder *spm_encoder_new(const Spm *s) {
    SpmEncoder *e = xcalloc(1, sizeof *e);
    e->s = s;
    wordcache_init(&e->cache);
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
    mergeheap_free(&e->heap);
    idvec_free(&e->word);
    free(e->rev);
    idvec_free(&e->rev_touched);
    idvec_free(&e->stack);
    wordcache_free(&e->cache);
    free(e->seg1.v);
    free(e->seg2.v);
    free(e);
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
    mergeheap_push(&e->heap, cand_key(~s->prio[id], l), (uint32_t)(L->len + R->len));
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
    e->heap.n = 0;
    for (int32_t i = 1; i < k; i++) spm_try_pair(e, w, i - 1, i);
    while (e->heap.n) {
        uint32_t aux;
        int32_t left = (int32_t)(uint32_t)mergeheap_pop(&e->heap, &aux);
        Sym *L = &sym[left];
        if (L->len == 0 || L->next < 0) continue;  // stale
        Sym *R = &sym[L->next];
        if (R->len == 0 || (uint32_t)(L->len + R->len) != aux) continue;  // stale
        L->len += R->len;
        L->next = R->next;
        if (R->next >= 0) sym[R->next].prev = left;
        R->len = 0;
        spm_try_pair(e, w, L->prev, left);
        spm_try_pair(e, w, left, L->next);
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
    int32_t id;
    uint32_t rank = pairmap_get(&e->s->merges, sym[l].id, sym[sym[l].next].id, &id);
    if (rank != RANK_NONE) mergeheap_push(&e->heap, cand_key(rank, l), (uint32_t)id);
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
    e->heap.n = 0;
    for (int32_t i = 0; i + 1 < k; i++) hf_try_pair(e, i);
    while (e->heap.n) {
        uint32_t aux;
        int32_t left = (int32_t)(uint32_t)mergeheap_pop(&e->heap, &aux), id;
        Sym *L = &sym[left];
        if (L->len == 0 || L->next < 0) continue;
        Sym *R = &sym[L->next];
        if (pairmap_get(&s->merges, L->id, R->id, &id) == RANK_NONE || (uint32_t)id != aux) continue;  // stale
        L->id = id;
        L->len += R->len;
        L->next = R->next;
        R->len = 0;
        if (L->next >= 0) sym[L->next].prev = left;
        hf_try_pair(e, L->prev);
        hf_try_pair(e, left);
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

// Encodes one word (a piece of text no merge crosses), through the cache.
static int encode_word(SpmEncoder *e, IdVec *out, const char *w, size_t n) {
    const Spm *s = e->s;
    uint64_t h = 0;
    uint32_t at = 0;
    int cached = n > 0 && n <= CACHE_MAX_WORD;
    if (cached) {
        size_t n_ids = 0;
        h = tok_hash(w, n);
        const int32_t *ids = wordcache_get(&e->cache, &at, &n_ids, h, w, n);
        if (ids) {
            append_word(e, out, ids, n_ids);
            return 0;
        }
    }
    e->word.n = 0;
    TRY(s->rules == RULES_SPM ? spm_bpe(e, &e->word, w, n) : hf_bpe(e, &e->word, w, n));
    if (cached) wordcache_put(&e->cache, at, h, w, n, e->word.v, e->word.n);
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
// Applies the normalizer ops to p[0..n) into out (tmp is scratch).
void spm_hf_normalize(const Spm *s, ByteVec *out, ByteVec *tmp, const char *p, size_t n) {
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
        spm_hf_normalize(s, &e->norm, &e->tmp, text + g.a, g.b - g.a);
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
