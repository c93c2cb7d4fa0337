// best-train: continues training a Hugging Face model on token shards, optionally
// sparsifying it progressively (BEST) or retraining under a fixed mask.
//
// The command line only: options with their defaults in one place, the effective
// configuration on stderr, then lib/train (the loop, state, metrics), which uses
// lib/model, lib/adamw, lib/mask, lib/schedule and lib/loader. Usage: docs/best-train.md.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/blas.h"  // defines: blas_init
#include "base/args.h"  // defines: ArgSpec, args_parse, args_given
#include "base/error.h" // defines: TRY_OR_DIE, err_set_prog
#include "dist/dist.h"  // defines: dist_init, dist_rank, dist_size, dist_finalize
#include "run/train.h"  // defines: Trainer, TrainConfig, train_open, train_run

// --resume keeps the run's hyperparameters (train.h): each one given on the command line
// with another value is named in one warning, never ignored silently (--steps is an error
// in train_open instead: the schedules are laid out over the run's steps).
static void warn_ignored(const ArgSpec *spec, const TrainConfig *cli, const TrainConfig *run, const char *schedule,
                         const char *saliency, const char *group, const char *pattern, const char *nm_ramp) {
    char buf[1024] = "";
    size_t n = 0;
#define IGN(NAME, FMT, A, B)                                                                             \
    if (args_given(spec, NAME) && (A) != (B) && n < sizeof buf)                                          \
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s--%s " FMT " (the run's " FMT ")", n ? ", " : "", NAME, A, B);
    IGN("batch", "%d", cli->batch, run->batch)
    IGN("micro-batch", "%d", cli->micro_batch, run->micro_batch)
    IGN("seq", "%d", cli->seq, run->seq)
    IGN("lr", "%g", cli->lr, run->lr)
    IGN("warmup", "%g", cli->warmup, run->warmup)
    IGN("weight-decay", "%g", cli->weight_decay, run->weight_decay)
    IGN("clip", "%g", cli->clip, run->clip)
    IGN("seed", "%llu", (unsigned long long)cli->seed, (unsigned long long)run->seed)
    IGN("sparsity", "%g", cli->sparsity, run->sparsity)
    IGN("prune-start", "%g", cli->prune_start, run->prune_start)
    IGN("prune-end", "%g", cli->prune_end, run->prune_end)
    IGN("prune-updates", "%d", cli->prune_updates, run->prune_updates)
#undef IGN
    char pat[16];
    const struct { const char *opt, *cli, *run; } names[] = {
        {"schedule", schedule, schedule_name(run->schedule)},
        {"saliency", saliency, saliency_name(run->saliency)},
        {"group", group, mask_group_name(run->group)},
        {"pattern", pattern, nm_name(pat, &run->pattern)},
        {"nm-ramp", nm_ramp, nm_ramp_name(run->nm_ramp)},
    };
    for (int i = 0; i < 5; i++)
        if (args_given(spec, names[i].opt) && strcmp(names[i].cli, names[i].run) != 0 && n < sizeof buf)
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%s--%s %s (the run's %s)", n ? ", " : "", names[i].opt,
                                  names[i].cli, names[i].run);
    if (n) fprintf(stderr, "best-train: warning: --resume continues the run with its own hyperparameters; ignored: %s\n", buf);
}

int main(int argc, char **argv) {
    blas_init(argv);
    err_set_prog("best-train");
    TRY_OR_DIE(dist_init(&argc, &argv)); // one rank unless mpirun started us
    char prog[64];
    if (dist_size() > 1) { // every rank prints its own errors: say whose
        snprintf(prog, sizeof prog, "best-train [rank %d of %d]", dist_rank(), dist_size());
        err_set_prog(prog);
    }
    const char *init = NULL, *schedule = "cubic", *saliency = "second", *group = "global", *device = NULL;
    const char *pattern = NULL, *nm_ramp = "global";
    StrList data = {0};
    int threads = 0, seed = 0;
    TrainConfig c = {
        .steps = 4000, .batch = 64, .micro_batch = 0, .seq = 2048,
        .lr = 1e-4, .warmup = 0.1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0, .clip = 1.0,
        .sparsity = 0, .prune_start = 0, .prune_end = 0.5, .prune_updates = 50,
    };
    const Option opts[] = {
        {"model", OPT_STRING, &c.model_dir, "DIR", "Hugging Face model folder to start from"},
        {"init", OPT_STRING, &init, "random", "start from a random init instead (needs --config)"},
        {"config", OPT_STRING, &c.init_config, "FILE", "config.json of the random init"},
        {"data", OPT_MULTI, &data, "SHARD", "token shards (repeat, or list several after --data)"},
        {"out", OPT_STRING, &c.out, "DIR", "writes DIR/model, DIR/state, DIR/log.jsonl (required; default --resume DIR)"},
        {"resume", OPT_STRING, &c.resume, "DIR", "continue the run whose --out was DIR (its hyperparameters win, "
                                                   "and its run options unless given)"},
        {"steps", OPT_INT, &c.steps, "N", "optimizer steps"},
        {"batch", OPT_INT, &c.batch, "N", "sequences per step"},
        {"micro-batch", OPT_INT, &c.micro_batch, "N", "sequences per forward (divides --batch / ranks; 0 = "
                                                         "--batch / ranks)"},
        {"seq", OPT_INT, &c.seq, "N", "tokens per sequence (capped by the model's context)"},
        {"lr", OPT_DOUBLE, &c.lr, "X", "peak learning rate"},
        {"warmup", OPT_DOUBLE, &c.warmup, "F", "linear warmup over this fraction of the steps, then linear decay to 0"},
        {"weight-decay", OPT_DOUBLE, &c.weight_decay, "X", "AdamW's decoupled weight decay"},
        {"clip", OPT_DOUBLE, &c.clip, "X", "gradient-norm clip (0 = none)"},
        {"seed", OPT_INT, &seed, "N", "data order (and random init)"},
        {"sparsity", OPT_DOUBLE, &c.sparsity, "S", "final sparsity of the prunable weights, in [0, 1)"},
        {"schedule", OPT_STRING, &schedule, "NAME", "cubic, linear or oneshot"},
        {"prune-start", OPT_DOUBLE, &c.prune_start, "F", "first prune update at this fraction of the steps"},
        {"prune-end", OPT_DOUBLE, &c.prune_end, "F", "last prune update (then the mask is frozen)"},
        {"prune-updates", OPT_INT, &c.prune_updates, "N", "mask updates, evenly spaced"},
        {"saliency", OPT_STRING, &saliency, "NAME", "second (0.5 v w^2), first (|m w|) or magnitude (|w|)"},
        {"group", OPT_STRING, &group, "NAME", "global (one threshold) or layer (per tensor)"},
        {"pattern", OPT_STRING, &pattern, "N:M", "BEST with an N:M target: the last update leaves N of every M "
                                                 "consecutive weights of a row (2:4, 4:8; sets --sparsity (M-N)/M)"},
        {"nm-ramp", OPT_STRING, &nm_ramp, "NAME", "--pattern: global (protect N a group, one threshold for the rest) "
                                                   "or group (every group M -> M-1 -> ... -> N)"},
        {"mask", OPT_STRING, &c.mask_file, "FILE", "retrain under this fixed mask (a best-mask file); no schedule"},
        {"save-every", OPT_INT, &c.save_every, "N", "save the state every N steps (and always at the end)"},
        {"moments-every", OPT_INT, &c.moments_every, "N", "write DIR/moments/step-N.safetensors every N steps"},
        {"save-masks", OPT_FLAG, &c.save_masks, NULL, "write DIR/masks/step-N.safetensors at every prune update"},
        {"no-save-masks", OPT_FLAG_OFF, &c.save_masks, NULL, "do not (the default; turns off a resumed run's --save-masks)"},
        {"stop-at", OPT_INT, &c.stop_at, "N", "stop (and save) after step N, as if interrupted"},
        {"log", OPT_STRING, &c.log, "FILE", "metrics, one JSON line per step (default DIR/log.jsonl)"},
        {"threads", OPT_INT, &threads, "N", "threads; 0 = all cores (at most 4 per core)"},
        {"device", OPT_STRING, &device, "NAME", "cuda or cpu: where the step runs (default cuda when a GPU is "
                                                  "visible, else cpu; not taken from a resumed state)"},
        {"recompute", OPT_FLAG, &c.recompute, NULL, "--device cuda: keep only each layer's input and run its forward "
                                                    "again in the backward (less memory, the same numbers)"},
        {"profile", OPT_STRING, &c.profile, "FILE", "--device cuda: the device time of each phase of a step "
                                                     "(CUDA events), a table written at the end (default $BEST_PROFILE)"},
        {"ignore-memory", OPT_FLAG, &c.ignore_memory, NULL, "start even when the run's memory estimate exceeds "
                                                             "this machine's RAM"},
        {"quiet", OPT_FLAG, &c.quiet, NULL, "nothing on stderr but warnings and errors"},
        {0},
    };
    const ArgSpec spec = {
        "best-train", "(--model DIR | --init random --config FILE) --data SHARD... --out DIR [options] | --resume DIR",
        "AdamW on a model, with progressive sparsification: the mask is recomputed every few\n"
        "steps from the weights and Adam's second moment, keeping exactly the scheduled number\n"
        "of prunable weights; pruned weights never return. A resumed run is bitwise the run\n"
        "that never stopped (on the CPU; it keeps the thread count unless --threads is given).",
        opts,
    };
    char **pos;
    int npos = args_parse(&pos, &spec, argc, argv);
    // shards may also follow --data as positional arguments: --data a.bin b.bin
    const char **shards = xcalloc((size_t)(data.n + npos + 1), sizeof *shards);
    for (int i = 0; i < data.n; i++) shards[c.n_data++] = data.v[i];
    for (int i = 0; i < npos; i++) shards[c.n_data++] = pos[i];
    c.data = shards;
    c.seed = (uint64_t)(int64_t)seed;
    if (!c.resume) {
        if (!!c.model_dir == !!init) args_usage_error(&spec, "give exactly one of --model DIR and --init random");
        if (init && strcmp(init, "random") != 0) args_usage_error(&spec, "--init %s: only 'random' is known", init);
        if (init && !c.init_config) args_usage_error(&spec, "--init random needs --config FILE");
        if (!init && c.init_config) args_usage_error(&spec, "--config goes with --init random");
        if (!c.n_data) args_usage_error(&spec, "--data SHARD is required");
        if (!c.out) args_usage_error(&spec, "--out DIR is required");
    } else {
        if (c.model_dir || init) args_usage_error(&spec, "--resume takes the model from its state: no --model/--init");
        if (!c.out) c.out = c.resume;
    }
    if (c.steps < 1 || c.batch < 1 || c.seq < 1 || c.prune_updates < 1 || c.save_every < 0 || c.moments_every < 0 ||
        c.stop_at < 0)
        args_usage_error(&spec, "--steps, --batch, --seq, --prune-updates must be >= 1; counts >= 0");
    if (c.micro_batch < 0 || (c.micro_batch > 0 && c.batch % c.micro_batch))
        args_usage_error(&spec, "--batch %d is not a multiple of --micro-batch %d", c.batch, c.micro_batch);
    if (!(c.sparsity >= 0 && c.sparsity < 1)) args_usage_error(&spec, "--sparsity %g is outside [0, 1)", c.sparsity);
    if (!(c.warmup >= 0 && c.warmup <= 1)) args_usage_error(&spec, "--warmup %g is outside [0, 1]", c.warmup);
    if (!(c.prune_start >= 0 && c.prune_start <= c.prune_end && c.prune_end <= 1))
        args_usage_error(&spec, "need 0 <= --prune-start <= --prune-end <= 1");
    if (!(c.lr >= 0) || !(c.clip >= 0) || !(c.weight_decay >= 0)) args_usage_error(&spec, "--lr, --clip, --weight-decay must be >= 0");
    if (schedule_parse(&c.schedule, schedule) < 0) args_usage_error(&spec, "unknown --schedule %s (cubic, linear, oneshot)", schedule);
    if (saliency_parse(&c.saliency, saliency) < 0) args_usage_error(&spec, "unknown --saliency %s (second, first, magnitude)", saliency);
    if (mask_group_parse(&c.group, group) < 0) args_usage_error(&spec, "unknown --group %s (global, layer)", group);
    if (!device) c.device = TRAIN_DEVICE_DEFAULT;
    else if (strcmp(device, "cuda") == 0) c.device = TRAIN_DEVICE_CUDA;
    else if (strcmp(device, "cpu") == 0) c.device = TRAIN_DEVICE_CPU;
    else args_usage_error(&spec, "unknown --device %s (cuda, cpu)", device);
    if (pattern) {
        if (nm_parse(&c.pattern, pattern) < 0 || c.pattern.m == 0)
            args_usage_error(&spec, "--pattern %s: N:M with 0 < N < M <= %d (2:4, 4:8)", pattern, NM_MAX);
        if (c.mask_file) args_usage_error(&spec, "--pattern with --mask: a fixed mask's pattern is its file's");
        if (args_given(&spec, "sparsity") && fabs(c.sparsity - nm_sparsity(&c.pattern)) > 1e-12)
            args_usage_error(&spec, "--sparsity %g with --pattern %s, whose sparsity is %g: give one of them",
                             c.sparsity, pattern, nm_sparsity(&c.pattern));
        c.sparsity = nm_sparsity(&c.pattern);
    }
    if (nm_ramp_parse(&c.nm_ramp, nm_ramp) < 0) args_usage_error(&spec, "unknown --nm-ramp %s (global, group)", nm_ramp);
    if (args_given(&spec, "nm-ramp") && !pattern && !c.resume) args_usage_error(&spec, "--nm-ramp goes with --pattern N:M");
    if (c.mask_file && c.sparsity > 0) args_usage_error(&spec, "--mask (a fixed mask) and --sparsity (a schedule) exclude each other");
    args_threads(&spec, threads);
    // run options given here win over a resumed state's (train.h)
    static const struct { const char *opt; unsigned bit; } run_opts[] = {
        {"threads", TRAIN_OPT_THREADS}, {"save-every", TRAIN_OPT_SAVE_EVERY},
        {"moments-every", TRAIN_OPT_MOMENTS_EVERY}, {"save-masks", TRAIN_OPT_SAVE_MASKS},
        {"no-save-masks", TRAIN_OPT_SAVE_MASKS}, {"log", TRAIN_OPT_LOG},
    };
    for (size_t i = 0; i < sizeof run_opts / sizeof *run_opts; i++)
        if (args_given(&spec, run_opts[i].opt)) c.given |= run_opts[i].bit;

    if (!c.profile && getenv("BEST_PROFILE") && *getenv("BEST_PROFILE")) c.profile = getenv("BEST_PROFILE");
    c.optim = train_optim_parse(getenv("BEST_OPTIM"));
    if (c.optim < 0) args_usage_error(&spec, "BEST_OPTIM=%s in the environment: expected fused, fused1 or passes",
                                      getenv("BEST_OPTIM"));
    if (dist_rank() > 0) c.quiet = 1; // rank 0 speaks for the run
    Trainer tr;
    c.steps_given = args_given(&spec, "steps");
    int orc = train_open(&tr, &c);
    if (orc == -2) args_usage_error(&spec, "%s", err_msg()); // (the model does not take --pattern)
    TRY_OR_DIE(orc);
    if (c.resume && dist_rank() == 0 && !c.quiet) warn_ignored(&spec, &c, &tr.cfg, schedule, saliency, group, pattern, nm_ramp);
    int last = c.stop_at > 0 && c.stop_at < tr.cfg.steps ? c.stop_at : tr.cfg.steps;
    if (c.resume && tr.step >= last) { // nothing to train: say so, and write nothing
        if (dist_rank() == 0 && !c.quiet)
            fprintf(stderr, "best-train: %s: the run is at step %d of %d%s: nothing to do (to train further, start a "
                    "new run from %s/model)\n", c.resume, tr.step, tr.cfg.steps,
                    last < tr.cfg.steps ? " (past --stop-at)" : ", finished", c.resume);
    } else {
        if (!c.quiet) train_print_config(stderr, &tr);
        TRY_OR_DIE(train_run(&tr));
        if (!c.quiet) fprintf(stderr, "best-train: step %d, saved %s/model and %s/state\n", tr.step, c.out, c.out);
    }
    train_close(&tr);
    free(shards);
    free(pos);
    free(data.v);
    TRY_OR_DIE(stdout_close()); // a lost result (a full disk) is an error
    dist_finalize();
    return 0;
}
