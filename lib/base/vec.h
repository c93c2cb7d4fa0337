// vec.h: the two growable arrays every tool passes around: token ids and bytes.
// Header-only because each operation is two lines; growth doubles, so appends
// are amortized O(1) and a reused vector stops allocating once warm.
#ifndef BEST_VEC_H
#define BEST_VEC_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h" // defines: xrealloc

typedef struct { int32_t *v; size_t n, cap; } IdVec;    // token ids
typedef struct { char *v; size_t n, cap; } ByteVec;     // bytes, not NUL-terminated

static inline void idvec_reserve(IdVec *a, size_t extra) {
    if (a->n + extra <= a->cap) return;
    size_t cap = a->cap ? a->cap : 256;
    while (cap < a->n + extra) cap *= 2;
    a->v = (int32_t *)xrealloc(a->v, cap * sizeof *a->v); // (the cast: C++ includes this too)
    a->cap = cap;
}
static inline void idvec_push(IdVec *a, int32_t x) { idvec_reserve(a, 1); a->v[a->n++] = x; }
static inline void idvec_free(IdVec *a) { free(a->v); a->v = NULL; a->n = a->cap = 0; }

static inline void bytevec_reserve(ByteVec *b, size_t extra) {
    if (b->n + extra <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra) cap *= 2;
    b->v = (char *)xrealloc(b->v, cap);
    b->cap = cap;
}
static inline void bytevec_append(ByteVec *b, const void *p, size_t n) {
    if (n == 0) return;  // memcpy(NULL, p, 0) is undefined behaviour
    bytevec_reserve(b, n);
    memcpy(b->v + b->n, p, n);
    b->n += n;
}
static inline void bytevec_push(ByteVec *b, char c) { bytevec_reserve(b, 1); b->v[b->n++] = c; }
static inline void bytevec_free(ByteVec *b) { free(b->v); b->v = NULL; b->n = b->cap = 0; }

#endif
