// bbpe_load.c: reads a byte-level BPE tokenizer (GPT-2, Qwen2/2.5/3) into a Bbpe
// (bbpe_internal.h): from a HF tokenizer.json (bbpe_load_json), or from vocab.json +
// merges.txt + tokenizer_config.json (bbpe_load_buffers, bbpe_load_files). Besides the
// vocab and the merges it builds what the encoder takes ready-made: the pre-tokenizer
// stages (the two known regexes by name, any other rewritten onto Oniguruma's Unicode
// classes and compiled by PCRE2), the added tokens in HF's two match sets, the byte
// symbols and the decode table (bbpe_finish). A Bbpe's lifetime and lookups are here
// too (bbpe_free, bbpe_vocab_size, bbpe_token_id). Encoding and decoding are bbpe.c's,
// and so is the story of the Unicode differences the regex rewrite makes up for.
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
// Order of this file: the byte-level alphabet; a Bbpe's lifetime and lookups; the vocab
// and the merges; added tokens; the regex rewrite and the stages; the normalizer and
// pre_tokenizer settings; the added-token sets and bbpe_finish; the three loaders.
#include "tok/bbpe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "base/error.h"          // defines: ERR, TRY, xmalloc, xcalloc, xrealloc
#include "base/fileio.h"         // defines: file_read_all
#include "tok/bbpe_internal.h"   // defines: struct Bbpe, Added, Stage, bbpe_nfc_append, PCRE2
#include "tok/tokmap.h"          // defines: StrMap, PairMap, strmap_put, pairmap_put
#include "tok/unicode_tables.h"  // defines: uni_ranges, uni_ws, UL, UN, UWS (generated)

#define MAX_ID (1 << 24)  // ids beyond this are taken for a corrupt file

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
// A Bbpe's lifetime and lookups

static Bbpe *bbpe_alloc(void) {
    bbpe_unicode_init();
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
            if (bbpe_nfc_append(&v, (const uint8_t *)a->s, a->len) < 0) { bytevec_free(&v); return -1; }
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
