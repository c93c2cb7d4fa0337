// model.h: a LLaMA or Qwen3 decoder on the CPU: its parameters, loading and saving a
// Hugging Face folder, the training forward and backward, the evaluation forward and
// one-token decoding with a KV cache. fp32 throughout; this is the reference the CUDA
// path is checked against.
//
// Memory follows llm.c: all parameters live in ONE contiguous fp32 block (m->params),
// carved into named pointers (m->w) and described by a table (m->info) of
// (HF name, offset, shape, prunable). Gradients (m->grads, m->g), Adam's m and v
// (adamw.h) and masks (uint8, one byte per parameter, 1 = keep) use the same layout,
// so zeroing, all-reducing, sharding and masking are flat loops over the block and a
// mask lines up with its weights by offset.
//
// Inside the block each family of tensors is stacked over layers, e.g. wq is
// (L, NH*HD, C) and layer l's q_proj.weight starts at wq + l*NH*HD*C.
//
// A model's 2-D weights can also live outside the block, in a store (weight.h): a
// packed checkpoint keeps them in the file's memory map in their packed encoding
// (pack/pack_model.h loads such a model) and only the 1-D tensors (norms, biases) are
// in the fp32 block. Evaluation decodes each stored weight into an fp32 buffer of the
// activations and runs the same BLAS products as the folder's model, so its results
// are bitwise the unpacked model's; one-token decoding multiplies straight from the
// storage. Training such a model is an error.
//
// Two files implement this header: model.c (the table, the forward and backward,
// decoding) and model_io.c (the folder: model_create, model_load, model_save and the
// checks and clean-ups around them).
//
// Not here: the kernels (layers.h), the optimizer (adamw.h), masks (sparse/mask.h),
// config.json parsing (config.h), packed checkpoints (lib/pack/), tokenization, data.
#ifndef BEST_MODEL_H
#define BEST_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "io/config.h"      // defines: ModelConfig
#include "io/safetensors.h" // defines: StDtype
#include "nn/adamw.h"       // defines: AdamW, AdamWHyper (the device step's optimizer)
#include "nn/params.h"      // defines: ParamInfo
#include "nn/weight.h"      // defines: WeightStore

#ifdef __cplusplus // model.cu and the C++ tests include this
extern "C" {
#endif

// The most parameters a config.json may describe (1.1e12; LLaMA-2-70B has 6.9e10).
#define MODEL_MAX_PARAMS ((size_t)1 << 40)

// Named pointers into a parameter-shaped block (weights or gradients).
// Q = NH*HD, KVD = KV*HD, I = intermediate_size.
typedef struct {
    float *embed;        // (V, C)        model.embed_tokens.weight
    float *attn_norm;    // (L, C)        input_layernorm
    float *wq;           // (L, Q, C)
    float *bq;           // (L, Q)        NULL without attention_bias
    float *wk;           // (L, KVD, C)
    float *bk;           // (L, KVD)
    float *wv;           // (L, KVD, C)
    float *bv;           // (L, KVD)
    float *q_norm;       // (L, HD)       Qwen3 only, else NULL
    float *k_norm;       // (L, HD)
    float *wo;           // (L, C, Q)
    float *bo;           // (L, C)
    float *mlp_norm;     // (L, C)        post_attention_layernorm
    float *wgate;        // (L, I, C)
    float *bgate;        // (L, I)        NULL without mlp_bias
    float *wup;          // (L, I, C)
    float *bup;          // (L, I)
    float *wdown;        // (L, C, I)
    float *bdown;        // (L, C)
    float *final_norm;   // (C)           model.norm.weight
    float *lm_head;      // (V, C)        == embed when the embeddings are tied
} ModelParams;

typedef struct {
    ModelConfig cfg;
    size_t V, C, I, L, NH, KV, HD, Q, KVD; // sizes from cfg, as size_t
    int qk_norm;          // Qwen3: RMSNorm over HD on q and k before RoPE
    ParamInfo *info;      // (n_info,) in block order
    int n_info;
    size_t n_params;      // floats in the block (with a store: the 1-D tensors only)
    size_t n_prunable;    // of which in prunable tensors (with a store: 0)
    float *params;        // (n_params,)
    float *grads;         // (n_params,) NULL until model_grads_init
    ModelParams w;        // into params
    ModelParams g;        // into grads (all NULL until model_grads_init)
    StDtype dtype;        // dtype of the weights we loaded (F32 for model_create)
    char *src_dir;        // folder loaded from (tokenizer files for saving), or NULL
    char *config_json;    // the config.json bytes, written back by model_save
    size_t config_len;
    WeightStore *ext;     // the 2-D weights when they are not in the block, else NULL
} Model;

// Model sizes and the parameter table (m->info, m->n_params) from the config.json text
// config_json (len bytes, copied; name is for messages), with the ranges of config.h
// and the block's size checked (at most MODEL_MAX_PARAMS), but no block allocated yet:
// a loader compares its tensors' shapes with the table first, then calls model_alloc.
// stored: the 2-D weights will live outside the block, in a store the caller sets as
// m->ext with one stored weight per 2-D table entry (pack/pack_model.c); only the 1-D
// tensors get room in the block.
int model_plan(Model *m, const char *config_json, size_t len, const char *name, int stored);
// The zeroed block of the table (m->params) and the named pointers m->w into it.
void model_alloc(Model *m);
// A model with all parameters zero, shaped by the config.json at path (a file or a
// folder holding one); for random initialisation by the caller.
int model_create(Model *m, const char *config_path);
// A Hugging Face folder: config.json, model.safetensors or model.safetensors.index.json
// + shards; F32, BF16 or F16 weights become fp32. Errors name the file and the tensor.
// (pack/pack_model.h's model_open also takes a packed checkpoint.)
int model_load(Model *m, const char *dir);
void model_free(Model *m);
// 0, or ERR when m's 2-D weights are in a store (a packed checkpoint), not in the fp32
// block: `what` ("best-mask", "training", ...) needs the model's folder.
int model_need_folder(const Model *m, const char *what);
// Writes dir/model.safetensors (metadata {"format": "pt"}; no lm_head.weight when
// tied) in dtype (ST_F32, ST_BF16, ST_F16, or -1 for the dtype loaded), config.json
// (torch_dtype updated if the dtype changed) and the tokenizer files of the source
// folder. Creates dir if needed; every file goes through temp + rename. A save that
// fails removes the folders it created (with what it wrote there), never a folder that
// was there before. ERR for a model with stored weights (best-pack --unpack writes a
// pack's folder). Files an earlier save left in dir that this one does not write (a
// tokenizer file the source has not) are removed.
int model_save(const Model *m, const char *dir, int dtype);
// Unlinks from dir every file model_save writes (after a failed save into a new folder).
void model_unlink_saved(const char *dir);
// 0, or ERR when a file model_save would write into dir is one of the run's inputs
// (fileio.h's path_note_input: `--model M --out-model M`), or when dir exists and holds
// anything but the files model_save writes (and their temporaries): a model folder is
// never mixed with foreign files. Checked before any work.
int model_check_save_dir(const char *dir);
// Unlinks from dir the files model_save writes that are not among written (n_written
// names): what an earlier save into dir left and this one did not write again. model_save
// calls it; an unpack, which adds the pack's files after model_save, calls it again.
void model_unlink_unsaved(const char *dir, const char *const *written, int n_written);

// The table entry of a HF tensor name, or NULL.
const ParamInfo *model_param(const Model *m, const char *name);
// What every checkpoint reader checks, so that a folder and a pack are refused alike:
// a tensor (ndim, shape) found for table entry p has p's shape; a tensor name found in
// a checkpoint belongs to the model (a parameter, a rotary inv_freq buffer, or a tied
// lm_head). 0, or ERR naming where (a file) and the tensor.
int model_check_shape(const ParamInfo *p, int ndim, const int64_t *shape, const char *where);
int model_check_name(const Model *m, const char *name, const char *where);
// The 2-D weights of the model by role, for code outside model.c that multiplies by
// them (model.cu): MW_HEAD of a model with tied embeddings is the embedding.
typedef enum { MW_EMBED, MW_Q, MW_K, MW_V, MW_O, MW_GATE, MW_UP, MW_DOWN, MW_HEAD } ModelMatrix;
// The index in m->info of matrix w of layer l (l < m->L; 0 for MW_EMBED and MW_HEAD):
// its offset in the block, or its stored weight m->ext->t[index].
int model_matrix_index(const Model *m, ModelMatrix w, size_t l);
// Parameters of the model, wherever they are (the block or the store).
size_t model_numel(const Model *m);
// Bytes of weights one model_forward_token reads: every 2-D weight but the embedding
// in full (stored: what its matvec reads), one embedding row, and the fp32 1-D
// tensors; not the KV cache.
size_t model_token_bytes(const Model *m);
// Allocates the gradient block (zeroed) and m->g; model_zero_grad zeroes it again.
void model_grads_init(Model *m);
void model_zero_grad(Model *m);
// The share of zeros among the prunable weights of the fp32 block (over n_prunable; 0 when
// nothing is prunable).
double model_sparsity(const Model *m);

// Activations for one (B, T), allocated once and reused by every call.
//
// Training mode keeps what the backward needs, per token (floats):
//   per layer  4C (block input, its norm, mid residual, its norm) + 2 (rstd)
//              + 2Q + 2KVD (q and k after RoPE, v, attention output) + NH (softmax lse)
//              + 2I (gate, up; silu(gate)*up is recomputed in the backward)
//              + Qwen3: Q + KVD + NH + KV (q, k before their norms, and the norms' rstd)
//   once       2C + 3 + V + I (final norm, loss, logits, h) and the backward's scratch
//              2C + 4Q + 2KVD + 3I
// plus, per thread, 2*ATT_BLOCK*T of attention scores (never T^2 per head: the
// backward recomputes the probabilities). model_acts_bytes() gives the exact figure;
// at T = 2048 it is 23 KB/token for stories260K, 301 KB for a 32M LLaMA (V 32000),
// 7.3 MB for LLaMA-2-7B (15 GB per 2048 tokens), 8.9 MB for Qwen3-8B.
// Evaluation mode keeps one layer's buffers, reused by every layer, and 128 rows of
// logits: 298 KB/token for LLaMA-2-7B.
typedef struct {
    float *res;    // (N, C)    block input (the residual stream)
    float *rstd1;  // (N)
    float *xn1;    // (N, C)    input_layernorm(res)
    float *qraw;   // (N, Q)    q_proj output before q_norm (Qwen3), else NULL
    float *qrstd;  // (N, NH)
    float *kraw;   // (N, KVD)
    float *krstd;  // (N, KV)
    float *q;      // (N, Q)    after q_norm and RoPE, (B, T, NH, HD)
    float *k;      // (N, KVD)  (B, T, KV, HD)
    float *v;      // (N, KVD)
    float *lse;    // (B, NH, T) log-sum-exp of each attention row
    float *att;    // (N, Q)    attention output, o_proj input
    float *res2;   // (N, C)    res + o_proj(att)
    float *rstd2;  // (N)
    float *xn2;    // (N, C)    post_attention_layernorm(res2)
    float *gate;   // (N, I)
    float *up;     // (N, I)
    uint16_t *xn1b, *xn2b; // the device's training step: xn1, xn2 kept as the products' bf16
                           // operands only (the norms write them; NULL on the CPU)
} LayerActs;

// LayerActs' layout, the one table model.c (the CPU) and model.cu (the device) carve a
// layer's activations by, field by field in this order: each field's width per row (a
// dimension of the model), whether only a model with q/k norms (Qwen3) has it, and for
// xn1 and xn2 the field the device's training step keeps in bf16 instead (bf16_offset;
// evaluating on the device keeps neither). Pointers are set through the offsets.
typedef enum { ACT_1, ACT_C, ACT_Q, ACT_KVD, ACT_NH, ACT_KV, ACT_I } ActWidth;
typedef struct {
    size_t offset;      // of the float * in LayerActs
    ActWidth width;
    int qk_norm_only;
    size_t bf16_offset; // of the uint16_t * the device uses instead (xn1b, xn2b); 0: none
} LayerActField;

enum { N_LAYER_ACT_FIELDS = 17 };
static inline const LayerActField *layer_act_fields(void) {
#define LAF(f, w, qk, b) {offsetof(LayerActs, f), w, qk, b}
    static const LayerActField fields[N_LAYER_ACT_FIELDS] = {
        LAF(res, ACT_C, 0, 0),    LAF(rstd1, ACT_1, 0, 0),  LAF(xn1, ACT_C, 0, offsetof(LayerActs, xn1b)),
        LAF(qraw, ACT_Q, 1, 0),   LAF(qrstd, ACT_NH, 1, 0), LAF(kraw, ACT_KVD, 1, 0),
        LAF(krstd, ACT_KV, 1, 0), LAF(q, ACT_Q, 0, 0),      LAF(k, ACT_KVD, 0, 0),
        LAF(v, ACT_KVD, 0, 0),    LAF(lse, ACT_NH, 0, 0),   LAF(att, ACT_Q, 0, 0),
        LAF(res2, ACT_C, 0, 0),   LAF(rstd2, ACT_1, 0, 0),  LAF(xn2, ACT_C, 0, offsetof(LayerActs, xn2b)),
        LAF(gate, ACT_I, 0, 0),   LAF(up, ACT_I, 0, 0),
    };
#undef LAF
    return fields;
}
// A field's width per row for model m (Model's C, Q, KVD, NH, KV, I).
#define LAYER_ACT_WIDTH(m, w)                                                                 \
    ((w) == ACT_1 ? 1 : (w) == ACT_C ? (m)->C : (w) == ACT_Q ? (m)->Q : (w) == ACT_KVD ? (m)->KVD \
     : (w) == ACT_NH ? (m)->NH : (w) == ACT_KV ? (m)->KV : (m)->I)
// The field's pointer in s.
#define LAYER_ACT_PTR(s, off, type) ((type **)((char *)(s) + (off)))

typedef struct {
    int B, T, train;
    size_t N;             // B*T
    int n_slots;          // L when training, 1 for evaluation (reused by every layer)
    LayerActs *layer;     // (n_slots,)
    float *resf;          // (N, C) output of the last block
    float *rstdf;         // (N)
    float *xnf;           // (N, C) model.norm(resf)
    float *logits;        // (logits_rows, V); the backward overwrites it with dlogits
    size_t logits_rows;   // N when training, min(N, 128) for evaluation
    float *lse_ce;        // (N)
    float *nll;           // (N) per position, 0 where the target is -1
    float *h;             // (N, I) silu(gate) * up, recomputed in the backward
    float *rope_cos;      // (T, HD/2)
    float *rope_sin;      // (T, HD/2)
    float *scratch;       // (n_scratch, attention_scratch(T)) per-thread attention blocks
    int n_scratch;
    float *wbuf;          // models with a store only: (largest 2-D weight) one stored
                          // weight decoded to fp32 for a BLAS product, else NULL
    // backward scratch (training mode only)
    float *dres, *dxn;    // (N, C)
    float *datt, *dq;     // (N, Q)
    float *dk, *dv;       // (N, KVD)
    float *dkh, *dvh;     // (B, NH, T, HD)
    float *dh, *dgate, *dup; // (N, I)
    int32_t *tokens;      // (N) copies of the last forward's inputs
    int32_t *targets;     // (N)
    int has_targets;
    float loss;           // mean NLL over positions with a target (0 if none)
    int n_valid;          // positions with a target
    float *block;         // the one allocation behind all of the above
    size_t bytes;
} ModelActs;

int model_acts_init(ModelActs *a, const Model *m, int B, int T, int train);
void model_acts_free(ModelActs *a);
// Bytes model_acts_init would allocate.
size_t model_acts_bytes(const Model *m, int B, int T, int train);

// Training forward over tokens (B*T); targets (B*T) are the next tokens, -1 = ignore,
// or NULL (no loss). Keeps activations in a (which must be in training mode); sets
// a->loss, a->n_valid, a->nll, a->logits. -1 if an id is outside [0, V) or m has
// stored weights.
int model_forward(const Model *m, ModelActs *a, const int32_t *tokens, const int32_t *targets);
// Adds into m->grads the gradient of loss_scale * a->loss (the last forward's mean
// loss). Gradient accumulation: with micro-batches i of n_i valid targets out of n,
// loss_scale_i = n_i / n reproduces the gradient of the whole batch's mean loss.
// Destroys a->logits.
void model_backward(Model *m, ModelActs *a, float loss_scale);
// Evaluation forward (any ModelActs; nothing kept for a backward). logits (B*T, V) and
// nll (B*T) are outputs, each may be NULL; nll needs targets.
int model_eval(float *logits, float *nll, const Model *m, ModelActs *a,
               const int32_t *tokens, const int32_t *targets);

// Block by block (one-shot pruning, sparse/calib.h): x (N, C) = the embeddings of tokens
// (N), ids already checked to be in [0, V); then block l over a's B*T rows: x (N, C) in,
// out (N, C) out (out may be x), a in either mode. The inputs of the block's Linear
// layers stay in a for the caller: a->layer[0].xn1 (q, k, v), .att (o_proj), .xn2 (gate,
// up) and a->h (down).
void model_embed(float *x, const Model *m, const int32_t *tokens, size_t N);
void model_block_forward(const Model *m, ModelActs *a, size_t l, const float *x, float *out);

// Generation state: keys and values of every position so far, and one token's buffers.
typedef struct {
    int max_T;
    float *k, *v;          // (L, max_T, KVD) keys after q/k norm and RoPE, values
    float *x, *xn;         // (C) residual, normed
    float *q, *att;        // (Q)
    float *gate, *up;      // (I)
    float *rstd;           // (NH)
    float *cos, *sin;      // (HD/2)
    float *logits;         // (V)
    float *scratch;        // (n_scratch, attention_scratch(max_T))
    int n_scratch;
    float *block;
} KVCache;

int kvcache_init(KVCache *c, const Model *m, int max_T);
void kvcache_free(KVCache *c);
// Runs token at position pos (0, 1, 2, ... in order; positions before pos must have
// been run) and returns the logits (V) of the next token, valid until the next call,
// or NULL after ERR (token out of range, pos >= max_T). A model with stored weights
// computes its products with their matvec (a packed one: spmv_forward, fp32 sums in
// another order than BLAS: logits agree with the unpacked model's to fp32 rounding,
// not bit for bit).
const float *model_forward_token(const Model *m, KVCache *c, int32_t token, int pos);

// Rows of several sequences in one forward pass, each row at its own position and seeing
// its own rows (best-eval --tasks: the requests of many documents, each document's
// shared prefix once, each request's rest after it; layers.h's attention_packed).
typedef struct {
    size_t max_rows, logit_rows, max_keys;
    float *x, *xn;         // (max_rows, C) residual, normed
    float *q, *att;        // (max_rows, Q)
    float *k, *v;          // (max_rows, KVD) keys after q/k norm and RoPE, values
    float *gate, *up;      // (max_rows, I)
    float *rstd;           // (max_rows * NH)
    float *cos, *sin;      // (max_rows, HD/2) each row's rotation
    float *hid;            // (logit_rows, C) the rows whose logits are asked for
    float *logits;         // (logit_rows, V)
    float *wbuf;           // a stored (packed) model: one weight matrix decoded
    float *scratch;        // (n_scratch, attention_packed_scratch(max_keys, HD))
    int n_scratch;
    float *block;
} PackedActs;

// max_keys: the most rows a segment sees (its prefix and itself).
int packed_acts_init(PackedActs *a, const Model *m, size_t max_rows, size_t logit_rows, size_t max_keys);
void packed_acts_free(PackedActs *a);
// Runs tokens (n <= max_rows): row i at position pos[i], in the segments seg (nseg, 4) of
// layers.h's attention_packed, up to the final norm (kept in a->xn). A stored weight is
// decoded into wbuf for each product, as model_eval does: the same fp32 products as the
// unpacked model. -1 after ERR (a token out of range).
int model_forward_packed(const Model *m, PackedActs *a, const int32_t *tokens, const int32_t *pos, size_t n,
                         const int32_t *seg, size_t nseg);
// The logits (n, V) of rows (n <= logit_rows) of the last model_forward_packed, valid until
// the next call.
const float *model_packed_logits(const Model *m, PackedActs *a, const int32_t *rows, size_t n);

// --- the training step on a CUDA device (model.cu) ---------------------------------------
// The model of a Model on the device, for training: the fp32 master weights and their
// gradients in one device allocation each with the host block's layout (so a mask, the
// moments and every offset of m->info mean the same on both sides), Adam's moments and
// the mask likewise, a bf16 copy of the weights (the matrix products' operands,
// refreshed after every optimizer step), and the activations of one (B, T) in one more
// allocation, fp32 like the CPU's (LayerActs, with device pointers). Each activation is
// cast to bf16 right before the product that reads it; products accumulate in fp32.
//
// Per step only scalars cross to the host: the loss of each forward, the gradient's sum
// of squares, the count of zero prunable weights. The host's Model and AdamW are brought
// up to date by devmodel_download (for saving, and for a mask update on the host).
//
// A model with stored weights (a pack, m->ext) goes on the device for evaluation and
// decoding only, its 2-D weights in their storage (weight.h's dev_upload: a pack's
// encodings as they are in the file), the 1-D ones in the fp32 block: evaluation decodes
// each weight to bf16 on the device right before its product (the same operand as a
// folder's bf16 copy), decoding multiplies straight from the storage (dev_matvec).
//
// With GPU ranks (devmodel_init_ranks: a communicator of dist_nccl.h; ZeRO stage 1) each
// rank holds the fp32 master weights, Adam's moments and the mask of its own slice of the
// block only (dist_slice, as the host's train.c), and the bf16 copy and the gradients
// whole: 6 + 13/N bytes a parameter. The last micro-batch's backward
// (devmodel_backward_sum) sums the gradients over the ranks onto the slices' owners layer
// by layer as the backward finishes each; the norm, clipping and AdamW then cover the
// slice, and each owner's updated weights go to every rank as bf16 (the products'
// operands). The fp32 weights the forward reads as such (the embedding, the norms, the
// biases: a few percent of a model) are also held whole by every rank (d->rep) and shared
// in fp32 after each update, so that N ranks compute what one does. A communicator of one
// rank runs the same code with a slice of everything.
//
// The struct is visible in every build (a Trainer holds a pointer); the functions exist
// only in builds with CUDA. docs/cuda.md: what has run where.
struct CudaCtx;
#define DEV_REP_RANGES 16 // the most ranges of the block rep can hold (13 families at most)
typedef struct DevModel {
    struct CudaCtx *ctx;        // the stream and cuBLASLt handle everything goes to
    const Model *m;             // the host model this mirrors (sizes, table): outlives d
    size_t n_params;
    float *params;              // (own_hi - own_lo) fp32 master weights of this rank's slice, the
                                // host block's layout from own_lo (one rank: all of them); NULL
                                // evaluating a folder (DEVMODEL_EVAL: bf16 and rep alone)
    float *grads;               // (n_params); a mask update's scores between steps
    float *adam_m, *adam_v;     // (own_hi - own_lo) exp_avg, exp_avg_sq of this rank's slice
    uint16_t *wbf;              // (n_params) bf16 bits of every rank's params
    uint8_t *mask;              // (own_hi - own_lo) 1 = keep, of this rank's slice
    struct DevComm *comm;       // GPU ranks (dist/dist_nccl.h), or NULL: one rank
    size_t own_lo, own_hi;      // this rank's slice of the block (dist_slice; [0, n_params) alone)
    float *rep;                 // GPU ranks, and evaluating a folder: (n_rep) the fp32 weights the
                                // forward reads (the embedding, the norms, the biases: the rep
                                // ranges of the block, one after another); else NULL (in params)
    size_t rep_off[DEV_REP_RANGES], rep_len[DEV_REP_RANGES];
    int n_rep_r;
    size_t n_rep;
    void **dw;                  // (n_info) a model with stored weights (a pack; evaluation and
                                // decoding only): the device storage of each 2-D table entry
                                // (m->ext->ops->dev_upload), NULL for 1-D ones; else NULL
    uint16_t *wdec;             // stored, evaluation: one stored weight decoded to bf16
    size_t weight_bytes;        // device memory the weights take (all forms)
    ModelParams w, g;           // the fp32 weights the forward reads (into params; with rep the
                                // embedding, norms and biases into rep and the matrices NULL: the
                                // products read them as bf16 at their offsets); into grads
                                // (lm_head == embed when tied)
    size_t pr_off[8], pr_len[8]; // the prunable families: ranges of the block
    int n_pr;
    int B, T;
    size_t N;                   // B*T
    int recompute;              // layers share all activations but their input (res)
    int eval;                   // forward only: no gradients, moments, mask, backward scratch
    int decode;                 // DEVMODEL_DECODE: kc, vc (L, T, KVD), the keys and values cache
    float *kc, *vc;
    uint16_t *kcb, *vcb;        // the same cache in bf16 with BEST_KV=bf16 (kc, vc NULL; never run on a GPU)
    int kv_bf16;
    int32_t *step_in;           // decoding: (2) on the device, the step's token and position
    int32_t *host_in;           // (2) pinned host memory: the next step's token and position
    float *host_logits;         // (V) pinned host memory: the last step's logits
    struct CUgraphExec_st *graph; // the decode step, captured at the first token; NULL before
    struct CUgraphExec_st *graph_greedy; // the same ending in the greedy token (devmodel_forward_token_greedy)
    int32_t *next_dev;          // decoding: (1) on the device, the greedy token
    int32_t *host_next;         // (1) pinned host memory: its copy
    int no_graph;               // steps launched one by one (BEST_CUDA_GRAPH=0, or no capture)
    int gemv;                   // decoding a folder: its products by gemv_bf16_cuda on xr, not cuBLASLt
                                // (BEST_DECODE_GEMV=own or BEST_DECODE_FUSE=on; never run on a GPU)
    int fuse;                   // decoding: the products that share an input in one kernel
                                // (nn/decode_fused.h; BEST_DECODE_FUSE=on; never run on a GPU)
    int n_fused;                // of those, launched in the last decode step enqueued (the rest
                                // fell back to the unfused kernels)
    float *dec_part;            // decoding with BEST_DECODE_ATTN=split: attention_decode_split_cuda's
                                // chunk states (never run on a GPU); else NULL
    int dec_split;
    LayerActs *layer;           // (L) host array of device pointers
    float *resf, *rstdf, *xnf;  // (N, C), (N), (N, C)
    size_t ce_rows;             // rows of logits per lm_head + cross-entropy chunk
    float *logits;              // (ce_rows, V) one chunk; dlogits in the backward
    uint16_t *logits_bf;        // (ce_rows, V) the chunk's dlogits as bf16
    float *nll;                 // (N)
    float *rope_cos, *rope_sin; // (T, HD/2)
    float *dres, *dxn;          // (N, C)
    float *datt, *dq;           // (N, Q)
    float *dk, *dv;             // (N, KVD)
    float *dkh, *dvh;           // (B, NH, T, HD)
    float *dh, *dgate, *dup;    // (N, I)
    uint16_t *xbf, *dybf;       // (N, max(C, Q, I)) bf16 operands of one product
    float *xr;                  // (max(C, Q, I)) stored, decoding: xbf as floats (a matvec's x)
    float *scratch;             // RMSNorm weight-gradient partials, bias-gradient scratch
    double *part;               // (DEV_RED_BLOCKS) partial sums of a reduction
    double *scalars;            // (4) reduction results, copied to the host
    int32_t *tokens, *targets;  // (N)
    int32_t *emb_index;         // training: (3 N + 1) the rows of each token (embedding_index), for the
    int32_t *host_index;        // embedding's backward; and its host copy, built by the forward
    size_t n_uniq;              // the distinct tokens of the last forward
    int32_t *rows_pos, *rows_vis; // DEVMODEL_EVAL: (N), (N, 3) devmodel_forward_packed's positions and keys
    float *acts;                // the one allocation behind the activations above
    size_t acts_bytes;
    int has_targets, n_valid;   // of the last forward
    size_t n_rows;              // and its rows (N, or devmodel_forward_packed's n)
    float loss;                 // mean NLL of the last forward (0 without a target)
    double nll_sum;             // its sum over the targets, in double (perplexity)
    double sumsq_total;         // devmodel_grad_sumsq_put's, the source of its copy
    struct DevProf *prof;       // --profile: events at the phase boundaries (NULL: off)
    int attn_cudnn;             // the training step's attention runs through cuDNN (BEST_ATTN=cudnn,
                                // attention_cudnn.h; never run on a GPU): s->lse then holds its statistics
    uint16_t *attn_bf;          // with it: (N (4 Q + 4 KVD)) bf16 q, o, k, v, dout, dq, dk, dv
} DevModel;

// The phases of a training step that devmodel_profile times (docs/best-train.md,
// "--profile"): the forward per layer, the head, the backward per layer, and the step's
// parts around them (train.c marks clip, optimizer and mask update).
enum {
    DP_ZERO, DP_EMBED, DP_NORM, DP_QKV, DP_ROPE, DP_ATTN, DP_O, DP_GATE_UP, DP_SWIGLU, DP_DOWN, DP_HEAD,
    DP_BWD_HEAD, DP_BWD_DOWN, DP_BWD_SWIGLU, DP_BWD_GATE_UP, DP_BWD_NORM, DP_BWD_O, DP_BWD_ATTN, DP_BWD_ROPE,
    DP_BWD_QKV, DP_BWD_EMBED, DP_COLLECTIVE, DP_CLIP, DP_OPTIM, DP_MASK,
    DP_N
};

// devmodel_init's flags.
enum {
    // keep each layer's input only and run the layer's forward again (but its down
    // projection) in the backward: the same bits for a fraction of the memory
    // (docs/best-train.md), a quarter more compute
    DEVMODEL_RECOMPUTE = 1,
    // forward only (perplexity): the bf16 copy of the weights (2 bytes a parameter) and
    // the embedding, norms and biases in fp32 (rep), one layer's activations;
    // devmodel_backward, the optimizer, devmodel_upload and devmodel_download refuse it
    DEVMODEL_EVAL = 2,
    // DEVMODEL_EVAL and a cache of keys and values for T positions: one token at a time
    // (devmodel_forward_token, generation); B must be 1
    DEVMODEL_DECODE = 4,
};

#ifdef BEST_CUDA
// Allocates d for m (whose weights it uploads; gradients and moments zero, mask all
// ones) and activations for (B, T); ce_rows: rows of logits per chunk (0 = as many as
// 2^26 floats of logits hold, at least 1); flags: DEVMODEL_*. 0, or ERR (out of device
// memory: how much was asked).
int devmodel_init(DevModel *d, struct CudaCtx *c, const Model *m, int B, int T, size_t ce_rows,
                  int flags);
// devmodel_init for one of the GPU ranks of comm (NULL: one rank, devmodel_init): d holds
// the fp32 weights, moments and mask of the rank's slice only, and rep; not for
// DEVMODEL_EVAL.
int devmodel_init_ranks(DevModel *d, struct CudaCtx *c, const Model *m, int B, int T, size_t ce_rows,
                        int flags, struct DevComm *comm);
void devmodel_free(DevModel *d);
// Bytes of device memory devmodel_init takes for m at (B, T) with flags: 19 per parameter
// (fp32 weights, gradients and both moments, the bf16 copy, the mask; with
// DEVMODEL_EVAL 2, and 4 per parameter of the embedding, norms and biases; stored
// weights: what their matvec reads, the largest one again as bf16 for evaluation, up to
// 1.75 KiB of alignment each not counted) and the activations
// (*acts_bytes, may be NULL); the cuBLASLt workspace not included. With ranks > 0,
// devmodel_init_ranks' on a communicator of that many ranks, for the largest slice (rank
// 0's): 6 per parameter (gradients, bf16 copy), 13 per parameter of the slice (fp32
// weights, moments, mask), 4 per parameter of rep (embedding, norms, biases). Needs no GPU
// and no weights: model_plan's table is enough.
size_t devmodel_bytes(size_t *acts_bytes, const Model *m, int B, int T, size_t ce_rows, int flags, int ranks);
// Uploads the host's weights (all n_params; they refresh the bf16 copy), moments (opt, or
// NULL: left as they are) and mask (NULL: all ones), the last two of this rank's slice
// (own_hi - own_lo elements, as train.c holds them). With ranks the whole block passes
// through the gradients' memory, which it leaves zero: call it between steps.
void devmodel_upload(DevModel *d, const float *params, const AdamW *opt, const uint8_t *mask);
// Downloads the weights into params (n_params; with ranks only this rank's slice
// [own_lo, own_hi): dist_gather assembles the block) and, with opt, the slice's moments
// into opt->m and opt->v (opt->t is the host's); waits for the device.
void devmodel_download(const DevModel *d, float *params, AdamW *opt);
// After this rank's fp32 weights changed in [a, b) of the block (every rank calls it, with
// the same range): each owner's part of [a, b) into every rank's bf16 copy, and with ranks
// also into every rank's rep (fp32) where rep holds it.
void devmodel_share_weights(DevModel *d, size_t a, size_t b);
// Downloads the gradients into grads (n_params) (tests).
void devmodel_download_grads(const DevModel *d, float *grads);
// Downloads the slice's mask into mask (own_hi - own_lo): after a mask update on the device (mask.h's
// mask_update_cuda), before the host saves it.
void devmodel_download_mask(const DevModel *d, uint8_t *mask);
// nll (d->n_rows): the last forward's NLL of each row (0 where its target was -1).
void devmodel_download_nll(const DevModel *d, float *nll);
// model_forward on the device: the same checks, d->loss and d->n_valid set, the loss
// returned through d->loss (the only value that comes back). -1 after ERR.
int devmodel_forward(DevModel *d, const int32_t *tokens, const int32_t *targets);
// model_forward_packed on the device (DEVMODEL_EVAL, B = 1: T rows at most, positions
// below T): n rows, row i token tokens[i] at position pos[i], target targets[i] (-1:
// none), in the segments seg (nseg, 4) of layers.h's attention_packed, which must cover
// the n rows once each; the loss and nll as devmodel_forward's (devmodel_download_nll:
// each row's). -1 after ERR (a token, target or position out of range, bad segments).
int devmodel_forward_packed(DevModel *d, const int32_t *tokens, const int32_t *pos, const int32_t *targets,
                            size_t n, const int32_t *seg, size_t nseg);
// model_forward_token on the device (DEVMODEL_DECODE): token at position pos (< d->T,
// positions 0 .. pos-1 already fed), its keys and values appended to the cache; logits
// (V) on the host. -1 after ERR (a token outside the vocabulary, pos past the cache).
// The step is one CUDA graph (all layers, the cache append, attention over the cache, the
// head, the logits' copy back), captured at the first call and replayed with the token and
// position that the host writes into pinned memory before each launch; BEST_CUDA_GRAPH=0
// in the environment launches the same work one kernel at a time instead.
int devmodel_forward_token(float *logits, DevModel *d, int32_t token, size_t pos);
// devmodel_forward_token for greedy decoding: *next = the argmax of the step's logits as
// eval.c's sample_token at temperature 0 picks it, found on the device (argmax_cuda), so
// that 4 bytes come back instead of the V logits. Its own graph (BEST_CUDA_GRAPH as above).
// -1 after ERR.
int devmodel_forward_token_greedy(int32_t *next, DevModel *d, int32_t token, size_t pos);
// model_backward on the device: adds the gradient of loss_scale * d->loss into d->grads.
void devmodel_backward(DevModel *d, float loss_scale);
// devmodel_backward for a step's last micro-batch: with GPU ranks, each layer's gradients
// are then summed over the ranks onto their owners (dist_nccl.h) while the backward goes
// on; the slice's gradients are the step's when the next call on d's stream runs.
void devmodel_backward_sum(DevModel *d, float loss_scale);
// devmodel_forward then devmodel_backward (sum 0) or devmodel_backward_sum (sum 1), with
// the head's backward done in the forward while each chunk's logits are there, so the
// lm_head product runs 3 times a micro-batch instead of 4: the same bits (test_step).
// best-train's step; loss_scale > 0. -1 after ERR (a token or target out of range).
int devmodel_forward_backward(DevModel *d, const int32_t *tokens, const int32_t *targets, float loss_scale,
                              int sum);
void devmodel_zero_grad(DevModel *d);
// With masked, the slice's gradients of pruned weights are set to 0 first (as
// mask_apply); then the slice's sum of squares in double, a fixed-order reduction (the
// same bits every run on a given GPU; not grad_sumsq's order). The ranks add theirs.
double devmodel_grad_sumsq(DevModel *d, int masked);
// The slice's grads *= s.
void devmodel_grad_scale(DevModel *d, float s);
// adamw_step's update number t of the slice on the device (with the device mask when
// masked), the weights shared among GPU ranks, then the bf16 copy refreshed.
void devmodel_adamw(DevModel *d, const AdamWHyper *h, int t, int masked);
// The one-pass optimizer (train.c's default; the three calls above stay as its reference):
// devmodel_grad_sumsq_start enqueues the slice's sum of squares of the gradients, masked
// as devmodel_grad_sumsq's (the same bits) but without writing them, and leaves it on the
// device; devmodel_grad_sumsq_get waits for it and returns it; with ranks,
// devmodel_grad_sumsq_put gives the device the sum of every rank's. devmodel_optimize
// then clips by max_norm (<= 0: no clipping) with the coefficient formed on the device
// from that sum, and runs masked AdamW and the bf16 copy in one kernel
// (adamw_fused_cuda; vec 4 or 1), and shares the weights as devmodel_adamw: the bits of
// devmodel_grad_sumsq, grad_clip_coef, devmodel_grad_scale and devmodel_adamw. A
// non-finite sum leaves weights and moments as they were. No host round trip on one rank.
void devmodel_grad_sumsq_start(DevModel *d, int masked);
double devmodel_grad_sumsq_get(DevModel *d);
void devmodel_grad_sumsq_put(DevModel *d, double total);
void devmodel_optimize(DevModel *d, const AdamWHyper *h, int t, int masked, double max_norm, int vec);
// Zeros among the prunable weights, over their count (model_sparsity's).
double devmodel_sparsity(DevModel *d);
// Waits until the device has done everything enqueued on d's stream (the optimizer's
// update, say), so that a clock read after it times the work and not its launch.
void devmodel_sync(DevModel *d);
// --profile: from here on, d records a CUDA event at each phase boundary of a step
// (devmodel_profile_mark; the forward, head and backward mark their own) and
// devmodel_profile_step, at the end of each step, adds each interval's device time to
// its phase; devmodel_profile_write prints the table: per phase the mean ms per step
// (steps after the first, when there are more), its share of the step, the calls, and
// for the products and attention the FLOPs and TFLOP/s. wall_ms: the host clock's mean
// step, shown beside the device's. Freed by devmodel_free.
void devmodel_profile_start(DevModel *d);
void devmodel_profile_mark(DevModel *d, int phase, double flops);
void devmodel_profile_step(DevModel *d);
void devmodel_profile_write(const DevModel *d, FILE *f, double wall_ms);
#endif

#ifdef __cplusplus
}
#endif

#endif
