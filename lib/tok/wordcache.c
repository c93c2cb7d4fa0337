// wordcache.c: storing into the tokenizers' word cache (wordcache.h; lookups inline there).
#include "tok/wordcache.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h" // defines: xcalloc

void wordcache_init(WordCache *c) {
    memset(c, 0, sizeof *c);
    c->slot = xcalloc(WORDCACHE_SLOTS, sizeof *c->slot);
}

void wordcache_free(WordCache *c) {
    free(c->slot);
    bytevec_free(&c->keys);
    idvec_free(&c->ids);
    memset(c, 0, sizeof *c);
}

void wordcache_put(WordCache *c, uint32_t at, uint64_t h, const void *w, size_t n, const int32_t *ids,
                   size_t n_ids) {
    if (c->used >= WORDCACHE_SLOTS / 2 || c->keys.n > (64u << 20) || c->ids.n > (64u << 20)) {
        memset(c->slot, 0, WORDCACHE_SLOTS * sizeof *c->slot);  // full: start over
        c->used = 0;
        c->keys.n = 0;
        c->ids.n = 0;
        at = (uint32_t)h & (WORDCACHE_SLOTS - 1);  // the first slot probed is empty now
    }
    c->slot[at] = (WordSlot){h, (uint32_t)c->keys.n, (uint32_t)n, (uint32_t)c->ids.n, (uint32_t)n_ids};
    bytevec_append(&c->keys, w, n);
    if (n_ids) {
        idvec_reserve(&c->ids, n_ids);
        memcpy(c->ids.v + c->ids.n, ids, n_ids * sizeof *ids);
        c->ids.n += n_ids;
    }
    c->used++;
}
