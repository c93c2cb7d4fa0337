// train_internal.h: what the files of best-train's loop share, and nothing outside
// lib/run/train*.c includes (the public API is train.h's). One header for them all, as
// tok/spm_internal.h: the files call each other both ways, so a header of one of them
// would be a cycle of includes (tests/t_layout.sh), and so would including train.h here:
// Trainer is named by its tag, and each file includes train.h itself.
//
//   train.c        the Trainer: open (its checks, the memory estimate), the step, the
//                  loop and its log, close; the few helpers below that the state uses too
//   train_out.c    the OUT folder: its lock, a fresh run's checks and clean-ups, the log
//                  cut back on resume, the undoing of a fresh run whose first save failed
//   train_state.c  the training state: its metadata (the hyperparameters, cursor and run
//                  options a resume restores), the one-rank file and the sharded save
//                  (shards.h), finding and reading the state on --resume, OUT/model's
//                  config.json with its "best" block, the moment dumps (train_save,
//                  train_save_moments)
//
// The state's format is train.h's and docs/formats.md's.
#ifndef BEST_TRAIN_INTERNAL_H
#define BEST_TRAIN_INTERNAL_H

#include "io/safetensors.h" // defines: SafeTensors
#include "nn/model.h"       // defines: Model
#include "run/shards.h"     // defines: ShardManifest

typedef struct TrainConfig TrainConfig; // run/train.h
typedef struct Trainer Trainer;

// --- train_state.c: the state read on --resume (train_open, in this order) ---

// The state to resume in DIR: *st opened on the file whose metadata holds the run, *sharded
// and mf (filled for shards) say which kind; the later step where both kinds are there.
int state_find(SafeTensors *st, ShardManifest *mf, int *sharded, const char *dir);
// The hyperparameters and run options of a state into tr->cfg, each range-checked.
int state_meta_read(Trainer *tr, const SafeTensors *st);
// m (read from DIR/model) has the config the state was trained with (its config_hash).
int state_config_check(const SafeTensors *st, const Model *m, const char *dir);
// The tensors of a one-file state: every weight, the moments and mask of this rank's slice.
int state_load_single(Trainer *tr, const SafeTensors *st);
// Adam's step count, the data cursor (loader_seek) and the shards' tokenizer check.
int state_cursor_read(Trainer *tr, const SafeTensors *st);

// --- train_out.c: OUT, for train_open and train_run (rank 0 calls them) ---

// Takes OUT/.lock (an exclusive flock, its holder's pid written in it) into tr->lock_fd;
// ERR "OUT is in use by another best-train (pid N)" when another process holds it.
// create 0: a missing lock file means nobody holds OUT (nothing taken, nothing created);
// create 1: OUT exists, the file is made.
int out_lock(Trainer *tr, const char *out, int create);
// A fresh run (no --resume) refuses an OUT that holds a state.
int out_check_fresh(const TrainConfig *c);
// Removes the temp files a killed run left in OUT's folders (under OUT's lock).
void out_remove_stale_temps(const char *out);
// Removes the moment dumps and masks (step-N.safetensors) that belong to no state.
void out_remove_stale_steps(const char *out);
// Keeps the lines of the log at path whose step is <= step.
int out_log_truncate(const char *path, int step);
// What a fresh run whose first save failed had written goes again (train.h).
void out_unmake_fresh(Trainer *tr);

// --- train.c: the Trainer's helpers the state uses too ---

// A copy of s that lives until train_close (tr->owned).
const char *train_own(Trainer *tr, const char *s);
// Every weight of m finite (params.h's check, as best-mask's): where names the file the
// weights came from.
int train_weights_check(const Model *m, const char *where);
// --device cuda: the host's weights, moments and mask brought up to date from the device
// (every rank calls it at the same points; a no-op when they are).
void train_host_sync(Trainer *tr);

#endif
