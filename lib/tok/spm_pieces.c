// spm_pieces.c: the piece table of a SentencePiece model (struct Spm in spm_internal.h),
// which both readers fill: pieces pushed in id order, then the maps from piece bytes to
// ids built once, with the checks sentencepiece makes at load time; the byte trie of
// user-defined pieces and added tokens. Reading the files is spm_model.c's and
// spm_json.c's job, encoding and decoding spm.c's.
#include "tok/spm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"       // defines: ERR, xmalloc, xcalloc, xrealloc, xstrdup
#include "tok/spm_internal.h" // defines: struct Spm, piece_to_id, trie_longest

static int32_t trie_new_node(Trie *t, uint8_t b) {
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->node = xrealloc(t->node, (size_t)t->cap * sizeof *t->node);
    }
    t->node[t->n] = (TrieNode){.child = -1, .sibling = -1, .value = -1, .byte = b};
    return t->n++;
}

void spm_trie_add(Trie *t, const uint8_t *key, size_t len, int32_t value) {
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

// A float score as a key whose unsigned order is the float order (-0 == +0).
static uint32_t score_key(float f) {
    uint32_t u;
    if (f == 0.0f) f = 0.0f;
    memcpy(&u, &f, 4);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

int spm_parse_byte_piece(const char *p, size_t n, int allow_lower) {
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
    strmap_free(&s->norm_map);
    strmap_free(&s->res_map);
    free(s->cm_unit);
    free(s->cm_norm);
    free(s->user.node);
    free(s->unk_surface);
    pairmap_free(&s->merges);
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

Spm *spm_new(int rules, const char *path) {
    Spm *s = xcalloc(1, sizeof *s);
    s->rules = rules;
    s->path = xstrdup(path);
    s->unk_id = s->bos_id = s->eos_id = -1;
    s->add_dummy_prefix = s->remove_extra_ws = s->escape_ws = 1;  // proto2 defaults
    return s;
}

void spm_push_piece(Spm *s, const char *p, size_t len, float score, int type) {
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


int spm_index(Spm *s, const uint8_t *norm) {
    const char *path = s->path;
    strmap_init(&s->norm_map, (size_t)s->n);
    strmap_init(&s->res_map, 256);
    for (int32_t i = 0; i < s->n; i++) {
        const char *p = piece_ptr(s, i);
        size_t len = piece_len(s, i);
        if (len == 0) return ERR("%s: piece %d is empty", path, i);
        StrMap *m = norm[i] ? &s->norm_map : &s->res_map;
        int32_t was = strmap_get(m, p, len);
        if (was >= 0)
            return ERR("%s: piece %d \"%.*s\" is already defined as piece %d", path, i,
                       (int)(len > 64 ? 64 : len), p, was);
        strmap_put(m, p, len, i);
    }
    s->byte_of = xmalloc((size_t)s->n * sizeof *s->byte_of);
    s->dec_id = xmalloc((size_t)s->n * sizeof *s->dec_id);
    int cut_ok = 1;
    for (int32_t i = 0; i < s->n; i++) {
        const char *p = piece_ptr(s, i);
        size_t len = piece_len(s, i);
        s->byte_of[i] = -1;
        if (s->type[i] == PIECE_BYTE) {
            int b = spm_parse_byte_piece(p, len, s->rules == RULES_HF);
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
