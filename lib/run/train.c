// train.c: the training loop and its metrics (see train.h): open (the checks, the memory
// estimate), the step on the host or through the engine, mask updates, the log, close.
// The state's save and resume are train_state.c's, OUT's lock and clean-ups train_out.c's
// (train_internal.h: what the files share).
#include "run/train.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/args.h"       // defines: args_choice
#include "base/error.h"      // defines: ERR, TRY, xmalloc
#include "base/fileio.h"     // defines: AFile, path_join, path_fmt, path_is_dir
#include "base/progress.h"   // defines: human_count
#include "io/safetensors.h"  // defines: SafeTensors
#include "sparse/select.h"   // defines: select_keep_count
#include "pack/pack_model.h" // defines: model_open
#include "dist/dist.h"       // defines: dist_slice, dist_sum_f64, dist_reduce_scatter_f32, dist_gather
#include "run/shards.h"      // defines: ShardManifest, shards_read
#include "base/cuda.h"         // defines: cuda_info
#include "nn/layers.h"       // defines: layers_blas_info
#include "run/train_internal.h" // defines: state_find, state_meta_read, out_lock, train_own, train_host_sync

// --- small helpers ------------------------------------------------------------------

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Uniform in (0, 1]: 53 random bits.
static double uniform01(uint64_t *s) { return ((splitmix64(s) >> 11) + 1) * (1.0 / 9007199254740992.0); }

void train_init_random(Model *m, uint64_t seed, double std) {
    uint64_t s = seed;
    for (int i = 0; i < m->n_info; i++) {
        const ParamInfo *p = &m->info[i];
        float *w = m->params + p->offset;
        if (strstr(p->name, "norm")) {
            for (size_t j = 0; j < p->numel; j++) w[j] = 1.0f;
        } else if (p->ndim == 2) {
            for (size_t j = 0; j < p->numel; j++) {  // Box-Muller, one normal per pair of uniforms
                double u1 = uniform01(&s), u2 = uniform01(&s);
                w[j] = (float)(std * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
            }
        } else {
            memset(w, 0, p->numel * sizeof *w);
        }
    }
}

const char *train_own(Trainer *tr, const char *s) {
    tr->owned = xrealloc(tr->owned, (size_t)(tr->n_owned + 1) * sizeof *tr->owned);
    return tr->owned[tr->n_owned++] = xstrdup(s);
}

int train_weights_check(const Model *m, const char *where) {
    for (int i = 0; i < m->n_info; i++)
        TRY(params_check_finite(where, &m->info[i], m->params + m->info[i].offset, 0, m->info[i].numel));
    return 0;
}

// --device cuda: the device's weights, moments and mask into the host's m.params, opt
// and mask (once per step at most), before anything reads them there. GPU ranks hold the
// fp32 weights of their slice only: the host block is gathered from them (every rank
// calls this at the same points).
void train_host_sync(Trainer *tr) {
    if (engine_train_on_device(&tr->dt) && tr->host_stale) {
        engine_train_download(&tr->dt, tr->m.params, &tr->opt, tr->mask); // the device updates the mask too
        if (dist_size() > 1) dist_gather(tr->m.params, tr->m.params + tr->lo, tr->m.n_params, sizeof(float), 1);
    }
    tr->host_stale = 0;
}

// --- open, step, run, close -------------------------------------------------------------

// BEST_TEST_PAUSE=POINT: the process stops itself (SIGSTOP) at POINT, so that a test can
// do something at exactly that moment and then let it go on (SIGCONT); how
// tests/t_train.sh makes the race of two fresh runs on one new OUT deterministic.
// Points: "train-lock" (a fresh run, its checks done, before it takes OUT's lock);
// "step-N" (after step N and its save, if any: tests/t_signals.sh interrupts a run there).
static void test_pause(const char *point) {
    const char *p = getenv("BEST_TEST_PAUSE");
    if (p && strcmp(p, point) == 0) raise(SIGSTOP);
}

static int config_check(const TrainConfig *c) {
    if (c->steps < 1) return ERR("--steps %d must be >= 1", c->steps);
    int ranks = dist_size();
    if (c->micro_batch < 1 || c->batch < c->micro_batch || c->batch % c->micro_batch)
        return ERR("--batch %d must be a positive multiple of --micro-batch %d", c->batch, c->micro_batch);
    if (c->batch % (c->micro_batch * ranks))
        return ERR("--batch %d does not split over %d ranks in micro-batches of %d: each rank takes batch / ranks "
                   "sequences, a multiple of --micro-batch", c->batch, ranks, c->micro_batch);
    if (c->seq < 1) return ERR("--seq %d must be >= 1", c->seq);
    if (!(c->sparsity >= 0 && c->sparsity < 1)) return ERR("--sparsity %g is outside [0, 1)", c->sparsity);
    if (!(c->prune_start >= 0 && c->prune_start <= c->prune_end && c->prune_end <= 1))
        return ERR("--prune-start %g and --prune-end %g must satisfy 0 <= start <= end <= 1", c->prune_start,
                   c->prune_end);
    if (c->prune_updates < 1) return ERR("--prune-updates %d must be >= 1", c->prune_updates);
    if (c->pattern.m && fabs(c->sparsity - nm_sparsity(&c->pattern)) > 1e-12) {
        char pat[16];
        return ERR("--sparsity %g with --pattern %s, whose sparsity is %g", c->sparsity, nm_name(pat, &c->pattern),
                   nm_sparsity(&c->pattern));
    }
    return 0;
}

// Puts fresh (hi - lo: this rank's slice, owned from here on) in force: the slice's
// pruned weights become 0 now (the others' with the all-gather that ends the step), and
// adamw_step keeps them 0. How a new mask enters a run in-process (mask_update).
static void mask_install(Trainer *tr, uint8_t *fresh) {
    free(tr->mask);
    tr->mask = fresh;
    tr->masked = 1;
    mask_apply(tr->m.params + tr->lo, tr->mask, tr->hi - tr->lo);
}

// A mask file (every rank reads all of it) in force: all the weights it prunes become 0
// and the rank keeps its slice. With a resumed state (resume set) it may only shrink the
// state's mask.
static int mask_file_install(Trainer *tr, const char *path, int resume) {
    Model *m = &tr->m;
    uint8_t *full = xmalloc(m->n_params);
    int rc = mask_load(full, path, m->info, m->n_info, m->n_params);
    if (rc == 0) rc = mask_file_pattern(&tr->pattern, path, full, m->info, m->n_info); // (kept by the run's saves)
    for (size_t i = tr->lo; rc == 0 && resume && i < tr->hi; i++)
        if (full[i] && !tr->mask[i - tr->lo])
            rc = ERR("%s: keeps a weight the run has pruned already (pruned weights never return)", path);
    if (rc == 0) {
        mask_apply(m->params, full, m->n_params);
        memcpy(tr->mask, full + tr->lo, tr->hi - tr->lo);
        tr->masked = 1;
    }
    free(full);
    return rc;
}

// --resume DIR --mask FILE: the schedule runs outside (best-mask on this run's moment
// dump), so FILE replaces the state's mask from the next step on, as an in-process
// update would. It may only shrink the mask.
static int resume_with_mask(Trainer *tr, const char *path) {
    TrainConfig *c = &tr->cfg;
    if (c->sparsity > 0)
        return ERR("%s: --mask on --resume needs a run without a schedule (this one has --sparsity %g)", c->resume,
                   c->sparsity);
    TRY(mask_file_install(tr, path, 1));
    c->mask_file = train_own(tr, path);
    return 0;
}

// The engine of the run's device (engine.h) and, on a GPU, the step there with the host's
// weights, moments and mask (this rank's slice) uploaded; every rank calls it. Under
// mpirun each rank takes the GPU of its local rank and joins the ranks' NCCL
// communicator; without, GPU 0 and no communicator.
static int device_open(Trainer *tr) {
    const TrainConfig *c = &tr->cfg;
    TRY(dist_agree(engine_open(&tr->eng, c->device == TRAIN_DEVICE_CUDA ? "cuda" : "cpu", ENGINE_LOCAL_GPU)));
    EngineTrainShape sh = {c->micro_batch, c->seq, c->recompute, c->profile != NULL};
    return engine_train_open(&tr->dt, tr->eng, &tr->m, &tr->opt, tr->masked ? tr->mask : NULL, &sh);
}

// The host memory a run takes, in bytes, from its config alone (nothing allocated yet, so
// that a 7B model on a small machine is refused before its 28 GB of weights are read):
// fp32 weights (4 a parameter), Adam's m and v and the mask of this rank's slice (9 / ranks),
// and on the CPU the gradients (4) and the activations of one micro-batch, estimated per
// token as 14 C + 4 I floats a layer plus 3 V (what model_acts_init takes, within ~20% on
// the fixtures). Times the ranks on this machine (Open MPI says how many).
#define GIB 1073741824.0 // bytes in a GiB: every size the tools print is in binary units

static double memory_estimate(const Model *plan, const TrainConfig *c, int on_cuda) {
    double P = (double)plan->n_params, ranks = dist_size();
    double need = 4 * P + 9 * P / ranks;
    if (!on_cuda) {
        int seq = config_cap_seq(&plan->cfg, c->seq, "best-train", "sequences", 1); // (said later, once)
        double tokens = (double)(c->micro_batch ? c->micro_batch : c->batch) * seq;
        need += 4 * P + 4 * tokens * ((double)plan->L * (14.0 * (double)plan->C + 4.0 * (double)plan->I) + 3.0 * (double)plan->V);
    }
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    return need * (local && atoi(local) > 0 ? atoi(local) : 1);
}

// The config.json of what the run will load: the resumed run's model, --config, or the
// --model folder's (a best-train OUT means OUT/model); NULL for a pack (refused later).
static char *config_path_of(const TrainConfig *c) {
    if (c->resume) return path_fmt("%s/model/config.json", c->resume);
    if (c->init_config) return xstrdup(c->init_config);
    if (!c->model_dir || !path_is_dir(c->model_dir)) return NULL;
    char *p = path_join(c->model_dir, "config.json");
    if (access(p, F_OK) != 0) {
        free(p);
        p = path_fmt("%s/model/config.json", c->model_dir);
    }
    return p;
}

// Refuses a run whose estimate exceeds this machine's RAM (unless --ignore-memory): it
// would swap for days or be killed hours in. Fills tr->mem_need and tr->mem_ram.
static int memory_check(Trainer *tr, int on_cuda) {
    const TrainConfig *c = &tr->cfg;
    char *path = config_path_of(c);
    char *text = NULL;
    size_t len;
    Model plan;
    int rc = path && file_read_all(&text, &len, path) == 0 && model_plan(&plan, text, len, path, 0) == 0;
    free(text);
    if (!rc) { // no config to plan from: model_open gives the real error
        free(path);
        return 0;
    }
    tr->mem_need = memory_estimate(&plan, c, on_cuda);
    tr->mem_ram = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    size_t P = plan.n_params;
    // the knob that fixes most refusals on the CPU: the largest micro-batch (a divisor of
    // the rank's batch) whose activations fit
    char hint[96] = "";
    int per_rank = c->batch / dist_size(), cur = c->micro_batch ? c->micro_batch : per_rank;
    for (int mb = cur - 1; mb >= 1 && !on_cuda && tr->mem_need > tr->mem_ram; mb--) {
        if (per_rank % mb) continue;
        TrainConfig smaller = *c;
        smaller.micro_batch = mb;
        double need = memory_estimate(&plan, &smaller, on_cuda);
        if (need <= tr->mem_ram) {
            snprintf(hint, sizeof hint, "--micro-batch %d (about %.1f GiB), ", mb, need / GIB);
            break;
        }
    }
    model_free(&plan);
    free(path);
    if (tr->mem_need <= tr->mem_ram || c->ignore_memory) return 0;
    char np[32];
    human_count(np, sizeof np, (double)P);
    return ERR("this run needs about %.1f GiB of memory (%s parameters: fp32 weights, Adam's moments%s) and this "
               "machine has %.1f GiB of RAM; %strain on a GPU (--device cuda; --recompute if its memory is short), "
               "over more machines (mpirun), or pass --ignore-memory to start anyway", tr->mem_need / GIB, np,
               on_cuda ? "" : ", gradients and activations", tr->mem_ram / GIB, hint);
}

// train_open's reading and checking, by every rank on its own (no collective, nothing
// written): the model or state, the shards, the mask. *sharded: this rank's slice of
// the weights came from a sharded state, and the ranks must share them.
static int open_read(Trainer *tr, const TrainConfig *cfg, int *sharded) {
    TrainConfig *c = &tr->cfg;
    SafeTensors st;
    ShardManifest mf = {0};
    int have_st = 0, rc = 0, ranks = dist_size();
    *sharded = 0;
    // OUT in use: refused before anything is read (or written); rank 0 holds the lock
    if (dist_rank() == 0 && c->out && path_is_dir(c->out) && out_lock(tr, c->out, 0) < 0) return -1;
    EngineKind kind; // the default: the GPU when one is visible
    if (engine_pick(&kind, c->device == TRAIN_DEVICE_CUDA ? "cuda" : c->device == TRAIN_DEVICE_CPU ? "cpu" : NULL) < 0)
        return -1;
    int on_cuda = kind == ENGINE_CUDA;
    if (c->resume) {
        TRY(state_find(&st, &mf, sharded, c->resume));
        have_st = 1;
        if (state_meta_read(tr, &st) < 0) goto fail;
        if (cfg->steps_given && cfg->steps != c->steps) {
            ERR("%s: --steps %d: the run was laid out over %d steps (its LR warmup and decay, its sparsity "
                "schedule); a resumed run keeps them. To train further, start a new run from %s/model",
                c->resume, cfg->steps, c->steps, c->resume);
            goto fail;
        }
    }
    // before the weights are read (the resumed run's settings are in c by now)
    if (memory_check(tr, on_cuda) < 0) goto fail;
    if (c->resume) {
        char *md = path_join(c->resume, "model");
        rc = model_load(&tr->m, md);
        free(md);
        if (rc < 0) goto fail;
        // the config the state was trained with: an edited OUT/model/config.json
        // (rope_theta, say) would go on training another model
        if (state_config_check(&st, &tr->m, c->resume) < 0) goto fail;
    } else if (c->init_config) {
        if (model_create(&tr->m, c->init_config) < 0) goto fail;
        train_init_random(&tr->m, c->seed, 0.02);
    } else {
        if (model_open(&tr->m, c->model_dir) < 0) goto fail;
    }
    if (model_need_folder(&tr->m, "best-train") < 0) goto fail;
    if (c->model_dir && train_weights_check(&tr->m, c->model_dir) < 0) goto fail;
    if (c->micro_batch == 0) c->micro_batch = c->batch / ranks > 0 ? c->batch / ranks : 1;
    c->seq = config_cap_seq(&tr->m.cfg, c->seq, "best-train", "sequences", c->quiet || dist_rank() > 0);
    if (config_check(c) < 0) {
        if (c->resume) err_prefix("%s", st.path);
        goto fail;
    }
    // the run's threads: the resumed state's unless given (state_run_read), else those in force
    if (tr->restored & TRAIN_OPT_THREADS) omp_set_num_threads(c->threads);
    c->threads = omp_get_max_threads();
    if (out_check_fresh(c) < 0) goto fail;
    Model *m = &tr->m;
    c->device = on_cuda ? TRAIN_DEVICE_CUDA : TRAIN_DEVICE_CPU;
    if (!on_cuda && c->recompute) {
        ERR("--recompute is for --device cuda (the CPU path keeps every layer's activations)");
        goto fail;
    }
    if (!on_cuda && c->profile) {
        ERR("--profile %s: it times the device's phases of a step; it needs --device cuda", c->profile);
        goto fail;
    }
    dist_slice(&tr->lo, &tr->hi, m->n_params, dist_rank(), ranks);
    adamw_init(&tr->opt, tr->hi - tr->lo);
    tr->mask = xmalloc(tr->hi - tr->lo ? tr->hi - tr->lo : 1);
    memset(tr->mask, 1, tr->hi - tr->lo);
    if (loader_open(&tr->data, c->data, c->n_data, c->seq, c->seed, (uint32_t)m->V) < 0) goto fail;
    if (have_st) {
        rc = *sharded ? shards_read(m->params, tr->opt.m, tr->opt.v, tr->mask, &mf, tr->lo, tr->hi)
                      : state_load_single(tr, &st);
        if (rc == 0) rc = state_cursor_read(tr, &st);
        if (rc < 0) goto fail;
        st_close(&st);
        have_st = 0;
        if (cfg->mask_file && resume_with_mask(tr, cfg->mask_file) < 0) goto fail;
    } else if (c->mask_file) {
        if (mask_file_install(tr, c->mask_file, 0) < 0) goto fail;
    } else if (c->pattern.m) { // BEST with an N:M target: every prunable tensor's columns in groups of M
        if (nm_check(&c->pattern, m->info, m->n_info) < 0) {
            err_prefix("%s", c->model_dir ? c->model_dir : c->init_config);
            rc = -2; // (a usage error: the option does not fit the model)
            goto fail;
        }
        tr->pattern = c->pattern;
    }
    tr->sched = (PruneSchedule){c->schedule, c->mask_file ? 0.0 : c->sparsity, c->steps, c->prune_start,
                                c->prune_end, c->prune_updates};
    size_t n = (size_t)(c->batch / ranks) * (size_t)c->seq; // this rank's share of a step's batch
    tr->tokens = xmalloc(n * sizeof *tr->tokens);
    tr->targets = xmalloc(n * sizeof *tr->targets);
    shards_manifest_free(&mf);
    return 0;
fail:
    if (have_st) st_close(&st);
    shards_manifest_free(&mf);
    return rc == -2 ? -2 : -1;
}

int train_open(Trainer *tr, const TrainConfig *cfg) {
    memset(tr, 0, sizeof *tr);
    tr->lock_fd = -1;
    tr->cfg = *cfg;
    TrainConfig *c = &tr->cfg;
    Model *m = &tr->m;
    int sharded, usage = 0;
    int orc = open_read(tr, cfg, &sharded);
    usage = orc == -2; // (every rank checks the same model: all agree)
    if (dist_agree(orc < 0 ? -1 : 0) < 0) goto fail;
    if (sharded) { // each rank read its slice of the fp32 weights: share them
        dist_gather(m->params, m->params + tr->lo, m->n_params, sizeof *m->params, 1);
        if (dist_agree(train_weights_check(m, c->resume)) < 0) goto fail;
    }
    // the device, with the weights all ranks now hold (the ranks together: a collective)
    if (dist_agree(device_open(tr)) < 0) goto fail;
    uint64_t kept = mask_count(tr->mask, tr->hi - tr->lo);
    dist_sum_u64(&kept, 1);
    tr->fixed_kept = kept - (m->n_params - m->n_prunable);
    // Everything checked, on every rank: from here on we write (rank 0: OUT, its lock, the log).
    int rc = 0;
    if (dist_rank() == 0) {
        // the run's inputs, which no output of it may be (fileio.h): the log first
        const char *ins[] = {c->model_dir, c->mask_file, c->init_config};
        for (int i = 0; i < 3; i++)
            if (ins[i]) path_note_input(ins[i]);
        for (int i = 0; i < c->n_data; i++) path_note_input(c->data[i]);
        char *logp = c->log ? xstrdup(c->log) : path_join(c->out, "log.jsonl");
        char *saved = path_join(c->out, "model"); // (--model OUT/model)
        rc = path_check_not_input(logp);
        if (rc == 0 && c->profile) rc = path_check_out_file(c->profile, c->out);
        if (rc == 0 && c->profile) rc = path_check_not_input(c->profile);
        if (rc == 0) rc = model_check_save_dir(saved);
        free(saved);
        if (rc == 0) rc = path_mkdir_made(&tr->out_made, c->out);
        if (rc == 0 && tr->lock_fd < 0) {
            test_pause("train-lock");
            rc = out_lock(tr, c->out, 1);
            if (rc == 0) rc = out_check_fresh(c);
        }
        if (rc == 0) out_remove_stale_temps(c->out); // under OUT's lock: no run of ours writes them
        if (rc == 0 && !c->resume) out_remove_stale_steps(c->out);
        if (rc == 0 && c->resume) rc = out_log_truncate(logp, tr->step);
        struct stat ls;
        tr->log_made = !c->resume && lstat(logp, &ls) < 0 && errno == ENOENT;
        tr->saved = c->resume != NULL;
        if (rc == 0) {
            tr->log = fopen(logp, c->resume ? "a" : "w");
            if (!tr->log) rc = ERR("%s: cannot open the log: %s", logp, strerror(errno));
        }
        tr->log_path = logp;
    }
    if (dist_agree(rc) < 0) goto fail;
    return 0;
fail:
    train_close(tr);
    return usage ? -2 : -1;
}

void train_close(Trainer *tr) {
    engine_train_close(&tr->dt);
    engine_close(tr->eng);
    if (tr->log) fclose(tr->log);
    free(tr->log_path);
    if (tr->lock_fd >= 0) close(tr->lock_fd);
    free(tr->out_made);
    if (tr->m.params) model_free(&tr->m);
    if (tr->opt.m) adamw_free(&tr->opt);
    if (tr->data.perm || tr->data.shards) loader_close(&tr->data);
    free(tr->mask);
    free(tr->tokens);
    free(tr->targets);
    for (int i = 0; i < tr->n_owned; i++) free(tr->owned[i]);
    free(tr->owned);
    free(tr->data_list);
    memset(tr, 0, sizeof *tr);
    tr->lock_fd = -1;
}

// Payload bytes this rank has put into collectives so far: MPI's and NCCL's.
static double comm_bytes(const Trainer *tr) { return (double)dist_bytes() + engine_train_comm_bytes(&tr->dt); }

// Step 5 of train.h: shrink the mask to S(t) and apply it to the weights.
// On the device (--device cuda) the update runs there (mask_update_cuda: the same mask,
// no score leaves the device); where that declines (bad inputs), the host's mask_compute
// on downloaded copies gives the error.
static int mask_update(Trainer *tr, double S, double *bytes) {
    Model *m = &tr->m;
    MaskSpec spec = {tr->cfg.saliency, tr->cfg.group, S, NULL, 0, 0, 0}; // weights in memory: no file to name
    int nm_final = 0; // the update leaves exactly N:M (the pattern's last)
    if (tr->pattern.m) {
        nm_ramp_at(&spec.nm_keep, &spec.sparsity, &tr->pattern, tr->cfg.nm_ramp, S);
        spec.nm_m = tr->pattern.m;
        nm_final = spec.nm_keep == tr->pattern.n && spec.sparsity >= nm_sparsity(&tr->pattern);
    }
    int on_device = 0;
    if (engine_train_on_device(&tr->dt)) {
        // the counts (MPI) and, with GPU ranks, the zeroed weights shared (NCCL)
        double b0 = comm_bytes(tr);
        int rc = engine_train_mask_update(&tr->dt, &spec);
        *bytes = comm_bytes(tr) - b0;
        if (rc < 0) {
            err_prefix("step %d: mask update", tr->step);
            return -1;
        }
        on_device = rc == 0;
        if (on_device) tr->masked = tr->host_stale = 1; // the host's mask, weights: downloaded when read
    }
    if (!on_device) {
        train_host_sync(tr); // on the device: its weights and moments are the ones to score
        Moments mo;
        moments_from_block(&mo, tr->opt.m, tr->opt.v, tr->lo);
        uint8_t *fresh = xmalloc(tr->hi - tr->lo ? tr->hi - tr->lo : 1);
        uint64_t b0 = dist_bytes();
        if (mask_compute_slice(fresh, &spec, m->info, m->n_info, m->params, tr->lo, tr->hi, &mo, tr->mask) < 0) {
            free(fresh);
            err_prefix("step %d: mask update", tr->step);
            return -1;
        }
        *bytes = (double)(dist_bytes() - b0);
        mask_install(tr, fresh);
        if (engine_train_on_device(&tr->dt)) { // the mask, and the weights it zeroed (every rank's)
            dist_gather(m->params, m->params + tr->lo, m->n_params, sizeof *m->params, 1);
            engine_train_upload(&tr->dt, m->params, NULL, tr->mask);
        }
    }
    if (!tr->cfg.save_masks) return 0;
    train_host_sync(tr);
    // rank 0 writes the whole mask: it gathers the other ranks' slices
    uint8_t *full = tr->mask;
    if (dist_size() > 1) {
        full = dist_rank() == 0 ? xmalloc(m->n_params) : NULL;
        dist_gather(full, tr->mask, m->n_params, 1, 0);
    }
    int rc = 0;
    if (dist_rank() == 0) {
        char *path = path_fmt("%s/masks/step-%d.safetensors", tr->cfg.out, tr->step);
        char *dir = path_join(tr->cfg.out, "masks");
        char pat[16];
        MaskMeta meta = {spec.sparsity, saliency_name(tr->cfg.saliency), mask_group_name(tr->cfg.group), tr->step, 1,
                         "BEST", schedule_name(tr->cfg.schedule), tr->cfg.steps,
                         nm_final ? nm_name(pat, &tr->pattern) : NULL};
        char *made;
        rc = path_mkdir_made(&made, dir);
        if (rc == 0) rc = mask_save(path, full, &meta, m->info, m->n_info);
        if (rc < 0) path_unmake(made, dir);
        else free(made);
        free(dir);
        free(path);
    }
    if (full != tr->mask) free(full);
    return dist_agree(rc);
}


int train_optim_parse(const char *s) {
    static const char *const names[] = {"fused", "fused1", "passes"}; // TRAIN_OPTIM_* in order
    return args_choice(s, names, 3);
}

// The error of a step whose loss or gradient norm is not finite.
static int diverged(int t, double loss, double norm) {
    return ERR("step %d: the %s is %g: training diverged (try a lower --lr); stopped, the last saved state "
               "is kept", t, isfinite(loss) ? "gradient norm" : "loss", isfinite(loss) ? norm : loss);
}

static int step(Trainer *tr, StepStats *stats) {
    TrainConfig *c = &tr->cfg;
    Model *m = &tr->m;
    int t = tr->step + 1;
    double t0 = now_seconds();
    double loss, sumsq;
    int passes = c->optim == TRAIN_OPTIM_PASSES;
    // (the one-pass optimizer on one GPU: the norm stays there until the step is done)
    int norm_later = engine_train_norm_later(&tr->dt, passes);
    // this rank's share of the batch (the other ranks' sequences skipped: every rank's cursor
    // stays the same)
    int ranks = dist_size(), per = c->batch / ranks;
    loader_skip(&tr->data, (uint64_t)dist_rank() * (uint64_t)per);
    for (size_t i = 0; i < (size_t)per; i++)
        loader_next(&tr->data, tr->tokens + i * (size_t)c->seq, tr->targets + i * (size_t)c->seq);
    loader_skip(&tr->data, (uint64_t)(ranks - 1 - dist_rank()) * (uint64_t)per);
    EngineGrads g = {tr->tokens, tr->targets, c->batch, c->micro_batch, c->seq, tr->masked, passes, t,
                     tr->mask, tr->lo, tr->hi};
    TRY(engine_train_grads(&tr->dt, &loss, &sumsq, &g));
    // the mean loss and clip_grad_norm_ over the ranks: each adds its part (dist.h), then clips
    double part[2] = {loss, sumsq};
    dist_sum_f64(part, 2);
    loss = part[0];
    double norm = sqrt(part[1]);
    if (!isfinite(loss) || (!norm_later && !isfinite(norm))) return diverged(t, loss, norm);
    AdamWHyper h = {lr_at(c->lr, c->warmup, c->steps, t), c->beta1, c->beta2, c->eps, c->weight_decay};
    EngineOptim o = {&h, tr->opt.t + 1, tr->masked, passes, c->optim == TRAIN_OPTIM_FUSED ? 4 : 1, c->clip,
                     norm_later ? NAN : part[1], &tr->opt, tr->mask, tr->lo, tr->hi};
    engine_train_optimize(&tr->dt, &norm, &o); // (waited for: the clock times the work)
    if (norm_later && !isfinite(norm)) return diverged(t, loss, norm); // (the kernel changed nothing)
    tr->host_stale = 1; // (a device's weights and moments are ahead of the host's)
    tr->step = t;
    double tm = now_seconds(), mask_seconds = 0, mask_bytes = 0;
    if (schedule_update_at(&tr->sched, t)) {
        engine_train_mask_begin(&tr->dt);
        TRY(mask_update(tr, schedule_sparsity(&tr->sched, t), &mask_bytes));
        engine_train_mask_end(&tr->dt);
        mask_seconds = now_seconds() - tm;
    }
    // on the CPU each rank updated (and masked) its slice of the host's weights: all-gather them
    if (!engine_train_on_device(&tr->dt)) dist_gather(m->params, m->params + tr->lo, m->n_params, sizeof *m->params, 1);
    engine_train_step_end(&tr->dt, now_seconds() - t0);
    if (stats) {
        double dt = now_seconds() - t0; // the whole step: forward to optimizer, mask update, all-gather
        double sparsity = engine_train_sparsity(&tr->dt);
        *stats = (StepStats){t, loss, h.lr, tr->masked && tr->sched.final == 0 ? NAN : schedule_mask_target(&tr->sched, t),
                             sparsity, norm, dt > 0 ? (double)c->batch * c->seq / dt : 0, 0, mask_seconds,
                             mask_bytes}; // (tokens_per_s_avg: train_run's)
    }
    return 0;
}

int train_step(Trainer *tr, StepStats *stats) {
    // GPU ranks wait for each other inside NCCL, where a stream synchronisation waits
    // without a limit: the watchdog times the whole step (dist.h)
    if (engine_train_nccl(&tr->dt)) dist_watch("a step of the GPU ranks (NCCL)");
    int rc = step(tr, stats);
    dist_watch(NULL);
    return rc;
}

// One line of the log, flushed; 0, or ERR naming the log when it could not be written
// (a full disk, /dev/full).
static int log_stats(FILE *f, const char *path, const StepStats *s) {
    // %.9g round-trips a float; NaN would not be JSON (target of a fixed mask file: null)
    fprintf(f, "{\"step\":%d,\"loss\":%.9g,\"lr\":%.9g,\"sparsity_target\":", s->step, s->loss, s->lr);
    if (isnan(s->target)) fprintf(f, "null");
    else fprintf(f, "%.9g", s->target);
    fprintf(f, ",\"sparsity\":%.9g,\"grad_norm\":%.9g,\"tokens_per_s\":%.1f,\"tokens_per_s_avg\":%.1f", s->sparsity,
            s->grad_norm, s->tokens_per_s, s->tokens_per_s_avg);
    if (s->mask_seconds > 0) fprintf(f, ",\"mask_update_s\":%.6f", s->mask_seconds);
    if (s->mask_seconds > 0 && dist_size() > 1) fprintf(f, ",\"mask_update_bytes\":%.0f", s->mask_bytes);
    fprintf(f, "}\n");
    if (fflush(f) != 0 || ferror(f)) return ERR("%s: cannot write the log: %s", path, strerror(errno));
    return 0;
}

// The device memory of the run (rank 0's GPU), measured against computed, at its end.
static void device_memory_say(const Trainer *tr) {
    size_t measured, computed;
    engine_train_memory(&tr->dt, &measured, &computed);
    if (!measured || tr->cfg.quiet || dist_rank() > 0) return;
    fprintf(stderr, "best-train: device memory: %.2f GiB in use after the first step (cudaMemGetInfo: the model, "
            "activations, workspaces and CUDA's own), %.2f GiB computed for the model and activations\n",
            (double)measured / (1 << 30), (double)computed / (1 << 30));
}

// --profile FILE: the table of the device's phases (rank 0's), written at the end of the run.
static int profile_write(Trainer *tr) {
    const char *path = tr->cfg.profile;
    if (!path || !engine_train_profiled(&tr->dt) || dist_rank() > 0) return dist_agree(0);
    AFile f;
    int rc = afile_open(&f, path);
    if (rc == 0) {
        engine_train_profile_write(&tr->dt, f.fp);
        rc = afile_commit(&f);
    }
    if (rc == 0 && !tr->cfg.quiet) fprintf(stderr, "best-train: the profile of the device's step: %s\n", path);
    return dist_agree(rc);
}

// A save (moments 0: train_save; 1: train_save_moments); when one fails before a save of
// a fresh run finished, out_unmake_fresh.
static int save_or_unmake(Trainer *tr, int moments) {
    if ((moments ? train_save_moments(tr) : train_save(tr)) == 0) {
        tr->saved |= !moments;
        return 0;
    }
    if (!tr->saved && dist_rank() == 0) out_unmake_fresh(tr);
    return -1;
}

// What an interrupt (SIGTERM, Ctrl-C, SIGHUP) leaves, for fileio's handler to say as the
// process dies (rank 0): the step of the last save (saved < 0: none yet) and the command
// that continues from it.
static void interrupt_note(const Trainer *tr, int saved, const char *dir) {
    if (dist_rank() > 0) return;
    char line[1024], launcher[48] = "";
    if (dist_size() > 1) snprintf(launcher, sizeof launcher, "mpirun -np %d ", dist_size());
    if (saved < 0)
        snprintf(line, sizeof line, "%sbest-train: interrupted before the first save (every %d steps): nothing to "
                 "resume; start the run again", tr->prog.tty ? "\n" : "", tr->cfg.save_every);
    else
        snprintf(line, sizeof line, "%sbest-train: interrupted; step %d is saved in %s; continue with: %sbest-train "
                 "--resume %s", tr->prog.tty ? "\n" : "", saved, dir, launcher, dir);
    signal_note_set(line);
}

int train_run(Trainer *tr) {
    const TrainConfig *c = &tr->cfg;
    int last = c->stop_at > 0 && c->stop_at < c->steps ? c->stop_at : c->steps;
    progress_init(&tr->prog, "train", (uint64_t)c->steps, "steps", c->quiet || dist_rank() > 0);
    tr->prog.done = (uint64_t)tr->step;
    int first = tr->step, collapsed = 0;
    double t_first = now_seconds();
    interrupt_note(tr, c->resume ? tr->step : -1, c->resume);
    while (tr->step < last) {
        StepStats s;
        TRY(train_step(tr, &s));
        double el = now_seconds() - t_first;
        s.tokens_per_s_avg = el > 0 ? (double)(tr->step - first) * c->batch * c->seq / el : 0;
        // rank 0's; every rank stops when it cannot be written (a collective, as each step is)
        if (dist_agree(tr->log ? log_stats(tr->log, tr->log_path, &s) : 0) < 0) return -1;
        // a collapsed model (an --lr far too high zeroed the weights the output depends on):
        // uniform predictions, loss ln V, and a zero gradient no later step can leave.
        // Finite, so not an error: said once, after the warmup
        double lnv = log((double)tr->m.V);
        if (!collapsed && s.grad_norm == 0 && fabs(s.loss - lnv) < 1e-4 * lnv && tr->step > c->warmup * c->steps) {
            collapsed = 1;
            if (dist_rank() == 0)
                fprintf(stderr, "%sbest-train: warning: step %d: the loss is ln V = %.4f (uniform predictions) and the "
                        "gradient norm 0: the model has collapsed and will not train on (--lr %g too high?)\n",
                        tr->prog.tty ? "\n" : "", tr->step, lnv, c->lr);
        }
        if (tr->step == first + 3 && last - tr->step > 3 && !c->quiet && dist_rank() == 0) {
            // once, after a few steps: what the whole run will take at this pace
            double per = (now_seconds() - t_first) / 3;
            char left[32];
            human_hms(left, sizeof left, per * (last - tr->step));
            fprintf(stderr, "%sbest-train: projected: %d more steps at %.3g s a step: %s\n", tr->prog.tty ? "\n" : "",
                    last - tr->step, per, left);
        }
        snprintf(tr->prog.extra, sizeof tr->prog.extra, "loss %.4f, lr %.2e, %.0f tokens/s run average (%.0f this "
                 "step), sparsity %.3f", s.loss, s.lr, s.tokens_per_s_avg, s.tokens_per_s, s.sparsity);
        progress_update(&tr->prog, (uint64_t)tr->step);
        if (c->moments_every > 0 && (tr->step % c->moments_every == 0 || tr->step == last))
            TRY(save_or_unmake(tr, 1));
        if (tr->step == last || (c->save_every > 0 && tr->step % c->save_every == 0)) {
            TRY(save_or_unmake(tr, 0));
            interrupt_note(tr, tr->step, c->out);
        }
        if (getenv("BEST_TEST_PAUSE")) {
            char point[32];
            snprintf(point, sizeof point, "step-%d", tr->step);
            test_pause(point);
        }
    }
    signal_note_set(NULL);
    progress_finish(&tr->prog);
    device_memory_say(tr);
    return profile_write(tr);
}

void train_print_config(FILE *f, const Trainer *tr) {
    const TrainConfig *c = &tr->cfg;
    const Model *m = &tr->m;
    char np[32], npr[32];
    human_count(np, sizeof np, (double)m->n_params);
    human_count(npr, sizeof npr, (double)m->n_prunable);
    fprintf(f, "best-train: %s (%zu layers, dim %zu, %s parameters, %s prunable)\n",
            c->resume ? c->resume : c->init_config ? "random init" : c->model_dir, m->L, m->C, np, npr);
    fprintf(f, "best-train: %d shard%s, %llu windows of %d+1 tokens, cursor epoch %llu pos %llu\n", c->n_data,
            c->n_data == 1 ? "" : "s", (unsigned long long)tr->data.n_windows, c->seq,
            (unsigned long long)tr->data.epoch, (unsigned long long)tr->data.pos);
    fprintf(f, "best-train: steps %d (from %d), batch %d = %d x micro-batch %d, lr %g, warmup %g, betas (%g, %g), "
            "eps %g, weight decay %g, clip %g, seed %llu\n", c->steps, tr->step, c->batch, c->batch / c->micro_batch,
            c->micro_batch, c->lr, c->warmup, c->beta1, c->beta2, c->eps, c->weight_decay, c->clip,
            (unsigned long long)c->seed);
    if (c->mask_file)
        fprintf(f, "best-train: fixed mask %s, %llu of %zu prunable weights kept\n", c->mask_file,
                (unsigned long long)tr->fixed_kept, m->n_prunable);
    else if (c->sparsity > 0)
        fprintf(f, "best-train: sparsity %g (%llu kept), schedule %s, prune from %g to %g of the steps in %d updates "
                "(steps %d..%d), saliency %s, group %s\n", c->sparsity,
                (unsigned long long)select_keep_count(c->sparsity, m->n_prunable), schedule_name(c->schedule),
                c->prune_start, c->prune_end, schedule_n_updates(&tr->sched),
                schedule_update_step(&tr->sched, 1), schedule_update_step(&tr->sched, schedule_n_updates(&tr->sched)),
                saliency_name(c->saliency), mask_group_name(c->group));
    else
        fprintf(f, "best-train: dense training (--sparsity 0)\n");
    if (!c->mask_file && c->sparsity > 0 && tr->pattern.m) {
        char pat[16];
        fprintf(f, "best-train: N:M target %s: each group of %d protects its best, ramp %s (the last update leaves "
                "exactly %d of every %d)\n", nm_name(pat, &tr->pattern), tr->pattern.m, nm_ramp_name(c->nm_ramp),
                tr->pattern.n, tr->pattern.m);
    }
    char *logp = c->log ? xstrdup(c->log) : path_join(c->out, "log.jsonl");
    fprintf(f, "best-train: out %s, log %s, %d threads, save every %d, moments every %d, masks %s%s\n", c->out, logp,
            c->threads, c->save_every, c->moments_every, c->save_masks ? "saved" : "not saved",
            c->stop_at ? " (stopping early)" : "");
    free(logp);
    if (c->device == TRAIN_DEVICE_CUDA)
        fprintf(f, "best-train: device cuda: %s; bf16 matrix products, fp32 weights and moments%s\n", cuda_info(),
                c->recompute ? "; activations recomputed" : "");
    else
        fprintf(f, "best-train: device cpu: %s\n", layers_blas_info());
    if (tr->mem_ram > 0)
        fprintf(f, "best-train: host memory: about %.2f GiB estimated for this run, of %.1f GiB RAM%s\n",
                tr->mem_need / GIB, tr->mem_ram / GIB, tr->mem_need > tr->mem_ram ? " (--ignore-memory)" : "");
    if (dist_size() > 1 || engine_train_nccl(&tr->dt))
        fprintf(f, "best-train: %s: data parallel, %d sequences per rank per step, ZeRO-1 (Adam moments, mask "
                "and update of ~%zu parameters per rank)%s\n", dist_info(), c->batch / dist_size(),
                tr->hi - tr->lo, engine_train_nccl(&tr->dt) ? "; gradients and weights over NCCL" : "");
    if (!c->resume) return;
    // where each run option of a resumed run came from (train.h)
    static const char *const names[] = {"threads", "save-every", "moments-every", "save-masks", "log"};
    for (int from_state = 1; from_state >= 0; from_state--) {
        unsigned bits = from_state ? tr->restored : c->given;
        fprintf(f, "%s", from_state ? "best-train: run options from the state:" : "; from the command line:");
        int any = 0;
        for (int i = 0; i < 5; i++)
            if (bits & 1u << i) fprintf(f, "%s %s", any++ ? "," : "", names[i]);
        if (!any) fprintf(f, " none");
    }
    fprintf(f, "\n");
}
