// spm_json.c: reads a HF tokenizer.json of the LLaMA kind (LlamaTokenizerFast: model BPE
// with byte_fallback, "▁" spaces through Prepend+Replace normalizers or a Metaspace
// pre-tokenizer) into an Spm (spm_internal.h) that follows HF's rules (RULES_HF): merges
// ranked by their line, added tokens matched in the raw or the normalized text.
// Deliberate gaps, each an error at load: normalizers other than Prepend/Replace(String),
// pre-tokenizers other than Metaspace("▁"), BPE dropout, subword prefixes/suffixes.
// The tokenizer.model reader is spm_model.c; encoding (and the normalizer ops) spm.c's.
#include "tok/spm.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"       // defines: ERR, TRY, xmalloc, xcalloc, xrealloc, xstrdup
#include "tok/spm_internal.h" // defines: struct Spm, spm_new, spm_push_piece, spm_index

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

// merges: ["a b", ...] (lines starting "#version" skipped) or [["a", "b"], ...].
static int hf_read_merges(Spm *s, const json_t *merges, int32_t V) {
    size_t n = json_array_size(merges);
    pairmap_init(&s->merges, n);
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
        pairmap_put(&s->merges, ia, ib, rank++, inew);  // a repeated pair keeps its last rank
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
    strmap_free(&s->norm_map);
    strmap_free(&s->res_map);
    free(s->byte_of);
    free(s->dec_id);
    s->byte_of = NULL, s->dec_id = NULL;
    for (size_t i = 0; i < n_add; i++) {
        if (add_id[i] < 0) continue;
        s->type[add_id[i]] = add[i].special ? PIECE_CONTROL : PIECE_USER;
    }
    s->byte_fallback = json_flag(model, "byte_fallback", 0);
    for (size_t i = 0; i < V; i++)
        if (s->type[i] == PIECE_NORMAL && spm_parse_byte_piece(tok[i], tok_len[i], 1) >= 0) s->type[i] = PIECE_BYTE;
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
                spm_hf_normalize(s, &nb, &tmp, add[i].p, add[i].n);
                spm_trie_add(&s->added_norm, (const uint8_t *)nb.v, nb.n, s->n_added);
            } else {
                spm_trie_add(&s->added_raw, (const uint8_t *)add[i].p, add[i].n, s->n_added);
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
    s->bos_id = find_norm(s, "<s>", 3);
    if (s->bos_id < 0) s->bos_id = strmap_get(&s->res_map, "<s>", 3);
    s->eos_id = find_norm(s, "</s>", 4);
    if (s->eos_id < 0) s->eos_id = strmap_get(&s->res_map, "</s>", 4);
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
