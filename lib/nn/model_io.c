// model_io.c: a model and its Hugging Face folder: the config.json a model is shaped by
// (model_create), loading the weights (model_load: model.safetensors or the shards of an
// index, checked against the parameter table before the block is allocated), and saving
// (model_save: the weights, config.json with its dtype updated, the source's tokenizer
// files; the checks and clean-ups around a save).
//
// The declarations stay in model.h: model_load and model_free are the model's init/free
// pair, and nearly every user of a Model loads or saves one. What a model is and
// computes (the parameter table, the forward and backward, decoding) is model.c's;
// safetensors, config.json and the temp + rename of every file are io/ and base/'s; a
// packed checkpoint's loader is pack/pack_model.c (which shares model_check_shape and
// model_check_name).
#include "nn/model.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"  // defines: ERR, TRY, xmalloc, xcalloc, xstrdup
#include "base/fileio.h" // defines: file_read_all, path_join, path_mkdir_made, AFile
#include "tok/tokenizer.h" // defines: TOKENIZER_FILES

// --- config.json ----------------------------------------------------------------------

// model_plan over the config.json at path (a file, or a folder holding one).
static int plan_file(Model *m, const char *path) {
    memset(m, 0, sizeof *m);
    char *file = path_is_dir(path) ? path_join(path, "config.json") : xstrdup(path);
    char *text;
    size_t len;
    int rc = file_read_all(&text, &len, file);
    if (rc == 0) {
        rc = model_plan(m, text, len, file, 0);
        free(text);
    }
    free(file);
    return rc;
}

int model_create(Model *m, const char *config_path) {
    TRY(plan_file(m, config_path));
    model_alloc(m);
    return 0;
}

// --- loading --------------------------------------------------------------------------

typedef struct {
    SafeTensors *st;   // (n,)
    int n;
    char *where;       // model.safetensors or the index, for messages
} Shards;

static void shards_close(Shards *s) {
    for (int i = 0; i < s->n; i++) st_close(&s->st[i]);
    free(s->st);
    free(s->where);
    memset(s, 0, sizeof *s);
}

// The shard files named by model.safetensors.index.json's weight_map, each opened once.
static int shards_open_index(Shards *s, const char *dir, const char *index) {
    char *text;
    size_t len;
    TRY(file_read_all(&text, &len, index));
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    free(text);
    if (!root) return ERR("%s: line %d: %s", index, je.line, je.text);
    json_t *map = json_object_get(root, "weight_map");
    int rc = 0;
    if (!json_is_object(map)) rc = ERR("%s: no weight_map object", index);
    const char *key;
    json_t *val;
    s->st = xcalloc(json_object_size(map) + 1, sizeof *s->st);
    json_object_foreach(map, key, val) {
        if (rc < 0) break;
        const char *file = json_string_value(val);
        if (!file || !*file || file[0] == '/' || strstr(file, "..")) {
            rc = ERR("%s: weight_map[%.100s] is not a file name in the folder", index, key);
            break;
        }
        char *path = path_join(dir, file);
        int seen = 0;
        for (int i = 0; i < s->n && !seen; i++) seen = strcmp(s->st[i].path, path) == 0;
        if (!seen && (rc = st_open(&s->st[s->n], path)) == 0) s->n++;
        free(path);
    }
    json_decref(root);
    return rc;
}

static int shards_open(Shards *s, const char *dir) {
    memset(s, 0, sizeof *s);
    char *single = path_join(dir, "model.safetensors");
    char *index = path_join(dir, "model.safetensors.index.json");
    int rc;
    if (access(single, F_OK) == 0) {
        s->st = xcalloc(1, sizeof *s->st);
        s->where = xstrdup(single);
        if ((rc = st_open(&s->st[0], single)) == 0) s->n = 1;
    } else if (access(index, F_OK) == 0) {
        s->where = xstrdup(index);
        rc = shards_open_index(s, dir, index);
    } else {
        rc = ERR("%s: no model.safetensors or model.safetensors.index.json", dir);
    }
    free(single);
    free(index);
    if (rc < 0) shards_close(s);
    return rc;
}

static const StTensor *shards_find(const Shards *s, const SafeTensors **in, const char *name) {
    for (int i = 0; i < s->n; i++) {
        const StTensor *t = st_find(&s->st[i], name);
        if (t) { *in = &s->st[i]; return t; }
    }
    return NULL;
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static void shape_str(char *buf, size_t n, int ndim, const int64_t *shape) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < ndim && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, d ? ", %lld" : "%lld", (long long)shape[d]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

int model_check_shape(const ParamInfo *p, int ndim, const int64_t *shape, const char *where) {
    if (ndim == p->ndim && shape[0] == p->shape[0] && (p->ndim == 1 || shape[1] == p->shape[1])) return 0;
    char got[64], want[64];
    shape_str(got, sizeof got, ndim, shape);
    shape_str(want, sizeof want, p->ndim, p->shape);
    return ERR("%s: tensor %s has shape %s, config.json implies %s", where, p->name, got, want);
}

int model_check_name(const Model *m, const char *name, const char *where) {
    if (model_param(m, name) || ends_with(name, ".rotary_emb.inv_freq")) return 0;
    if (m->cfg.tie_word_embeddings && strcmp(name, "lm_head.weight") == 0) return 0;
    return ERR("%s: unexpected tensor %s (not part of a %s with this config.json)", where, name,
               config_arch_name(m->cfg.arch));
}

// Every tensor of the table is there with its shape, and nothing else is: checked on
// the files' headers, before the block is allocated (a wild config.json must not cost
// a huge allocation before its shapes are found wrong).
static int check_tensors(const Model *m, const Shards *s) {
    for (int i = 0; i < m->n_info; i++) {
        const ParamInfo *p = &m->info[i];
        const SafeTensors *st;
        const StTensor *t = shards_find(s, &st, p->name);
        if (!t) return ERR("%s: missing tensor %s", s->where, p->name);
        TRY(model_check_shape(p, t->ndim, t->shape, st->path));
    }
    // Anything else in the files would be silently ignored by us but not by the model
    // it came from (a bias the config does not announce, say): refuse it.
    for (int k = 0; k < s->n; k++)
        for (int j = 0; j < s->st[k].n_tensors; j++)
            TRY(model_check_name(m, s->st[k].tensors[j].name, s->st[k].path));
    return 0;
}

static int load_tensors(Model *m, const Shards *s) {
    for (int i = 0; i < m->n_info; i++) {
        const ParamInfo *p = &m->info[i];
        const SafeTensors *st = NULL;
        const StTensor *t = shards_find(s, &st, p->name); // found by check_tensors
        TRY(st_to_f32(m->params + p->offset, st, t));
        if (i == 0) m->dtype = t->dtype;
    }
    return 0;
}

int model_load(Model *m, const char *dir) {
    memset(m, 0, sizeof *m);
    if (!path_is_dir(dir)) return ERR("%s: not a model folder", dir);
    TRY(plan_file(m, dir));
    m->src_dir = xstrdup(dir);
    Shards s;
    int rc = shards_open(&s, dir);
    if (rc == 0) {
        rc = check_tensors(m, &s);
        if (rc == 0) {
            model_alloc(m);
            rc = load_tensors(m, &s);
        }
        shards_close(&s);
    }
    if (rc < 0) model_free(m);
    return rc;
}

// --- saving ---------------------------------------------------------------------------

typedef struct { const float *src; StDtype dtype; } SaveCtx;

// StFillFn: fp32 -> bf16 / f16, little-endian, chunk by chunk.
static int fill_half(void *buf, size_t off, size_t n, void *ctx) {
    const SaveCtx *c = ctx;
    const float *src = c->src + off / 2;
    uint8_t *out = buf;
    for (size_t i = 0; i < n / 2; i++) {
        uint16_t h = c->dtype == ST_BF16 ? st_f32_to_bf16(src[i]) : st_f32_to_f16(src[i]);
        out[2 * i] = (uint8_t)h;
        out[2 * i + 1] = (uint8_t)(h >> 8);
    }
    return 0;
}

static int write_bytes(const char *path, const char *data, size_t n) {
    AFile f;
    TRY(afile_open(&f, path));
    if (n && fwrite(data, 1, n, f.fp) != n) {
        afile_abort(&f);
        return ERR("%s: write failed: %s", path, strerror(errno));
    }
    return afile_commit(&f);
}

static const char *torch_dtype_name(StDtype d) {
    return d == ST_BF16 ? "bfloat16" : d == ST_F16 ? "float16" : "float32";
}

// config.json with the string value of key ("torch_dtype", "dtype") replaced, editing
// the text so that everything else stays byte for byte (jansson would reformat numbers).
static void replace_json_string(char **text, size_t *len, const char *key, const char *value) {
    char pat[32];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    for (char *k = strstr(*text, pat); k; k = strstr(k + 1, pat)) {
        char *p = k + strlen(pat);
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
        if (*p != ':') continue;
        p++;
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
        if (*p != '"') continue;
        char *end = strchr(p + 1, '"');
        if (!end) return;
        size_t head = (size_t)(p + 1 - *text), tail = *len - (size_t)(end - *text);
        size_t vl = strlen(value);
        char *out = xmalloc(head + vl + tail + 1);
        memcpy(out, *text, head);
        memcpy(out + head, value, vl);
        memcpy(out + head + vl, end, tail + 1);
        free(*text);
        *text = out;
        *len = head + vl + tail;
        return;
    }
}

static int save_config(const Model *m, const char *dir, StDtype dtype) {
    char *path = path_join(dir, "config.json");
    char *text = xmalloc(m->config_len + 1);
    memcpy(text, m->config_json, m->config_len);
    text[m->config_len] = 0;
    size_t len = m->config_len;
    if (strcmp(m->cfg.torch_dtype, torch_dtype_name(dtype)) != 0) {
        replace_json_string(&text, &len, "torch_dtype", torch_dtype_name(dtype));
        replace_json_string(&text, &len, "dtype", torch_dtype_name(dtype));
    }
    int rc = write_bytes(path, text, len);
    free(text);
    free(path);
    return rc;
}

// What model_save writes: the weights and config.json, then the files it copies from the
// source folder: generation_config.json and the tokenizer's (tokenizer.h's list).
enum { N_SAVED_FILES = 3 + TOKENIZER_N_FILES, FIRST_COPIED_FILE = 2 };
static const char *saved_file(size_t i) {
    static const char *const own[3] = {"model.safetensors", "config.json", "generation_config.json"};
    return i < 3 ? own[i] : TOKENIZER_FILES[i - 3];
}

static int copy_tokenizer_files(const char *src, const char *dir) {
    for (size_t i = FIRST_COPIED_FILE; i < N_SAVED_FILES; i++) {
        char *from = path_join(src, saved_file(i)), *to = path_join(dir, saved_file(i));
        int rc = 0;
        if (access(from, R_OK) == 0) {
            char *data;
            size_t n;
            rc = file_read_all(&data, &n, from);
            if (rc == 0) {
                rc = write_bytes(to, data, n);
                free(data); // also when the write failed
            }
        }
        free(from);
        free(to);
        TRY(rc);
    }
    return 0;
}

int model_save(const Model *m, const char *dir, int dtype) {
    TRY(model_need_folder(m, "saving"));
    StDtype dt = dtype < 0 ? m->dtype : (StDtype)dtype;
    if (dt != ST_F32 && dt != ST_BF16 && dt != ST_F16)
        return ERR("%s: cannot save weights as %s (F32, BF16 or F16)", dir, st_dtype_name(dt));
    char *made; // the folders this save creates, removed again if it fails
    TRY(path_mkdir_made(&made, dir));
    StWriter w;
    st_writer_init(&w);
    SaveCtx *ctx = xcalloc((size_t)m->n_info, sizeof *ctx);
    int rc = st_writer_meta(&w, "format", "pt"); // transformers refuses files without it
    for (int i = 0; rc == 0 && i < m->n_info; i++) {
        const ParamInfo *p = &m->info[i];
        ctx[i].src = m->params + p->offset;
        ctx[i].dtype = dt;
        // F32 is written straight from the block (little-endian hosts only, as the format)
        rc = dt == ST_F32 ? st_writer_add(&w, p->name, dt, p->ndim, p->shape, ctx[i].src)
                          : st_writer_add_fn(&w, p->name, dt, p->ndim, p->shape, fill_half, &ctx[i]);
    }
    char *path = path_join(dir, "model.safetensors");
    if (rc == 0) rc = st_writer_write(&w, path);
    free(path);
    st_writer_free(&w);
    free(ctx);
    if (rc == 0) rc = save_config(m, dir, dt);
    if (rc == 0 && m->src_dir) rc = copy_tokenizer_files(m->src_dir, dir);
    if (rc == 0) { // a file an earlier save wrote, which this one did not: stale (a tokenizer.json
                   // beside this model's tokenizer.model would take precedence over it)
        const char *written[N_SAVED_FILES];
        int n = 0;
        for (size_t i = 0; i < N_SAVED_FILES; i++) {
            char *from = m->src_dir && i >= FIRST_COPIED_FILE ? path_join(m->src_dir, saved_file(i)) : NULL;
            if (i < FIRST_COPIED_FILE || (from && access(from, R_OK) == 0)) written[n++] = saved_file(i);
            free(from);
        }
        model_unlink_unsaved(dir, written, n);
    }
    if (rc < 0 && made) { // a folder of our own: what is in it, we wrote
        model_unlink_saved(dir);
        path_unmake(made, dir);
    } else {
        free(made);
    }
    return rc;
}

// A name model_save writes, or a temporary of one (".NAME.tmp.XXXXXX", fileio.h).
static int is_saved_name(const char *name) {
    for (size_t i = 0; i < N_SAVED_FILES; i++)
        if (strcmp(name, saved_file(i)) == 0 || path_is_temp_of(name, saved_file(i))) return 1;
    return 0;
}

int model_check_save_dir(const char *dir) {
    int rc = 0;
    for (size_t i = 0; i < N_SAVED_FILES && rc == 0; i++) {
        char *path = path_join(dir, saved_file(i));
        rc = path_check_not_input(path);
        free(path);
    }
    DIR *d = rc == 0 ? opendir(dir) : NULL; // no folder yet: nothing to mix with
    for (struct dirent *e; d && rc == 0 && (e = readdir(d));)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 && !is_saved_name(e->d_name))
            rc = ERR("%s: holds %s, which is not part of a model folder: a model is saved into a new or empty "
                     "folder, or over one saved before (never mixed with other files)", dir, e->d_name);
    if (d) closedir(d);
    return rc;
}

void model_unlink_unsaved(const char *dir, const char *const *written, int n_written) {
    for (size_t i = 0; i < N_SAVED_FILES; i++) {
        int kept = 0;
        for (int j = 0; j < n_written && !kept; j++) kept = strcmp(written[j], saved_file(i)) == 0;
        if (kept) continue;
        char *path = path_join(dir, saved_file(i));
        unlink(path);
        free(path);
    }
}

void model_unlink_saved(const char *dir) {
    for (size_t i = 0; i < N_SAVED_FILES; i++) {
        char *path = path_join(dir, saved_file(i));
        unlink(path);
        free(path);
    }
}
