// tokenizer.c: finds the tokenizer files (in a folder, or wherever a TokFiles reads them
// from: a pack), recognises the family, hashes the bytes and dispatches to lib/tok/spm.c
// or lib/tok/bbpe.c. No tokenization happens here.
#include "tok/tokenizer.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "tok/bbpe.h"    // defines: bbpe_load_json, bbpe_load_buffers, bbpe_encode
#include "base/error.h"  // defines: ERR, TRY
#include "base/fileio.h" // defines: file_read_all, path_join, path_is_dir
#include "tok/spm.h"     // defines: spm_load_model, spm_load_json, spm_encode

static int exists(const char *p) {
    FILE *f = fopen(p, "rb");
    if (f) fclose(f);
    return f != NULL;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

// Does any pre_tokenizer or decoder in this (possibly Sequence) node have this type?
static int json_has_type(const json_t *node, const char *type) {
    if (!node || json_is_null(node)) return 0;
    const char *t = json_string_value(json_object_get(node, "type"));
    if (t && strcmp(t, type) == 0) return 1;
    const char *lists[] = {"pretokenizers", "normalizers", "decoders"};
    for (size_t k = 0; k < 3; k++) {
        json_t *arr = json_object_get(node, lists[k]);
        size_t i;
        json_t *child;
        json_array_foreach(arr, i, child) if (json_has_type(child, type)) return 1;
    }
    return 0;
}

const char *const TOKENIZER_FILES[TOKENIZER_N_FILES] = {
    "tokenizer.model", "tokenizer.json",    "tokenizer_config.json", "special_tokens_map.json",
    "added_tokens.json", "vocab.json", "merges.txt",
};

// text (n bytes of a tokenizer.json); path names it in messages.
static int load_json(Tokenizer *t, const char *text, size_t n, const char *path) {
    t->hash = XXH64(text, n, 0);
    json_error_t jerr;
    json_t *root = json_loadb(text, n, 0, &jerr);
    if (!root) return ERR("%s: malformed JSON at line %d: %s", path, jerr.line, jerr.text);
    int rc = -1;
    json_t *model = json_object_get(root, "model");
    const char *type = json_string_value(json_object_get(model, "type"));
    if (!json_is_object(model)) {
        ERR("%s: no \"model\" object: not a Hugging Face tokenizer.json", path);
    } else if (type && strcmp(type, "BPE") != 0) {
        ERR("%s: tokenizer model type %s is not supported (BPE only)", path, type);
    } else if (json_has_type(json_object_get(root, "pre_tokenizer"), "ByteLevel")) {
        t->kind = TOK_BBPE;
        rc = bbpe_load_json(&t->bbpe, root, path);
    } else if (json_is_true(json_object_get(model, "byte_fallback")) ||
               json_has_type(json_object_get(root, "pre_tokenizer"), "Metaspace") ||
               json_has_type(json_object_get(root, "normalizer"), "Prepend")) {
        t->kind = TOK_SPM;
        rc = spm_load_json(&t->spm, root, path);
    } else {
        ERR("%s: a BPE tokenizer.json that is neither byte-level nor SentencePiece-style", path);
    }
    json_decref(root);
    return rc;
}

// data (n bytes of a tokenizer.model: sentencepiece's protobuf); path names it.
static int load_model(Tokenizer *t, const char *data, size_t n, const char *path) {
    t->hash = XXH64(data, n, 0);
    t->kind = TOK_SPM;
    return spm_load_model(&t->spm, (const uint8_t *)data, n, path);
}

// A file of f: 0 with its bytes in *b (b->name: WHERE/NAME, freed by buf_free), 1 when
// there is none, -1 after ERR.
static int buf_read(TokBuf *b, const TokFiles *f, const char *name) {
    memset(b, 0, sizeof *b);
    char *data;
    size_t n;
    int rc = f->read(f->ctx, name, &data, &n);
    if (rc != 0) return rc;
    b->data = data, b->n = n, b->name = path_join(f->where, name);
    return 0;
}
static void buf_free(TokBuf *b) {
    free((char *)b->data);
    free((char *)b->name);
    memset(b, 0, sizeof *b);
}

// vocab.json + merges.txt (+ tokenizer_config.json) of f; the hash is of the first two.
// 1 (no ERR) when f has no vocab.json: the caller says what was looked for.
static int load_vocab_merges(Tokenizer *t, const TokFiles *f) {
    TokBuf vocab, merges, config;
    int rv = buf_read(&vocab, f, "vocab.json");
    if (rv != 0) return rv;
    int rm = buf_read(&merges, f, "merges.txt"), rcfg = 1, rc = rm;
    if (rm == 1) rc = ERR("%s: no merges.txt beside vocab.json", f->where);
    if (rc == 0 && (rcfg = buf_read(&config, f, "tokenizer_config.json")) < 0) rc = -1;
    if (rc == 0) {
        XXH64_state_t *xx = XXH64_createState();
        XXH64_reset(xx, 0);
        XXH64_update(xx, vocab.data, vocab.n);
        XXH64_update(xx, merges.data, merges.n);
        t->hash = XXH64_digest(xx);
        XXH64_freeState(xx);
        t->kind = TOK_BBPE;
        rc = bbpe_load_buffers(&t->bbpe, &vocab, &merges, rcfg == 0 ? &config : NULL);
    }
    buf_free(&vocab);
    if (rm == 0) buf_free(&merges);
    if (rcfg == 0) buf_free(&config);
    return rc;
}

// A folder's files: ctx is the folder.
static int folder_read(void *ctx, const char *name, char **data, size_t *n) {
    char *path = path_join(ctx, name);
    int rc = exists(path) ? file_read_all(data, n, path) : 1;
    free(path);
    return rc;
}

// tokenizer.json preferred, then tokenizer.model, then vocab.json + merges.txt.
static int load_files(Tokenizer *t, const TokFiles *f) {
    static const char *const order[] = {"tokenizer.json", "tokenizer.model"};
    for (int i = 0; i < 2; i++) {
        TokBuf b;
        int rc = buf_read(&b, f, order[i]);
        if (rc == 1) continue;
        if (rc == 0) rc = i == 0 ? load_json(t, b.data, b.n, b.name) : load_model(t, b.data, b.n, b.name);
        buf_free(&b);
        return rc;
    }
    int rc = load_vocab_merges(t, f);
    if (rc == 1) return ERR("%s: no tokenizer.json, tokenizer.model or vocab.json + merges.txt in this %s", f->where,
                            f->read == folder_read ? "folder" : "pack");
    return rc;
}

// The fields every kind sets from its tables; t->path = where.
static int tokenizer_finish(Tokenizer *t, int rc) {
    if (rc < 0) { tokenizer_free(t); return -1; }
    if (t->kind == TOK_SPM) {
        t->vocab_size = spm_vocab_size(t->spm);
        t->bos_id = spm_bos_id(t->spm);
        t->eos_id = spm_eos_id(t->spm);
        t->add_bos = t->bos_id >= 0;
        t->add_eos = 0;
    } else {
        t->vocab_size = bbpe_vocab_size(t->bbpe);
        t->bos_id = -1;
        t->eos_id = bbpe_token_id(t->bbpe, "<|endoftext|>");
        t->add_bos = 0;
        t->add_eos = t->eos_id >= 0;
    }
    return 0;
}

int tokenizer_load_files(Tokenizer *t, const TokFiles *f) {
    memset(t, 0, sizeof *t);
    t->path = xstrdup(f->where);
    return tokenizer_finish(t, load_files(t, f));
}

int tokenizer_load(Tokenizer *t, const char *path) {
    memset(t, 0, sizeof *t);
    t->path = xstrdup(path);
    int rc;
    if (path_is_dir(path)) {
        TokFiles f = {folder_read, (void *)path, path};
        rc = load_files(t, &f);
    } else if (ends_with(path, "vocab.json")) { // the folder's vocab.json + merges.txt, whatever else is there
        char *dir = xstrdup(path);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0; else strcpy(dir, ".");
        TokFiles f = {folder_read, dir, dir};
        if ((rc = load_vocab_merges(t, &f)) == 1) rc = ERR("%s/vocab.json: cannot open: %s", dir, strerror(ENOENT));
        free(dir);
    } else { // a tokenizer.json, or tokenizer.model under any other name: the protobuf
        char *data;
        size_t n;
        rc = file_read_all(&data, &n, path);
        if (rc == 0) {
            rc = ends_with(path, ".json") ? load_json(t, data, n, path) : load_model(t, data, n, path);
            free(data);
        }
    }
    return tokenizer_finish(t, rc);
}

void tokenizer_free(Tokenizer *t) {
    if (t->spm) spm_free(t->spm);
    if (t->bbpe) bbpe_free(t->bbpe);
    free(t->path);
    memset(t, 0, sizeof *t);
}

void tok_encoder_init(TokEncoder *e, const Tokenizer *t) {
    e->tok = t;
    e->impl = t->kind == TOK_SPM ? (void *)spm_encoder_new(t->spm) : (void *)bbpe_encoder_new(t->bbpe);
}

void tok_encoder_free(TokEncoder *e) {
    if (!e->impl) return;
    if (e->tok->kind == TOK_SPM) spm_encoder_free(e->impl);
    else bbpe_encoder_free(e->impl);
    e->impl = NULL;
}

int tok_encode(TokEncoder *e, IdVec *out, const char *text, size_t len) {
    return e->tok->kind == TOK_SPM ? spm_encode(e->impl, out, text, len)
                                   : bbpe_encode(e->impl, out, text, len);
}

int tok_is_special(const Tokenizer *t, int32_t id) { return t->kind == TOK_BBPE && bbpe_is_special(t->bbpe, id); }

int tok_decode(const Tokenizer *t, ByteVec *out, const int32_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= t->vocab_size)
            return ERR("token id %d outside the vocabulary (size %d)", ids[i], t->vocab_size);
    return t->kind == TOK_SPM ? spm_decode(t->spm, out, ids, n) : bbpe_decode(t->bbpe, out, ids, n);
}
