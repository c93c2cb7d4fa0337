// mask.h: a model's pruning mask: computing it from scores, and its file.
//
// A mask is uint8, one byte per parameter of the block (model.h), 1 = keep, laid out
// like the weights (adamw.h applies it). Only prunable tensors (the seven Linear
// weights of each block) are ever 0; the others are all 1.
//
// Computing: mask_compute scores every prunable weight (saliency.h), streams the
// scores chunk by chunk through the radix select (select.h) and keeps exactly
// k = select_keep_count(S, n_prunable) weights of the whole model (group global), or
// of each tensor (group layer). With an old mask the weights it pruned are not
// candidates at all, so a new mask only shrinks the old one.
//
// File (docs/formats.md, "Masks"): safetensors with one tensor per prunable parameter
// under the parameter's HF name, BOOL with the parameter's shape (default), or U8
// bit-packed (shape (ceil(numel/8),), weight i in bit i%8 of byte i/8, LSB first,
// metadata "packing": "bits" and "shape:NAME": "[out,in]"). Metadata: format
// "best-mask", version "1", sparsity, saliency, group, step, prunable, kept, and method
// and schedule when the maker names them (best-train: "BEST" and its schedule).
//
// Adam moments (best-train's dump, read here for scoring): safetensors with F32
// NAME.exp_avg and NAME.exp_avg_sq for each parameter NAME (all prunable ones at least).
//
// Not here: the threshold (select.h), scores (saliency.h), the optimizer step that
// keeps pruned weights at zero (nn/adamw.h), the reports of a mask (mask_report.h).
#ifndef BEST_MASK_H
#define BEST_MASK_H

#include <stddef.h>
#include <stdint.h>

#include "nn/params.h"       // defines: ParamInfo, params_check_finite
#include "io/safetensors.h"  // defines: SafeTensors
#include "sparse/nm.h"       // defines: NMPattern
#include "sparse/saliency.h" // defines: Saliency

#ifdef __cplusplus // mask.cu and the C++ tests include this
extern "C" {
#endif

typedef enum { GROUP_GLOBAL, GROUP_LAYER } MaskGroup;
int mask_group_parse(MaskGroup *out, const char *name); // "global", "layer"; -1 (no ERR) if unknown
const char *mask_group_name(MaskGroup g);

// Adam moments laid out like the block, either a dump file (mapped; read chunk by
// chunk, never copied whole) or arrays already in memory (best-train's own state).
typedef struct {
    SafeTensors st;          // the file, when opened from one
    int is_file;
    const StTensor **m, **v; // (n_info) NAME.exp_avg / NAME.exp_avg_sq, NULL if absent
    int n_info;
    const float *flat_m;     // (n) exp_avg of the block's elements [flat_lo, flat_lo + n), when
    const float *flat_v;     // (n) exp_avg_sq         from memory (a rank's slice, or all)
    size_t flat_lo;
} Moments;

// Opens a moment dump and checks it against the parameter table: every tensor is
// NAME.exp_avg or NAME.exp_avg_sq of a known parameter, F32, of its shape; every
// prunable parameter has both. Errors name the file and the tensor.
int moments_open(Moments *mo, const char *path, const ParamInfo *info, int n_info);
// Moments in memory: exp_avg and exp_avg_sq hold the block's elements from lo on (0: the
// whole block).
void moments_from_block(Moments *mo, const float *exp_avg, const float *exp_avg_sq, size_t lo);
void moments_close(Moments *mo);
// The dump's "step" metadata, or NULL.
const char *moments_step(const Moments *mo);

typedef struct {
    Saliency saliency;
    MaskGroup group;
    double sparsity;     // in [0, 1): the fraction of prunable weights set to 0
    const char *weights_from; // where the weights were read (a model folder), for messages;
                              // NULL: "the weights"
    int prune_floor;     // prune exactly floor(n * sparsity) of each group of n (the one-shot
                         // baselines count so), instead of keeping round((1 - sparsity) n)
    int nm_m, nm_keep;   // BEST with an N:M target (nm.h): every group of nm_m consecutive
                         // weights of a row keeps its nm_keep best still alive whatever the
                         // threshold (nm_protect); nm_m 0: no groups
} MaskSpec;

// mask (n_params) from the weights params (n_params) described by info (n_info).
// mo is needed by first and second order (NULL for magnitude). old (n_params) is an
// earlier mask or NULL: weights it pruned stay pruned. Group global needs the old mask
// to keep at least k weights (else an error: a mask only shrinks); group layer keeps
// min(k_t, what the old mask kept) in each tensor. A NaN or inf weight or moment, or a
// negative exp_avg_sq, is an ERR naming the file (spec->weights_from, the moments'
// file), the tensor and the element.
int mask_compute(uint8_t *mask, const MaskSpec *spec, const ParamInfo *info, int n_info,
                 const float *params, size_t n_params, const Moments *mo, const uint8_t *old);
// mask_compute on this rank's slice [lo, hi) of the block (dist.h), the ranks together:
// each scores only its slice, and the threshold comes from count-only sums over the
// ranks (select.h), so the ranks' slices put together are exactly mask_compute's mask
// (the same threshold, the same ties kept). mask and old (NULL or hi - lo) hold the
// slice; params is the whole block (only the slice is read); mo's flat moments, if in
// memory, may hold just the slice. Every rank calls it, with the same spec; an error on
// one rank (bad inputs in its slice) is an error on all (dist_agree), so none waits.
int mask_compute_slice(uint8_t *mask, const MaskSpec *spec, const ParamInfo *info, int n_info,
                       const float *params, size_t lo, size_t hi, const Moments *mo, const uint8_t *old);

// The device memory a mask update reads and writes, as spans of the parameter block
// (mask.cu): the parameter table, the prunable ranges of the block in its order
// (pr_off, pr_len: n_pr of them), this rank's slice [own_lo, own_hi) and in it the fp32
// weights, Adam's moments and the mask (own_hi - own_lo each, from own_lo); scores
// (n_params) scratch at the weights' own offsets, overwritten; the stream the work goes
// to; share(ctx, a, b), called after the pruned weights are zeroed: each owner's weights
// of [a, b) to every rank's copy that the products read (their bf16 copy).
typedef struct {
    const ParamInfo *info;
    int n_info;
    size_t n_prunable;
    const size_t *pr_off, *pr_len;
    int n_pr;
    size_t own_lo, own_hi;
    float *params;
    const float *adam_m, *adam_v;
    uint8_t *mask;
    float *scores;
    struct CUstream_st *stream;
    void (*share)(void *ctx, size_t a, size_t b);
    void *share_ctx;
} MaskSpans;

// mask_compute on the device, for best-train --device cuda: the new mask replaces
// ms->mask (the old one is the `old` mask), the weights it prunes become 0 (and
// ms->share passes them on), and no score leaves the device. The same mask as
// mask_compute on the downloaded weights and moments, bit for bit. Returns 0; 1 where
// mask_compute would fail on bad inputs (a NaN or infinite weight or moment, a negative
// exp_avg_sq; or fewer candidates than k): nothing but the scores changed, and
// mask_compute on the host gives the message naming the tensor and element; -1 after
// ERR (sparsity outside [0, 1)).
#ifdef BEST_CUDA // (the emulated tests include mask.cu, whose functions they make static)
int mask_update_cuda(const MaskSpans *ms, const MaskSpec *spec);

struct DevModel;
// The spans of a DevModel (nn/model.h) for mask_update_cuda: its slice's weights, moments
// and mask, d->grads as the scores (dead between a step's optimizer update and the next
// step's zero_grad: call the update there), its stream, devmodel_share_weights.
void mask_spans_of(MaskSpans *ms, struct DevModel *d);
#endif

// Ones in mask (n).
uint64_t mask_count(const uint8_t *mask, size_t n);
// x[i] = 0 where mask[i] == 0 (gradients before clipping, weights after loading).
void mask_apply(float *x, const uint8_t *mask, size_t n);

typedef struct {
    double sparsity;       // requested; NAN when not known
    const char *saliency;  // or NULL
    const char *group;     // or NULL
    long long step;        // -1 when not known
    int packed;            // write bit-packed U8 instead of BOOL
    const char *method;    // what made the mask ("BEST": best-train's schedule), or NULL
    const char *schedule;  // the sparsity schedule that reached it ("cubic"), or NULL
    long long steps;       // the steps of the run that made it (best-train), 0 when not known
    const char *pattern;   // "2:4" (sparse/nm.h), or NULL: unstructured
} MaskMeta;

// Writes the prunable tensors of mask (n_params) through temp + rename.
int mask_save(const char *path, const uint8_t *mask, const MaskMeta *meta, const ParamInfo *info, int n_info);
// Reads a mask file (BOOL or bit-packed) into mask (n_params); non-prunable entries
// become 1. Checks names, dtypes, shapes and 0/1 values against info; errors name the
// file and the tensor.
int mask_read(uint8_t *mask, const SafeTensors *st, const ParamInfo *info, int n_info, size_t n_params);
int mask_load(uint8_t *mask, const char *path, const ParamInfo *info, int n_info, size_t n_params);
// The N:M pattern a mask file says it has (metadata "pattern", sparse/nm.h; absent:
// unstructured), checked against mask (n_params, what mask_load read from path): every
// prunable tensor's groups keep at most N of M. 0, or ERR (a malformed pattern, or a tensor
// that breaks it, named with its count of such groups).
int mask_file_pattern(NMPattern *out, const char *path, const uint8_t *mask, const ParamInfo *info, int n_info);

// Where a prunable tensor sits: *layer and the module index (0..6 = q, k, v, o, gate,
// up, down) from its HF name; -1 for any other name.
int mask_module_of(int *layer, const char *name);
extern const char *const MASK_MODULES[7];  // "q", "k", "v", "o", "gate", "up", "down"

#ifdef __cplusplus
}
#endif

#endif
