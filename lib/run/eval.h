// eval.h: what best-eval measures: perplexity over token windows, and generation.
//
// Perplexity follows the protocol of the pruning literature (SparseGPT, Wanda): the
// text is tokenized once, cut into non-overlapping windows of `seq` tokens (the
// remainder that does not fill a window is dropped, as they do; a text shorter
// than one window is one window), each window predicts its own tokens 1..seq-1
// from the ones before (shift by one), and ppl = exp(total nll / predicted tokens).
// With equal windows this equals their exp(mean over windows of the window's mean
// loss). Not here: reading text or shards (tools/best-eval), the model (model.h).
#ifndef BEST_EVAL_H
#define BEST_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"     // defines: Engine
#include "nn/model.h"      // defines: Model
#include "base/progress.h" // defines: Progress
#include "base/vec.h"      // defines: IdVec

typedef struct {
    double nll;        // total negative log-likelihood (nats)
    uint64_t tokens;   // predicted tokens
    int windows, seq;
    double ppl;        // exp(nll / tokens)
    int batch;         // the windows a forward pass took (the one asked for, or the one chosen)
    size_t device_bytes; // on a CUDA device: what the model and the activations took there
} PplResult;

// tokens (n); windows of seq evaluated `batch` at a time on the engine e (engine.h: the
// CPU in fp32; CUDA in bf16 matrix products, fp32 elsewhere; a pack's weights stay
// packed on the device, each decoded to bf16 right before its product). batch 0: as many
// as fit the memory the engine has free, at most EVAL_AUTO_BATCH_MAX (the same
// perplexity, in fewer and larger products). Progress counts windows.
#define EVAL_AUTO_BATCH_MAX 16
int eval_perplexity(PplResult *r, Engine *e, const Model *m, const int32_t *tokens, size_t n, int seq, int batch,
                    Progress *pr);

typedef struct {
    float temperature;   // 0 = greedy (argmax, lowest id on ties)
    float top_p;         // nucleus sampling mass, 1 = off
    uint64_t seed;
    int max_new_tokens;
    const int32_t *stop; // generation ends after one of these ids (EOS)
    int n_stop;
} GenOptions;

// Where generation spent its time: the prompt's forward passes, then decoding (one
// forward pass and one sample per new token after the first; on_token not counted).
typedef struct {
    double prompt_seconds;
    double decode_seconds;
    int decode_tokens;   // forward passes after the prompt
    // on a CUDA device: what the weights took there (a pack: in its encodings), and all of
    // the model with its keys/values cache and activations (not cuBLASLt's workspace)
    size_t device_weight_bytes, device_bytes;
    // measured there (cudaMemGetInfo, the whole device's use: this process's context and
    // allocations, and any other process's): before the model went up, once it was up,
    // and after the last token (decoding allocates nothing: its peak); whether the decode
    // steps ran as CUDA graphs; the fused product kernels of a step (BEST_DECODE_FUSE=on)
    size_t device_mem_before, device_mem_loaded, device_mem_after;
    int cuda_graph, decode_fused;
} GenStats;

// Appends to out the tokens generated after prompt (n_prompt >= 1), through the engine's
// keys/values cache (on CUDA: cached on the device, bf16 matrix products, a pack's
// products straight from its encodings, spmv.h; at temperature 0 only the greedy token
// comes back). on_token (may be NULL) is called after each new token but a stop token
// (which ends the text and is not part of it; out still ends with it), for streaming
// output; a nonzero return ends generation there (a stop string seen). st may be NULL.
int eval_generate(IdVec *out, GenStats *st, Engine *e, const Model *m, const int32_t *prompt, size_t n_prompt,
                  const GenOptions *o, int (*on_token)(const IdVec *so_far, void *ctx), void *ctx);

// Picks the next token from logits (V): argmax at temperature 0, else a sample from
// softmax(logits / T) restricted to the smallest set whose mass reaches top_p.
// rng: the state of a 64-bit generator, advanced by one draw.
int32_t sample_token(const float *logits, int V, float temperature, float top_p, uint64_t *rng,
                     float *scratch /* (2V) */);

#endif
