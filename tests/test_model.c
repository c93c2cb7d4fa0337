// test_model.c: lib/nn/model.c, lib/nn/layers.c and lib/nn/adamw.c against PyTorch and against
// themselves.
//
//   * fixtures from tests/model_ref.py (tiny LLaMA with GQA, Qwen3 with q/k norms and
//     an explicit head_dim, tied LLaMA with every bias): logits, loss, every parameter
//     gradient, the evaluation path, KV-cache decoding, gradient accumulation, and 3
//     masked AdamW steps with clipping (see check_adamw for the two ways they run);
//   * finite differences of the loss (no PyTorch involved);
//   * the blocked attention kernels at T = 150 against a naive double version;
//   * loading errors, and saving (F32, BF16 and F16 round trips, shards, tied models);
//   * golden: stories260K greedy from BOS for 200 tokens must write llama2.c's text.
//
// Agreement is measured as the normwise relative error of a tensor,
//     err(a, b) = max_i |a_i - b_i| / max_i |b_i|      (b = the reference),
// and must be <= 1e-5 for every tensor (scalars: |a - b| / |b|). fp32 results that
// differ only by summation order land at 1e-7 .. 2e-6 here; a wrong term in a
// gradient gives 1e-2 or more.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nn/adamw.h"       // defines: AdamW, grad_clip
#include "sparse/mask.h"    // defines: mask_apply
#include "base/error.h"     // defines: err_msg, xmalloc
#include "base/fileio.h"    // defines: path_join, file_read_all
#include "nn/layers.h"      // defines: layers_init, layers_blas_info
#include "nn/model.h"       // defines: Model, ModelActs, KVCache
#include "io/safetensors.h" // defines: SafeTensors, StWriter
#include "test.h"           // defines: T_OK, T_SKIP, T_DONE
#include "tok/tokenizer.h"  // defines: tokenizer_load, tok_decode

#define TOL 1e-5

// --- fixtures ---------------------------------------------------------------------------

typedef struct {
    const char *name;
    char dir[256];
    Model m;
    SafeTensors ex;          // expected.safetensors
    int B, T;
    int32_t *tokens, *targets; // (B*T)
} Fix;

// A float tensor of expected.safetensors (fresh array), or NULL after a failed check.
static float *ex_f32(const Fix *f, const char *name, size_t want) {
    const StTensor *t = st_find(&f->ex, name);
    float *out = NULL;
    if (!t || (want && t->nelem != want) || st_to_f32_alloc(&out, &f->ex, t) < 0) {
        T_OK(0, "%s: expected.safetensors has a usable %s", f->name, name);
        return NULL;
    }
    return out;
}

static int32_t *ex_i32(const Fix *f, const char *name) {
    const StTensor *t = st_find(&f->ex, name);
    if (!t || t->dtype != ST_I32) return NULL;
    int32_t *out = xmalloc(t->nbytes);
    memcpy(out, t->data, t->nbytes); // little-endian host, like the file
    return out;
}

static int fix_open(Fix *f, const char *name) {
    memset(f, 0, sizeof *f);
    f->name = name;
    snprintf(f->dir, sizeof f->dir, "tests/fixtures/model/%s", name);
    int rc = model_load(&f->m, f->dir);
    if (!T_OK(rc == 0, "%s: load %s%s%s", name, f->dir, rc ? ": " : "", rc ? err_msg() : ""))
        return -1;
    char *p = path_join(f->dir, "expected.safetensors");
    rc = st_open(&f->ex, p);
    free(p);
    if (!T_OK(rc == 0, "%s: open expected.safetensors%s%s", name, rc ? ": " : "",
              rc ? err_msg() : ""))
        return -1;
    const StTensor *t = st_find(&f->ex, "tokens");
    f->tokens = ex_i32(f, "tokens");
    f->targets = ex_i32(f, "targets");
    if (!T_OK(t && t->ndim == 2 && f->tokens && f->targets, "%s: tokens and targets", name))
        return -1;
    f->B = (int)t->shape[0];
    f->T = (int)t->shape[1];
    return 0;
}

static void fix_close(Fix *f) {
    model_free(&f->m);
    st_close(&f->ex);
    free(f->tokens);
    free(f->targets);
}

// Compares every parameter-shaped tensor of block (n_params) with expected PREFIX.NAME;
// one line per failing tensor, one summary line.
static void compare_block(const Fix *f, const float *block, const char *prefix, const char *what) {
    const Model *m = &f->m;
    double worst = 0;
    const char *worst_name = "";
    int bad = 0;
    for (int i = 0; i < m->n_info; i++) {
        const ParamInfo *p = &m->info[i];
        char name[160];
        snprintf(name, sizeof name, "%s.%s", prefix, p->name);
        float *want = ex_f32(f, name, p->numel);
        if (!want) { bad++; continue; }
        double e = rel_err(block + p->offset, want, p->numel);
        if (e > worst) { worst = e; worst_name = p->name; }
        if (e > TOL) { bad++; T_OK(0, "%s: %s %s rel err %.2e", f->name, what, p->name, e); }
        free(want);
    }
    T_OK(!bad, "%s: %s of all %d tensors, max rel err %.2e (%s)", f->name, what, m->n_info,
         worst, worst_name);
}

// --- checks against PyTorch -------------------------------------------------------------

static void check_forward_backward(Fix *f, ModelActs *a) {
    Model *m = &f->m;
    size_t N = (size_t)f->B * f->T;
    T_OK(model_forward(m, a, f->tokens, f->targets) == 0, "%s: forward", f->name);
    float *logits = ex_f32(f, "logits", N * m->V), *loss = ex_f32(f, "loss", 1);
    if (logits) {
        double e = rel_err(a->logits, logits, N * m->V);
        T_OK(e <= TOL, "%s: logits rel err %.2e", f->name, e);
    }
    if (loss) {
        double e = fabs(a->loss - loss[0]) / fabs(loss[0]);
        T_OK(e <= TOL, "%s: loss %.7f vs torch %.7f, rel err %.2e", f->name, a->loss, loss[0], e);
    }
    model_grads_init(m);
    model_backward(m, a, 1.0f);
    compare_block(f, m->grads, "grad", "gradients");
    // The CPU path is deterministic: a second run gives the same bits.
    float *g1 = xmalloc(m->n_params * sizeof *g1);
    memcpy(g1, m->grads, m->n_params * sizeof *g1);
    float loss1 = a->loss;
    model_zero_grad(m);
    model_forward(m, a, f->tokens, f->targets);
    model_backward(m, a, 1.0f);
    T_OK(loss1 == a->loss && memcmp(g1, m->grads, m->n_params * sizeof *g1) == 0,
         "%s: a second forward and backward give bit-identical loss and gradients", f->name);
    free(g1);
    free(logits);
    free(loss);
}

static void check_eval_and_decode(Fix *f) {
    const Model *m = &f->m;
    size_t N = (size_t)f->B * f->T, V = m->V;
    float *want = ex_f32(f, "logits", N * V), *loss = ex_f32(f, "loss", 1);
    if (!want || !loss) { free(want); free(loss); return; }
    ModelActs a;
    model_acts_init(&a, m, f->B, f->T, 0);
    float *logits = xmalloc(N * V * sizeof *logits), *nll = xmalloc(N * sizeof *nll);
    T_OK(model_eval(logits, nll, m, &a, f->tokens, f->targets) == 0, "%s: eval", f->name);
    double e = rel_err(logits, want, N * V);
    T_OK(e <= TOL, "%s: eval logits rel err %.2e", f->name, e);
    double sum = 0;
    int n = 0;
    for (size_t i = 0; i < N; i++) if (f->targets[i] >= 0) { sum += nll[i]; n++; }
    e = fabs(sum / n - loss[0]) / loss[0];
    T_OK(e <= TOL, "%s: eval nll mean rel err %.2e", f->name, e);
    // The chunked path (no logits requested) must give the same nll.
    float *nll2 = xmalloc(N * sizeof *nll2);
    model_eval(NULL, nll2, m, &a, f->tokens, f->targets);
    T_OK(memcmp(nll, nll2, N * sizeof *nll) == 0, "%s: eval nll without logits is identical",
         f->name);
    model_acts_free(&a);

    // KV cache, one token at a time, one sequence after the other.
    KVCache c;
    kvcache_init(&c, m, f->T);
    double worst = 0;
    for (int b = 0; b < f->B; b++)
        for (int t = 0; t < f->T; t++) {
            const float *z = model_forward_token(m, &c, f->tokens[b * f->T + t], t);
            if (!z) { worst = INFINITY; break; }
            double et = rel_err(z, want + ((size_t)b * f->T + t) * V, V);
            if (et > worst) worst = et;
        }
    T_OK(worst <= TOL, "%s: KV-cache decoding logits rel err %.2e", f->name, worst);
    T_OK(model_forward_token(m, &c, 0, f->T) == NULL && strstr(err_msg(), "position"),
         "%s: decoding past the cache is an error (%s)", f->name, err_msg());
    kvcache_free(&c);
    free(logits);
    free(nll);
    free(nll2);
    free(want);
    free(loss);
}

// Two micro-batches of one sequence, each scaled by its share of the valid targets,
// must give the gradient of the batch of two.
static void check_accumulation(Fix *f) {
    Model *m = &f->m;
    size_t T = (size_t)f->T;
    int total = 0;
    for (size_t i = 0; i < (size_t)f->B * T; i++) total += f->targets[i] >= 0;
    ModelActs a;
    model_acts_init(&a, m, 1, f->T, 1);
    model_zero_grad(m);
    for (int b = 0; b < f->B; b++) {
        model_forward(m, &a, f->tokens + b * T, f->targets + b * T);
        model_backward(m, &a, (float)a.n_valid / (float)total);
    }
    compare_block(f, m->grads, "grad", "accumulated gradients (2 micro-batches)");
    model_acts_free(&a);
}

// 3 masked AdamW steps with clipping, as model_ref.py takes them, twice:
//
//  * teacher-forced: at each step the C gradient is compared with PyTorch's (1e-5),
//    then PyTorch's raw gradient is what C masks, clips and feeds to AdamW. The C and
//    PyTorch weights then stay within rounding of each other, so the weights after 3
//    steps must agree to 1e-5: this checks masking, clipping and AdamW exactly, and
//    the gradients at every point of the trajectory.
//  * free-running: C uses its own gradients, as in training. The losses before each
//    step and after the last must agree to 1e-5. The weights are only reported: Adam
//    divides each gradient by its own magnitude, so an element whose gradient is at
//    fp32 noise level (1e-7 of the tensor's largest, e.g. k_proj.bias, whose gradient
//    RoPE alone keeps from being exactly 0) moves by +-lr whichever way the noise
//    points; two correct fp32 implementations differ there by up to 6e-3 after 3
//    steps (seen: 4e-4 of max|w| on a k_proj.bias before this split).
static void adamw_run(Fix *f, ModelActs *a, const uint8_t *mask, const float *w0, int forced,
                      const float *want_loss, const float *want_norm) {
    Model *m = &f->m;
    const char *run = forced ? "teacher-forced" : "free-running";
    memcpy(m->params, w0, m->n_params * sizeof *w0);
    AdamW o;
    adamw_init(&o, m->n_params);
    AdamWHyper h = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1};
    for (int s = 0; s < 3; s++) {
        model_zero_grad(m);
        model_forward(m, a, f->tokens, f->targets);
        double el = fabs(a->loss - want_loss[s]) / want_loss[s];
        T_OK(el <= TOL, "%s: %s step %d: loss %.6f, rel err %.2e", f->name, run, s + 1, a->loss, el);
        model_backward(m, a, 1.0f);
        if (forced) {
            char prefix[16];
            snprintf(prefix, sizeof prefix, s ? "grad%d" : "grad", s + 1);
            if (s) compare_block(f, m->grads, prefix, "gradients on the trajectory");
            for (int i = 0; i < m->n_info; i++) { // continue from PyTorch's gradient
                const ParamInfo *p = &m->info[i];
                char name[160];
                snprintf(name, sizeof name, "%s.%s", prefix, p->name);
                float *g = ex_f32(f, name, p->numel);
                if (g) memcpy(m->grads + p->offset, g, p->numel * sizeof *g);
                free(g);
            }
        }
        mask_apply(m->grads, mask, m->n_params);
        double norm = grad_clip(m->grads, 1.0, m->n_params);
        double en = fabs(norm - want_norm[s]) / want_norm[s];
        T_OK(en <= TOL, "%s: %s step %d: grad norm %.5f before clipping to 1, rel err %.2e",
             f->name, run, s + 1, norm, en);
        adamw_step(&o, m->params, m->grads, mask, &h);
    }
    model_forward(m, a, f->tokens, f->targets);
    double el = fabs(a->loss - want_loss[3]) / want_loss[3];
    T_OK(el <= TOL, "%s: %s: loss after 3 steps %.6f, rel err %.2e", f->name, run, a->loss, el);
    if (forced) {
        compare_block(f, m->params, "step3", "teacher-forced weights after 3 AdamW steps");
    } else {
        // Where the weights differ most, how small was PyTorch's first gradient there?
        double worst = 0, gratio = 0;
        const char *wn = "";
        for (int i = 0; i < m->n_info; i++) {
            const ParamInfo *p = &m->info[i];
            char name[160];
            snprintf(name, sizeof name, "step3.%s", p->name);
            float *want = ex_f32(f, name, p->numel);
            snprintf(name, sizeof name, "grad.%s", p->name);
            float *g = ex_f32(f, name, p->numel);
            double e = want && g ? rel_err(m->params + p->offset, want, p->numel) : INFINITY;
            if (e > worst && g) {
                size_t j = 0;
                float gmax = 0;
                for (size_t k = 0; k < p->numel; k++) {
                    if (fabsf(m->params[p->offset + k] - want[k]) >
                        fabsf(m->params[p->offset + j] - want[j])) j = k;
                    if (fabsf(g[k]) > gmax) gmax = fabsf(g[k]);
                }
                worst = e;
                wn = p->name;
                gratio = fabsf(g[j]) / gmax;
            }
            free(want);
            free(g);
        }
        printf("# %s: free-running weights after 3 steps: max rel err %.2e (%s, at an element "
               "whose first gradient is %.1e of the tensor's largest)\n", f->name, worst, wn,
               gratio);
    }
    size_t nonzero = 0, pruned = 0;
    for (size_t i = 0; i < m->n_params; i++) {
        pruned += !mask[i];
        nonzero += !mask[i] && m->params[i] != 0.0f;
    }
    T_OK(pruned > 0 && nonzero == 0, "%s: %s: all %zu pruned weights are exactly 0 after 3 steps",
         f->name, run, pruned);
    adamw_free(&o);
}

static void check_adamw(Fix *f, ModelActs *a) {
    Model *m = &f->m;
    uint8_t *mask = xmalloc(m->n_params);
    memset(mask, 1, m->n_params);
    float *want_loss = NULL, *want_norm = NULL, *w0 = NULL;
    for (int i = 0; i < m->n_info; i++) {
        const ParamInfo *p = &m->info[i];
        char name[160];
        snprintf(name, sizeof name, "mask.%s", p->name);
        const StTensor *t = st_find(&f->ex, name);
        if (!p->prunable) {
            if (t) { T_OK(0, "%s: %s is not prunable but has a mask", f->name, p->name); goto out; }
            continue;
        }
        if (!t || t->dtype != ST_U8 || t->nelem != p->numel) {
            T_OK(0, "%s: expected.safetensors has a U8 %s", f->name, name);
            goto out;
        }
        memcpy(mask + p->offset, t->data, p->numel);
    }
    want_loss = ex_f32(f, "losses", 4);
    want_norm = ex_f32(f, "gnorms", 3);
    if (!want_loss || !want_norm) goto out;
    w0 = xmalloc(m->n_params * sizeof *w0);
    memcpy(w0, m->params, m->n_params * sizeof *w0);
    adamw_run(f, a, mask, w0, 1, want_loss, want_norm);
    adamw_run(f, a, mask, w0, 0, want_loss, want_norm);
out:
    free(w0);
    free(want_loss);
    free(want_norm);
    free(mask);
}

// --- finite differences -----------------------------------------------------------------

// Mean NLL of the batch, summed in double from the per-position fp32 NLLs (a->loss is
// rounded to fp32, which alone would be ~5e-7 of noise).
static double loss_at(const Fix *f, ModelActs *a) {
    model_forward(&f->m, a, f->tokens, f->targets);
    double s = 0;
    for (size_t i = 0; i < a->N; i++) if (f->targets[i] >= 0) s += a->nll[i];
    return s / a->n_valid;
}

// Central differences against the backward, in fp32 with no reference involved.
// Noise: the loss is a mean of fp32 NLLs of ~5 (ulp 5e-7), so it carries rounding noise
// of ~1e-7 (measured: difference quotients at h = 1e-5 .. 1e-6 scatter by 1e-7 / h).
// Truncation: a central difference is off by h^2 L'''/6; Richardson's combination
// (4 D(h/2) - D(h)) / 3 removes that term, leaving O(h^4) and noise ~3e-7 / h.
// Tolerance for both checks below: |fd - backward| <= 1e-3 |backward| + 1e-6 / h, the
// second term being 3x the noise.
//   * single weights: the largest |g| of the tensor (0.03-0.7 here), h = 1e-2;
//   * the whole tensor along d = sign(g) (so the derivative g.d = |g|_1 is large and
//     every weight takes part), h = 1e-2 * rms(w) (curvature along d is large: without
//     Richardson, h = 1e-3 was already 2e-3 off for a 64x64 q_proj).
// A missing factor or term in a backward kernel shows up at 1e-2 or (usually) far more.
static double richardson(const Fix *f, ModelActs *a, float *w, const float *save,
                         const int8_t *d, size_t n, double h) {
    double D[2];
    for (int k = 0; k < 2; k++) {
        double hk = k ? h / 2 : h, l[2], step = 0;
        for (int s = 0; s < 2; s++) {
            for (size_t i = 0; i < n; i++) w[i] = save[i] + (float)((s ? -hk : hk) * d[i]);
            if (n == 1) step = s ? step - w[0] : w[0]; // the step fp32 really took
            l[s] = loss_at(f, a);
        }
        memcpy(w, save, n * sizeof *w);
        D[k] = (l[0] - l[1]) / (n == 1 ? step : 2 * hk);
    }
    return (4 * D[1] - D[0]) / 3;
}

static void check_finite_differences(Fix *f, const char **names, int n_names) {
    Model *m = &f->m;
    ModelActs a;
    model_acts_init(&a, m, f->B, f->T, 1);
    model_zero_grad(m);
    model_forward(m, &a, f->tokens, f->targets);
    model_backward(m, &a, 1.0f);
    for (int k = 0; k < n_names; k++) {
        const ParamInfo *p = model_param(m, names[k]);
        if (!T_OK(p, "%s: tensor %s exists", f->name, names[k])) continue;
        float *w = m->params + p->offset;
        const float *g = m->grads + p->offset;
        float *save = xmalloc(p->numel * sizeof *save);
        int8_t *d = xmalloc(p->numel);
        memcpy(save, w, p->numel * sizeof *save);
        // 1. the weight with the largest gradient
        size_t j = 0;
        for (size_t i = 1; i < p->numel; i++) if (fabsf(g[i]) > fabsf(g[j])) j = i;
        int8_t one = 1;
        double fd = richardson(f, &a, w + j, save + j, &one, 1, 1e-2);
        double e = fabs(fd - g[j]);
        T_OK(e <= 1e-3 * fabs(g[j]) + 1e-6 / 1e-2, "%s: finite difference d loss / d %s[%zu]: %.6e "
             "vs backward %.6e (rel err %.1e)", f->name, p->name, j, fd, g[j], e / fabs(g[j]));
        // 2. the whole tensor along sign(g)
        double an = 0, ss = 0;
        for (size_t i = 0; i < p->numel; i++) {
            d[i] = g[i] >= 0 ? 1 : -1;
            an += fabs(g[i]);
            ss += (double)save[i] * save[i];
        }
        double h = 1e-2 * sqrt(ss / (double)p->numel);
        fd = richardson(f, &a, w, save, d, p->numel, h);
        e = fabs(fd - an);
        T_OK(e <= 1e-3 * fabs(an) + 1e-6 / h, "%s: finite difference along sign(g) of %s "
             "(h %.1e): %.6e vs backward %.6e (rel err %.1e)", f->name, p->name, h, fd, an,
             e / fabs(an));
        free(save);
        free(d);
    }
    model_acts_free(&a);
}

// --- loading errors, saving ---------------------------------------------------------------

static char tmp_root[64];

static char *tmp_path(const char *name) { return path_join(tmp_root, name); }

static void write_file(const char *path, const void *data, size_t n) {
    FILE *fp = fopen(path, "wb");
    CHECK(fp && fwrite(data, 1, n, fp) == n && fclose(fp) == 0, "cannot write %s", path);
}

// A copy of m's folder in tmp/name: config.json (or config), the tensors minus skip,
// with reshape's first dimension one larger, plus extra (a (2,) tensor) if given.
static char *write_variant(const Model *m, const char *name, const char *config,
                           const char *skip, const char *reshape, const char *extra) {
    char *dir = tmp_path(name);
    mkdir(dir, 0777);
    char *p = path_join(dir, "config.json");
    write_file(p, config ? config : m->config_json, config ? strlen(config) : m->config_len);
    free(p);
    StWriter w;
    st_writer_init(&w);
    st_writer_meta(&w, "format", "pt");
    float *big = NULL;
    static const float two[2] = {1, 2};
    for (int i = 0; i < m->n_info; i++) {
        const ParamInfo *q = &m->info[i];
        if (skip && strcmp(q->name, skip) == 0) continue;
        int64_t shape[2] = {q->shape[0], q->shape[1]};
        const float *data = m->params + q->offset;
        if (reshape && strcmp(q->name, reshape) == 0) {
            shape[0]++;
            big = xcalloc((size_t)shape[0] * (q->ndim == 2 ? (size_t)shape[1] : 1), sizeof *big);
            data = big;
        }
        st_writer_add(&w, q->name, ST_F32, q->ndim, shape, data);
    }
    int64_t s2[1] = {2};
    if (extra) st_writer_add(&w, extra, ST_F32, 1, s2, two);
    p = path_join(dir, "model.safetensors");
    CHECK(st_writer_write(&w, p) == 0, "%s", err_msg());
    free(p);
    st_writer_free(&w);
    free(big);
    return dir;
}

static void expect_load_error(const char *dir, const char *what, const char *needle1,
                              const char *needle2) {
    Model m2;
    int rc = model_load(&m2, dir);
    const char *msg = err_msg();
    T_OK(rc < 0 && strstr(msg, needle1) && strstr(msg, needle2) && !strchr(msg, '\n'),
         "load error, %s: %s", what, msg);
    if (rc == 0) model_free(&m2);
}

static void check_load_errors(const Fix *f) {
    const Model *m = &f->m;
    char *d = write_variant(m, "missing", NULL, "model.layers.1.mlp.up_proj.weight", NULL, NULL);
    expect_load_error(d, "missing tensor", "missing tensor model.layers.1.mlp.up_proj.weight",
                      "model.safetensors");
    free(d);
    d = write_variant(m, "shape", NULL, NULL, "model.layers.0.self_attn.k_proj.weight", NULL);
    const ParamInfo *k = model_param(m, "model.layers.0.self_attn.k_proj.weight");
    char want[160];
    snprintf(want, sizeof want, "k_proj.weight has shape [%lld, %lld], config.json implies "
             "[%lld, %lld]", (long long)k->shape[0] + 1, (long long)k->shape[1],
             (long long)k->shape[0], (long long)k->shape[1]);
    expect_load_error(d, "wrong shape", want, "model.safetensors");
    free(d);
    d = write_variant(m, "arch", "{\"architectures\": [\"MistralForCausalLM\"]}", NULL, NULL, NULL);
    expect_load_error(d, "unsupported architecture", "unsupported architecture", "config.json");
    free(d);
    d = write_variant(m, "extra", NULL, NULL, NULL, "model.layers.0.self_attn.q_proj.bias");
    expect_load_error(d, "unexpected tensor", "unexpected tensor model.layers.0.self_attn.q_proj.bias",
                      "model.safetensors");
    free(d);
    // Truncated: the fixture's own file minus its last 7 bytes.
    d = tmp_path("truncated");
    mkdir(d, 0777);
    char *src = path_join(f->dir, "model.safetensors"), *cfg = path_join(d, "config.json");
    char *dst = path_join(d, "model.safetensors"), *data;
    size_t n;
    file_read_all(&data, &n, src);
    write_file(dst, data, n - 7);
    write_file(cfg, m->config_json, m->config_len);
    expect_load_error(d, "truncated safetensors", "model.safetensors", "");
    free(data);
    free(src);
    free(cfg);
    free(dst);
    free(d);
    d = tmp_path("nothing");
    mkdir(d, 0777);
    cfg = path_join(d, "config.json");
    write_file(cfg, m->config_json, m->config_len);
    expect_load_error(d, "no weights", "no model.safetensors", "");
    free(cfg);
    free(d);
}

// Tied model: a redundant lm_head.weight and rotary inv_freq tensors are ignored.
static void check_load_ignored(const Fix *f) {
    char *d = write_variant(&f->m, "tied_extra", NULL, NULL, NULL, "lm_head.weight");
    Model m2;
    int rc = model_load(&m2, d);
    T_OK(rc == 0, "%s: a tied checkpoint with lm_head.weight loads (%s)", f->name,
         rc ? err_msg() : "ignored");
    if (rc == 0) model_free(&m2);
    free(d);
    d = write_variant(&f->m, "inv_freq", NULL, NULL, NULL,
                      "model.layers.0.self_attn.rotary_emb.inv_freq");
    rc = model_load(&m2, d);
    T_OK(rc == 0, "%s: rotary_emb.inv_freq is ignored (%s)", f->name, rc ? err_msg() : "ok");
    if (rc == 0) model_free(&m2);
    free(d);
}

static void check_save(const Fix *f) {
    const Model *m = &f->m;
    char name[64];
    snprintf(name, sizeof name, "%s_f32", f->name);
    char *d = tmp_path(name);
    Model m2;
    int rc = model_save(m, d, -1);
    T_OK(rc == 0, "%s: save F32 (%s)", f->name, rc ? err_msg() : d);
    rc = model_load(&m2, d);
    if (T_OK(rc == 0, "%s: reload the saved folder (%s)", f->name, rc ? err_msg() : "ok")) {
        T_OK(m2.n_params == m->n_params &&
             memcmp(m2.params, m->params, m->n_params * sizeof(float)) == 0 &&
             m2.dtype == ST_F32, "%s: F32 round trip is bit-exact", f->name);
        model_free(&m2);
    }
    SafeTensors st;
    char *p = path_join(d, "model.safetensors");
    if (st_open(&st, p) == 0) {
        const char *fmt = st_meta(&st, "format");
        T_OK(fmt && strcmp(fmt, "pt") == 0, "%s: metadata format = pt", f->name);
        T_OK(!st_find(&st, "lm_head.weight") == !!m->cfg.tie_word_embeddings,
             "%s: lm_head.weight written only when untied", f->name);
        st_close(&st);
    }
    free(p);
    free(d);

    snprintf(name, sizeof name, "%s_bf16", f->name);
    d = tmp_path(name);
    rc = model_save(m, d, ST_BF16);
    T_OK(rc == 0, "%s: save BF16 (%s)", f->name, rc ? err_msg() : d);
    rc = model_load(&m2, d);
    if (T_OK(rc == 0, "%s: reload BF16 (%s)", f->name, rc ? err_msg() : "ok")) {
        size_t bad = 0;
        for (size_t i = 0; i < m->n_params; i++)
            bad += m2.params[i] != st_bf16_to_f32(st_f32_to_bf16(m->params[i]));
        T_OK(bad == 0 && m2.dtype == ST_BF16 && strcmp(m2.cfg.torch_dtype, "bfloat16") == 0,
             "%s: BF16 round trip = fp32 rounded to bf16; config says %s", f->name,
             m2.cfg.torch_dtype);
        model_free(&m2);
    }
    free(d);

    snprintf(name, sizeof name, "%s_f16", f->name);
    d = tmp_path(name);
    rc = model_save(m, d, ST_F16);
    if (rc == 0) rc = model_load(&m2, d);
    if (T_OK(rc == 0, "%s: save and reload F16%s%s", f->name, rc ? ": " : "", rc ? err_msg() : "")) {
        size_t bad = 0;
        for (size_t i = 0; i < m->n_params; i++)
            bad += m2.params[i] != st_f16_to_f32(st_f32_to_f16(m->params[i]));
        T_OK(bad == 0 && m2.dtype == ST_F16 && strcmp(m2.cfg.torch_dtype, "float16") == 0,
             "%s: F16 round trip = fp32 rounded to f16; config says %s", f->name,
             m2.cfg.torch_dtype);
        model_free(&m2);
    }
    free(d);
}

// The model split over two shards with an index.
static void check_shards(const Fix *f) {
    const Model *m = &f->m;
    char *d = tmp_path("sharded");
    mkdir(d, 0777);
    char *p = path_join(d, "config.json");
    write_file(p, m->config_json, m->config_len);
    free(p);
    StWriter w[2];
    char map[16384];
    size_t k = (size_t)snprintf(map, sizeof map, "{\"metadata\": {}, \"weight_map\": {");
    for (int s = 0; s < 2; s++) st_writer_init(&w[s]);
    for (int i = 0; i < m->n_info; i++) {
        const ParamInfo *q = &m->info[i];
        int s = i >= m->n_info / 2;
        st_writer_add(&w[s], q->name, ST_F32, q->ndim, q->shape, m->params + q->offset);
        k += (size_t)snprintf(map + k, sizeof map - k, "%s\"%s\": \"model-%05d-of-00002.safetensors\"",
                              i ? ", " : "", q->name, s + 1);
    }
    snprintf(map + k, sizeof map - k, "}}");
    for (int s = 0; s < 2; s++) {
        char fn[64];
        snprintf(fn, sizeof fn, "model-%05d-of-00002.safetensors", s + 1);
        p = path_join(d, fn);
        st_writer_write(&w[s], p);
        st_writer_free(&w[s]);
        free(p);
    }
    p = path_join(d, "model.safetensors.index.json");
    write_file(p, map, strlen(map));
    free(p);
    Model m2;
    int rc = model_load(&m2, d);
    if (T_OK(rc == 0, "%s: load from 2 shards + index (%s)", f->name, rc ? err_msg() : "ok")) {
        T_OK(memcmp(m2.params, m->params, m->n_params * sizeof(float)) == 0,
             "%s: sharded load equals the single file", f->name);
        model_free(&m2);
    }
    free(d);
}

// --- attention across blocks ----------------------------------------------------------------

// The fixtures have T = 9, inside one ATT_BLOCK; this checks the blocked kernels at
// T = 150 (three blocks, a partial last one), GQA, B = 2, against a naive double
// implementation, and a query window at pos0 > 0 (how decoding and chunked prefill
// call it) against the full forward.
static void check_attention_blocks(void) {
    enum { B = 2, T = 150, NH = 4, KV = 2, HD = 8, G = NH / KV, Q = NH * HD, KVD = KV * HD };
    size_t nq = (size_t)B * T * Q, nk = (size_t)B * T * KVD;
    float *q = xmalloc(nq * 4), *k = xmalloc(nk * 4), *v = xmalloc(nk * 4), *dout = xmalloc(nq * 4);
    float *out = xmalloc(nq * 4), *lse = xmalloc((size_t)B * NH * T * 4), *dq = xmalloc(nq * 4);
    float *dk = xmalloc(nk * 4), *dv = xmalloc(nk * 4), *dkh = xmalloc(nq * 4), *dvh = xmalloc(nq * 4);
    double *o_ref = xcalloc(nq, 8), *dq_ref = xcalloc(nq, 8), *dk_ref = xcalloc(nk, 8),
           *dv_ref = xcalloc(nk, 8), *p = xmalloc(T * 8);
    uint32_t s = 7;
#define RND() (s = s * 1664525u + 1013904223u, (float)((s >> 8) / 16777216.0 * 4 - 2))
    for (size_t i = 0; i < nq; i++) { q[i] = RND(); dout[i] = RND(); }
    for (size_t i = 0; i < nk; i++) { k[i] = RND(); v[i] = RND(); }
#undef RND
    int nscr = layers_threads();
    float *scratch = xmalloc((size_t)nscr * attention_scratch(T) * 4);
    attention_forward(out, lse, q, k, v, scratch, B, T, T, 0, NH, KV, HD, nscr);
    attention_backward(dq, dk, dv, dkh, dvh, dout, q, k, v, out, lse, scratch, B, T, NH, KV, HD, nscr);
    double scale = 1.0 / sqrt((double)HD);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const float *qt = q + ((size_t)(b * T + t) * NH + h) * HD;
                const float *dot = dout + ((size_t)(b * T + t) * NH + h) * HD;
                double mx = -INFINITY, sum = 0, D = 0;
                for (int j = 0; j <= t; j++) {
                    const float *kj = k + ((size_t)(b * T + j) * KV + h / G) * HD;
                    double d = 0;
                    for (int c = 0; c < HD; c++) d += (double)qt[c] * kj[c];
                    p[j] = d * scale;
                    if (p[j] > mx) mx = p[j];
                }
                for (int j = 0; j <= t; j++) sum += p[j] = exp(p[j] - mx);
                double *o = o_ref + ((size_t)(b * T + t) * NH + h) * HD;
                for (int j = 0; j <= t; j++) {
                    p[j] /= sum;
                    const float *vj = v + ((size_t)(b * T + j) * KV + h / G) * HD;
                    for (int c = 0; c < HD; c++) o[c] += p[j] * vj[c];
                }
                for (int c = 0; c < HD; c++) D += dot[c] * o[c];
                for (int j = 0; j <= t; j++) {
                    size_t kv = ((size_t)(b * T + j) * KV + h / G) * HD;
                    double dp = 0;
                    for (int c = 0; c < HD; c++) dp += (double)dot[c] * v[kv + c];
                    double ds = p[j] * (dp - D) * scale;
                    for (int c = 0; c < HD; c++) {
                        dq_ref[((size_t)(b * T + t) * NH + h) * HD + c] += ds * k[kv + c];
                        dk_ref[kv + c] += ds * qt[c];
                        dv_ref[kv + c] += p[j] * dot[c];
                    }
                }
            }
    float *r = xmalloc(nq * 4);
    struct { const char *name; const float *got; const double *want; size_t n; } cmp[] = {
        {"out", out, o_ref, nq}, {"dq", dq, dq_ref, nq}, {"dk", dk, dk_ref, nk}, {"dv", dv, dv_ref, nk},
    };
    for (size_t c = 0; c < sizeof cmp / sizeof *cmp; c++) {
        for (size_t i = 0; i < cmp[c].n; i++) r[i] = (float)cmp[c].want[i];
        double e = rel_err(cmp[c].got, r, cmp[c].n);
        T_OK(e <= TOL, "attention T=%d (3 blocks), GQA: %s vs naive double, rel err %.2e", T,
             cmp[c].name, e);
    }
    // The last 50 queries alone (pos0 = 100) see the same keys: the same rows out.
    enum { W = 50 };
    float *qw = xmalloc((size_t)B * W * Q * 4), *ow = xmalloc((size_t)B * W * Q * 4);
    for (int b = 0; b < B; b++)
        memcpy(qw + (size_t)b * W * Q, q + ((size_t)b * T + T - W) * Q, (size_t)W * Q * 4);
    attention_forward(ow, NULL, qw, k, v, scratch, B, W, T, T - W, NH, KV, HD, nscr);
    double worst = 0;
    for (int b = 0; b < B; b++) {
        double e = rel_err(ow + (size_t)b * W * Q, out + ((size_t)b * T + T - W) * Q, (size_t)W * Q);
        if (e > worst) worst = e;
    }
    T_OK(worst <= TOL, "attention: a window of %d queries at pos0 = %d matches the full forward "
         "(rel err %.2e)", W, T - W, worst);
    free(qw); free(ow); free(r); free(scratch);
    free(q); free(k); free(v); free(dout); free(out); free(lse); free(dq); free(dk); free(dv);
    free(dkh); free(dvh); free(o_ref); free(dq_ref); free(dk_ref); free(dv_ref); free(p);
}

// --- attention over packed segments -----------------------------------------------------

// One packed layout: documents of a prefix and NSEG segments after it, rows of every
// length around ATT_ROWS (4) and ROW_LANES (16) multiples. attention_packed against a
// naive double softmax per row; then the same documents with each segment laid out as
// one sequence (prefix copied in front, no shared prefix): every row the same bits.
static void check_attention_packed_case(size_t NH, size_t KV, size_t HD) {
    enum { NDOC = 3, NSEG = 4 };
    static const int pre[NDOC] = {0, 17, 33}, len[NDOC][NSEG] = {{1, 2, 3, 4}, {5, 7, 9, 16}, {17, 1, 31, 6}};
    size_t G = NH / KV, Q = NH * HD, KVD = KV * HD, n = 0, nseg = 0, max_keys = 0, n1 = 0;
    for (int d = 0; d < NDOC; d++) {
        n += (size_t)pre[d], nseg += pre[d] > 0;
        for (int i = 0; i < NSEG; i++) {
            n += (size_t)len[d][i], nseg++;
            n1 += (size_t)(pre[d] + len[d][i]);
            if ((size_t)(pre[d] + len[d][i]) > max_keys) max_keys = (size_t)(pre[d] + len[d][i]);
        }
    }
    float *q = xmalloc(n * Q * 4), *k = xmalloc(n * KVD * 4), *v = xmalloc(n * KVD * 4), *out = xmalloc(n * Q * 4);
    float *q1 = xmalloc(n1 * Q * 4), *k1 = xmalloc(n1 * KVD * 4), *v1 = xmalloc(n1 * KVD * 4), *out1 = xmalloc(n1 * Q * 4);
    int32_t *seg = xmalloc(nseg * 4 * sizeof *seg), *seg1 = xmalloc(NDOC * NSEG * 4 * sizeof *seg1);
    double *p = xmalloc(max_keys * 8), *o = xmalloc(HD * 8);
    uint32_t s = 11;
#define RND() (s = s * 1664525u + 1013904223u, (float)((s >> 8) / 16777216.0 * 4 - 2))
    for (size_t i = 0; i < n * Q; i++) q[i] = RND();
    for (size_t i = 0; i < n * KVD; i++) k[i] = RND(), v[i] = RND();
#undef RND
    // layout 1: {first row, rows, prefix's first row, prefix rows}; layout 2: one per segment
    size_t r = 0, r1 = 0, ns = 0, ns1 = 0, at[NDOC][NSEG][3]; // prefix, segment rows in 1; rows in 2
    for (int d = 0; d < NDOC; d++) {
        size_t p0 = r;
        if (pre[d]) {
            int32_t g[4] = {(int32_t)r, pre[d], (int32_t)r, 0};
            memcpy(seg + 4 * ns++, g, sizeof g);
            r += (size_t)pre[d];
        }
        for (int i = 0; i < NSEG; i++) {
            int32_t g[4] = {(int32_t)r, len[d][i], (int32_t)p0, pre[d]}, g1[4] = {(int32_t)r1, pre[d] + len[d][i], 0, 0};
            memcpy(seg + 4 * ns++, g, sizeof g);
            memcpy(seg1 + 4 * ns1++, g1, sizeof g1);
            at[d][i][0] = p0, at[d][i][1] = r, at[d][i][2] = r1;
            size_t rows[2][2] = {{p0, (size_t)pre[d]}, {r, (size_t)len[d][i]}}; // prefix, then segment
            for (int c = 0; c < 2; c++) {
                memcpy(q1 + r1 * Q, q + rows[c][0] * Q, rows[c][1] * Q * 4);
                memcpy(k1 + r1 * KVD, k + rows[c][0] * KVD, rows[c][1] * KVD * 4);
                memcpy(v1 + r1 * KVD, v + rows[c][0] * KVD, rows[c][1] * KVD * 4);
                r1 += rows[c][1];
            }
            r += (size_t)len[d][i];
        }
    }
    int nscr = layers_threads();
    float *scratch = xmalloc((size_t)nscr * attention_packed_scratch(max_keys, HD) * 4);
    attention_packed(out, q, k, v, seg, nseg, scratch, max_keys, NH, KV, HD, nscr);
    attention_packed(out1, q1, k1, v1, seg1, NDOC * NSEG, scratch, max_keys, NH, KV, HD, nscr);
    double scale = 1.0 / sqrt((double)HD);
    float *ref = xmalloc(n * Q * 4);
    int same = 1;
    for (size_t g = 0; g < nseg; g++) {
        size_t g0 = (size_t)seg[4 * g], gn = (size_t)seg[4 * g + 1], gp0 = (size_t)seg[4 * g + 2], gp = (size_t)seg[4 * g + 3];
        for (size_t t = 0; t < gn; t++)
            for (size_t h = 0; h < NH; h++) {
                const float *qt = q + (g0 + t) * Q + h * HD;
                double mx = -INFINITY, sum = 0;
                for (size_t j = 0; j < gp + t + 1; j++) { // the prefix's keys, then the segment's
                    size_t kr = j < gp ? gp0 + j : g0 + j - gp;
                    double dd = 0;
                    for (size_t c = 0; c < HD; c++) dd += (double)qt[c] * k[(kr * KV + h / G) * HD + c];
                    p[j] = dd * scale;
                    if (p[j] > mx) mx = p[j];
                }
                for (size_t j = 0; j < gp + t + 1; j++) sum += p[j] = exp(p[j] - mx);
                memset(o, 0, HD * 8);
                for (size_t j = 0; j < gp + t + 1; j++) {
                    size_t kr = j < gp ? gp0 + j : g0 + j - gp;
                    for (size_t c = 0; c < HD; c++) o[c] += p[j] / sum * v[(kr * KV + h / G) * HD + c];
                }
                for (size_t c = 0; c < HD; c++) ref[(g0 + t) * Q + h * HD + c] = (float)o[c];
            }
    }
    double worst = rel_err(out, ref, n * Q);
    for (int d = 0; d < NDOC; d++)
        for (int i = 0; i < NSEG; i++) {
            size_t P = (size_t)pre[d];
            same &= memcmp(out + at[d][i][0] * Q, out1 + at[d][i][2] * Q, P * Q * 4) == 0;
            same &= memcmp(out + at[d][i][1] * Q, out1 + (at[d][i][2] + P) * Q, (size_t)len[d][i] * Q * 4) == 0;
        }
    T_OK(worst <= TOL, "attention_packed NH=%zu KV=%zu HD=%zu: %zu segments vs naive double, rel err %.2e", NH, KV,
         HD, nseg, worst);
    T_OK(same, "attention_packed NH=%zu KV=%zu HD=%zu: rows after a shared prefix are bitwise the rows of the "
         "segment laid out alone", NH, KV, HD);
    free(q); free(k); free(v); free(out); free(q1); free(k1); free(v1); free(out1);
    free(seg); free(seg1); free(p); free(o); free(scratch); free(ref);
}

static void check_attention_packed(void) {
    check_attention_packed_case(4, 2, 8);  // stories260K's head
    check_attention_packed_case(2, 2, 12); // no GQA, HD not a multiple of 8
    check_attention_packed_case(4, 1, 64);
}

// --- golden: stories260K ------------------------------------------------------------------

// llama2.c's `run stories260K.bin -z tok512.bin -t 0 -n 200` feeds BOS at position 0
// and then each argmax back in: 200 forward passes, 200 new tokens (it would stop at a
// BOS, which never comes), each printed as its piece with the leading space of the
// first one dropped because it follows BOS. tok_decode of the 200 ids does the same
// (SentencePiece drops the dummy-prefix space). expected_greedy_200.txt holds exactly
// that text: no prompt, no leading space, no trailing newline.
static void check_golden(void) {
    const char *shared = test_shared();
    if (!shared) { T_SKIP("stories260K golden: ../shared not found"); return; }
    char *dir = path_join(shared, "models/stories260K");
    char *exp_path = path_join(dir, "expected_greedy_200.txt");
    char *tok_path = path_join(dir, "tokenizer.model");
    Model m;
    char *want = NULL;
    size_t want_n = 0;
    if (access(exp_path, R_OK) != 0) { T_SKIP("stories260K golden: %s absent", exp_path); goto out; }
    int rc = model_load(&m, dir);
    if (!T_OK(rc == 0, "stories260K: load %s", rc ? err_msg() : dir)) goto out;
    KVCache c;
    kvcache_init(&c, &m, 256);
    int32_t ids[200];
    int32_t tok = 1; // BOS
    for (int pos = 0; pos < 200; pos++) {
        const float *z = model_forward_token(&m, &c, tok, pos);
        int best = 0;
        for (size_t i = 1; i < m.V; i++) if (z[i] > z[best]) best = (int)i;
        ids[pos] = tok = best;
    }
    // The training forward over BOS + the first 199 tokens (4 attention blocks) must
    // give the logits decoding gave, position by position.
    int32_t seq[200], tgt[200];
    seq[0] = 1;
    for (int i = 1; i < 200; i++) seq[i] = ids[i - 1];
    for (int i = 0; i < 200; i++) tgt[i] = ids[i];
    ModelActs a;
    model_acts_init(&a, &m, 1, 200, 1);
    model_forward(&m, &a, seq, tgt);
    double worst = 0;
    for (int pos = 0; pos < 200; pos++) {
        const float *z = model_forward_token(&m, &c, seq[pos], pos);
        double e = rel_err(a.logits + (size_t)pos * m.V, z, m.V);
        if (e > worst) worst = e;
    }
    T_OK(worst <= TOL, "stories260K: training forward over 200 tokens = KV-cache decoding "
         "(logits rel err %.2e)", worst);
    model_acts_free(&a);
    kvcache_free(&c);
    file_read_all(&want, &want_n, exp_path);
    Tokenizer t;
    rc = tokenizer_load(&t, tok_path);
    if (T_OK(rc == 0, "stories260K: tokenizer %s", rc ? err_msg() : tok_path)) {
        ByteVec got = {0};
        tok_decode(&t, &got, ids, 200);
        size_t i = 0;
        while (i < got.n && i < want_n && got.v[i] == want[i]) i++;
        T_OK(got.n == want_n && i == want_n, "stories260K: greedy 200 tokens from BOS reproduce "
             "expected_greedy_200.txt (%zu bytes; first difference at byte %zu)", want_n, i);
        bytevec_free(&got);
        tokenizer_free(&t);
    }
    // Saving a real model copies its tokenizer files.
    char *out = tmp_path("stories_saved"), *tm = path_join(out, "tokenizer.model");
    rc = model_save(&m, out, -1);
    T_OK(rc == 0 && access(tm, R_OK) == 0, "stories260K: save copies tokenizer.model%s%s",
         rc ? ": " : "", rc ? err_msg() : "");
    free(out);
    free(tm);
    model_free(&m);
out:
    free(want);
    free(dir);
    free(exp_path);
    free(tok_path);
}

int main(void) {
    layers_init();
    printf("# BLAS: %s\n", layers_blas_info());
    snprintf(tmp_root, sizeof tmp_root, "/tmp/best_test_model.XXXXXX");
    CHECK(mkdtemp(tmp_root), "mkdtemp: %s", strerror(errno));

    static const char *fd_llama[] = {
        "model.embed_tokens.weight", "model.layers.0.input_layernorm.weight",
        "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
        "model.layers.1.self_attn.v_proj.weight", "model.layers.1.self_attn.o_proj.weight",
        "model.layers.0.mlp.gate_proj.weight", "model.layers.1.mlp.up_proj.weight",
        "model.layers.0.mlp.down_proj.weight", "model.layers.1.post_attention_layernorm.weight",
        "model.norm.weight", "lm_head.weight",
    };
    static const char *fd_qwen[] = {
        "model.embed_tokens.weight", "model.layers.0.self_attn.q_norm.weight",
        "model.layers.1.self_attn.k_norm.weight", "model.layers.0.self_attn.k_proj.weight",
    };
    static const char *fd_tied[] = {
        "model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.bias",
        "model.layers.1.self_attn.k_proj.bias", "model.layers.0.self_attn.v_proj.bias",
        "model.layers.1.self_attn.o_proj.bias", "model.layers.0.mlp.gate_proj.bias",
        "model.layers.0.mlp.up_proj.bias", "model.layers.1.mlp.down_proj.bias",
    };
    struct { const char *name; const char **fd; int n_fd; } fixtures[] = {
        {"llama", fd_llama, sizeof fd_llama / sizeof *fd_llama},
        {"qwen3", fd_qwen, sizeof fd_qwen / sizeof *fd_qwen},
        {"llama_tied", fd_tied, sizeof fd_tied / sizeof *fd_tied},
    };
    for (size_t i = 0; i < sizeof fixtures / sizeof *fixtures; i++) {
        Fix f;
        if (fix_open(&f, fixtures[i].name) == 0) {
            ModelActs a;
            model_acts_init(&a, &f.m, f.B, f.T, 1);
            check_forward_backward(&f, &a);
            check_eval_and_decode(&f);
            check_accumulation(&f);
            check_finite_differences(&f, fixtures[i].fd, fixtures[i].n_fd);
            check_save(&f);
            if (i == 0) { check_load_errors(&f); check_shards(&f); }
            if (f.m.cfg.tie_word_embeddings) check_load_ignored(&f);
            check_adamw(&f, &a); // last: it changes the weights
            model_acts_free(&a);
        }
        fix_close(&f);
    }
    check_attention_blocks();
    check_attention_packed();
    check_golden();

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_root);
    if (system(cmd) != 0) printf("# could not remove %s\n", tmp_root);
    T_DONE();
}
