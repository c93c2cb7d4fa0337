// params.h: the table that describes a model's parameters (model.h builds it): each
// tensor's Hugging Face name, where it sits in the fp32 parameter block, its shape, and
// whether it may be pruned. Masks, moments, saliency dumps and packs are laid out by
// this table, so they include this header rather than the whole model.
#ifndef BEST_PARAMS_H
#define BEST_PARAMS_H

#include <stddef.h>
#include <stdint.h>

// One tensor of the parameter block, under its Hugging Face name.
typedef struct {
    char name[96];       // "model.layers.3.self_attn.q_proj.weight"
    size_t offset;       // first float inside the block; SIZE_MAX when the tensor is
                         // stored elsewhere (weight.h: the 2-D ones of a packed model)
    size_t numel;
    int ndim;            // 1 or 2
    int64_t shape[2];    // as in the safetensors file: (out, in) for Linear weights
    int prunable;        // q,k,v,o,gate,up,down _proj.weight of a block
} ParamInfo;

// 0, or ERR "where: tensor NAME: weight I is nan" (or inf) for the first element of w that
// is not finite; w holds elements [off, off + n) of tensor p. Every tool that trains or
// scores weights checks them so before using them (best-mask, best-train).
int params_check_finite(const char *where, const ParamInfo *p, const float *w, size_t off, size_t n);
// Adam's moments, elements [off, off + n) of tensor name (NULL: a flat slice): every m
// finite, every v finite and >= 0 (either may be NULL); else ERR naming where, the
// moment and the element.
int params_check_moments(const char *where, const char *name, const float *m, const float *v, size_t off, size_t n);

// [*a, *b): the elements of tensor p inside the block's slice [lo, hi) (a rank's, dist.h),
// as offsets within p; a == b when it has none.
static inline void params_part(size_t *a, size_t *b, const ParamInfo *p, size_t lo, size_t hi) {
    size_t s = p->offset > lo ? p->offset : lo, e = p->offset + p->numel < hi ? p->offset + p->numel : hi;
    *a = s < e ? s - p->offset : 0;
    *b = s < e ? e - p->offset : 0;
}

#endif
