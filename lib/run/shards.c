// shards.c: the sharded training state's files (see shards.h).
#include "run/shards.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "base/error.h"  // defines: ERR, TRY, xmalloc
#include "base/fileio.h" // defines: AFile, path_join
#include "dist/dist.h"   // defines: dist_slice
#include "nn/params.h"   // defines: params_check_moments

// "step-S/rank-R-of-N.safetensors": a shard's name inside the state folder, as the
// manifest lists it.
static void shard_name(char name[96], int step, int rank, int ranks) {
    snprintf(name, 96, "step-%d/rank-%d-of-%d.safetensors", step, rank, ranks);
}

char *shard_path(const char *state_dir, int step, int rank, int ranks) {
    char name[96];
    shard_name(name, step, rank, ranks);
    return path_join(state_dir, name);
}

static int meta_zu(StWriter *w, const char *key, size_t x) {
    char buf[32];
    snprintf(buf, sizeof buf, "%zu", x);
    return st_writer_meta(w, key, buf);
}

int shard_add(StWriter *w, const float *params, const float *m, const float *v, const uint8_t *mask, int rank,
              int ranks, size_t lo, size_t hi, size_t n_params) {
    int64_t shape[1] = {(int64_t)(hi - lo)};
    TRY(st_writer_add(w, "params", ST_F32, 1, shape, params));
    TRY(st_writer_add(w, "exp_avg", ST_F32, 1, shape, m));
    TRY(st_writer_add(w, "exp_avg_sq", ST_F32, 1, shape, v));
    TRY(st_writer_add(w, "mask", ST_BOOL, 1, shape, mask));
    TRY(meta_zu(w, "rank", (size_t)rank));
    TRY(meta_zu(w, "ranks", (size_t)ranks));
    TRY(meta_zu(w, "lo", lo));
    TRY(meta_zu(w, "hi", hi));
    return meta_zu(w, "n_params", n_params);
}

int shards_manifest_write(const char *state_dir, int step, int ranks, size_t n_params, const uint64_t *hashes) {
    json_t *o = json_object(), *a = json_array(), *h = json_array();
    json_object_set_new(o, "format", json_string(SHARDS_FORMAT));
    json_object_set_new(o, "version", json_string(SHARDS_VERSION));
    json_object_set_new(o, "step", json_integer(step));
    json_object_set_new(o, "ranks", json_integer(ranks));
    json_object_set_new(o, "n_params", json_integer((json_int_t)n_params));
    for (int r = 0; r < ranks; r++) {
        char name[96];
        shard_name(name, step, r, ranks);
        json_array_append_new(a, json_string(name));
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)hashes[r]);
        json_array_append_new(h, json_string(hex));
    }
    json_object_set_new(o, "shards", a);
    json_object_set_new(o, "content_hashes", h);
    char *text = json_dumps(o, JSON_INDENT(1));
    json_decref(o);
    char *path = path_join(state_dir, "manifest.json");
    AFile f;
    int rc = afile_open(&f, path);
    if (rc == 0) {
        fputs(text, f.fp);
        fputc('\n', f.fp);
        rc = afile_commit(&f);
    }
    free(path);
    free(text);
    return rc;
}

void shards_manifest_free(ShardManifest *mf) {
    for (int r = 0; mf->files && r < mf->ranks; r++) free(mf->files[r]);
    free(mf->files);
    free(mf->hashes);
    memset(mf, 0, sizeof *mf);
}

// An integer field of o in [lo, hi], or ERR naming the file.
static int json_int_in(json_int_t *out, const json_t *o, const char *key, json_int_t lo, json_int_t hi,
                       const char *path) {
    const json_t *x = json_object_get(o, key);
    if (!json_is_integer(x) || json_integer_value(x) < lo || json_integer_value(x) > hi)
        return ERR("%s: \"%s\" is not an integer in [%lld, %lld]", path, key, (long long)lo, (long long)hi);
    *out = json_integer_value(x);
    return 0;
}

int shards_manifest_read(ShardManifest *mf, const char *state_dir) {
    memset(mf, 0, sizeof *mf);
    char *path = path_join(state_dir, "manifest.json");
    json_error_t je;
    json_t *o = json_load_file(path, 0, &je);
    int rc = 0;
    json_int_t step = 0, ranks = 0, n = 0;
    const json_t *fmt = json_object_get(o, "format"), *ver = json_object_get(o, "version");
    const json_t *a = json_object_get(o, "shards"), *h = json_object_get(o, "content_hashes");
    if (!o) rc = ERR("%s: not JSON (%s, line %d)", path, je.text, je.line);
    else if (!json_is_string(fmt) || strcmp(json_string_value(fmt), SHARDS_FORMAT) != 0)
        rc = ERR("%s: \"format\" is not \"%s\"", path, SHARDS_FORMAT);
    else if (!json_is_string(ver) || strcmp(json_string_value(ver), SHARDS_VERSION) != 0)
        rc = ERR("%s: \"version\" is not \"%s\" (another version of best-train wrote it)", path, SHARDS_VERSION);
    if (rc == 0) rc = json_int_in(&step, o, "step", 0, INT32_MAX, path);
    if (rc == 0) rc = json_int_in(&ranks, o, "ranks", 1, 1 << 20, path);
    if (rc == 0) rc = json_int_in(&n, o, "n_params", 1, INT64_MAX, path);
    if (rc == 0 && (!json_is_array(a) || json_array_size(a) != (size_t)ranks))
        rc = ERR("%s: \"shards\" is not a list of %lld files", path, (long long)ranks);
    if (rc == 0 && (!json_is_array(h) || json_array_size(h) != (size_t)ranks))
        rc = ERR("%s: \"content_hashes\" is not a list of %lld hashes", path, (long long)ranks);
    if (rc == 0) {
        mf->step = (int)step, mf->ranks = (int)ranks, mf->n_params = (size_t)n;
        mf->files = xcalloc((size_t)ranks, sizeof *mf->files);
        mf->hashes = xcalloc((size_t)ranks, sizeof *mf->hashes);
        for (int r = 0; r < mf->ranks && rc == 0; r++) {
            char want[96];
            shard_name(want, mf->step, r, mf->ranks);
            const char *s = json_string_value(json_array_get(a, (size_t)r));
            const char *x = json_string_value(json_array_get(h, (size_t)r));
            char *end = NULL;
            if (x) mf->hashes[r] = strtoull(x, &end, 16);
            if (!s || strcmp(s, want) != 0) rc = ERR("%s: shard %d is not named \"%s\"", path, r, want);
            else if (!x || strlen(x) != 16 || !isxdigit((unsigned char)x[0]) || *end)
                rc = ERR("%s: content hash %d is not 16 hex digits", path, r);
            else mf->files[r] = shard_path(state_dir, mf->step, r, mf->ranks);
        }
    }
    json_decref(o);
    free(path);
    if (rc < 0) shards_manifest_free(mf);
    return rc;
}

int shards_check(const SafeTensors *st, const ShardManifest *mf, int r) {
    TRY(st_check_content_hash(st, "content_hash"));
    char want[17];
    snprintf(want, sizeof want, "%016llx", (unsigned long long)mf->hashes[r]);
    if (strcmp(st_meta(st, "content_hash"), want) != 0)
        return ERR("%s: content hash %s, the manifest says %s (a shard of another save?)", st->path,
                   st_meta(st, "content_hash"), want);
    return 0;
}

// The metadata key of a shard as an integer, which must equal want.
static int meta_is(const SafeTensors *st, const char *key, size_t want) {
    const char *v = st_meta(st, key);
    char buf[32];
    snprintf(buf, sizeof buf, "%zu", want);
    if (!v || strcmp(v, buf) != 0)
        return ERR("%s: metadata %s is %s%s%s, the manifest says %zu (a shard of another save?)", st->path, key,
                   v ? "\"" : "", v ? v : "missing", v ? "\"" : "", want);
    return 0;
}

static const void *shard_tensor(const SafeTensors *st, const char *name, StDtype dt, size_t n) {
    const StTensor *t = st_find(st, name);
    if (!t || t->dtype != dt || t->ndim != 1 || t->nelem != n) {
        ERR("%s: no %s tensor %s of %zu elements", st->path, st_dtype_name(dt), name, n);
        return NULL;
    }
    return t->data;
}

// One shard's part of [lo, hi) into the arrays (see shards_read).
static int shard_copy(float *params, float *m, float *v, uint8_t *mask, const ShardManifest *mf, int r, size_t lo,
                      size_t hi) {
    size_t flo, fhi;
    dist_slice(&flo, &fhi, mf->n_params, r, mf->ranks);
    size_t a = flo > lo ? flo : lo, b = fhi < hi ? fhi : hi;
    if (a >= b) return 0;
    if (access(mf->files[r], F_OK) != 0)
        return ERR("%s: missing (the manifest lists %d shards; a save that did not finish?)", mf->files[r], mf->ranks);
    SafeTensors st;
    TRY(st_open(&st, mf->files[r]));
    size_t n = fhi - flo;
    int rc = shards_check(&st, mf, r);
    if (rc == 0) rc = meta_is(&st, "rank", (size_t)r);
    if (rc == 0) rc = meta_is(&st, "ranks", (size_t)mf->ranks);
    if (rc == 0) rc = meta_is(&st, "lo", flo);
    if (rc == 0) rc = meta_is(&st, "hi", fhi);
    if (rc == 0) rc = meta_is(&st, "n_params", mf->n_params);
    if (rc == 0) rc = meta_is(&st, "step", (size_t)mf->step);
    const float *sp = rc ? NULL : shard_tensor(&st, "params", ST_F32, n);
    const float *sm = sp ? shard_tensor(&st, "exp_avg", ST_F32, n) : NULL;
    const float *sv = sm ? shard_tensor(&st, "exp_avg_sq", ST_F32, n) : NULL;
    const uint8_t *sk = sv ? shard_tensor(&st, "mask", ST_BOOL, n) : NULL;
    if (!sk) rc = -1;
    if (rc == 0) rc = params_check_moments(st.path, NULL, sm + (a - flo), sv + (a - flo), a - flo, b - a);
    if (rc == 0) {
        memcpy(params + a, sp + (a - flo), (b - a) * sizeof *params);
        memcpy(m + (a - lo), sm + (a - flo), (b - a) * sizeof *m);
        memcpy(v + (a - lo), sv + (a - flo), (b - a) * sizeof *v);
        for (size_t i = a; i < b && rc == 0; i++) {
            uint8_t x = sk[i - flo];
            if (x > 1) rc = ERR("%s: mask holds %u at %zu (BOOL is 0 or 1)", st.path, x, i - flo);
            mask[i - lo] = x;
        }
    }
    st_close(&st);
    return rc;
}

int shards_read(float *params, float *m, float *v, uint8_t *mask, const ShardManifest *mf, size_t lo, size_t hi) {
    for (int r = 0; r < mf->ranks; r++) TRY(shard_copy(params, m, v, mask, mf, r, lo, hi));
    return 0;
}

void shards_prune(const char *state_dir, int keep) {
    DIR *d = opendir(state_dir);
    char keep_name[32];
    snprintf(keep_name, sizeof keep_name, "step-%d", keep);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (strncmp(e->d_name, "step-", 5) != 0 || (keep >= 0 && strcmp(e->d_name, keep_name) == 0)) continue;
        char *dir = path_join(state_dir, e->d_name);
        DIR *s = opendir(dir);
        for (struct dirent *f; s && (f = readdir(s));) {
            if (strcmp(f->d_name, ".") == 0 || strcmp(f->d_name, "..") == 0) continue;
            char *p = path_join(dir, f->d_name);
            unlink(p);
            free(p);
        }
        if (s) closedir(s);
        rmdir(dir);
        free(dir);
    }
    if (d) closedir(d);
}
