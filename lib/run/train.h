// train.h: the training loop of best-train: AdamW on a (progressively) masked model,
// with gradient accumulation, clipping, the sparsity and learning-rate schedules,
// metrics, and a training state that resumes bitwise.
//
// One step t (1..T):
//   1. zero the gradients; for each of batch/micro_batch micro-batches: the next
//      windows of the loader, forward, backward with loss scale micro/batch (every
//      position has a target, so this is the whole batch's mean loss)
//   2. a loss or gradient norm that is NaN or inf stops the run (ERR, nothing saved)
//   3. gradients of pruned weights set to 0, the norm taken (logged) and clipped
//   4. adamw_step with lr(t) and the mask (pruned weights stay exactly 0)
//   5. if a prune update falls on t (schedule.h): the mask is recomputed from the
//      weights and Adam's moments as they stand after the step, shrinking the old
//      mask to exactly k = select_keep_count(S(t), n_prunable) survivors (mask.h),
//      and the weights are multiplied by it. With an N:M pattern each group's best
//      survivors are protected first and the ramp (nm.h) sets k; the last update
//      leaves exactly N of every M
//   6. a JSON line to the log, the progress bar, and the saves that are due
// With N ranks (mpirun -np N, dist.h) each rank takes its N-th of every batch's windows
// (rank r the r-th run of batch/N consecutive ones, so the ranks together read exactly
// one rank's windows), its gradients are reduce-scattered (each rank gets the sum over
// ranks of its slice of the block), and 2-5 run on the rank's slice: the norm's squares
// and the loss are summed over ranks, AdamW updates the slice, a mask update scores the
// slice and finds the global threshold from count sums (mask_compute_slice); then the
// ranks all-gather the weights. Only rank 0 writes the log, the model and the dumps; the
// state is saved by every rank (shards.h). The CPU only so far: --device cuda takes one rank.
// With --device cuda, 1-5 run on the device (the same steps; bf16 matrix products; the
// mask update of 5 is mask_compute's on the device, mask.h's mask_update_cuda); saves
// download first, so every file is the CPU run's format and a state resumes on either
// device.
//
// State (OUT/state/state.safetensors, docs/best-train.md): every parameter NAME as
// F32, NAME.exp_avg and NAME.exp_avg_sq (F32), NAME.mask (BOOL, prunable tensors
// only); __metadata__ holds format "best-train-state", the step, Adam's t, the data
// cursor (epoch, pos; the seed is the only other randomness), every hyperparameter
// and the schedule, the shards' tokenizer hash and the run options. Every number read
// back is range-checked (an error names the state file and the key). OUT/model/
// (model_save, dtype of the input) is written before the state, so a state on disk
// always has its model folder beside it.
//
// Not here: the command line (tools/best-train), kernels (model.h), the optimizer
// update (adamw.h), masks and their files (mask.h), schedules (schedule.h), data
// order (loader.h).
#ifndef BEST_TRAIN_H
#define BEST_TRAIN_H

#include <stdint.h>
#include <stdio.h>

#include "nn/adamw.h"        // defines: AdamW
#include "io/loader.h"       // defines: Loader
#include "sparse/mask.h"     // defines: MaskGroup
#include "nn/model.h"        // defines: Model, ModelActs
#include "engine/engine.h"   // defines: Engine, EngineTrain
#include "base/progress.h"   // defines: Progress
#include "sparse/saliency.h" // defines: Saliency
#include "sparse/schedule.h" // defines: PruneSchedule, SchedKind

typedef struct TrainConfig { // (tagged: run/train_internal.h declares it)
    // where from, where to
    const char *model_dir;     // HF folder, or NULL with init_config
    const char *init_config;   // config.json for a random init (normal(0, 0.02), norms 1)
    const char *const *data;   // (n_data) token shards; n_data 0 on resume = the saved list
    int n_data;
    const char *out;           // OUT; locked (OUT/.lock) while the run writes there
    const char *log;           // NULL: OUT/log.jsonl (a run option, below)
    const char *mask_file;     // fixed mask (no schedule), or NULL; with resume: the mask
                               // that replaces the state's from the next step (it may
                               // only shrink it; the run must have no schedule)
    const char *resume;        // an earlier OUT, or NULL
    // optimization (taken from the state on resume)
    int steps, batch, micro_batch, seq;
    double lr, warmup, beta1, beta2, eps, weight_decay, clip;
    uint64_t seed;
    // pruning (taken from the state on resume)
    double sparsity;
    SchedKind schedule;
    double prune_start, prune_end;
    int prune_updates;
    Saliency saliency;
    MaskGroup group;
    NMPattern pattern;         // --pattern: BEST with an N:M target (sparsity (M - N) / M; nm.h), the
                               // mask exactly N:M from the last update on; m = 0: unstructured
    NMRamp nm_ramp;            // how the updates get there (nm.h: global, group)
    // run options: how the run goes and what it writes besides the model and state, not
    // what it computes. Saved in the state; on resume the state's win unless the bit of
    // the option is in `given` (set on the command line). threads: the OpenMP threads in
    // force when train_open is called (0 = OpenMP's default); after it, the count the run
    // uses (a resumed run takes the state's, as a different count changes the sums).
    int threads, save_every, moments_every, save_masks;
    unsigned given;            // TRAIN_OPT_* bits
    // of this invocation only (never saved)
    int device;                // TRAIN_DEVICE_*; DEFAULT: cuda when cuda_device_count() > 0,
                               // else cpu. Not restored on resume: a state moves between
                               // machines, and either device continues it (train.c)
    int recompute;             // --device cuda: activation recomputation (model.h)
    const char *profile;       // --device cuda: the device time of each phase of a step, as a
                               // table written here at the end (devmodel_profile_write), or NULL
    int optim;                 // --device cuda: TRAIN_OPTIM_* (BEST_OPTIM in the environment)
    int quiet;
    int stop_at;               // stop (and save) after this step; 0 = run to the end
    int ignore_memory;         // start even when the memory estimate exceeds this machine's RAM
    int steps_given;           // --steps was on the command line: on resume it must be the
                               // run's (its LR and sparsity schedules are laid out over them)
} TrainConfig;

// The run options of TrainConfig, as bits of its `given` and of Trainer's `restored`.
enum {
    TRAIN_OPT_THREADS = 1,
    TRAIN_OPT_SAVE_EVERY = 2,
    TRAIN_OPT_MOMENTS_EVERY = 4,
    TRAIN_OPT_SAVE_MASKS = 8,
    TRAIN_OPT_LOG = 16,
};

// Where the step runs (TrainConfig.device).
enum { TRAIN_DEVICE_DEFAULT, TRAIN_DEVICE_CPU, TRAIN_DEVICE_CUDA };

// The device's optimizer (TrainConfig.optim; the same bits each way, model.h): one pass
// with 16-byte loads (BEST_OPTIM=fused, the default), one pass an element a thread
// (fused1), or the passes it replaces (passes: masked fill, a sum fetched to the host,
// scale, AdamW, bf16 cast). For a GPU run to time them against each other.
enum { TRAIN_OPTIM_FUSED, TRAIN_OPTIM_FUSED1, TRAIN_OPTIM_PASSES };
// BEST_OPTIM's value as a TRAIN_OPTIM_*, or -1 (unset or empty: TRAIN_OPTIM_FUSED).
int train_optim_parse(const char *s);

// What step t measured (also the JSON line of the log).
typedef struct {
    int step;
    double loss, lr, target, sparsity, grad_norm;
    double tokens_per_s;     // batch x seq over the whole step's time, optimizer and mask update included
    double tokens_per_s_avg; // the run's average since it started (or resumed): the tokens of its
                             // steps over the wall time from before its first step to the end of
                             // this one (saves, logging and everything between steps included)
    double mask_seconds;     // time of this step's mask update (scoring, select, apply), or 0
    double mask_bytes;       // payload this rank put into collectives in that update (dist.h:
                             // counts only; 0 on one rank)
} StepStats;

typedef struct Trainer { // (tagged: run/train_internal.h declares it)
    TrainConfig cfg;         // effective: the saved hyperparameters after a resume
    Model m;
    size_t lo, hi;           // this rank's slice of the parameter block (dist.h); [0, n_params)
                             // on one rank. ZeRO stage 1: opt and mask hold the slice only,
                             // and the rank updates only its slice of m.params (all of it is
                             // kept, for the forward, and shared after each step)
    AdamW opt;               // moments (hi - lo), t = steps taken
    uint8_t *mask;           // (hi - lo) 1 = keep
    int masked;              // 0 while the mask is all ones (pure training)
    uint64_t fixed_kept;     // prunable weights a fixed --mask keeps (the banner's count)
    NMPattern pattern;       // the run's N:M pattern: cfg.pattern's (a schedule to it), or the fixed
                             // --mask's (its metadata, checked); else m = 0
    Loader data;
    PruneSchedule sched;
    int step;                // optimizer steps done
    int32_t *tokens, *targets; // (batch / ranks, seq) this rank's sequences of a step
    FILE *log;
    char *log_path;          // its name, for a failed write's message
    Progress prog;
    char **owned;            // strings read from a state, freed by train_close
    int n_owned;
    const char **data_list;  // the shard list in use (cfg.data points here)
    unsigned restored;       // TRAIN_OPT_* bits: run options taken from the resumed state
    int lock_fd;             // OUT/.lock, held (flock) until train_close or exit; -1: none
    char *out_made;          // OUT's topmost folder this run created (NULL: OUT was there)
    int log_made;            // the log is a regular file this run created
    int saved;               // a save of this run finished (or the run is a resume)
    double mem_need, mem_ram; // host memory: the estimate for this run (bytes, all ranks of this
                              // machine) and the machine's RAM (train_print_config shows both)
    // The run's device (engine.h). --device cuda: the step runs there (dt: its own weights,
    // gradients, moments and mask); the host's m.params, opt and mask are brought up to date
    // before a mask update and a save. On the CPU dt is empty and the step is the host's.
    Engine *eng;
    EngineTrain dt;
    int host_stale;          // the device's weights and moments are ahead of the host's
} Trainer;

// Checks and opens everything (model or state, shards, mask) before writing
// anything; then opens the log (truncated to the saved step on resume). OUT is
// taken first: an exclusive flock on OUT/.lock, which holds the holder's pid; when
// another process holds it, ERR "OUT is in use by another best-train (pid N)" and
// nothing is touched. The kernel drops the lock when the process ends, however.
// -1 after ERR; -2 after ERR for an option the model does not take (a --pattern whose M
// does not divide a prunable tensor's columns: best-train exits 2, a usage error).
int train_open(Trainer *tr, const TrainConfig *cfg);
// Runs steps until cfg.steps (or cfg.stop_at), saving as configured. -1 after ERR
// (a diverged loss included); the last saved state is left as it was. A fresh run whose
// first save or a moment dump before it fails (a full disk) leaves OUT as it found it:
// the model folder, log, moment dumps, masks and lock file it wrote are removed, and OUT
// when the run made it.
int train_run(Trainer *tr);
// One step (1-6 above, without saves); stats may be NULL.
int train_step(Trainer *tr, StepStats *stats);
// OUT/model then OUT/state/state.safetensors, each file through temp + rename
// (train_state.c, as the state's reading). With --device cuda the device's weights and moments are downloaded first.
int train_save(Trainer *tr);
// OUT/moments/step-N.safetensors: NAME.exp_avg, NAME.exp_avg_sq (F32) per parameter.
int train_save_moments(Trainer *tr);
void train_close(Trainer *tr);
// Prints the effective configuration (the banner) to f.
void train_print_config(FILE *f, const Trainer *tr);
// Sets every parameter: normal(0, std) for matrices (Linear, embeddings), 1 for
// norms, 0 for biases, from splitmix64 seeded with seed (Box-Muller).
void train_init_random(Model *m, uint64_t seed, double std);

#endif
