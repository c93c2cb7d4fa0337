// mergeheap.h: the binary min-heap of merge candidates that the BPE merge loops of
// spm.c and bbpe.c pop from. A candidate is a 64-bit key, rank (or inverted score) in
// the high half and the position of its left symbol in the low half, so that one
// comparison orders by rank and then leftmost first, as both references do; aux is
// what the caller needs to spot a stale candidate (sentencepiece: the merged length;
// HF: the merged id; bbpe.c checks its own table and leaves it 0). Stale candidates
// are not removed: the loops skip them when they come up. Inline: it is the inner loop.
#ifndef BEST_MERGEHEAP_H
#define BEST_MERGEHEAP_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/error.h" // defines: xrealloc

typedef struct { uint64_t key; uint32_t aux; } HeapEnt;
typedef struct { HeapEnt *v; size_t n, cap; } MergeHeap;

static inline void mergeheap_free(MergeHeap *h) {
    free(h->v);
    h->v = NULL;
    h->n = h->cap = 0;
}

static inline void mergeheap_push(MergeHeap *h, uint64_t key, uint32_t aux) {
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 256;
        h->v = xrealloc(h->v, h->cap * sizeof *h->v);
    }
    size_t i = h->n++;
    while (i > 0 && h->v[(i - 1) / 2].key > key) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = (HeapEnt){key, aux};
}

// Removes the smallest key (h->n > 0) and returns it, its aux in *aux.
static inline uint64_t mergeheap_pop(MergeHeap *h, uint32_t *aux) {
    HeapEnt top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && h->v[c + 1].key < h->v[c].key) c++;
        if (h->v[c].key >= last.key) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    *aux = top.aux;
    return top.key;
}

#endif
