// loader.c: seeded, resumable window order over token shards (see loader.h).
#include "io/loader.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h" // defines: ERR, xmalloc

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Uniform in [0, n) without modulo bias (rejection on the top of the range).
static uint64_t uniform_below(uint64_t *s, uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = splitmix64(s); while (x >= limit);
    return x % n;
}

void loader_permute(uint64_t *perm, uint64_t n, uint64_t seed) {
    uint64_t s = seed;
    for (uint64_t i = 0; i < n; i++) perm[i] = i;
    for (uint64_t i = n; i > 1; i--) {
        uint64_t j = uniform_below(&s, i);
        uint64_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
}

int loader_open(Loader *l, const char *const *paths, int n_paths, int seq, uint64_t seed, uint32_t vocab) {
    memset(l, 0, sizeof *l);
    if (n_paths < 1) return ERR("no token shards given");
    if (seq < 1) return ERR("sequence length %d must be >= 1", seq);
    l->shards = xcalloc((size_t)n_paths, sizeof *l->shards);
    l->first = xcalloc((size_t)n_paths + 1, sizeof *l->first);
    l->seq = seq;
    l->seed = seed;
    for (int i = 0; i < n_paths; i++) {
        if (shard_open(&l->shards[i], paths[i]) < 0) goto fail;
        l->n_shards = i + 1;
        if (l->shards[i].h.vocab_size > vocab) {
            ERR("%s: token vocabulary of %u is larger than the model's %u (a shard of another tokenizer?)",
                paths[i], l->shards[i].h.vocab_size, vocab);
            goto fail;
        }
        uint64_t hash = l->shards[i].h.tokenizer_hash;
        if (i == 0) l->tokenizer_hash = hash;
        if (hash != l->tokenizer_hash) {
            ERR("%s: made by another tokenizer than %s (tokenizer hash %016llx, not %016llx): shards of two "
                "tokenizers do not mix", paths[i], paths[0], (unsigned long long)hash,
                (unsigned long long)l->tokenizer_hash);
            goto fail;
        }
        uint64_t n = l->shards[i].h.ntokens;
        l->first[i + 1] = l->first[i] + (n > 0 ? (n - 1) / (uint64_t)seq : 0);
    }
    l->n_windows = l->first[n_paths];
    if (l->n_windows == 0) {
        ERR("%s%s: fewer than seq + 1 = %d tokens in every shard: no training window", paths[0],
            n_paths > 1 ? " ..." : "", seq + 1);
        goto fail;
    }
    l->perm = xmalloc(l->n_windows * sizeof *l->perm);
    loader_permute(l->perm, l->n_windows, l->seed);
    return 0;
fail:
    loader_close(l);
    return -1;
}

void loader_close(Loader *l) {
    for (int i = 0; i < l->n_shards; i++) shard_close(&l->shards[i]);
    free(l->shards);
    free(l->first);
    free(l->perm);
    memset(l, 0, sizeof *l);
}

int loader_seek(Loader *l, uint64_t epoch, uint64_t pos) {
    if (pos >= l->n_windows)
        return ERR("data cursor %llu is past the %llu windows of the shards (other shards or --seq?)",
                   (unsigned long long)pos, (unsigned long long)l->n_windows);
    if (epoch != l->epoch) loader_permute(l->perm, l->n_windows, l->seed + epoch);
    l->epoch = epoch;
    l->pos = pos;
    return 0;
}

void loader_next(Loader *l, int32_t *tokens, int32_t *targets) {
    uint64_t w = l->perm[l->pos];
    int i = 0;
    while (w >= l->first[i + 1]) i++;  // few shards: a linear scan is enough
    uint64_t start = (w - l->first[i]) * (uint64_t)l->seq;
    size_t T = (size_t)l->seq;
    // inputs [start, start + T), targets [start + 1, start + T + 1)
    shard_read(&l->shards[i], tokens, start, T);
    shard_read(&l->shards[i], targets, start + 1, T);
    if (++l->pos == l->n_windows) {
        l->epoch++;
        l->pos = 0;
        loader_permute(l->perm, l->n_windows, l->seed + l->epoch);
    }
}

void loader_skip(Loader *l, uint64_t n) {
    while (n > 0) {
        uint64_t left = l->n_windows - l->pos;
        if (n < left) {
            l->pos += n;
            return;
        }
        n -= left;
        l->epoch++;
        l->pos = 0;
        loader_permute(l->perm, l->n_windows, l->seed + l->epoch);
    }
}
