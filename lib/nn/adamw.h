// adamw.h: the optimizer of the CPU path: AdamW exactly as torch.optim.AdamW
// (single-tensor implementation of torch 1.13-2.x: bias correction, decoupled weight
// decay, fp32 moments), global gradient-norm clipping as
// torch.nn.utils.clip_grad_norm_; a mask keeps pruned weights at zero through a step.
//
// Everything works on flat arrays laid out like the parameter block (model.h), so a
// rank that owns a slice of the block (ZeRO stage 1) passes pointers into that slice
// and the same offsets into the mask. A mask is uint8, one per parameter, 1 = keep.
//
// Not here: which weights a mask keeps (sparse/mask.h), learning-rate schedules.
#ifndef BEST_ADAMW_H
#define BEST_ADAMW_H

#include <stddef.h>
#include <stdint.h>

#include "nn/kernel_math.h" // defines: AdamWScalars

#ifdef __cplusplus // adamw.cu includes this
extern "C" {
#endif

typedef struct {
    double lr, beta1, beta2, eps, weight_decay; // torch's defaults: 1e-3, 0.9, 0.999, 1e-8, 1e-2
} AdamWHyper;

typedef struct {
    float *m;     // (n) exp_avg
    float *v;     // (n) exp_avg_sq
    size_t n;
    int t;        // steps taken so far
} AdamW;

void adamw_init(AdamW *o, size_t n);  // moments zero, t = 0
void adamw_free(AdamW *o);

// The float scalars of step t (1-based) as torch forms them from h's doubles; the CPU
// update and the CUDA kernel take these.
AdamWScalars adamw_scalars(const AdamWHyper *h, int t);
// One AdamW step, number t (1-based), over w, m, v, g (n). With a mask, positions with
// mask 0 see a zero gradient (their moments decay as torch's would) and their weight is
// set to 0 after the update.
void adamw_update(float *w, float *m, float *v, const float *g, const uint8_t *mask,
                  const AdamWHyper *h, int t, size_t n);
// adamw_update over the whole block with o's moments; increments o->t first.
void adamw_step(AdamW *o, float *w, const float *g, const uint8_t *mask, const AdamWHyper *h);

// Sum of squares of g (n) in double, in a fixed order (the same for any thread count).
// Ranks add theirs before the square root.
double grad_sumsq(const float *g, size_t n);
// clip_grad_norm_'s factor: min(1, max_norm / (norm + 1e-6)); 1 for max_norm <= 0
// (no clipping). The same function as the device's (kernel_math.h's km_clip_coef).
float grad_clip_coef(double norm, double max_norm);
// g (n) *= s.
void grad_scale(float *g, float s, size_t n);
// The single-process clip_grad_norm_: returns the norm before clipping.
double grad_clip(float *g, double max_norm, size_t n);

#ifdef BEST_CUDA
struct CUstream_st; // cudaStream_t
// adamw_update on device arrays (adamw.cu); mask may be NULL.
void adamw_update_cuda(float *w, float *m, float *v, const float *g, const uint8_t *mask,
                       const AdamWHyper *h, int t, size_t n, struct CUstream_st *stream);
// The one-pass optimizer: over n elements, g times the clip coefficient that
// grad_clip_coef(sqrt(*sumsq), max_norm) gives (sumsq: a device double, the sum of
// squares of every rank's masked gradients), adamw_update's step, and wbf (n) = the new
// weights in bf16; bitwise what the passes grad_scale, adamw_update and a bf16 cast give.
// A non-finite *sumsq changes nothing. vec 4 takes 16-byte loads where every pointer is
// aligned for them (the last n % 4 one at a time); vec 1 one element a thread throughout.
// g is only read.
void adamw_fused_cuda(float *w, float *m, float *v, uint16_t *wbf, const float *g, const uint8_t *mask,
                      const double *sumsq, double max_norm, const AdamWHyper *h, int t, size_t n, int vec,
                      struct CUstream_st *stream);
#endif

#ifdef __cplusplus
}
#endif

#endif
