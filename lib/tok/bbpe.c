// bbpe.c: the encoder and decoder of byte-level BPE (GPT-2, Qwen2/2.5/3), which give the
// same ids as Hugging Face `tokenizers` 0.23 encode(text, add_special_tokens=False).
// The tokenizer they run on (struct Bbpe, bbpe_internal.h) is read by bbpe_load.c.
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
//     splitters and PCRE2 (the rewrite, in bbpe_load.c, turns \p{L}, \p{N}, \s, \S into
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
// The settings it reads and the deliberate gaps (each an error at load) are listed at
// the top of bbpe_load.c. The Unicode tables are in unicode_tables.c, and the maps, word
// cache and merge heap in tokmap.h, wordcache.h and mergeheap.h.
//
// Order of this file: Unicode classes and NFC (filled once, on the first load); the
// encoder (the merge loop, the word cache, the two known splitters, the pre-tokenizer
// stages, added tokens, normalization); the decoder.
//
// How it is checked: tests/test_bbpe.c (hand-derived ids, HF ids of tricky
// strings, the splitters against PCRE2 on C4 and WikiText), the fuzz targets
// tests/fuzz/fuzz_bbpe_encode.c (splitters == PCRE2, round trips) and
// fuzz_tokenizer_json.c, and the end-to-end oracle (best-tokenize --ids vs HF).
#include "tok/bbpe.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "base/error.h"          // defines: ERR, TRY, CHECK, xcalloc, xrealloc
#include "base/utf8.h"           // defines: utf8_valid
#include "tok/bbpe_internal.h"   // defines: struct Bbpe, Added, AddedSet, Stage, utf8_decode, PCRE2
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

void bbpe_unicode_init(void) { pthread_once(&uni_once, uni_init); }

static inline size_t utf8_len(uint8_t c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

// Appends NFC(s) as HF computes it: utf8proc on the segments between the
// characters of nfc_unsafe, which are copied as they are (to HF they are
// starters that block reordering and never compose, so the cut is exact).
int bbpe_nfc_append(ByteVec *out, const uint8_t *s, size_t n) {
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
// boundary-safe code point go through bbpe_nfc_append.
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
        TRY(bbpe_nfc_append(out, s + safe, j - safe));
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

int bbpe_is_special(const Bbpe *b, int32_t id) {
    for (size_t i = 0; i < b->n_added; i++)
        if (b->added[i].id == id) return b->added[i].special;
    return 0;
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
