// wordcache.h: a per-encoder cache from the bytes of a word (a piece of text no merge
// crosses) to its ids, shared by spm.c and bbpe.c: natural text repeats its words, so
// each distinct word is merged once. Which words are cached (how long a word may be)
// is the caller's choice; so is the hash (tok_hash of the word, passed in).
//
// Full (half the slots used, or 64 Mi key bytes or ids) means start over rather than
// evict: the common words come straight back. Not shared between threads.
#ifndef BEST_WORDCACHE_H
#define BEST_WORDCACHE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/vec.h" // defines: ByteVec, IdVec

#define WORDCACHE_SLOTS (1u << 17)  // 3 MiB of slots per encoder (power of two)

typedef struct { uint64_t h; uint32_t key_off, key_len, ids_off, ids_n; } WordSlot;  // key_len 0: empty
typedef struct {
    WordSlot *slot;  // (WORDCACHE_SLOTS,)
    uint32_t used;
    ByteVec keys;    // the cached words' bytes, back to back
    IdVec ids;       // their ids, back to back
} WordCache;

void wordcache_init(WordCache *c);
void wordcache_free(WordCache *c);

// The ids of word w[0..n) (n > 0, hash h) and their count in *n_ids, or NULL when the
// word is not cached; *at is then the slot wordcache_put takes.
static inline const int32_t *wordcache_get(const WordCache *c, uint32_t *at, size_t *n_ids, uint64_t h,
                                           const void *w, size_t n) {
    for (uint32_t i = (uint32_t)h & (WORDCACHE_SLOTS - 1);; i = (i + 1) & (WORDCACHE_SLOTS - 1)) {
        const WordSlot *s = &c->slot[i];
        if (s->key_len == 0) {
            *at = i;
            return NULL;
        }
        if (s->h == h && s->key_len == n && memcmp(c->keys.v + s->key_off, w, n) == 0) {
            *n_ids = s->ids_n;
            return c->ids.v + s->ids_off;
        }
    }
}

// Remembers word w[0..n) -> ids[0..n_ids) in slot `at` from a wordcache_get that missed
// (emptying the cache first when it is full).
void wordcache_put(WordCache *c, uint32_t at, uint64_t h, const void *w, size_t n, const int32_t *ids,
                   size_t n_ids);

#endif
