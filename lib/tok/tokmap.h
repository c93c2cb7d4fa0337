// tokmap.h: the two hash maps both tokenizers look tokens up in (spm*.c and bbpe.c):
// token bytes -> id (StrMap) and a pair of ids -> (merge rank, merged id) (PairMap).
// Open addressing with linear probing, load kept under 1/2, so a miss ends within a few
// slots. The lookups are inline: the merge loops run them once per candidate pair.
//
// What they do not do: removal (tokenizers only grow their tables while loading), and
// iteration. The word cache is wordcache.h, the merge heap mergeheap.h.
#ifndef BEST_TOKMAP_H
#define BEST_TOKMAP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define XXH_INLINE_ALL  // the short-key hash inlined: it runs once per pre-token and lookup
#include <xxhash.h>

#include "base/vec.h" // defines: ByteVec

// The hash of token and word bytes everywhere in lib/tok (XXH3: one multiply or two for
// the short keys tokenizers have).
static inline uint64_t tok_hash(const void *p, size_t n) { return XXH3_64bits(p, n); }

// ---------------------------------------------------------------------------------
// Token bytes -> id. Keys are copied into the map; a key put twice keeps the last id.

typedef struct { uint64_t h; uint32_t off, len; int32_t id; } StrEnt;  // id < 0: empty
typedef struct { StrEnt *tab; size_t mask, n; ByteVec keys; } StrMap;

// expect: about how many keys will be put (the map grows past it)
void strmap_init(StrMap *m, size_t expect);
void strmap_free(StrMap *m);  // leaves an empty map that strmap_get answers -1 from
void strmap_put(StrMap *m, const char *s, size_t len, int32_t id);

// The id of s[0..len), whose tok_hash is h, or -1.
static inline int32_t strmap_get_h(const StrMap *m, const char *s, size_t len, uint64_t h) {
    if (!m->tab) return -1;
    for (size_t i = h & m->mask;; i = (i + 1) & m->mask) {
        const StrEnt *e = &m->tab[i];
        if (e->id < 0) return -1;
        if (e->h == h && e->len == len && (len == 0 || memcmp(m->keys.v + e->off, s, len) == 0)) return e->id;
    }
}

static inline int32_t strmap_get(const StrMap *m, const char *s, size_t len) {
    return strmap_get_h(m, s, len, tok_hash(s, len));
}

// ---------------------------------------------------------------------------------
// (left id, right id) -> (rank, merged id): the merges of a BPE model. A pair put twice
// keeps the later rank and id, as HF's collect() of the merges into a HashMap does.

#define RANK_NONE UINT32_MAX
typedef struct { uint64_t key; uint32_t rank; int32_t id; } PairEnt;  // key UINT64_MAX: empty
typedef struct { PairEnt *tab; size_t mask; } PairMap;

// expect: the number of pairs that will be put, at most (the map does not grow)
void pairmap_init(PairMap *p, size_t expect);
void pairmap_free(PairMap *p);
void pairmap_put(PairMap *p, int32_t a, int32_t b, uint32_t rank, int32_t id);

static inline size_t pair_hash(uint64_t key) { return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 29); }

// The rank of the pair (a, b) and its merged id in *id, or RANK_NONE (*id untouched).
static inline uint32_t pairmap_get(const PairMap *p, int32_t a, int32_t b, int32_t *id) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (size_t i = pair_hash(key) & p->mask;; i = (i + 1) & p->mask) {
        const PairEnt *e = &p->tab[i];
        if (e->key == key) { *id = e->id; return e->rank; }
        if (e->key == UINT64_MAX) return RANK_NONE;
    }
}

#endif
