// tokenizer.c: finds the tokenizer files, recognises the family, hashes the bytes
// and dispatches to lib/tok/spm.c or lib/tok/bbpe.c. No tokenization happens here.
#include "tok/tokenizer.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "tok/bbpe.h"    // defines: bbpe_load_json, bbpe_load_files, bbpe_encode
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

static int load_json(Tokenizer *t, const char *path) {
    char *text;
    size_t n;
    TRY(file_read_all(&text, &n, path));
    t->hash = XXH64(text, n, 0);
    json_error_t jerr;
    json_t *root = json_loadb(text, n, 0, &jerr);
    free(text);
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

static int load_model(Tokenizer *t, const char *path) {
    char *data;
    size_t n;
    TRY(file_read_all(&data, &n, path));
    t->hash = XXH64(data, n, 0);
    t->kind = TOK_SPM;
    int rc = spm_load_model(&t->spm, (const uint8_t *)data, n, path);
    free(data);
    return rc;
}

// vocab.json + merges.txt (+ tokenizer_config.json) from one folder.
static int load_vocab_merges(Tokenizer *t, const char *dir) {
    char *vocab = path_join(dir, "vocab.json"), *merges = path_join(dir, "merges.txt");
    char *config = path_join(dir, "tokenizer_config.json");
    int rc = -1;
    if (!exists(merges)) {
        ERR("%s: no merges.txt beside vocab.json", dir);
    } else {
        XXH64_state_t *xx = XXH64_createState();
        XXH64_reset(xx, 0);
        const char *files[] = {vocab, merges};
        rc = 0;
        for (int i = 0; i < 2 && rc == 0; i++) {
            char *d;
            size_t n;
            rc = file_read_all(&d, &n, files[i]);
            if (rc == 0) { XXH64_update(xx, d, n); free(d); }
        }
        t->hash = XXH64_digest(xx);
        XXH64_freeState(xx);
        t->kind = TOK_BBPE;
        if (rc == 0) rc = bbpe_load_files(&t->bbpe, vocab, merges, exists(config) ? config : NULL);
    }
    free(vocab);
    free(merges);
    free(config);
    return rc;
}

int tokenizer_load(Tokenizer *t, const char *path) {
    memset(t, 0, sizeof *t);
    t->path = xstrdup(path);
    int rc;
    if (path_is_dir(path)) {
        char *json = path_join(path, "tokenizer.json"), *model = path_join(path, "tokenizer.model");
        char *vocab = path_join(path, "vocab.json");
        if (exists(json)) rc = load_json(t, json);
        else if (exists(model)) rc = load_model(t, model);
        else if (exists(vocab)) rc = load_vocab_merges(t, path);
        else rc = ERR("%s: no tokenizer.json, tokenizer.model or vocab.json + merges.txt in this folder", path);
        free(json);
        free(model);
        free(vocab);
    } else if (ends_with(path, ".json") && !ends_with(path, "vocab.json")) {
        rc = load_json(t, path);
    } else if (ends_with(path, "vocab.json")) {
        char *dir = xstrdup(path);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0; else strcpy(dir, ".");
        rc = load_vocab_merges(t, dir);
        free(dir);
    } else {
        rc = load_model(t, path); // tokenizer.model or any other name: the protobuf
    }
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

int tok_decode(const Tokenizer *t, ByteVec *out, const int32_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= t->vocab_size)
            return ERR("token id %d outside the vocabulary (size %d)", ids[i], t->vocab_size);
    return t->kind == TOK_SPM ? spm_decode(t->spm, out, ids, n) : bbpe_decode(t->bbpe, out, ids, n);
}
