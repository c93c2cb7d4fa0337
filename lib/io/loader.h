// loader.h: training windows from token shards, in a seeded random order, resumable.
//
// Windows are cut per shard, never across a shard boundary: shard i of n_i tokens
// holds W_i = floor((n_i - 1) / seq) windows, window w covering tokens
// [w*seq, w*seq + seq + 1) (inputs are the first seq, targets the last seq: the
// windows do not overlap except for that one shared token). Global window indices
// run over shard 0's windows, then shard 1's, and so on; the tail of a shard that
// does not fill a window is never used.
//
// Epoch e visits all N = sum W_i windows once, in the order of a Fisher-Yates
// permutation driven by splitmix64 seeded with seed + e (loader_permute). When the
// permutation is used up the next epoch starts. The cursor (epoch, pos) is all the
// state there is: a loader reopened at the same cursor yields the same windows.
//
// Not here: the shard format and its checks (shard.h), batching into micro-batches
// (train.h).
#ifndef BEST_LOADER_H
#define BEST_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "io/shard.h" // defines: Shard

typedef struct {
    Shard *shards;       // (n_shards)
    int n_shards;
    uint64_t *first;     // (n_shards + 1) global index of each shard's first window
    uint64_t n_windows;  // N
    uint64_t tokenizer_hash; // of the shards' header (shard.h), the same in every shard
    int seq;             // T
    uint64_t seed;
    uint64_t epoch, pos; // the cursor: next window is perm[pos] of epoch
    uint64_t *perm;      // (N) the permutation of the current epoch
} Loader;

// Opens and verifies the shards; every token must be < vocab (the model's V), and
// every shard must carry the first one's tokenizer hash (shards of two tokenizers do
// not mix). Errors name the shard; fewer than seq + 1 tokens in all shards is an error.
int loader_open(Loader *l, const char *const *paths, int n_paths, int seq, uint64_t seed, uint32_t vocab);
void loader_close(Loader *l);
// Moves the cursor (a resumed run); pos must be < N.
int loader_seek(Loader *l, uint64_t epoch, uint64_t pos);
// Fills tokens (T) and targets (T) from the next window and advances the cursor.
void loader_next(Loader *l, int32_t *tokens, int32_t *targets);
// Advances the cursor past n windows without reading them (a rank skips the other
// ranks' windows of a batch: train.h), into later epochs as loader_next would.
void loader_skip(Loader *l, uint64_t n);
// perm (n) = a permutation of 0..n-1 from seed (Fisher-Yates over splitmix64).
void loader_permute(uint64_t *perm, uint64_t n, uint64_t seed);

#endif
