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

#endif
