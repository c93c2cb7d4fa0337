// train_state.c: best-train's training state: its metadata (every hyperparameter, the
// data cursor and the run options, each range-checked when read back), the state saved
// by one rank (OUT/state/state.safetensors) or by several (shards.h's files, then the
// manifest), finding and reading it on --resume, OUT/model's config.json with its "best"
// block, and the moment dumps (OUT/moments). The format is train.h's.
//
// Not here: the loop, open and close (train.c); OUT's lock (train_out.c); the sharded files themselves
// (shards.c); the safetensors format (io/safetensors.h).
#include "run/train.h"
#include "run/train_internal.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <xxhash.h>

#include "base/args.h"       // defines: ARGS_THREADS_PER_CORE
#include "base/error.h"      // defines: ERR, TRY, xmalloc
#include "base/fileio.h"     // defines: path_join, path_fmt, path_mkdir_made
#include "base/version.h"    // defines: best_version
#include "dist/dist.h"       // defines: dist_rank, dist_size, dist_agree, dist_gather
#include "nn/params.h"       // defines: params_part, params_check_moments

#define STATE_FORMAT "best-train-state"
#define STATE_VERSION "2" // 2: content_hash, config_hash, log as a name inside OUT

// --- state: metadata ----------------------------------------------------------------

static int meta_set(StWriter *w, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int meta_set(StWriter *w, const char *key, const char *fmt, ...) {
    char buf[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return st_writer_meta(w, key, buf);
}

static int meta_get(const SafeTensors *st, const char *key, const char **out) {
    *out = st_meta(st, key);
    return *out ? 0 : ERR("%s: no \"%s\" in the metadata (not a best-train state?)", st->path, key);
}

// A finite number in [lo, hi] ([lo, hi) with hi_open).
static int meta_double(const SafeTensors *st, const char *key, double lo, double hi, int hi_open, double *out) {
    const char *v;
    TRY(meta_get(st, key, &v));
    char *end;
    *out = strtod(v, &end);
    if (*end || end == v || !isfinite(*out) || *out < lo || *out > hi || (hi_open && *out == hi))
        return ERR("%s: metadata %s = \"%s\" is not a number in [%g, %g%c", st->path, key, v, lo, hi,
                   hi_open ? ')' : ']');
    return 0;
}

// An integer in [lo, hi], in decimal digits (with a '-' when lo < 0).
static int meta_int(const SafeTensors *st, const char *key, int lo, int hi, int *out) {
    const char *v;
    TRY(meta_get(st, key, &v));
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    int sign_ok = (v[0] >= '0' && v[0] <= '9') || (v[0] == '-' && lo < 0);
    if (!sign_ok || *end || end == v || errno || x < lo || x > hi)
        return ERR("%s: metadata %s = \"%s\" is not an integer in [%d, %d]", st->path, key, v, lo, hi);
    *out = (int)x;
    return 0;
}

// A count in decimal digits (base 10) or 16 hex digits (base 16: a hash).
static int meta_u64(const SafeTensors *st, const char *key, int base, uint64_t *out) {
    const char *v;
    TRY(meta_get(st, key, &v));
    char *end;
    errno = 0;
    *out = strtoull(v, &end, base);
    if (!isxdigit((unsigned char)v[0]) || *end || end == v || errno || (base == 16 && end - v != 16))
        return ERR("%s: metadata %s = \"%s\" is not a %s", st->path, key, v,
                   base == 16 ? "hash of 16 hex digits" : "count");
    return 0;
}

// a and b name the same file or folder (device and inode).
static int same_file(const char *a, const char *b) {
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

// The hash of a config.json as a run reads it: xxh64 of its JSON with sorted keys and
// no spaces, without the "best" block train_save adds (so that a config saved into
// OUT/model hashes as the one the run started from). Text that is not a JSON object
// hashes as it is (model_load refuses it anyway).
static uint64_t config_hash(const char *json, size_t len) {
    json_error_t je;
    json_t *o = json_loadb(json, len, 0, &je);
    char *text = NULL;
    if (json_is_object(o)) {
        json_object_del(o, "best");
        text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    }
    uint64_t h = text ? XXH64(text, strlen(text), 0) : XXH64(json, len, 0);
    free(text);
    json_decref(o);
    return h;
}

// The state's "log": the log's file name when it sits in OUT itself ("" for the default
// OUT/log.jsonl); a log elsewhere is not restored by a resume (state_run_read), so it is
// written as "log_outside", for the message only.
static int log_meta_write(StWriter *w, const TrainConfig *c) {
    if (!c->log) return st_writer_meta(w, "log", "");
    const char *slash = strrchr(c->log, '/'), *base = slash ? slash + 1 : c->log;
    char *dir = slash ? strndup(c->log, (size_t)(slash - c->log + (slash == c->log))) : xstrdup(".");
    CHECK(dir, "out of memory");
    int inside = *base && same_file(dir, c->out);
    free(dir);
    return inside ? st_writer_meta(w, "log", base) : st_writer_meta(w, "log_outside", c->log);
}

// Every hyperparameter that shapes the run, so that a resume continues the same run.
static int state_meta_write(StWriter *w, const Trainer *tr) {
    const TrainConfig *c = &tr->cfg;
    int rc = 0;
    rc |= st_writer_meta(w, "format", STATE_FORMAT);
    rc |= st_writer_meta(w, "version", STATE_VERSION);
    rc |= meta_set(w, "step", "%d", tr->step);
    rc |= meta_set(w, "adam_t", "%d", tr->opt.t);
    rc |= meta_set(w, "data_epoch", "%llu", (unsigned long long)tr->data.epoch);
    rc |= meta_set(w, "data_pos", "%llu", (unsigned long long)tr->data.pos);
    rc |= meta_set(w, "data_windows", "%llu", (unsigned long long)tr->data.n_windows);
    rc |= meta_set(w, "seed", "%llu", (unsigned long long)c->seed);
    rc |= meta_set(w, "steps", "%d", c->steps);
    rc |= meta_set(w, "batch", "%d", c->batch);
    rc |= meta_set(w, "micro_batch", "%d", c->micro_batch);
    rc |= meta_set(w, "seq", "%d", c->seq);
    rc |= meta_set(w, "lr", "%.17g", c->lr);
    rc |= meta_set(w, "warmup", "%.17g", c->warmup);
    rc |= meta_set(w, "beta1", "%.17g", c->beta1);
    rc |= meta_set(w, "beta2", "%.17g", c->beta2);
    rc |= meta_set(w, "eps", "%.17g", c->eps);
    rc |= meta_set(w, "weight_decay", "%.17g", c->weight_decay);
    rc |= meta_set(w, "clip", "%.17g", c->clip);
    rc |= meta_set(w, "sparsity", "%.17g", c->sparsity);
    rc |= st_writer_meta(w, "schedule", schedule_name(c->schedule));
    rc |= meta_set(w, "prune_start", "%.17g", c->prune_start);
    rc |= meta_set(w, "prune_end", "%.17g", c->prune_end);
    rc |= meta_set(w, "prune_updates", "%d", c->prune_updates);
    rc |= st_writer_meta(w, "saliency", saliency_name(c->saliency));
    rc |= st_writer_meta(w, "group", mask_group_name(c->group));
    rc |= meta_set(w, "masked", "%d", tr->masked);
    rc |= st_writer_meta(w, "mask_file", c->mask_file ? c->mask_file : "");
    char pat[16];
    rc |= st_writer_meta(w, "pattern", tr->pattern.m ? nm_name(pat, &tr->pattern) : "");
    rc |= st_writer_meta(w, "nm_ramp", nm_ramp_name(c->nm_ramp));
    json_t *a = json_array();
    for (int i = 0; i < c->n_data; i++) json_array_append_new(a, json_string(c->data[i]));
    char *js = json_dumps(a, JSON_COMPACT);
    json_decref(a);
    rc |= st_writer_meta(w, "data", js);
    free(js);
    rc |= meta_set(w, "tokenizer_hash", "%016llx", (unsigned long long)tr->data.tokenizer_hash);
    rc |= meta_set(w, "threads", "%d", c->threads);
    rc |= meta_set(w, "save_every", "%d", c->save_every);
    rc |= meta_set(w, "moments_every", "%d", c->moments_every);
    rc |= meta_set(w, "save_masks", "%d", c->save_masks);
    rc |= log_meta_write(w, c);
    rc |= meta_set(w, "config_hash", "%016llx", (unsigned long long)config_hash(tr->m.config_json, tr->m.config_len));
    return rc ? -1 : 0;
}

// The last key of a state file (one rank's, or a shard): the content hash of all the
// rest (io/safetensors.h), checked on --resume; into *hash for the manifest.
static int state_seal(StWriter *w, uint64_t *hash) {
    TRY(st_writer_content_hash(hash, w, "content_hash"));
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)*hash);
    return st_writer_meta(w, "content_hash", hex);
}

// The run options of a state (train.h) into tr->cfg, except those given (each is
// range-checked all the same); a state written before they were saved has none of
// them (the command line's or the defaults stay). The log is restored only into the
// resumed folder itself: a run resumed into another --out does not write the first
// run's log.
static int state_run_read(Trainer *tr, const SafeTensors *st) {
    TrainConfig *c = &tr->cfg;
    static const struct { const char *key; unsigned bit; int hi; } ints[] = {
        {"threads", TRAIN_OPT_THREADS, INT_MAX}, {"save_every", TRAIN_OPT_SAVE_EVERY, INT_MAX},
        {"moments_every", TRAIN_OPT_MOMENTS_EVERY, INT_MAX}, {"save_masks", TRAIN_OPT_SAVE_MASKS, 1},
    };
    int *dst[] = {&c->threads, &c->save_every, &c->moments_every, &c->save_masks};
    for (int i = 0; i < 4; i++) {
        if (!st_meta(st, ints[i].key)) continue;
        int x;
        TRY(meta_int(st, ints[i].key, ints[i].bit == TRAIN_OPT_THREADS, ints[i].hi, &x));
        if (c->given & ints[i].bit) continue;
        *dst[i] = x;
        tr->restored |= ints[i].bit;
    }
    int most = ARGS_THREADS_PER_CORE * omp_get_num_procs();
    if ((tr->restored & TRAIN_OPT_THREADS) && c->threads > most)
        return ERR("%s: metadata threads = %d: more than this machine's %d cores run (at most %d); give --threads",
                   st->path, c->threads, omp_get_num_procs(), most);
    int same_dir = c->out && same_file(c->out, c->resume);
    const char *v = st_meta(st, "log"), *outside = st_meta(st, "log_outside");
    // a name in OUT, nothing else: a state from elsewhere must not name a file to cut back
    if (v && (strchr(v, '/') || strcmp(v, ".") == 0 || strcmp(v, "..") == 0))
        return ERR("%s: metadata log = \"%s\" is not a file name inside the run's folder", st->path, v);
    if (v && !(c->given & TRAIN_OPT_LOG) && same_dir) {
        char *path = *v ? path_join(c->out, v) : NULL;
        c->log = path ? train_own(tr, path) : NULL;
        free(path);
        tr->restored |= TRAIN_OPT_LOG;
        struct stat l;
        if (c->log && lstat(c->log, &l) == 0 && !S_ISREG(l.st_mode))
            return ERR("%s: the run's log is not a regular file (a link or a device?); give --log", c->log);
    }
    if (outside && !v && !(c->given & TRAIN_OPT_LOG) && same_dir && !c->quiet && dist_rank() == 0)
        fprintf(stderr, "best-train: the run logged to %s, outside %s: that log is not continued (give --log %s to "
                "continue it); logging to %s/log.jsonl\n", outside, c->out, outside, c->out);
    return 0;
}

// Reads the hyperparameters of a state into tr->cfg, each range-checked, then the run
// options (state_run_read).
int state_meta_read(Trainer *tr, const SafeTensors *st) {
    TrainConfig *c = &tr->cfg;
    const char *v;
    TRY(meta_get(st, "format", &v));
    if (strcmp(v, STATE_FORMAT) != 0) return ERR("%s: format \"%s\", want \"%s\"", st->path, v, STATE_FORMAT);
    TRY(meta_get(st, "version", &v));
    if (strcmp(v, STATE_VERSION) != 0) return ERR("%s: state version %s, this build reads %s", st->path, v, STATE_VERSION);
    TRY(meta_u64(st, "seed", 10, &c->seed));
    TRY(meta_int(st, "steps", 1, INT_MAX, &c->steps));
    TRY(meta_int(st, "batch", 1, INT_MAX, &c->batch));
    TRY(meta_int(st, "micro_batch", 1, c->batch, &c->micro_batch));
    TRY(meta_int(st, "seq", 1, INT_MAX, &c->seq));
    TRY(meta_double(st, "lr", 0, INFINITY, 0, &c->lr));
    TRY(meta_double(st, "warmup", 0, 1, 0, &c->warmup));
    TRY(meta_double(st, "beta1", 0, 1, 1, &c->beta1));
    TRY(meta_double(st, "beta2", 0, 1, 1, &c->beta2));
    TRY(meta_double(st, "eps", 0, INFINITY, 0, &c->eps));
    TRY(meta_double(st, "weight_decay", 0, INFINITY, 0, &c->weight_decay));
    TRY(meta_double(st, "clip", 0, INFINITY, 0, &c->clip));
    TRY(meta_double(st, "sparsity", 0, 1, 1, &c->sparsity));
    TRY(meta_get(st, "schedule", &v));
    if (schedule_parse(&c->schedule, v) < 0) return ERR("%s: unknown schedule \"%s\"", st->path, v);
    TRY(meta_double(st, "prune_start", 0, 1, 0, &c->prune_start));
    TRY(meta_double(st, "prune_end", c->prune_start, 1, 0, &c->prune_end));
    TRY(meta_int(st, "prune_updates", 1, INT_MAX, &c->prune_updates));
    TRY(meta_get(st, "saliency", &v));
    if (saliency_parse(&c->saliency, v) < 0) return ERR("%s: unknown saliency \"%s\"", st->path, v);
    TRY(meta_get(st, "group", &v));
    if (mask_group_parse(&c->group, v) < 0) return ERR("%s: unknown group \"%s\"", st->path, v);
    TRY(meta_int(st, "masked", 0, 1, &tr->masked));
    TRY(meta_get(st, "mask_file", &v));
    c->mask_file = *v ? train_own(tr, v) : NULL;
    v = st_meta(st, "pattern"); // (states before issue 39 have none: unstructured)
    if (v && *v && nm_parse(&tr->pattern, v) < 0) return ERR("%s: metadata pattern = \"%s\" is not N:M", st->path, v);
    v = st_meta(st, "nm_ramp"); // (states before BEST N:M have none)
    if (v && nm_ramp_parse(&c->nm_ramp, v) < 0) return ERR("%s: metadata nm_ramp = \"%s\" is not global or group", st->path, v);
    c->pattern = c->sparsity > 0 && !c->mask_file ? tr->pattern : (NMPattern){0, 0}; // a schedule's target
    TRY(meta_int(st, "step", 0, c->steps, &tr->step));
    if (c->n_data == 0) {
        TRY(meta_get(st, "data", &v));
        json_error_t je;
        json_t *a = json_loads(v, 0, &je);
        if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > INT_MAX) {
            json_decref(a);
            return ERR("%s: metadata \"data\" is not a list of shards", st->path);
        }
        c->n_data = (int)json_array_size(a);
        tr->data_list = xcalloc((size_t)c->n_data, sizeof *tr->data_list);
        for (int i = 0; i < c->n_data; i++) {
            const char *s = json_string_value(json_array_get(a, (size_t)i));
            tr->data_list[i] = train_own(tr, s ? s : "");
        }
        json_decref(a);
        c->data = tr->data_list;
    }
    return state_run_read(tr, st);
}

// The config the state was trained with (its config_hash): an edited DIR/model/config.json
// (rope_theta, say) would go on training another model.
int state_config_check(const SafeTensors *st, const Model *m, const char *dir) {
    uint64_t want;
    TRY(meta_u64(st, "config_hash", 16, &want));
    if (config_hash(m->config_json, m->config_len) != want)
        return ERR("%s/model/config.json: not the config this state was trained with (its hash is not the state's "
                   "config_hash %016llx): restore it, or start a new run from %s/model", dir,
                   (unsigned long long)want, dir);
    return 0;
}

// --- state: tensors ------------------------------------------------------------------

// Elements [a, b) of tensor name (F32, of p's shape) into dst.
static int tensor_copy_part(float *dst, const SafeTensors *st, const char *name, const ParamInfo *p, size_t a,
                            size_t b) {
    const StTensor *t = st_find(st, name);
    if (!t) return ERR("%s: no tensor %s", st->path, name);
    if (t->dtype != ST_F32 || t->ndim != p->ndim || t->shape[0] != p->shape[0] ||
        (p->ndim == 2 && t->shape[1] != p->shape[1]))
        return ERR("%s: tensor %s is not F32 of the parameter's shape", st->path, name);
    memcpy(dst, (const float *)t->data + a, (b - a) * sizeof *dst);
    return 0;
}

// The tensors of a one-file state (one rank saved it): every weight, and the moments
// and mask of this rank's slice.
int state_load_single(Trainer *tr, const SafeTensors *st) {
    Model *m = &tr->m;
    char name[128];
    for (int i = 0; i < m->n_info; i++) {
        const ParamInfo *p = &m->info[i];
        TRY(tensor_copy_part(m->params + p->offset, st, p->name, p, 0, p->numel));
        size_t a, b;
        params_part(&a, &b, p, tr->lo, tr->hi);
        if (a == b) continue;
        size_t d = p->offset + a - tr->lo; // where element a sits in the slice
        snprintf(name, sizeof name, "%s.exp_avg", p->name);
        TRY(tensor_copy_part(tr->opt.m + d, st, name, p, a, b));
        snprintf(name, sizeof name, "%s.exp_avg_sq", p->name);
        TRY(tensor_copy_part(tr->opt.v + d, st, name, p, a, b));
        TRY(params_check_moments(st->path, p->name, tr->opt.m + d, tr->opt.v + d, a, b - a));
        if (!p->prunable) continue;
        snprintf(name, sizeof name, "%s.mask", p->name);
        const StTensor *t = st_find(st, name);
        if (!t || t->dtype != ST_BOOL || t->nelem != p->numel)
            return ERR("%s: no BOOL tensor %s of %zu elements", st->path, name, p->numel);
        const uint8_t *bits = t->data;
        for (size_t j = a; j < b; j++) {
            if (bits[j] > 1) return ERR("%s: %s holds %u at %zu (BOOL is 0 or 1)", st->path, name, bits[j], j);
            tr->mask[d + j - a] = bits[j];
        }
    }
    return train_weights_check(m, st->path);
}

// Adam's step count, the data cursor and the shards' tokenizer from a state's metadata.
int state_cursor_read(Trainer *tr, const SafeTensors *st) {
    int adam_t;
    TRY(meta_int(st, "adam_t", 0, tr->step, &adam_t));
    tr->opt.t = adam_t;
    uint64_t epoch, pos, nw, hash;
    TRY(meta_u64(st, "data_epoch", 10, &epoch));
    TRY(meta_u64(st, "data_pos", 10, &pos));
    TRY(meta_u64(st, "data_windows", 10, &nw));
    if (nw != tr->data.n_windows)
        return ERR("%s: the state was trained on %llu windows, these shards give %llu (other --data or --seq?)",
                   st->path, (unsigned long long)nw, (unsigned long long)tr->data.n_windows);
    // step t has read t * batch windows, epoch after epoch (loader.h)
    uint64_t read = (uint64_t)tr->step * (uint64_t)tr->cfg.batch;
    if (pos >= nw || epoch != read / nw || pos != read % nw)
        return ERR("%s: metadata data_epoch = %llu, data_pos = %llu: not where step %d of batch %d leaves the "
                   "cursor over %llu windows (epoch %llu, pos %llu)", st->path, (unsigned long long)epoch,
                   (unsigned long long)pos, tr->step, tr->cfg.batch, (unsigned long long)nw,
                   (unsigned long long)(read / nw), (unsigned long long)(read % nw));
    if (st_meta(st, "tokenizer_hash")) { // states of older builds have none
        TRY(meta_u64(st, "tokenizer_hash", 16, &hash));
        if (hash != tr->data.tokenizer_hash)
            return ERR("%s: the run was trained on shards of tokenizer %016llx, but %s was made by tokenizer %016llx "
                       "(shards of another tokenizer)", st->path, (unsigned long long)hash, tr->cfg.data[0],
                       (unsigned long long)tr->data.tokenizer_hash);
    }
    return loader_seek(&tr->data, epoch, pos);
}

// The state to resume: OUT/state/state.safetensors (saved by one rank) or the manifest
// of a sharded save (shards.h); where a run was killed between a save of one kind and
// the removal of the other, the later step. *st is opened on the file whose metadata
// holds the run (the one file, or shard 0); *sharded says which kind, and mf is filled
// for shards.
int state_find(SafeTensors *st, ShardManifest *mf, int *sharded, const char *dir) {
    char *sdir = path_join(dir, "state"), *one = path_join(sdir, "state.safetensors");
    char *man = path_join(sdir, "manifest.json");
    int has_one = access(one, F_OK) == 0, has_man = access(man, F_OK) == 0, rc = 0, opened = 0;
    *sharded = 0;
    memset(mf, 0, sizeof *mf);
    if (!has_one && !has_man)
        rc = ERR("%s: neither state.safetensors nor manifest.json (not the --out of a best-train run, or no save "
                 "finished)", sdir);
    if (rc == 0 && has_one) rc = st_open(st, one), opened = rc == 0;
    if (rc == 0 && has_man) rc = shards_manifest_read(mf, sdir);
    if (rc == 0 && has_man) {
        int one_step = -1;
        if (has_one && meta_int(st, "step", 0, INT_MAX, &one_step) < 0) rc = -1;
        if (rc == 0 && mf->step > one_step) {
            if (opened) st_close(st);
            opened = 0;
            *sharded = 1;
            rc = st_open(st, mf->files[0]);
            opened = rc == 0;
            if (rc == 0) rc = shards_check(st, mf, 0);
        }
    }
    // what the state says, it said when it was saved (the hash of a shard is checked
    // with the manifest's above; shards_read checks every shard it reads)
    if (rc == 0 && !*sharded) rc = st_check_content_hash(st, "content_hash");
    if (rc < 0 && opened) st_close(st);
    if (rc < 0 || !*sharded) shards_manifest_free(mf);
    free(sdir);
    free(one);
    free(man);
    return rc;
}

// OUT/state/state.safetensors: one rank holds all of it.
static int save_single(Trainer *tr, const char *sdir) {
    const Model *m = &tr->m;
    char *made = NULL; // the folders this save creates, removed again if it fails
    int rc = path_mkdir_made(&made, sdir);
    StWriter w;
    st_writer_init(&w);
    char name[128];
    for (int i = 0; rc == 0 && i < m->n_info; i++) {
        const ParamInfo *p = &m->info[i];
        rc = st_writer_add(&w, p->name, ST_F32, p->ndim, p->shape, m->params + p->offset);
        snprintf(name, sizeof name, "%s.exp_avg", p->name);
        if (rc == 0) rc = st_writer_add(&w, name, ST_F32, p->ndim, p->shape, tr->opt.m + p->offset);
        snprintf(name, sizeof name, "%s.exp_avg_sq", p->name);
        if (rc == 0) rc = st_writer_add(&w, name, ST_F32, p->ndim, p->shape, tr->opt.v + p->offset);
        snprintf(name, sizeof name, "%s.mask", p->name);
        if (rc == 0 && p->prunable) rc = st_writer_add(&w, name, ST_BOOL, p->ndim, p->shape, tr->mask + p->offset);
    }
    uint64_t hash;
    if (rc == 0) rc = state_meta_write(&w, tr);
    if (rc == 0) rc = state_seal(&w, &hash);
    char *path = path_join(sdir, "state.safetensors");
    if (rc == 0) rc = st_writer_write(&w, path);
    if (rc < 0) path_unmake(made, sdir);
    else free(made);
    st_writer_free(&w);
    free(path);
    if (rc == 0) { // a sharded save of an earlier run with more ranks is now stale
        char *man = path_join(sdir, "manifest.json");
        unlink(man);
        free(man);
        shards_prune(sdir, -1);
    }
    return rc;
}

// OUT/state/step-S/rank-R-of-N.safetensors from every rank, then rank 0's manifest, the
// save's completion marker (shards.h); the ranks agree after each stage, so that none
// goes on past a rank that failed.
static int save_shards(Trainer *tr, const char *sdir) {
    const Model *m = &tr->m;
    int rank = dist_rank(), rc = 0;
    char *path = shard_path(sdir, tr->step, rank, dist_size());
    char *dir = path_fmt("%s/step-%d", sdir, tr->step);
    if (rank == 0) rc = path_mkdir_p(dir);
    TRY(dist_agree(rc));
    StWriter w;
    st_writer_init(&w);
    rc = shard_add(&w, m->params + tr->lo, tr->opt.m, tr->opt.v, tr->mask, rank, dist_size(), tr->lo, tr->hi,
                   m->n_params);
    uint64_t *hashes = xcalloc((size_t)dist_size(), sizeof *hashes); // every rank's, for the manifest
    if (rc == 0) rc = state_meta_write(&w, tr);
    if (rc == 0) rc = state_seal(&w, &hashes[rank]);
    if (rc == 0) rc = st_writer_write(&w, path);
    st_writer_free(&w);
    free(path);
    free(dir);
    if (dist_agree(rc) < 0) {
        free(hashes);
        return -1;
    }
    dist_sum_u64(hashes, (size_t)dist_size());
    if (rank == 0) {
        rc = shards_manifest_write(sdir, tr->step, dist_size(), m->n_params, hashes);
        if (rc == 0) { // the earlier saves, of either kind, are now stale
            char *one = path_join(sdir, "state.safetensors");
            unlink(one);
            free(one);
            shards_prune(sdir, tr->step);
        }
    }
    free(hashes);
    return dist_agree(rc);
}

// The model's config.json with a "best" block saying what made the weights (transformers
// keeps unknown keys as attributes and ignores them): method, sparsity (counted and
// scheduled), schedule, saliency, group, step of steps, and the build's version. Falls
// back to the config as it is when it does not parse.
static json_t *best_block(const Trainer *tr) {
    const TrainConfig *c = &tr->cfg;
    const char *method = c->mask_file ? "fixed mask" : c->sparsity > 0 ? "BEST" : "dense training";
    json_t *b = json_pack("{s:s, s:f, s:s, s:s, s:s, s:i, s:i, s:s}", "method", method, "sparsity",
                          model_sparsity(&tr->m), "schedule", schedule_name(c->schedule), "saliency",
                          saliency_name(c->saliency), "group", mask_group_name(c->group), "step", tr->step, "steps",
                          c->steps, "version", best_version());
    if (b && c->sparsity > 0 && !c->mask_file)
        json_object_set_new(b, "sparsity_target", json_real(schedule_mask_target(&tr->sched, tr->step)));
    char pat[16];
    // (a schedule's pattern once its last update is done: the mask is N:M from then on)
    int nm_reached = c->mask_file || c->sparsity == 0 ||
                     tr->step >= schedule_update_step(&tr->sched, schedule_n_updates(&tr->sched));
    if (b && tr->pattern.m && nm_reached) json_object_set_new(b, "pattern", json_string(nm_name(pat, &tr->pattern)));
    return b;
}

int train_save(Trainer *tr) {
    train_host_sync(tr);
    char *mdir = path_join(tr->cfg.out, "model"), *sdir = path_join(tr->cfg.out, "state");
    // OUT/model first: a state on disk always has its model beside it (the ranks hold the
    // same weights; rank 0 writes them)
    int rc = 0;
    if (dist_rank() == 0) {
        Model view = tr->m; // the same model, its config.json with the "best" block
        json_error_t je;
        json_t *cfg = json_loadb(tr->m.config_json, tr->m.config_len, 0, &je);
        char *text = NULL;
        if (json_is_object(cfg)) {
            json_object_set_new(cfg, "best", best_block(tr));
            text = json_dumps(cfg, JSON_INDENT(2));
        }
        if (text) view.config_json = text, view.config_len = strlen(text);
        rc = model_save(&view, mdir, -1);
        free(text);
        json_decref(cfg);
    }
    if (dist_agree(rc) == 0) rc = dist_size() == 1 ? save_single(tr, sdir) : save_shards(tr, sdir);
    else rc = -1;
    free(mdir);
    free(sdir);
    return rc;
}

int train_save_moments(Trainer *tr) {
    train_host_sync(tr);
    const Model *m = &tr->m;
    // rank 0 writes the whole model's moments: it gathers the other ranks' slices
    const float *em = tr->opt.m, *ev = tr->opt.v;
    float *full = NULL;
    if (dist_size() > 1) {
        full = dist_rank() == 0 ? xmalloc(2 * m->n_params * sizeof *full) : NULL;
        dist_gather(full, tr->opt.m, m->n_params, sizeof *full, 0);
        dist_gather(full ? full + m->n_params : NULL, tr->opt.v, m->n_params, sizeof *full, 0);
        em = full, ev = full ? full + m->n_params : NULL;
    }
    int rc = 0;
    if (dist_rank() == 0) {
        char *dir = path_join(tr->cfg.out, "moments"), *made;
        rc = path_mkdir_made(&made, dir);
        StWriter w;
        st_writer_init(&w);
        char name[128];
        for (int i = 0; rc == 0 && i < m->n_info; i++) {
            const ParamInfo *p = &m->info[i];
            snprintf(name, sizeof name, "%s.exp_avg", p->name);
            rc = st_writer_add(&w, name, ST_F32, p->ndim, p->shape, em + p->offset);
            snprintf(name, sizeof name, "%s.exp_avg_sq", p->name);
            if (rc == 0) rc = st_writer_add(&w, name, ST_F32, p->ndim, p->shape, ev + p->offset);
        }
        if (rc == 0) rc = meta_set(&w, "step", "%d", tr->step);
        if (rc == 0) rc = meta_set(&w, "beta1", "%.17g", tr->cfg.beta1);
        if (rc == 0) rc = meta_set(&w, "beta2", "%.17g", tr->cfg.beta2);
        if (rc == 0) rc = st_writer_meta(&w, "schedule", schedule_name(tr->cfg.schedule));
        if (rc == 0) rc = meta_set(&w, "sparsity", "%.17g", schedule_mask_target(&tr->sched, tr->step));
        char *path = path_fmt("%s/step-%d.safetensors", dir, tr->step);
        if (rc == 0) rc = st_writer_write(&w, path);
        if (rc < 0) path_unmake(made, dir);
        else free(made);
        st_writer_free(&w);
        free(path);
        free(dir);
    }
    free(full);
    return dist_agree(rc);
}
