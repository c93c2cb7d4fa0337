// saliency.h: how much each weight matters, as one float score per weight.
//
// Three criteria over a flat range of weights (a slice of the parameter block,
// model.h, with Adam's moments at the same offsets, adamw.h):
//   second order  s = 0.5 * v * w^2   (v = exp_avg_sq: the diagonal empirical Fisher)
//   first order   s = |m * w|         (m = exp_avg)
//   magnitude     s = |w|
// A pruned weight (w == 0) scores exactly +0, so once pruned it never outranks a live
// weight. Scores are never negative and never -0.0, so their uint32 bit patterns sort
// like the floats (select.h relies on that). NaN or infinite inputs, and a negative
// exp_avg_sq, are errors: a score computed from them would rank garbage.
//
// Not here: choosing the threshold (select.h), masks and their files (mask.h).
#ifndef BEST_SALIENCY_H
#define BEST_SALIENCY_H

#include <stddef.h>

#ifdef __cplusplus // the CUDA twins (.cu) and the C++ tests include this
extern "C" {
#endif

typedef enum { SAL_MAGNITUDE, SAL_FIRST, SAL_SECOND } Saliency;

// "magnitude", "first", "second" -> *out; -1 (no ERR) if unknown.
int saliency_parse(Saliency *out, const char *name);
const char *saliency_name(Saliency s);
// 1 when the criterion reads exp_avg (first) or exp_avg_sq (second).
int saliency_needs_moments(Saliency s);

// out (n) = scores of w (n). m (n) is read by SAL_FIRST, v (n) by SAL_SECOND; the other
// may be NULL. Returns 0, or -1 after ERR naming the first bad element ("element 12:
// exp_avg_sq is nan"); the caller prefixes the tensor name.
int saliency_score(float *out, Saliency s, const float *w, const float *m, const float *v, size_t n);

#ifdef BEST_CUDA
struct CUstream_st; // cudaStream_t
// saliency_score on device arrays (saliency.cu): out (n) = the scores; *bad (a device
// counter, zeroed by the caller) += the number of elements with a NaN or infinite input
// or a negative exp_avg_sq (0: all good).
void saliency_score_cuda(float *out, unsigned long long *bad, Saliency s, const float *w,
                         const float *m, const float *v, size_t n, struct CUstream_st *stream);
#endif

#ifdef __cplusplus
}
#endif

#endif
