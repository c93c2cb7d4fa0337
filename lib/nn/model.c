// model.c: LLaMA / Qwen3 decoder on the CPU: parameter layout, training forward/backward,
// evaluation forward, KV-cache decoding. Loading and saving a HF folder are model_io.c's.
//
// The architecture, as transformers' modeling_llama.py / modeling_qwen3.py compute it:
//   x = embed[tokens]
//   per block:  h = input_layernorm(x)
//               q, k, v = h Wq^T (+bq), h Wk^T (+bk), h Wv^T (+bv)
//               Qwen3: q, k = q_norm(q), k_norm(k)   (RMSNorm over each head's HD)
//               q, k = rope(q), rope(k)                (rotate_half layout)
//               x = x + o_proj(causal_gqa_attention(q, k, v))
//               x = x + down(silu(gate(post_attention_layernorm(x))) * up(...))
//   logits = norm(x) lm_head^T;  loss = mean cross-entropy of the shifted targets.
// The kernels are in layers.c; this file is the order in which they run. Every
// product with a 2-D weight goes through linear() (and the embedding through
// embed_rows()), which reads the weight from the fp32 block or asks its store
// (weight.h; the last section of this file).
#include "nn/model.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"  // defines: ERR, TRY, CHECK, xmalloc
#include "nn/layers.h"   // defines: the kernels

// --- parameter layout ---------------------------------------------------------------

// Families of tensors, in block order. A per-layer family is stacked over layers.
enum {
    F_EMBED, F_ATTN_NORM, F_WQ, F_BQ, F_WK, F_BK, F_WV, F_BV, F_QNORM, F_KNORM, F_WO, F_BO,
    F_MLP_NORM, F_WGATE, F_BGATE, F_WUP, F_BUP, F_WDOWN, F_BDOWN, F_FINAL_NORM, F_LM_HEAD,
    F_N
};

static const struct {
    const char *name;  // HF name; %d is the layer
    int per_layer, prunable;
    size_t field;      // offset of the pointer inside ModelParams
} FAM[F_N] = {
    {"model.embed_tokens.weight", 0, 0, offsetof(ModelParams, embed)},
    {"model.layers.%d.input_layernorm.weight", 1, 0, offsetof(ModelParams, attn_norm)},
    {"model.layers.%d.self_attn.q_proj.weight", 1, 1, offsetof(ModelParams, wq)},
    {"model.layers.%d.self_attn.q_proj.bias", 1, 0, offsetof(ModelParams, bq)},
    {"model.layers.%d.self_attn.k_proj.weight", 1, 1, offsetof(ModelParams, wk)},
    {"model.layers.%d.self_attn.k_proj.bias", 1, 0, offsetof(ModelParams, bk)},
    {"model.layers.%d.self_attn.v_proj.weight", 1, 1, offsetof(ModelParams, wv)},
    {"model.layers.%d.self_attn.v_proj.bias", 1, 0, offsetof(ModelParams, bv)},
    {"model.layers.%d.self_attn.q_norm.weight", 1, 0, offsetof(ModelParams, q_norm)},
    {"model.layers.%d.self_attn.k_norm.weight", 1, 0, offsetof(ModelParams, k_norm)},
    {"model.layers.%d.self_attn.o_proj.weight", 1, 1, offsetof(ModelParams, wo)},
    {"model.layers.%d.self_attn.o_proj.bias", 1, 0, offsetof(ModelParams, bo)},
    {"model.layers.%d.post_attention_layernorm.weight", 1, 0, offsetof(ModelParams, mlp_norm)},
    {"model.layers.%d.mlp.gate_proj.weight", 1, 1, offsetof(ModelParams, wgate)},
    {"model.layers.%d.mlp.gate_proj.bias", 1, 0, offsetof(ModelParams, bgate)},
    {"model.layers.%d.mlp.up_proj.weight", 1, 1, offsetof(ModelParams, wup)},
    {"model.layers.%d.mlp.up_proj.bias", 1, 0, offsetof(ModelParams, bup)},
    {"model.layers.%d.mlp.down_proj.weight", 1, 1, offsetof(ModelParams, wdown)},
    {"model.layers.%d.mlp.down_proj.bias", 1, 0, offsetof(ModelParams, bdown)},
    {"model.norm.weight", 0, 0, offsetof(ModelParams, final_norm)},
    {"lm_head.weight", 0, 0, offsetof(ModelParams, lm_head)},
};

static float **fam_ptr(ModelParams *p, int f) { return (float **)((char *)p + FAM[f].field); }
static const float *fam_w(const Model *m, int f) {
    return *(float *const *)((const char *)&m->w + FAM[f].field);
}

// Shape of one tensor of family f (one layer's); 0 when the model has no such tensor.
static int fam_shape(int64_t shape[2], const Model *m, int f) {
    const ModelConfig *c = &m->cfg;
    int64_t V = (int64_t)m->V, C = (int64_t)m->C, I = (int64_t)m->I, Q = (int64_t)m->Q,
            KVD = (int64_t)m->KVD, HD = (int64_t)m->HD;
    int ab = c->attention_bias, mb = c->mlp_bias;
#define SHAPE1(a) (shape[0] = (a), 1)
#define SHAPE2(a, b) (shape[0] = (a), shape[1] = (b), 2)
    switch (f) {
    case F_EMBED: return SHAPE2(V, C);
    case F_LM_HEAD: return c->tie_word_embeddings ? 0 : SHAPE2(V, C);
    case F_ATTN_NORM: case F_MLP_NORM: case F_FINAL_NORM: return SHAPE1(C);
    case F_WQ: return SHAPE2(Q, C);
    case F_WK: case F_WV: return SHAPE2(KVD, C);
    case F_WO: return SHAPE2(C, Q);
    case F_BQ: return ab ? SHAPE1(Q) : 0;
    case F_BK: case F_BV: return ab ? SHAPE1(KVD) : 0;
    case F_BO: return ab ? SHAPE1(C) : 0;
    case F_QNORM: case F_KNORM: return m->qk_norm ? SHAPE1(HD) : 0;
    case F_WGATE: case F_WUP: return SHAPE2(I, C);
    case F_WDOWN: return SHAPE2(C, I);
    case F_BGATE: case F_BUP: return mb ? SHAPE1(I) : 0;
    case F_BDOWN: return mb ? SHAPE1(C) : 0;
    }
#undef SHAPE1
#undef SHAPE2
    return 0;
}

// The table index of family f, layer l (a tied lm_head: the embedding's).
static int fam_index(const Model *m, int f, size_t l) {
    if (f == F_LM_HEAD && m->cfg.tie_word_embeddings) f = F_EMBED;
    size_t i = 0; // the entries of the families before f, then l
    for (int g = 0; g < f; g++) {
        int64_t s[2];
        if (fam_shape(s, m, g)) i += FAM[g].per_layer ? m->L : 1;
    }
    return (int)(i + l);
}

// The stored weight of family f, layer l.
static const void *stored_weight(const Model *m, int f, size_t l) { return m->ext->t[fam_index(m, f, l)]; }

int model_matrix_index(const Model *m, ModelMatrix w, size_t l) {
    static const int fam[] = {F_EMBED, F_WQ, F_WK, F_WV, F_WO, F_WGATE, F_WUP, F_WDOWN, F_LM_HEAD};
    return fam_index(m, fam[w], w == MW_EMBED || w == MW_HEAD ? 0 : l);
}

// Fills m->info, m->n_info, m->n_params and m->n_prunable; the block is not allocated
// yet (params_alloc). With stored set, the 2-D families get no room in the block
// (offset SIZE_MAX). Counts and sizes are size_t with overflow checks, although the
// ranges of config.h already keep them far from overflowing.
static int params_layout(Model *m, const char *name, int stored) {
    size_t count = 0, n = 0, npr = 0, total = 0;
    for (int f = 0; f < F_N; f++) {
        int64_t s[2];
        if (fam_shape(s, m, f)) count += FAM[f].per_layer ? m->L : 1;
    }
    if (count > INT_MAX) return ERR("%s: %zu tensors are too many", name, count);
    m->info = xcalloc(count, sizeof *m->info);
    for (int f = 0; f < F_N; f++) {
        int64_t s[2];
        int nd = fam_shape(s, m, f);
        if (!nd) continue;
        size_t numel = (size_t)s[0], reps = FAM[f].per_layer ? m->L : 1, all;
        if ((nd == 2 && __builtin_mul_overflow(numel, (size_t)s[1], &numel)) ||
            __builtin_mul_overflow(numel, reps, &all) || __builtin_add_overflow(total, all, &total) ||
            total > MODEL_MAX_PARAMS)
            return ERR("%s: the model would have more than %zu parameters", name, MODEL_MAX_PARAMS);
        int in_block = !(stored && nd == 2);
        for (size_t r = 0; r < reps; r++) {
            CHECK((size_t)m->n_info < count, "params_layout: table overflow");
            ParamInfo *p = &m->info[m->n_info++];
            snprintf(p->name, sizeof p->name, FAM[f].name, (int)r);
            p->offset = in_block ? n + r * numel : SIZE_MAX;
            p->numel = numel;
            p->ndim = nd;
            p->shape[0] = s[0];
            p->shape[1] = nd == 2 ? s[1] : 0;
            p->prunable = FAM[f].prunable;
        }
        if (!in_block) continue;
        n += all;
        if (FAM[f].prunable) npr += all;
    }
    m->n_params = n;
    m->n_prunable = npr;
    return 0;
}

// The zeroed block the table describes, and m->w into it.
void model_alloc(Model *m) {
    m->params = xcalloc(m->n_params, sizeof *m->params);
    memset(&m->w, 0, sizeof m->w);
    size_t i = 0; // the table is in family order: a family's first entry sets its pointer
    for (int f = 0; f < F_N; f++) {
        int64_t s[2];
        if (!fam_shape(s, m, f)) continue;
        if (m->info[i].offset != SIZE_MAX) *fam_ptr(&m->w, f) = m->params + m->info[i].offset;
        i += FAM[f].per_layer ? m->L : 1;
    }
    if (m->cfg.tie_word_embeddings) m->w.lm_head = m->w.embed;
}

int model_plan(Model *m, const char *config_json, size_t len, const char *name, int stored) {
    memset(m, 0, sizeof *m);
    m->dtype = ST_F32;
    m->config_len = len;
    m->config_json = xmalloc(len + 1);
    memcpy(m->config_json, config_json, len);
    m->config_json[len] = 0;
    int rc = config_parse(&m->cfg, m->config_json, m->config_len, name);
    const ModelConfig *c = &m->cfg;
    if (rc == 0 && c->head_dim % 2) rc = ERR("%s: head_dim %d is odd; RoPE needs pairs", name, c->head_dim);
    if (rc == 0) {
        m->V = (size_t)c->vocab_size;
        m->C = (size_t)c->hidden_size;
        m->I = (size_t)c->intermediate_size;
        m->L = (size_t)c->num_hidden_layers;
        m->NH = (size_t)c->num_attention_heads;
        m->KV = (size_t)c->num_key_value_heads;
        m->HD = (size_t)c->head_dim;
        m->Q = m->NH * m->HD; // both below 2^10 and 2^18 (config.h): no overflow
        m->KVD = m->KV * m->HD;
        m->qk_norm = c->arch == ARCH_QWEN3;
        rc = params_layout(m, name, stored);
    }
    if (rc < 0) model_free(m);
    return rc;
}

void model_free(Model *m) {
    if (m->ext) m->ext->close(m->ext);
    free(m->info);
    free(m->params);
    free(m->grads);
    free(m->src_dir);
    free(m->config_json);
    memset(m, 0, sizeof *m);
}

int model_need_folder(const Model *m, const char *what) {
    if (!m->ext) return 0;
    return ERR("%s: %s; %s needs the model's folder (%s)", m->ext->path, m->ext->what, what, m->ext->hint);
}

const ParamInfo *model_param(const Model *m, const char *name) {
    for (int i = 0; i < m->n_info; i++)
        if (strcmp(m->info[i].name, name) == 0) return &m->info[i];
    return NULL;
}

void model_grads_init(Model *m) {
    if (!m->grads) m->grads = xcalloc(m->n_params, sizeof *m->grads);
    else model_zero_grad(m);
    // Same layout as the weights: shift every pointer by grads - params.
    for (int f = 0; f < F_N; f++) {
        float *w = *fam_ptr(&m->w, f);
        *fam_ptr(&m->g, f) = w ? m->grads + (w - m->params) : NULL;
    }
}

void model_zero_grad(Model *m) {
    if (m->grads) memset(m->grads, 0, m->n_params * sizeof *m->grads);
}

double model_sparsity(const Model *m) {
    uint64_t zeros = 0;
    for (int i = 0; i < m->n_info; i++) {
        const ParamInfo *p = &m->info[i];
        if (!p->prunable) continue;
        const float *w = m->params + p->offset;
        for (size_t j = 0; j < p->numel; j++) zeros += w[j] == 0.0f;
    }
    return m->n_prunable ? (double)zeros / (double)m->n_prunable : 0.0;
}

// --- activations ----------------------------------------------------------------------

// Hands out consecutive pieces of one block; with base NULL it only counts. Pieces
// are rounded to 16 floats so every buffer starts on a 64-byte boundary.
typedef struct { float *base; size_t used; } Carver;

static float *take(Carver *c, size_t n) {
    if (!n) return NULL;
    float *p = c->base ? c->base + c->used : NULL;
    c->used += (n + 15) & ~(size_t)15;
    return p;
}

static void acts_layout(ModelActs *a, const Model *m, Carver *cv) {
    size_t N = a->N, T = (size_t)a->T, C = m->C, Q = m->Q, KVD = m->KVD, I = m->I;
    const LayerActField *fields = layer_act_fields(); // (model.h: the device's too)
    for (int s = 0; s < a->n_slots; s++)
        for (int i = 0; i < N_LAYER_ACT_FIELDS; i++) {
            const LayerActField *f = &fields[i];
            size_t n = f->qk_norm_only && !m->qk_norm ? 0 : N * LAYER_ACT_WIDTH(m, f->width);
            *LAYER_ACT_PTR(&a->layer[s], f->offset, float) = take(cv, n);
        }
    a->resf = take(cv, N * C);
    a->rstdf = take(cv, N);
    a->xnf = take(cv, N * C);
    a->logits = take(cv, a->logits_rows * m->V);
    a->lse_ce = take(cv, N);
    a->nll = take(cv, N);
    a->h = take(cv, N * I);
    a->rope_cos = take(cv, T * m->HD / 2);
    a->rope_sin = take(cv, T * m->HD / 2);
    a->scratch = take(cv, (size_t)a->n_scratch * attention_scratch(T));
    a->wbuf = take(cv, m->ext ? m->ext->max_numel : 0);
    if (!a->train) return;
    a->dres = take(cv, N * C);
    a->dxn = take(cv, N * C);
    a->datt = take(cv, N * Q);
    a->dq = take(cv, N * Q);
    a->dk = take(cv, N * KVD);
    a->dv = take(cv, N * KVD);
    a->dkh = take(cv, N * Q);
    a->dvh = take(cv, N * Q);
    a->dh = take(cv, N * I);
    a->dgate = take(cv, N * I);
    a->dup = take(cv, N * I);
}

enum { EVAL_LOGIT_ROWS = 128 }; // evaluation computes the logits this many rows at a time

static void acts_shape(ModelActs *a, const Model *m, int B, int T, int train) {
    memset(a, 0, sizeof *a);
    a->B = B;
    a->T = T;
    a->train = train;
    a->N = (size_t)B * (size_t)T;
    a->n_slots = train ? (int)m->L : 1;
    a->logits_rows = train || a->N < EVAL_LOGIT_ROWS ? a->N : EVAL_LOGIT_ROWS;
    a->n_scratch = layers_threads();
    a->layer = xcalloc((size_t)a->n_slots, sizeof *a->layer);
}

size_t model_acts_bytes(const Model *m, int B, int T, int train) {
    ModelActs a;
    acts_shape(&a, m, B, T, train);
    Carver cv = {NULL, 0};
    acts_layout(&a, m, &cv);
    free(a.layer);
    return cv.used * sizeof(float) + 2 * a.N * sizeof(int32_t);
}

int model_acts_init(ModelActs *a, const Model *m, int B, int T, int train) {
    if (B < 1 || T < 1) return ERR("batch %d x %d: both must be at least 1", B, T);
    acts_shape(a, m, B, T, train);
    Carver cv = {NULL, 0};
    acts_layout(a, m, &cv);
    a->block = xmalloc(cv.used * sizeof(float));
    a->bytes = cv.used * sizeof(float);
    cv = (Carver){a->block, 0};
    acts_layout(a, m, &cv);
    a->tokens = xcalloc(a->N, sizeof *a->tokens);
    a->targets = xcalloc(a->N, sizeof *a->targets);
    rope_table(a->rope_cos, a->rope_sin, 0, (size_t)T, m->HD, m->cfg.rope_theta);
    return 0;
}

void model_acts_free(ModelActs *a) {
    free(a->layer);
    free(a->block);
    free(a->tokens);
    free(a->targets);
    memset(a, 0, sizeof *a);
}

// --- forward ----------------------------------------------------------------------------

static int check_ids(const int32_t *ids, size_t n, size_t V, int32_t lo, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] < lo || (ids[i] >= 0 && (size_t)ids[i] >= V))
            return ERR("%s %d at position %zu is outside [%d, %zu)", what, ids[i], i, lo, V);
    return 0;
}

static void linear(float *y, const float *x, const Model *m, int f, size_t l, const float *b,
                   float *wbuf, size_t N, size_t IC, size_t OC, int acc);
static void embed_rows(float *x, const Model *m, const int32_t *tokens, size_t N);

// One decoder block: s->res in, out (N, C) out (out may be s->res of the next slot).
static void block_forward(const Model *m, const ModelActs *a, size_t l, LayerActs *s, float *out) {
    const ModelParams *w = &m->w;
    size_t B = (size_t)a->B, T = (size_t)a->T, N = a->N;
    size_t C = m->C, Q = m->Q, KVD = m->KVD, I = m->I, HD = m->HD;
    float eps = (float)m->cfg.rms_norm_eps;
    float *wb = a->wbuf;
#define LW(p, size) ((p) ? (p) + l * (size) : NULL) // layer l's slice of a stacked family
    rmsnorm_forward(s->xn1, s->rstd1, s->res, w->attn_norm + l * C, N, C, eps);
    if (m->qk_norm) {
        linear(s->qraw, s->xn1, m, F_WQ, l, LW(w->bq, Q), wb, N, C, Q, 0);
        linear(s->kraw, s->xn1, m, F_WK, l, LW(w->bk, KVD), wb, N, C, KVD, 0);
        rmsnorm_forward(s->q, s->qrstd, s->qraw, w->q_norm + l * HD, N * m->NH, HD, eps);
        rmsnorm_forward(s->k, s->krstd, s->kraw, w->k_norm + l * HD, N * m->KV, HD, eps);
    } else {
        linear(s->q, s->xn1, m, F_WQ, l, LW(w->bq, Q), wb, N, C, Q, 0);
        linear(s->k, s->xn1, m, F_WK, l, LW(w->bk, KVD), wb, N, C, KVD, 0);
    }
    linear(s->v, s->xn1, m, F_WV, l, LW(w->bv, KVD), wb, N, C, KVD, 0);
    rope_forward(s->q, a->rope_cos, a->rope_sin, B, T, m->NH, HD);
    rope_forward(s->k, a->rope_cos, a->rope_sin, B, T, m->KV, HD);
    attention_forward(s->att, s->lse, s->q, s->k, s->v, a->scratch, B, T, T, 0, m->NH, m->KV,
                      HD, a->n_scratch);
    memcpy(s->res2, s->res, N * C * sizeof(float)); // residual: res2 = res + o_proj(att)
    linear(s->res2, s->att, m, F_WO, l, LW(w->bo, C), wb, N, Q, C, 1);
    rmsnorm_forward(s->xn2, s->rstd2, s->res2, w->mlp_norm + l * C, N, C, eps);
    linear(s->gate, s->xn2, m, F_WGATE, l, LW(w->bgate, I), wb, N, C, I, 0);
    linear(s->up, s->xn2, m, F_WUP, l, LW(w->bup, I), wb, N, C, I, 0);
    swiglu_forward(a->h, s->gate, s->up, N * I);
    if (out != s->res2) memcpy(out, s->res2, N * C * sizeof(float));
    linear(out, a->h, m, F_WDOWN, l, LW(w->bdown, C), wb, N, I, C, 1);
#undef LW
}

void model_embed(float *x, const Model *m, const int32_t *tokens, size_t N) { embed_rows(x, m, tokens, N); }

void model_block_forward(const Model *m, ModelActs *a, size_t l, const float *x, float *out) {
    LayerActs *s = &a->layer[0];
    memcpy(s->res, x, a->N * m->C * sizeof(float));
    block_forward(m, a, l, s, out);
}

// Embedding, every block, final norm: leaves model.norm(x) in a->xnf.
static void trunk_forward(const Model *m, ModelActs *a, const int32_t *tokens) {
    embed_rows(a->layer[0].res, m, tokens, a->N);
    for (size_t l = 0; l < m->L; l++) {
        LayerActs *s = &a->layer[a->train ? l : 0];
        float *out = l + 1 == m->L ? a->resf : a->layer[a->train ? l + 1 : 0].res;
        block_forward(m, a, l, s, out);
    }
    rmsnorm_forward(a->xnf, a->rstdf, a->resf, m->w.final_norm, a->N, m->C,
                    (float)m->cfg.rms_norm_eps);
}

int model_forward(const Model *m, ModelActs *a, const int32_t *tokens, const int32_t *targets) {
    CHECK(a->train, "model_forward needs activations in training mode");
    TRY(model_need_folder(m, "training"));
    size_t N = a->N;
    TRY(check_ids(tokens, N, m->V, 0, "token"));
    if (targets) TRY(check_ids(targets, N, m->V, -1, "target"));
    memcpy(a->tokens, tokens, N * sizeof *tokens);
    a->has_targets = targets != NULL;
    if (targets) memcpy(a->targets, targets, N * sizeof *targets);
    trunk_forward(m, a, tokens);
    matmul_forward(a->logits, a->xnf, m->w.lm_head, NULL, N, m->C, m->V, 0);
    a->loss = 0;
    a->n_valid = 0;
    if (!targets) return 0;
    double sum = crossentropy_forward(a->nll, a->lse_ce, a->logits, targets, N, m->V);
    for (size_t n = 0; n < N; n++) a->n_valid += targets[n] >= 0;
    // No valid target: torch's mean would be NaN; 0 keeps a training loop going.
    a->loss = a->n_valid ? (float)(sum / a->n_valid) : 0.0f;
    return 0;
}

int model_eval(float *logits, float *nll, const Model *m, ModelActs *a,
               const int32_t *tokens, const int32_t *targets) {
    size_t N = a->N, V = m->V;
    CHECK(!nll || targets, "model_eval: nll needs targets");
    TRY(check_ids(tokens, N, V, 0, "token"));
    if (targets) TRY(check_ids(targets, N, V, -1, "target"));
    trunk_forward(m, a, tokens);
    const float *head = m->w.lm_head;
    if (m->ext) { // decoded once for all the rows below
        m->ext->ops->decode(a->wbuf, stored_weight(m, F_LM_HEAD, 0));
        head = a->wbuf;
    }
    // With an output array the logits go straight there; otherwise a few rows at a time.
    size_t rows = logits ? N : a->logits_rows;
    for (size_t r0 = 0; r0 < N; r0 += rows) {
        size_t nr = N - r0 < rows ? N - r0 : rows;
        float *z = logits ? logits + r0 * V : a->logits;
        matmul_forward(z, a->xnf + r0 * m->C, head, NULL, nr, m->C, V, 0);
        if (nll) crossentropy_forward(nll + r0, NULL, z, targets + r0, nr, V);
    }
    return 0;
}

// --- backward ---------------------------------------------------------------------------

// One block backward: a->dres holds d(block output) on entry and d(block input) on exit.
static void block_backward(Model *m, ModelActs *a, size_t l) {
    const ModelParams *w = &m->w, *g = &m->g;
    const LayerActs *s = &a->layer[l];
    size_t B = (size_t)a->B, T = (size_t)a->T, N = a->N;
    size_t C = m->C, Q = m->Q, KVD = m->KVD, I = m->I, HD = m->HD;
#define LW(p, size) ((p) ? (p) + l * (size) : NULL)
    // MLP: out = res2 + down(silu(gate) * up); h is recomputed rather than stored.
    swiglu_forward(a->h, s->gate, s->up, N * I);
    matmul_backward(a->dh, g->wdown + l * C * I, LW(g->bdown, C), a->dres, a->h,
                    w->wdown + l * C * I, N, I, C, 0);
    swiglu_backward(a->dgate, a->dup, a->dh, s->gate, s->up, N * I);
    matmul_backward(a->dxn, g->wgate + l * I * C, LW(g->bgate, I), a->dgate, s->xn2,
                    w->wgate + l * I * C, N, C, I, 0);
    matmul_backward(a->dxn, g->wup + l * I * C, LW(g->bup, I), a->dup, s->xn2,
                    w->wup + l * I * C, N, C, I, 1);
    rmsnorm_backward(a->dres, g->mlp_norm + l * C, a->dxn, s->res2, s->rstd2,
                     w->mlp_norm + l * C, N, C, 1); // dres is now d(res2)
    // Attention: res2 = res + o_proj(att).
    matmul_backward(a->datt, g->wo + l * C * Q, LW(g->bo, C), a->dres, s->att,
                    w->wo + l * C * Q, N, Q, C, 0);
    attention_backward(a->dq, a->dk, a->dv, a->dkh, a->dvh, a->datt, s->q, s->k, s->v, s->att,
                       s->lse, a->scratch, B, T, m->NH, m->KV, HD, a->n_scratch);
    rope_backward(a->dq, a->rope_cos, a->rope_sin, B, T, m->NH, HD);
    rope_backward(a->dk, a->rope_cos, a->rope_sin, B, T, m->KV, HD);
    if (m->qk_norm) { // in place: d(q after norm) -> d(q_proj output)
        rmsnorm_backward(a->dq, g->q_norm + l * HD, a->dq, s->qraw, s->qrstd,
                         w->q_norm + l * HD, N * m->NH, HD, 0);
        rmsnorm_backward(a->dk, g->k_norm + l * HD, a->dk, s->kraw, s->krstd,
                         w->k_norm + l * HD, N * m->KV, HD, 0);
    }
    matmul_backward(a->dxn, g->wq + l * Q * C, LW(g->bq, Q), a->dq, s->xn1, w->wq + l * Q * C,
                    N, C, Q, 0);
    matmul_backward(a->dxn, g->wk + l * KVD * C, LW(g->bk, KVD), a->dk, s->xn1,
                    w->wk + l * KVD * C, N, C, KVD, 1);
    matmul_backward(a->dxn, g->wv + l * KVD * C, LW(g->bv, KVD), a->dv, s->xn1,
                    w->wv + l * KVD * C, N, C, KVD, 1);
    rmsnorm_backward(a->dres, g->attn_norm + l * C, a->dxn, s->res, s->rstd1,
                     w->attn_norm + l * C, N, C, 1); // dres is now d(res)
#undef LW
}

void model_backward(Model *m, ModelActs *a, float loss_scale) {
    CHECK(a->train && a->has_targets, "model_backward needs a training forward with targets");
    CHECK(!m->ext, "model_backward on a model with stored weights");
    CHECK(m->grads, "model_backward before model_grads_init");
    if (!a->n_valid) return; // the loss is a constant 0
    size_t N = a->N, C = m->C;
    // d(mean nll)/d logits = (softmax - onehot) / n_valid, written over the logits.
    crossentropy_backward(a->logits, a->logits, a->lse_ce, a->targets,
                          loss_scale / (float)a->n_valid, N, m->V);
    matmul_backward(a->dxn, m->g.lm_head, NULL, a->logits, a->xnf, m->w.lm_head, N, C, m->V, 0);
    rmsnorm_backward(a->dres, m->g.final_norm, a->dxn, a->resf, a->rstdf, m->w.final_norm,
                     N, C, 0);
    for (size_t l = m->L; l-- > 0;) block_backward(m, a, l);
    embedding_backward(m->g.embed, a->dres, a->tokens, N, C);
}

// --- decoding with a KV cache -----------------------------------------------------------

int kvcache_init(KVCache *c, const Model *m, int max_T) {
    memset(c, 0, sizeof *c);
    if (max_T < 1) return ERR("KV cache of %d positions", max_T);
    c->max_T = max_T;
    c->n_scratch = layers_threads();
    size_t T = (size_t)max_T;
    Carver cv = {NULL, 0};
    for (int pass = 0; pass < 2; pass++) {
        c->k = take(&cv, m->L * T * m->KVD);
        c->v = take(&cv, m->L * T * m->KVD);
        c->x = take(&cv, m->C);
        c->xn = take(&cv, m->C);
        c->q = take(&cv, m->Q);
        c->att = take(&cv, m->Q);
        c->gate = take(&cv, m->I);
        c->up = take(&cv, m->I);
        c->rstd = take(&cv, m->NH);
        c->cos = take(&cv, m->HD / 2);
        c->sin = take(&cv, m->HD / 2);
        c->logits = take(&cv, m->V);
        c->scratch = take(&cv, (size_t)c->n_scratch * attention_scratch(T));
        if (pass == 0) {
            c->block = xmalloc(cv.used * sizeof(float));
            cv = (Carver){c->block, 0};
        }
    }
    return 0;
}

void kvcache_free(KVCache *c) {
    free(c->block);
    memset(c, 0, sizeof *c);
}

const float *model_forward_token(const Model *m, KVCache *c, int32_t token, int pos) {
    if (token < 0 || (size_t)token >= m->V) {
        ERR("token %d is outside [0, %zu)", token, m->V);
        return NULL;
    }
    if (pos < 0 || pos >= c->max_T) {
        ERR("position %d is outside the KV cache's %d positions", pos, c->max_T);
        return NULL;
    }
    const ModelParams *w = &m->w;
    size_t C = m->C, Q = m->Q, KVD = m->KVD, I = m->I, HD = m->HD, T = (size_t)c->max_T;
    size_t p = (size_t)pos;
    float eps = (float)m->cfg.rms_norm_eps;
    embed_rows(c->x, m, &token, 1);
    rope_table(c->cos, c->sin, p, 1, HD, m->cfg.rope_theta);
    for (size_t l = 0; l < m->L; l++) {
#define LW(x, size) ((x) ? (x) + l * (size) : NULL)
        float *kc = c->k + l * T * KVD, *vc = c->v + l * T * KVD; // (max_T, KVD) of layer l
        rmsnorm_forward(c->xn, c->rstd, c->x, w->attn_norm + l * C, 1, C, eps);
        linear(c->q, c->xn, m, F_WQ, l, LW(w->bq, Q), NULL, 1, C, Q, 0);
        linear(kc + p * KVD, c->xn, m, F_WK, l, LW(w->bk, KVD), NULL, 1, C, KVD, 0);
        linear(vc + p * KVD, c->xn, m, F_WV, l, LW(w->bv, KVD), NULL, 1, C, KVD, 0);
        if (m->qk_norm) { // in place, one row per head
            rmsnorm_forward(c->q, c->rstd, c->q, w->q_norm + l * HD, m->NH, HD, eps);
            rmsnorm_forward(kc + p * KVD, c->rstd, kc + p * KVD, w->k_norm + l * HD, m->KV, HD, eps);
        }
        rope_forward(c->q, c->cos, c->sin, 1, 1, m->NH, HD);
        rope_forward(kc + p * KVD, c->cos, c->sin, 1, 1, m->KV, HD);
        attention_forward(c->att, NULL, c->q, kc, vc, c->scratch, 1, 1, p + 1, p, m->NH, m->KV,
                          HD, c->n_scratch);
        linear(c->x, c->att, m, F_WO, l, LW(w->bo, C), NULL, 1, Q, C, 1);
        rmsnorm_forward(c->xn, c->rstd, c->x, w->mlp_norm + l * C, 1, C, eps);
        linear(c->gate, c->xn, m, F_WGATE, l, LW(w->bgate, I), NULL, 1, C, I, 0);
        linear(c->up, c->xn, m, F_WUP, l, LW(w->bup, I), NULL, 1, C, I, 0);
        swiglu_forward(c->gate, c->gate, c->up, I);
        linear(c->x, c->gate, m, F_WDOWN, l, LW(w->bdown, C), NULL, 1, I, C, 1);
#undef LW
    }
    rmsnorm_forward(c->xn, c->rstd, c->x, w->final_norm, 1, C, eps);
    linear(c->logits, c->xn, m, F_LM_HEAD, 0, NULL, NULL, 1, C, m->V, 0);
    return c->logits;
}

// --- packed rows ------------------------------------------------------------------------

int packed_acts_init(PackedActs *a, const Model *m, size_t max_rows, size_t logit_rows, size_t max_keys) {
    memset(a, 0, sizeof *a);
    if (max_rows < 1 || logit_rows < 1 || max_keys < 1)
        return ERR("packed rows: %zu rows, %zu of logits, %zu keys", max_rows, logit_rows, max_keys);
    a->max_rows = max_rows;
    a->logit_rows = logit_rows;
    a->max_keys = max_keys;
    a->n_scratch = layers_threads();
    size_t n = max_rows;
    Carver cv = {NULL, 0};
    for (int pass = 0; pass < 2; pass++) {
        a->x = take(&cv, n * m->C);
        a->xn = take(&cv, n * m->C);
        a->q = take(&cv, n * m->Q);
        a->att = take(&cv, n * m->Q);
        a->k = take(&cv, n * m->KVD);
        a->v = take(&cv, n * m->KVD);
        a->gate = take(&cv, n * m->I);
        a->up = take(&cv, n * m->I);
        a->rstd = take(&cv, n * m->NH);
        a->cos = take(&cv, n * m->HD / 2);
        a->sin = take(&cv, n * m->HD / 2);
        a->hid = take(&cv, logit_rows * m->C);
        a->logits = take(&cv, logit_rows * m->V);
        a->wbuf = m->ext ? take(&cv, m->ext->max_numel) : NULL; // one stored matrix decoded
        a->scratch = take(&cv, (size_t)a->n_scratch * attention_packed_scratch(max_keys, m->HD));
        if (pass == 0) {
            a->block = xmalloc(cv.used * sizeof(float));
            cv = (Carver){a->block, 0};
        }
    }
    return 0;
}

void packed_acts_free(PackedActs *a) {
    free(a->block);
    memset(a, 0, sizeof *a);
}

int model_forward_packed(const Model *m, PackedActs *a, const int32_t *tokens, const int32_t *pos, size_t n,
                         const int32_t *seg, size_t nseg) {
    CHECK(n >= 1 && n <= a->max_rows, "model_forward_packed: %zu rows for %zu", n, a->max_rows);
    TRY(check_ids(tokens, n, m->V, 0, "token"));
    const ModelParams *w = &m->w;
    size_t C = m->C, Q = m->Q, KVD = m->KVD, I = m->I, HD = m->HD;
    float eps = (float)m->cfg.rms_norm_eps, *wb = a->wbuf;
    embed_rows(a->x, m, tokens, n);
    for (size_t i = 0; i < n; i++) rope_table(a->cos + i * HD / 2, a->sin + i * HD / 2, (size_t)pos[i], 1, HD, m->cfg.rope_theta);
    for (size_t l = 0; l < m->L; l++) {
#define LW(x, size) ((x) ? (x) + l * (size) : NULL)
        rmsnorm_forward(a->xn, a->rstd, a->x, w->attn_norm + l * C, n, C, eps);
        linear(a->q, a->xn, m, F_WQ, l, LW(w->bq, Q), wb, n, C, Q, 0);
        linear(a->k, a->xn, m, F_WK, l, LW(w->bk, KVD), wb, n, C, KVD, 0);
        linear(a->v, a->xn, m, F_WV, l, LW(w->bv, KVD), wb, n, C, KVD, 0);
        if (m->qk_norm) { // in place, one row per head
            rmsnorm_forward(a->q, a->rstd, a->q, w->q_norm + l * HD, n * m->NH, HD, eps);
            rmsnorm_forward(a->k, a->rstd, a->k, w->k_norm + l * HD, n * m->KV, HD, eps);
        }
        rope_forward(a->q, a->cos, a->sin, 1, n, m->NH, HD);
        rope_forward(a->k, a->cos, a->sin, 1, n, m->KV, HD);
        attention_packed(a->att, a->q, a->k, a->v, seg, nseg, a->scratch, a->max_keys, m->NH, m->KV, HD, a->n_scratch);
        linear(a->x, a->att, m, F_WO, l, LW(w->bo, C), wb, n, Q, C, 1);
        rmsnorm_forward(a->xn, a->rstd, a->x, w->mlp_norm + l * C, n, C, eps);
        linear(a->gate, a->xn, m, F_WGATE, l, LW(w->bgate, I), wb, n, C, I, 0);
        linear(a->up, a->xn, m, F_WUP, l, LW(w->bup, I), wb, n, C, I, 0);
        swiglu_forward(a->gate, a->gate, a->up, n * I);
        linear(a->x, a->gate, m, F_WDOWN, l, LW(w->bdown, C), wb, n, I, C, 1);
#undef LW
    }
    rmsnorm_forward(a->xn, a->rstd, a->x, w->final_norm, n, C, eps);
    return 0;
}

const float *model_packed_logits(const Model *m, PackedActs *a, const int32_t *rows, size_t n) {
    CHECK(n <= a->logit_rows, "model_packed_logits: %zu rows for %zu", n, a->logit_rows);
    for (size_t i = 0; i < n; i++) memcpy(a->hid + i * m->C, a->xn + (size_t)rows[i] * m->C, m->C * sizeof(float));
    linear(a->logits, a->hid, m, F_LM_HEAD, 0, NULL, a->wbuf, n, m->C, m->V, 0);
    return a->logits;
}

// --- weights from the block or from a store --------------------------------------------

// y (N, OC) = x (N, IC) @ W^T + b (acc: y += ...), W (OC, IC) = family f of layer l.
// A folder's model: BLAS on the fp32 block. A stored weight: with wbuf, W decoded into
// wbuf (the fp32 bits the block would hold) and the very same BLAS call, so that
// evaluation is bitwise the unpacked model's; without (one token, N = 1), the store's
// matvec straight from its encoding, reading the fewest bytes.
static void linear(float *y, const float *x, const Model *m, int f, size_t l, const float *b,
                   float *wbuf, size_t N, size_t IC, size_t OC, int acc) {
    if (!m->ext) {
        matmul_forward(y, x, fam_w(m, f) + l * OC * IC, b, N, IC, OC, acc);
        return;
    }
    const void *t = stored_weight(m, f, l);
    if (wbuf) {
        m->ext->ops->decode(wbuf, t);
        matmul_forward(y, x, wbuf, b, N, IC, OC, acc);
    } else {
        CHECK(N == 1, "linear: a stored product of %zu rows needs a decode buffer", N);
        m->ext->ops->matvec(y, x, t, b, acc);
    }
}

// x (N, C) = the embeddings of tokens (N), already checked to be in [0, V).
static void embed_rows(float *x, const Model *m, const int32_t *tokens, size_t N) {
    if (m->ext) m->ext->ops->embed(x, tokens, stored_weight(m, F_EMBED, 0), N);
    else if (N == 1) memcpy(x, m->w.embed + (size_t)tokens[0] * m->C, m->C * sizeof *x);
    else embedding_forward(x, tokens, m->w.embed, N, m->C);
}

size_t model_numel(const Model *m) {
    size_t n = 0;
    for (int i = 0; i < m->n_info; i++) n += m->info[i].numel;
    return n;
}

size_t model_token_bytes(const Model *m) {
    size_t bytes = 0, L = m->L;
    for (int f = 0; f < F_N; f++) {
        int64_t s[2];
        int nd = fam_shape(s, m, f);
        if (f == F_LM_HEAD && m->cfg.tie_word_embeddings) nd = fam_shape(s, m, F_EMBED);
        if (!nd) continue;
        size_t reps = FAM[f].per_layer ? L : 1, numel = (size_t)s[0] * (nd == 2 ? (size_t)s[1] : 1);
        if (nd == 1) { bytes += reps * numel * sizeof(float); continue; }
        for (size_t r = 0; r < reps; r++) {
            const void *t = m->ext ? stored_weight(m, f, r) : NULL;
            if (f == F_EMBED) // one row
                bytes += t ? m->ext->ops->row_bytes(t) : m->C * sizeof(float);
            else bytes += t ? m->ext->ops->bytes(t) : numel * sizeof(float);
        }
    }
    return bytes;
}
