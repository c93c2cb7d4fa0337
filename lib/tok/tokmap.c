// tokmap.c: building the tokenizers' hash maps (tokmap.h); the lookups are inline there.
#include "tok/tokmap.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h" // defines: xmalloc

void strmap_init(StrMap *m, size_t expect) {
    size_t cap = 64;
    while (cap < 2 * expect) cap *= 2;
    m->tab = xmalloc(cap * sizeof *m->tab);
    for (size_t i = 0; i < cap; i++) m->tab[i].id = -1;
    m->mask = cap - 1;
    m->n = 0;
    memset(&m->keys, 0, sizeof m->keys);
}

void strmap_free(StrMap *m) {
    free(m->tab);
    bytevec_free(&m->keys);
    memset(m, 0, sizeof *m);
}

// The slot holding s[0..len) (hash h), or the empty slot where it would go.
static StrEnt *strmap_slot(const StrMap *m, const char *s, size_t len, uint64_t h) {
    for (size_t i = h & m->mask;; i = (i + 1) & m->mask) {
        StrEnt *e = &m->tab[i];
        if (e->id < 0) return e;
        if (e->h == h && e->len == len && (len == 0 || memcmp(m->keys.v + e->off, s, len) == 0)) return e;
    }
}

void strmap_put(StrMap *m, const char *s, size_t len, int32_t id) {
    if (2 * (m->n + 1) > m->mask + 1) {  // grow to keep the load under 1/2
        StrEnt *old = m->tab;
        size_t oldcap = m->mask + 1, cap = 2 * oldcap;
        m->tab = xmalloc(cap * sizeof *m->tab);
        for (size_t i = 0; i < cap; i++) m->tab[i].id = -1;
        m->mask = cap - 1;
        for (size_t i = 0; i < oldcap; i++) {
            if (old[i].id < 0) continue;
            size_t j = old[i].h & m->mask;
            while (m->tab[j].id >= 0) j = (j + 1) & m->mask;
            m->tab[j] = old[i];
        }
        free(old);
    }
    uint64_t h = tok_hash(s, len);
    StrEnt *e = strmap_slot(m, s, len, h);
    if (e->id < 0) {
        e->h = h;
        e->off = (uint32_t)m->keys.n;
        e->len = (uint32_t)len;
        if (len) bytevec_append(&m->keys, s, len);
        m->n++;
    }
    e->id = id;  // a repeated key keeps the last id, as serde's HashMap does
}

void pairmap_init(PairMap *p, size_t expect) {
    size_t cap = 64;
    while (cap < 2 * expect) cap *= 2;
    p->tab = xmalloc(cap * sizeof *p->tab);
    for (size_t i = 0; i < cap; i++) p->tab[i].key = UINT64_MAX;
    p->mask = cap - 1;
}

void pairmap_free(PairMap *p) {
    free(p->tab);
    memset(p, 0, sizeof *p);
}

void pairmap_put(PairMap *p, int32_t a, int32_t b, uint32_t rank, int32_t id) {
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t i = pair_hash(key) & p->mask;
    while (p->tab[i].key != UINT64_MAX && p->tab[i].key != key) i = (i + 1) & p->mask;
    p->tab[i].key = key;
    p->tab[i].rank = rank;
    p->tab[i].id = id;
}
