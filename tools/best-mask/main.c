// best-mask: a pruning mask from weights (and Adam moments), its report and picture,
// and the masked model; or, with --mask FILE, the report, picture and masked model of
// a mask made before (by best-mask or best-train --save-masks), titled from its metadata.
//
// The command line only: options, the effective configuration on stderr, then
// nn/model (loading, saving), sparse/mask (moments, scores through sparse/saliency,
// the global threshold through sparse/select, mask files, report, heatmap, and
// mask_apply). Every output is checked for before anything is written, and every
// file goes through temp + rename. Usage: docs/best-mask.md.
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/blas.h"       // defines: blas_init
#include "base/args.h"       // defines: ArgSpec, args_parse, args_threads
#include "base/error.h"      // defines: TRY_OR_DIE, DIE
#include "base/fileio.h"     // defines: path_check_out_file, path_check_out_dir
#include "sparse/mask.h"     // defines: mask_compute, mask_save, Moments
#include "sparse/mask_report.h" // defines: mask_report_json, mask_plot_svg, mask_print_table
#include "nn/model.h"        // defines: Model, model_save
#include "pack/pack_model.h" // defines: model_open
#include "base/progress.h"   // defines: now_seconds, Progress, human_count
#include "sparse/calib.h"    // defines: calib_windows, OneShotSpec, OneShotStats
#include "sparse/nm.h"       // defines: NMPattern, nm_parse, nm_check
#include "engine/engine.h"   // defines: Engine, engine_open, engine_oneshot

typedef struct {
    const char *model, *moments, *saliency, *group, *method, *calib, *out, *out_model, *report, *plot, *from_mask, *mask;
    const char *device, *precision, *pattern;
    double sparsity, percdamp;
    int apply, pack_bits, nsamples, seq, step, threads, quiet, seed, batch;
} Opts;

// The heatmap's title, from what made the mask: "BEST, cubic schedule, second-order
// saliency, global, sparsity 0.9, step 100" (the parts the metadata has).
static void title_add(char *buf, size_t n, const char *part) {
    size_t at = strlen(buf);
    if (at < n) snprintf(buf + at, n - at, "%s%s", at ? ", " : "", part);
}
static void mask_title(char *buf, size_t n, const MaskMeta *mm) {
    char part[96];
    buf[0] = 0;
    if (mm->method) title_add(buf, n, mm->method);
    if (mm->schedule) {
        snprintf(part, sizeof part, "%s schedule", mm->schedule);
        title_add(buf, n, part);
    }
    if (mm->saliency && !(mm->method && strcmp(mm->saliency, mm->method) == 0)) { // ("wanda, wanda saliency")
        const char *s = mm->saliency;
        snprintf(part, sizeof part, "%s saliency", strcmp(s, "second") == 0 ? "second-order"
                                                   : strcmp(s, "first") == 0 ? "first-order" : s);
        title_add(buf, n, part);
    }
    if (mm->group) title_add(buf, n, mm->group);
    if (mm->pattern) title_add(buf, n, mm->pattern);
    if (!isnan(mm->sparsity)) {
        snprintf(part, sizeof part, "sparsity %g", mm->sparsity);
        title_add(buf, n, part);
    }
    if (mm->step >= 0 && mm->steps > 0) { // ("step 100" on a 200-step run read as its end)
        snprintf(part, sizeof part, "mask set at step %lld of %lld", mm->step, mm->steps);
        title_add(buf, n, part);
    } else if (mm->step >= 0) {
        snprintf(part, sizeof part, "step %lld", mm->step);
        title_add(buf, n, part);
    }
}

// A number from a mask file's metadata; *out stays as it is when the key is absent.
static int meta_number(double *out, const SafeTensors *st, const char *key) {
    const char *v = st_meta(st, key);
    if (!v) return 0;
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !isfinite(x)) return ERR("%s: metadata %s = \"%s\" is not a number", st->path, key, v);
    *out = x;
    return 0;
}

int main(int argc, char **argv) {
    blas_init(argv);
    Opts o = {.sparsity = NAN, .nsamples = 128, .seq = 2048, .step = -1, .percdamp = 0.01};
    const Option opts[] = {
        {"model", OPT_STRING, &o.model, "DIR", "Hugging Face model folder (required)"},
        {"sparsity", OPT_DOUBLE, &o.sparsity, "S", "fraction of prunable weights set to 0, in [0, 1) (required)"},
        {"moments", OPT_STRING, &o.moments, "FILE", "Adam moments (NAME.exp_avg, NAME.exp_avg_sq) for first/second order"},
        {"saliency", OPT_STRING, &o.saliency, "NAME", "second (0.5 v w^2), first (|m w|) or magnitude (|w|)"},
        {"group", OPT_STRING, &o.group, "NAME", "global (one threshold for the model) or layer (per tensor)"},
        {"method", OPT_STRING, &o.method, "NAME", "one-shot method, per tensor: magnitude, wanda or sparsegpt (these two "
                                                   "need --calib)"},
        {"calib", OPT_STRING, &o.calib, "SHARD", "calibration tokens (a token shard) of wanda and sparsegpt"},
        {"nsamples", OPT_INT, &o.nsamples, "N", "calibration windows"},
        {"seq", OPT_INT, &o.seq, "N", "calibration window length in tokens (capped by the model's context)"},
        {"seed", OPT_INT, &o.seed, "S", "seed of the calibration windows' draw"},
        {"percdamp", OPT_DOUBLE, &o.percdamp, "X", "sparsegpt's dampening: X times the mean of diag(H)"},
        {"pattern", OPT_STRING, &o.pattern, "N:M", "--method: keep N of every M consecutive weights of a row "
                                                   "(2:4, 4:8; sets the sparsity), or unstructured (the default)"},
        {"batch", OPT_INT, &o.batch, "N", "--device cuda: calibration windows a forward pass (default: as many as "
                                          "fit in half the free memory, up to 4 GiB of activations)"},
        {"precision", OPT_STRING, &o.precision, "NAME", "--device cuda: bf16 (the products on bf16 operands, "
                                                        "fp32 accumulation) or fp32 (as the CPU; slower)"},
        {"device", OPT_STRING, &o.device, "NAME", "where --method runs: cuda or cpu (default: cuda when a GPU is "
                                                  "visible, else cpu)"},
        {"from-mask", OPT_STRING, &o.from_mask, "FILE", "an earlier mask: the new one only shrinks it"},
        {"mask", OPT_STRING, &o.mask, "FILE", "an existing mask to report, plot or apply instead of computing one"},
        {"out", OPT_STRING, &o.out, "MASK", "write the mask (safetensors, one BOOL tensor per prunable weight)"},
        {"pack-bits", OPT_FLAG, &o.pack_bits, NULL, "write the mask bit-packed (U8, 8 weights a byte)"},
        {"apply", OPT_FLAG, &o.apply, NULL, "write the masked model to --out-model"},
        {"out-model", OPT_STRING, &o.out_model, "DIR", "folder for --apply (weights in the input's dtype)"},
        {"report", OPT_STRING, &o.report, "FILE", "sparsity per tensor, layer, module type and in total (JSON)"},
        {"plot", OPT_STRING, &o.plot, "FILE", "heatmap of sparsity, layers x module types (SVG)"},
        {"step", OPT_INT, &o.step, "N", "training step recorded in the mask (default: the moments' step)"},
        {"threads", OPT_INT, &o.threads, "N", "threads; 0 = all cores (at most 4 per core)"},
        {"quiet", OPT_FLAG, &o.quiet, NULL, "nothing on stderr but warnings and errors"},
        {0},
    };
    const ArgSpec spec = {
        "best-mask", "--model DIR --sparsity S [--moments FILE] [--saliency second|first|magnitude] [--group global|layer] "
                     "[--out MASK] [--apply --out-model DIR] [--report FILE.json] [--plot FILE.svg] [--from-mask FILE]\n"
                     "       best-mask --model DIR --sparsity S --method magnitude|wanda|sparsegpt [--calib SHARD --nsamples N "
                     "--seq N --seed S] [--pattern N:M] [--device cuda|cpu] [--out MASK] [--apply --out-model DIR]\n"
                     "       best-mask --model DIR --mask FILE [--apply --out-model DIR] [--report FILE.json] [--plot FILE.svg]",
        "Keeps the prunable weights (the seven Linear weights of every block) of highest\n"
        "saliency: exactly round((1 - S) * n) of the n over the whole model (--group global), or\n"
        "round((1 - S) * n) of each tensor's n (--group layer). Ties at the threshold go to the\n"
        "lowest index. --method: the one-shot baselines, from calibration windows block by\n"
        "block for Wanda and SparseGPT (SparseGPT also updates the kept weights: --apply\n"
        "--out-model keeps them): magnitude prunes floor(S * n) of each tensor, Wanda\n"
        "floor(S * columns) of each row, SparseGPT floor(S * rows * 128) of each block of 128\n"
        "columns. When the sparsity achieved differs from S, both are printed.",
        opts,
    };
    char **pos;
    int npos = args_parse(&pos, &spec, argc, argv);
    free(pos);
    if (npos) args_usage_error(&spec, "unexpected argument");
    if (!o.model) args_usage_error(&spec, "--model is required");
    if (o.mask && (!isnan(o.sparsity) || o.moments || o.saliency || o.group || o.method || o.from_mask || o.step >= 0 ||
                   o.out || o.pack_bits))
        args_usage_error(&spec, "--mask FILE takes the mask as it is: no --sparsity, --moments, --saliency, --group, "
                                "--method, --from-mask, --step, --out, --pack-bits");
    NMPattern pat = {0, 0};
    char pat_name[16];
    if (o.pattern) {
        if (nm_parse(&pat, o.pattern) < 0)
            args_usage_error(&spec, "--pattern %s: N:M with 0 < N < M <= %d (2:4, 4:8), or unstructured", o.pattern,
                             NM_MAX);
        if (!o.method) args_usage_error(&spec, "--pattern goes with --method (magnitude, wanda, sparsegpt)");
        // NaN: not given (args.c refuses "nan")
        if (pat.m && !isnan(o.sparsity) && fabs(o.sparsity - nm_sparsity(&pat)) > 1e-12)
            args_usage_error(&spec, "--sparsity %g with --pattern %s, whose sparsity is %g: give one of them",
                             o.sparsity, o.pattern, nm_sparsity(&pat));
        if (pat.m) o.sparsity = nm_sparsity(&pat);
    }
    // NaN: not given (args.c refuses "nan")
    if (!o.mask && isnan(o.sparsity)) args_usage_error(&spec, "--sparsity is required (or --mask FILE)");
    if (!o.mask && !(o.sparsity >= 0 && o.sparsity < 1)) args_usage_error(&spec, "--sparsity %g is outside [0, 1)", o.sparsity);
    MaskSpec ms = {SAL_SECOND, GROUP_GLOBAL, o.sparsity, NULL, 0, 0, 0};
    OneShotMethod om = ONESHOT_WANDA;
    int calibrated = 0; // wanda, sparsegpt
    if (o.method) {
        if (oneshot_method_parse(&om, o.method) < 0)
            args_usage_error(&spec, "unknown --method %s (magnitude, wanda, sparsegpt)", o.method);
        calibrated = oneshot_calibrated(om);
        if (o.moments || o.from_mask || (o.saliency && strcmp(o.saliency, "magnitude") != 0) ||
            (o.group && strcmp(o.group, "layer") != 0))
            args_usage_error(&spec, "--method %s prunes each tensor on its own: no --moments, --from-mask, --saliency "
                                    "or --group global", o.method);
        if (calibrated && !o.calib) args_usage_error(&spec, "--method %s needs --calib SHARD", o.method);
        if (!calibrated && o.calib) args_usage_error(&spec, "--method magnitude uses no --calib");
        if (o.nsamples < 1 || o.seq < 2) args_usage_error(&spec, "--nsamples must be at least 1 and --seq at least 2");
        if (o.batch < 0) args_usage_error(&spec, "--batch %d: at least 1 (or 0: as many windows as fit)", o.batch);
        if (o.precision && strcmp(o.precision, "bf16") != 0 && strcmp(o.precision, "fp32") != 0)
            args_usage_error(&spec, "unknown --precision %s (bf16, fp32)", o.precision);
        if (!(o.percdamp > 0 && o.percdamp < 1e6)) args_usage_error(&spec, "--percdamp %g is outside (0, 1e6)", o.percdamp);
        o.saliency = "magnitude";
        o.group = "layer";
        ms.prune_floor = 1;
    } else if (o.calib) {
        args_usage_error(&spec, "--calib goes with --method wanda or sparsegpt");
    }
    if (o.device && !o.method)
        args_usage_error(&spec, "--device goes with --method (masks from saliency are computed on the CPU)");
    if (o.device && strcmp(o.device, "cuda") != 0 && strcmp(o.device, "cpu") != 0)
        args_usage_error(&spec, "unknown --device %s (cuda, cpu)", o.device);
    if (!o.saliency) o.saliency = "second";
    if (!o.group) o.group = "global";
    if (saliency_parse(&ms.saliency, o.saliency) < 0)
        args_usage_error(&spec, "unknown --saliency %s (second, first, magnitude)", o.saliency);
    if (mask_group_parse(&ms.group, o.group) < 0) args_usage_error(&spec, "unknown --group %s (global, layer)", o.group);
    if (!o.mask && saliency_needs_moments(ms.saliency) && !o.moments)
        args_usage_error(&spec, "--saliency %s needs --moments FILE (or use --saliency magnitude)", o.saliency);
    if (o.apply != !!o.out_model) args_usage_error(&spec, "--apply and --out-model go together");
    if (!o.out && !o.apply && !o.report && !o.plot)
        args_usage_error(&spec, "nothing to write: give %s--apply --out-model, --report or --plot", o.mask ? "" : "--out, ");
    args_threads(&spec, o.threads);
    // every output can be written, and is none of the inputs, before the work and before
    // the first of them is
    const char *ins[] = {o.model, o.mask, o.moments, o.calib};
    for (int i = 0; i < 4; i++)
        if (ins[i]) path_note_input(ins[i]);
    if (o.apply) TRY_OR_DIE(path_check_out_dir(o.out_model));
    if (o.apply) TRY_OR_DIE(model_check_save_dir(o.out_model)); // (--out-model the --model folder)
    const char *files[] = {o.out, o.report, o.plot};
    for (int i = 0; i < 3; i++)
        if (files[i]) TRY_OR_DIE(path_check_out_file(files[i], o.apply ? o.out_model : NULL));

    double t0 = now_seconds();
    Engine *e = NULL; // --method's device, the GPU when one is visible (engine_pick): before the model is read
    if (o.method) TRY_OR_DIE(engine_open(&e, o.device, 0));
    Model m;
    TRY_OR_DIE(model_open(&m, o.model));
    TRY_OR_DIE(model_need_folder(&m, "best-mask"));
    if (nm_check(&pat, m.info, m.n_info) < 0) args_usage_error(&spec, "%s", err_msg()); // (M divides every row)
    ms.weights_from = m.src_dir;
    if (!o.quiet) {
        char np[32], npr[32];
        human_count(npr, sizeof npr, (double)m.n_prunable);
        human_count(np, sizeof np, (double)m.n_params);
        fprintf(stderr, "best-mask: %s (%zu layers, %s prunable of %s parameters)\n", o.model, m.L, npr, np);
    }
    uint8_t *mask = xmalloc(m.n_params), *old = NULL;
    OneShotStats times; // (a one-shot run's phases, for --report)
    int have_times = 0;
    Moments mo, *mop = NULL;
    MaskMeta meta;
    SafeTensors given; // --mask: kept open to the end, meta's strings point into it
    if (o.mask) {
        TRY_OR_DIE(st_open(&given, o.mask));
        TRY_OR_DIE(mask_read(mask, &given, m.info, m.n_info, m.n_params));
        double sparsity = NAN, step = -1;
        TRY_OR_DIE(meta_number(&sparsity, &given, "sparsity"));
        double steps = 0;
        TRY_OR_DIE(meta_number(&step, &given, "step"));
        if (step != floor(step) || step < -1) DIE("%s: metadata step = %s is not a step", o.mask, st_meta(&given, "step"));
        TRY_OR_DIE(meta_number(&steps, &given, "steps"));
        if (steps != floor(steps) || steps < 0 || steps > 1e15)
            DIE("%s: metadata steps = %s is not a count of steps", o.mask, st_meta(&given, "steps"));
        meta = (MaskMeta){sparsity, st_meta(&given, "saliency"), st_meta(&given, "group"), (long long)step, 0,
                          st_meta(&given, "method"), st_meta(&given, "schedule"), (long long)steps,
                          st_meta(&given, "pattern")};
        if (!o.quiet) fprintf(stderr, "best-mask: mask %s\n", o.mask);
    } else {
        if (o.moments && saliency_needs_moments(ms.saliency)) {
            TRY_OR_DIE(moments_open(&mo, o.moments, m.info, m.n_info));
            mop = &mo;
            const char *st = moments_step(&mo);
            if (o.step < 0 && st) o.step = atoi(st);
        }
        if (o.from_mask) {
            old = xmalloc(m.n_params);
            TRY_OR_DIE(mask_load(old, o.from_mask, m.info, m.n_info, m.n_params));
        }
        if (!o.quiet && o.method)
            fprintf(stderr, "best-mask: sparsity %g of every tensor, method %s, %d threads\n", o.sparsity, o.method,
                    omp_get_max_threads());
        else if (!o.quiet)
            fprintf(stderr, "best-mask: sparsity %g, saliency %s, group %s%s%s, %d threads\n", o.sparsity,
                    saliency_name(ms.saliency), mask_group_name(ms.group), o.from_mask ? ", shrinking " : "",
                    o.from_mask ? o.from_mask : "", omp_get_max_threads());
        if (o.method) {
            int32_t *win = NULL;
            if (calibrated) {
                o.seq = config_cap_seq(&m.cfg, o.seq, "best-mask", "windows", o.quiet);
                win = xmalloc((size_t)o.nsamples * (size_t)o.seq * sizeof *win);
                TRY_OR_DIE(calib_windows(win, o.calib, o.nsamples, o.seq, (uint64_t)o.seed));
                if (!o.quiet)
                    fprintf(stderr, "best-mask: %s on %s, %d windows of %d tokens from %s (seed %d), layer by layer\n",
                            o.method, engine_name(e), o.nsamples, o.seq, o.calib, o.seed);
            } else if (!o.quiet) {
                fprintf(stderr, "best-mask: magnitude on %s\n", engine_name(e));
            }
            OneShotSpec os = {om, o.sparsity, o.percdamp, o.batch, o.precision && !strcmp(o.precision, "fp32"), pat};
            Progress pr;
            progress_init(&pr, o.method, calibrated ? m.L : 0, "layers", o.quiet || !calibrated);
            TRY_OR_DIE(engine_oneshot(e, mask, &times, &m, &os, win, o.nsamples, o.seq, calibrated ? &pr : NULL));
            progress_finish(&pr);
            engine_close(e);
            have_times = calibrated;
            if (!o.quiet && calibrated)
                fprintf(stderr, "best-mask: seconds: forward %.2f, %s %.2f, factor %.2f, %s %.2f\n", times.forward,
                        om == ONESHOT_SPARSEGPT ? "Hessian" : "norms", times.stats, times.factor,
                        om == ONESHOT_SPARSEGPT ? "prune and update" : "prune", times.update);
            if (!o.quiet && times.device_bytes > 0)
                fprintf(stderr, "best-mask: device memory: %.2f GiB allocated, %.2f GiB in use on the device\n",
                        times.device_bytes / (1 << 30), times.device_in_use / (1 << 30));
            free(win);
            if (om == ONESHOT_SPARSEGPT && !o.apply && !o.quiet)
                fprintf(stderr, "best-mask: note: sparsegpt also updated the kept weights; only --apply --out-model "
                                "writes them (the mask alone gives a worse model)\n");
        } else {
            TRY_OR_DIE(mask_compute(mask, &ms, m.info, m.n_info, m.params, m.n_params, mop, old));
        }
        meta = (MaskMeta){o.sparsity, calibrated ? o.method : saliency_name(ms.saliency), mask_group_name(ms.group), o.step,
                          o.pack_bits, o.method, NULL, 0, pat.m ? nm_name(pat_name, &pat) : NULL};
    }
    // the model folder first: --out may name a file inside it (--out D/mask --out-model D)
    if (o.apply) {
        mask_apply(m.params, mask, m.n_params);
        TRY_OR_DIE(model_save(&m, o.out_model, -1));
    }
    if (o.out) TRY_OR_DIE(mask_save(o.out, mask, &meta, m.info, m.n_info));
    if (o.report) TRY_OR_DIE(mask_report_json(o.report, mask, &meta, have_times ? &times : NULL, m.info, m.n_info));
    if (o.plot) {
        char title[256];
        mask_title(title, sizeof title, &meta);
        TRY_OR_DIE(mask_plot_svg(o.plot, mask, m.info, m.n_info, title));
    }
    if (!o.quiet) {
        mask_print_table(stderr, mask, m.info, m.n_info);
        // the sparsity a rule gives can be a little under the one asked for: said, with the rule
        double got = mask_sparsity(mask, m.info, m.n_info);
        if (!o.mask && fabs(got - o.sparsity) >= 5e-5)
            fprintf(stderr, "best-mask: achieved sparsity %.2f%%, requested %.2f%%: %s\n", 100 * got, 100 * o.sparsity,
                    calibrated && om == ONESHOT_WANDA ? "wanda prunes floor(S x columns) weights of each row (its "
                    "comparison group)"
                    : calibrated ? "sparsegpt prunes floor(S x rows x 128) weights of each block of 128 columns"
                    : o.method ? "magnitude prunes floor(S x n) of each tensor's n weights"
                    : ms.group == GROUP_LAYER ? "--group layer keeps round((1 - S) x n) of each tensor's n weights"
                    : "ties at the threshold");
        fprintf(stderr, "best-mask: done in %.2fs\n", now_seconds() - t0);
    }
    free(mask);
    free(old);
    if (mop) moments_close(mop);
    if (o.mask) st_close(&given);
    model_free(&m);
    TRY_OR_DIE(stdout_close()); // a lost result (a full disk) is an error
    return 0;
}
