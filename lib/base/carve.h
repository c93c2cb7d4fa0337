// carve.h: one device allocation handed out in aligned pieces, for the .cu files that lay
// out many buffers (nn/model.cu's DevModel, sparse/calib.cu's walk): a first pass with base
// NULL measures (cv.used is then the bytes to allocate), a second carves the allocation.
// Plain C; no CUDA call, so the layouts' sizes are known without a GPU.
#ifndef BEST_CARVE_H
#define BEST_CARVE_H

#include <stddef.h>

typedef struct {
    char *base; // the allocation, or NULL: measure only
    size_t used;
} Carver;

// The next piece of `bytes`, 256-byte aligned as cudaMalloc's own (NULL when measuring).
static inline void *carve_take(Carver *cv, size_t bytes) {
    size_t at = (cv->used + 255) & ~(size_t)255;
    cv->used = at + bytes;
    return cv->base ? cv->base + at : NULL;
}

#endif
