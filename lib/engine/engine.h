// engine.h: the seam between the run layer and the device a model runs on. One table of
// operations (EngineOps, below) per device: the CPU's (engine.c: model.c's forward
// passes) and CUDA's (engine_cuda.c: model.cu's DevModel). The run layer (lib/run) asks
// an Engine and never which device it is: no #ifdef BEST_CUDA there or in tools/
// (tests/t_layout.sh checks it).
//
// engine_pick holds the default-device rule, the one place it is decided: the GPU when
// one is visible, else the CPU; "cuda" asked of a build without CUDA or a machine
// without a usable GPU is an error naming why (cuda_info). engine_open picks and
// creates the device's context (CUDA: its stream, cuBLASLt handle and workspace).
//
// The operations, each a session opened on a Model and closed by the caller:
//   windows (EngineWin)  perplexity: the summed NLL of (nb, seq) windows of tokens, each
//                        predicting the targets given (-1: none); at most `batch` windows
//                        a call. CPU: model_eval in fp32 (a last smaller batch gets its own
//                        activations); CUDA: devmodel_forward (DEVMODEL_EVAL: bf16
//                        products, fp32 elsewhere; a last smaller batch padded with
//                        copies of its first window, without targets).
//   rows (EngineRows)    zero-shot scoring: packed batches of rows, each row at its own
//                        position in its own segments (layers.h's attention_packed),
//                        the NLL of the scoring rows subtracted from their requests'
//                        loglikelihoods in row order. CPU: model_forward_packed and
//                        model_packed_logits; CUDA: devmodel_forward_packed.
//   decode (EngineDec)   generation: one token at a time through a keys/values cache of
//                        max_T positions, the logits (V) of each step; on the device the
//                        greedy token can also come back alone (4 bytes a step).
//   oneshot              best-mask --method: magnitude, Wanda or SparseGPT over the whole
//                        model, block by block from calibration windows (sparse/calib.h).
//                        CPU: oneshot_prune (fp32, OpenBLAS and LAPACK); CUDA:
//                        oneshot_prune_cuda (one block's weights on the device at a time,
//                        bf16 products, cuBLASLt and cuSOLVER; never run on a GPU as of
//                        2026-11-29).
//   train (EngineTrain)  the training step: gradients over micro-batches, the clip and
//                        AdamW, the sparsity, and on a device the mask update and the
//                        host's copies brought up to date. CPU: model.c's forward and
//                        backward in fp32 on the host's own block (its gradients
//                        reduce-scattered over the ranks, dist.h), AdamW on this rank's
//                        slice; the mask update is the host's (run/train.c, mask.h's
//                        mask_compute_slice). CUDA: model.cu's DevModel with its own
//                        weights, gradients, moments and mask, under mpirun one GPU a rank
//                        and NCCL between them (dist_nccl.h), the mask update there too
//                        (sparse/mask.cu).
//
// The engine sits above sparse/ and pack/ (the device's mask update is sparse's) and below
// run/ (tests/t_layout.sh).
#ifndef BEST_ENGINE_H
#define BEST_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nn/adamw.h"     // defines: AdamW, AdamWHyper
#include "nn/model.h"     // defines: Model
#include "sparse/calib.h" // defines: OneShotSpec, OneShotStats
#include "sparse/mask.h"  // defines: MaskSpec

typedef enum { ENGINE_CPU = 0, ENGINE_CUDA = 1 } EngineKind;

typedef struct Engine Engine;

// *kind = the device a run takes: name "cpu", "cuda", or NULL/"" (the default: CUDA when
// a GPU is visible, else the CPU). 0, or -1 after ERR ("--device cuda: ...; use --device
// cpu") when CUDA is asked and this build or machine has none usable; an unknown name
// is an ERR too.
int engine_pick(EngineKind *kind, const char *name);
// *out = the engine of engine_pick(name), on GPU `device` for CUDA; ENGINE_LOCAL_GPU:
// under mpirun the GPU of this rank's local rank (one rank a GPU: ERR when mpirun started
// more ranks on this machine than it has GPUs), else GPU 0. 0, or -1 after ERR.
#define ENGINE_LOCAL_GPU (-1)
int engine_open(Engine **out, const char *name, int device);
void engine_close(Engine *e); // NULL is fine
EngineKind engine_kind(const Engine *e);
const char *engine_name(const Engine *e); // "cpu", "cuda"

// --- windows: perplexity --------------------------------------------------------------------
typedef struct {
    Engine *e;
    void *s; // the device's state
} EngineWin;

// The most windows of seq tokens (at most max and nwin, at least 1) whose activations fit
// the memory the device has free (CPU: a quarter of the memory available now; CUDA: half
// of the device's free memory, never run on a GPU as of 2026-11-29).
int engine_win_auto_batch(Engine *e, const Model *m, int seq, size_t nwin, int max);
int engine_win_open(EngineWin *w, Engine *e, const Model *m, int batch, int seq);
// Adds to *total (a double: 10^5 .. 10^7 terms) the NLL of x's targets, x and targets
// (nb, seq), nb <= batch: term by term in order on the CPU, the device's sum (in double,
// in a fixed order) on CUDA. -1 after ERR.
int engine_win_nll(double *total, EngineWin *w, const int32_t *x, const int32_t *targets, int nb);
size_t engine_win_device_bytes(const EngineWin *w); // the model and activations on a GPU; 0 on the CPU
void engine_win_close(EngineWin *w);

// --- rows: zero-shot scoring ----------------------------------------------------------------
typedef struct {
    Engine *e;
    void *s;
} EngineRows;

// A packed batch: rows (n) of tokens at positions pos, in segments seg (nseg, 4); the
// scoring rows score_row (n_score), the token each predicts (target) and the request it
// adds to (score_req).
typedef struct {
    const int32_t *tok, *pos;
    size_t n;
    const int32_t *seg;
    size_t nseg;
    const int32_t *score_row, *target;
    const size_t *score_req;
    size_t n_score;
} EngineBatch;

int engine_rows_open(EngineRows *r, Engine *e, const Model *m);
// Room for batches in which a segment sees up to `longest` rows; *max_rows = the rows a
// batch may hold (at least longest). 0, or -1 after ERR.
int engine_rows_reserve(EngineRows *r, size_t longest, size_t *max_rows);
// ll[score_req[k]] -= the NLL of score_row[k] predicting target[k], k in order.
int engine_rows_score(EngineRows *r, double *ll, const EngineBatch *b);
void engine_rows_close(EngineRows *r);

// --- decode: generation ---------------------------------------------------------------------
typedef struct {
    Engine *e;
    void *s;
} EngineDec;

// On a GPU, what decoding took there: the weights (a pack: in its encodings), all of the
// model with its cache and activations, cudaMemGetInfo's use before the model went up,
// once it was up and now; whether the steps ran as CUDA graphs; the fused product kernels
// of a step (BEST_DECODE_FUSE=on). All 0 on the CPU.
typedef struct {
    size_t weight_bytes, bytes;
    size_t mem_before, mem_loaded, mem_now;
    int cuda_graph, fused;
} EngineDecStats;

int engine_dec_open(EngineDec *d, Engine *e, const Model *m, int max_T);
// The logits (V) of token at position pos, valid until the next step; NULL after ERR.
const float *engine_dec_step(EngineDec *d, int32_t token, int pos);
// Whether engine_dec_greedy is there (CUDA, unless BEST_GREEDY_LOGITS=1).
int engine_dec_has_greedy(const EngineDec *d);
// The step, and *next = the argmax of its logits (lowest id on ties) without copying
// them back. 0, or -1 after ERR.
int engine_dec_greedy(EngineDec *d, int32_t token, int pos, int32_t *next);
void engine_dec_stats(EngineDecStats *st, const EngineDec *d);
void engine_dec_close(EngineDec *d);

// --- oneshot: best-mask --method ------------------------------------------------------------

// calib.h's oneshot_prune on the engine's device: m's prunable weights pruned in place (and
// SparseGPT's kept ones updated), mask (m->n_params) 1 = kept, st (may be NULL) the
// phases' seconds and the device memory. windows (n, seq): calibration tokens (NULL for
// magnitude); pr (may be NULL) counts blocks. 0, or -1 after ERR.
int engine_oneshot(Engine *e, uint8_t *mask, OneShotStats *st, Model *m, const OneShotSpec *spec,
                   const int32_t *windows, int n, int seq, Progress *pr);

// --- train: the training step on a device ------------------------------------------------
typedef struct {
    Engine *e;
    void *s;
} EngineTrain;

typedef struct {
    int micro_batch, seq;
    int recompute; // keep each layer's input only, recompute the rest in the backward pass
    int profile;   // time the step's phases (engine_train_profile_write)
} EngineTrainShape;

// The gradients of one step of batch sequences: this rank's share of them (tokens and
// targets, batch / ranks sequences, read by the caller) in micro-batches of micro_batch,
// the mean loss; masked: only kept weights get gradients. passes: the optimizer of
// separate passes (the sum of squares comes back here) rather than the one-pass one.
typedef struct {
    const int32_t *tokens, *targets; // (batch / ranks, seq)
    int batch, micro_batch, seq, masked, passes;
    int step; // for errors: "step N: ..."
    const uint8_t *mask; // the host's: this rank's slice [lo, hi) of the block (the CPU's step)
    size_t lo, hi;
} EngineGrads;

// The optimizer of one step, after engine_train_grads: the gradient norm clipped to clip
// (0: off), then AdamW (h, its step t) on the kept weights (masked) or all of them. vec:
// the one-pass optimizer's vector width (4; 1 for fused1); passes: the separate passes.
// sumsq: the squared gradient norm summed over the ranks, or NaN when it stayed on the
// device (engine_train_norm_later). opt: the host's moments of the slice [lo, hi) (the
// CPU updates them; a device counts the step in opt->t, its moments being its own), mask
// the host's slice.
typedef struct {
    const AdamWHyper *h;
    int t, masked, passes, vec;
    double clip, sumsq;
    AdamW *opt;
    const uint8_t *mask;
    size_t lo, hi;
} EngineOptim;

// The step's buffers: on the CPU m's gradients and the activations of one micro-batch; on
// a device its model, with the host's params (every parameter), opt and mask (this
// rank's slice; NULL: all kept) uploaded.
int engine_train_open(EngineTrain *t, Engine *e, Model *m, const AdamW *opt, const uint8_t *mask,
                      const EngineTrainShape *sh);
void engine_train_close(EngineTrain *t);
// Whether the step's weights, moments and mask are the device's own (the host's copies
// are then brought up to date by engine_train_download before they are read).
int engine_train_on_device(const EngineTrain *t);
// Whether the gradient's norm stays on the device until the optimizer has run (one rank,
// the one-pass optimizer): engine_train_grads then gives NaN for it.
int engine_train_norm_later(const EngineTrain *t, int passes);
// The device's weights, moments (opt; may be NULL) and mask into the host's (this rank's
// slice of the weights with GPU ranks), and back; nothing on the CPU.
void engine_train_download(EngineTrain *t, float *params, AdamW *opt, uint8_t *mask);
void engine_train_upload(EngineTrain *t, const float *params, const AdamW *opt, const uint8_t *mask);
// *loss = the mean loss of this rank's sequences; *sumsq = their squared gradient norm,
// NaN when it stays on the device (one rank, one-pass optimizer). -1 after ERR.
int engine_train_grads(EngineTrain *t, double *loss, double *sumsq, const EngineGrads *g);
// The optimizer, waited for; *norm (the gradient norm, the clip's input) is set when
// o->sumsq was NaN.
void engine_train_optimize(EngineTrain *t, double *norm, const EngineOptim *o);
// The mask update on the device (sparse/mask.h's mask_update_cuda): 0 done, 1 not done
// here (the CPU's; or bad inputs: the host's mask_compute gives the message), -1 after
// ERR.
int engine_train_mask_update(EngineTrain *t, const MaskSpec *spec);
// Marks the mask update's start in the profile, and waits for its end.
void engine_train_mask_begin(EngineTrain *t);
void engine_train_mask_end(EngineTrain *t);
// A step ended after wall seconds on the host's clock: the profile's step, and the
// device memory in use measured after the first.
void engine_train_step_end(EngineTrain *t, double wall);
double engine_train_sparsity(EngineTrain *t); // the zero share of the prunable weights (model_sparsity)
// Payload bytes put into the device's collectives so far (NCCL); whether the GPU ranks
// talk over NCCL (under mpirun, one rank too).
double engine_train_comm_bytes(const EngineTrain *t);
int engine_train_nccl(const EngineTrain *t);
// Bytes in use on the device after the first step (cudaMemGetInfo), and computed.
void engine_train_memory(const EngineTrain *t, size_t *measured, size_t *computed);
// Whether steps were timed (EngineTrainShape.profile, and at least one step ended), and
// the profile's table (the device's phases, ms per step, and the memory) written to f.
int engine_train_profiled(const EngineTrain *t);
void engine_train_profile_write(EngineTrain *t, FILE *f);

// --- the table each device fills ------------------------------------------------------------
typedef struct {
    const char *name;
    int (*open)(void **ctx, int device);
    void (*close)(void *ctx);
    size_t (*win_bytes)(const Model *m, int batch, int seq);
    double (*win_budget)(void *ctx);
    int (*win_open)(void **s, void *ctx, const Model *m, int batch, int seq);
    int (*win_nll)(double *total, void *s, const int32_t *x, const int32_t *targets, int nb);
    size_t (*win_device_bytes)(const void *s);
    void (*win_close)(void *s);
    int (*rows_open)(void **s, void *ctx, const Model *m);
    int (*rows_reserve)(void *s, size_t longest, size_t *max_rows);
    int (*rows_score)(void *s, double *ll, const EngineBatch *b);
    void (*rows_close)(void *s);
    int (*dec_open)(void **s, void *ctx, const Model *m, int max_T);
    const float *(*dec_step)(void *s, int32_t token, int pos);
    int (*dec_greedy)(void *s, int32_t token, int pos, int32_t *next); // NULL: none
    void (*dec_stats)(EngineDecStats *st, const void *s);
    void (*dec_close)(void *s);
    int (*oneshot)(void *ctx, uint8_t *mask, OneShotStats *st, Model *m, const OneShotSpec *spec,
                   const int32_t *windows, int n, int seq, Progress *pr);
    // the training step (those of a device only: NULL on the CPU)
    int (*train_open)(void **s, void *ctx, Model *m, const AdamW *opt, const uint8_t *mask,
                      const EngineTrainShape *sh);
    int on_device;    // the step's state is the device's (download, upload, mask update, memory, profile)
    int (*train_norm_later)(int passes);
    void (*train_close)(void *s);
    void (*train_download)(void *s, float *params, AdamW *opt, uint8_t *mask);
    void (*train_upload)(void *s, const float *params, const AdamW *opt, const uint8_t *mask);
    int (*train_grads)(void *s, double *loss, double *sumsq, const EngineGrads *g);
    void (*train_optimize)(void *s, double *norm, const EngineOptim *o);
    int (*train_mask_update)(void *s, const MaskSpec *spec);
    void (*train_mask_begin)(void *s);
    void (*train_mask_end)(void *s);
    void (*train_step_end)(void *s, double wall);
    double (*train_sparsity)(void *s);
    double (*train_comm_bytes)(const void *s);
    int (*train_nccl)(const void *s);
    void (*train_memory)(const void *s, size_t *measured, size_t *computed);
    int (*train_profiled)(const void *s);
    void (*train_profile_write)(void *s, FILE *f);
} EngineOps;

extern const EngineOps engine_cpu_ops;
// CUDA's table, or NULL in a build without CUDA (engine_cuda.c).
extern const EngineOps *const engine_cuda_ops;

#endif
