// shards.h: best-train's state when several ranks save it: one file per rank holding the
// rank's flat slice of the parameter block, and the manifest that completes a save.
//
// OUT/state/step-S/rank-R-of-N.safetensors (each rank writes its own, temp + rename):
// four 1-D tensors over the block's elements [lo, hi) = dist_slice(n_params, R, N):
// "params" (F32, the fp32 master weights), "exp_avg", "exp_avg_sq" (F32) and "mask"
// (BOOL, 1 = keep; 1 for every element of a tensor that is not prunable). __metadata__:
// the state's own keys (train.h: format, step, hyperparameters, cursor, ...) and rank,
// ranks, lo, hi, n_params.
// OUT/state/manifest.json (rank 0, temp + rename, after every rank's file is on disk:
// the completion marker): {"format": "best-train-state-shards", "version": "1",
// "step": S, "ranks": N, "n_params": n, "shards": ["step-S/rank-0-of-N.safetensors",
// ...], "content_hashes": ["<16 hex digits>", ...]}: shard R's content hash, also the
// last key of its own metadata (the hash of everything else in it: io/safetensors.h),
// checked when it is read. A save of step S is complete exactly when the manifest
// names step S.
//
// One rank saves state/state.safetensors instead (train.h): the same numbers, one tensor
// per parameter. A resume reads either, and with any rank count: each rank copies its
// own slice out of the files that overlap it (shards_read), so a state moves exactly
// between rank counts.
//
// Not here: the state's metadata keys and its one-rank file (train_state.c), the training
// loop (train.c), the slices (dist.h), the safetensors format (io/safetensors.h).
#ifndef BEST_SHARDS_H
#define BEST_SHARDS_H

#include <stddef.h>
#include <stdint.h>

#include "io/safetensors.h" // defines: StWriter

#define SHARDS_FORMAT "best-train-state-shards"
#define SHARDS_VERSION "2" // 2: content_hashes

typedef struct {
    int step, ranks;
    size_t n_params;
    char **files;       // (ranks) full paths of the shards, in rank order
    uint64_t *hashes;   // (ranks) each shard's content hash
} ShardManifest;

// state_dir/step-S/rank-R-of-N.safetensors (malloc'd).
char *shard_path(const char *state_dir, int step, int rank, int ranks);
// Adds this rank's slice to w: the four tensors (pointers kept until the write) and the
// keys rank, ranks, lo, hi, n_params.
int shard_add(StWriter *w, const float *params, const float *m, const float *v, const uint8_t *mask, int rank,
              int ranks, size_t lo, size_t hi, size_t n_params);
// Writes state_dir/manifest.json through temp + rename; hashes (ranks): each shard's
// content hash (its metadata's "content_hash").
int shards_manifest_write(const char *state_dir, int step, int ranks, size_t n_params, const uint64_t *hashes);
// Reads and checks state_dir/manifest.json (every field, and that each shard is named as
// shard_path names it). Errors name the file.
int shards_manifest_read(ShardManifest *mf, const char *state_dir);
void shards_manifest_free(ShardManifest *mf);
// The elements [lo, hi) of the block from the manifest's shards that overlap them:
// params (the block's own offsets: params + lo on), m, v, mask (hi - lo, the slice).
// Each shard must hold what it says (shards_check), its metadata match the manifest
// (rank, ranks, its slice, n_params, step) and its tensors their dtype and length;
// masks hold 0 or 1, exp_avg is finite, exp_avg_sq finite and >= 0. Errors name the shard.
// Shard r (opened as st) holds what it says (its content_hash, io/safetensors.h) and is
// the one the manifest lists (the same hash); else ERR naming the shard.
int shards_check(const SafeTensors *st, const ShardManifest *mf, int r);
int shards_read(float *params, float *m, float *v, uint8_t *mask, const ShardManifest *mf, size_t lo, size_t hi);
// Removes state_dir/step-*/ except step-keep (keep < 0: all), files and folder.
void shards_prune(const char *state_dir, int keep);

#endif
