// test_calib_cuda.cpp: the one-shot walk on the device (lib/sparse/calib.cu,
// oneshot_prune_cuda: best-mask --method --device cuda) against calib.c's on the CPU
// (oneshot_prune), on the tiny fixtures tests/fixtures/model/{llama, qwen3, llama_tied}
// (GQA; Qwen3's q/k norms and head_dim; every bias):
//
//   * magnitude: the device's masks and zeroed weights are the CPU's, bit for bit;
//   * the block's forward (emulated build only: calib.cu's own functions): block 0's output
//     over two windows within 2e-2 (normwise) of model_block_forward's, and each input's
//     statistics (X^T X, squared norms) within 3e-2 of the CPU's from its fp32 activations
//     (the device takes them from the products' bf16 operands);
//   * Wanda and SparseGPT at 50% and 70% over the whole model, 3 windows in batches of 2
//     (a short last one): the exact counts of each method (Wanda floor(S cols) a row;
//     SparseGPT floor(S rows 128) a block of 128 columns), the pruned weights 0 in the
//     host's block, Wanda's kept weights untouched; and against the CPU walk's: with
//     --precision fp32 (the products and X^T X in fp32, as on the CPU) at least 99.99% of
//     the mask the same (measured: all of it) and the weights within 1e-5 normwise
//     (measured 1.6e-6 at most); with bf16 (the default) at least 99.5% of the mask the same
//     (measured 99.84% to 100%) and the weights within 0.1. The bf16 bounds are not rounding
//     bounds: the device's forward multiplies bf16 operands and the CPU's fp32, so scores
//     near a row's or a block's threshold swap, and each swap moves a whole weight (measured
//     up to 5e-2 at 70%, 8e-4 at 50%). The targets for real models are checked on a
//     GPU by tests/gpu/oneshot_check.sh;
//   * --pattern 2:4 (issue 39) for magnitude, Wanda and SparseGPT through the walk: exactly
//     2:4, and with fp32 products the CPU walk's masks and weights, with bf16 97% of its mask;
//   * oneshot_cuda_bytes is what the walk allocated, and grows with the batch;
//   * a calibration token outside the vocabulary is an error, and nothing was changed;
//   * `test_calib_cuda --stories DIR CALIB.bin VALID.bin` (tests/t_oneshot.sh, with
//     ../shared): stories260K pruned by Wanda and SparseGPT at 50% and 70% from 8 windows
//     of 128 tokens on the CPU and on the device: the device's perplexity on the
//     validation text within 1% of the CPU walk's with --precision fp32; bf16's printed,
//     within 1% at 50% (below).
//
// Built two ways, as test_step is: build/tests/test_calib_cuda (g++: calib.cu and the
// kernels it calls run in tests/cuda_emu.h, cuBLASLt and cuSOLVER stood in for by
// tests/cuda_shims.h) and build/tests/test_calib_cuda_gpu (nvcc: libbest's walk on a real
// GPU, tests/gpu/run.sh; "skip - no CUDA device" where there is none; never run yet).
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#ifdef TEST_ON_GPU
#include "base/cuda.h"    // defines: cuda_ctx_create, cuda_device_count
#include "sparse/calib.h" // defines: oneshot_prune_cuda, oneshot_cuda_bytes (BEST_CUDA)
#define MODE "on the GPU (libbest's walk, cuBLASLt, cuSOLVER)"
#else
#define MODE "in the CPU emulator (cuBLASLt, cuSOLVER: CPU shims)"
#define KM_GRID_CAP 3u         // tiny grids: the grid-stride loops run at tiny sizes
#define BEST_KAPI static       // this file's own copy of the walk and its kernels
#define SELECT_CUDA_SPAN 512   // several blocks of the select's marking at these sizes
#include "cuda_emu.h"
#include "cuda_shims.h" // defines: CudaCtx, matmul_*_cuda, solver_*_cuda (CPU stand-ins)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function" // the walk uses some of each file
#include "nn/layers.cu"
#include "nn/attention.cu"
#include "sparse/saliency.cu"
#include "sparse/select.cu"
#include "sparse/wanda.cu"
#include "sparse/sparsegpt.cu"
#include "sparse/nm.cu"
#include "sparse/calib.cu"
#pragma GCC diagnostic pop
#endif
#include "base/error.h"       // defines: err_msg
extern "C" {
#include "io/shard.h" // defines: Shard, shard_open, shard_read (no C++ guard of its own)
}
#include "nn/model.h"         // defines: Model, model_load, model_block_forward
#include "sparse/calib.h"     // defines: oneshot_prune, OneShotSpec
#include "sparse/nm.h"        // defines: nm_violations
#include "sparse/sparsegpt.h" // defines: SPARSEGPT_BLOCK
#include "test.h"

#include "cuda_test.h" // defines: ctx_get, load_fixture

enum { NWIN = 3, SEQ = 12, BATCH = 2 };

// Calibration windows (NWIN, SEQ) of tokens in [0, V), from seed.
static std::vector<int32_t> windows_make(size_t V, uint64_t seed) {
    std::vector<int32_t> w(NWIN * SEQ);
    for (auto &t : w) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        t = (int32_t)((seed >> 33) % V);
    }
    return w;
}

#ifndef TEST_ON_GPU // (the block forward's check, emulated only: nvcc -Werror refuses unused functions)
// ||a - b|| / ||b|| over n.
static double rel_norm(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}
static double rel_norm_d(const double *a, const double *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
    return den > 0 ? sqrt(num / den) : sqrt(num);
}
#endif

// --- magnitude ---------------------------------------------------------------------------------

static void check_magnitude(const char *name, double S) {
    Model c, d;
    if (!load_fixture(&c, name) || !load_fixture(&d, name)) return;
    std::vector<uint8_t> mc(c.n_params), md(d.n_params);
    OneShotSpec spec = {ONESHOT_MAGNITUDE, S, 0.01, 0, 0, {0, 0}};
    OneShotStats st;
    T_OK(oneshot_prune(mc.data(), &st, &c, &spec, NULL, 0, 0, NULL) == 0, "%s: magnitude on the CPU", name);
    T_OK(oneshot_prune_cuda(md.data(), &st, &d, &spec, NULL, 0, 0, NULL, ctx_get()) == 0, "%s: magnitude %s", name,
         MODE);
    T_OK(mc == md && memcmp(c.params, d.params, c.n_params * sizeof(float)) == 0,
         "%s: magnitude at %g: the device's mask and zeroed weights are the CPU's, bit for bit", name, S);
    model_free(&c);
    model_free(&d);
}

// --- the block's forward and statistics (calib.cu's functions: the emulated build) --------------

#ifndef TEST_ON_GPU
static void check_block(const char *name, OneShotMethod method) {
    Model m;
    if (!load_fixture(&m, name)) return;
    std::vector<int32_t> win = windows_make(m.V, 11);
    size_t C = m.C, T = SEQ, N = 2 * T;
    // the CPU: two windows through block 0, keeping the four inputs' activations
    ModelActs a;
    model_acts_init(&a, &m, 1, SEQ, 0);
    std::vector<float> x(N * C), out(N * C);
    for (int s = 0; s < 2; s++) model_embed(x.data() + s * T * C, &m, win.data() + s * T, T);
    size_t dim[4] = {C, m.Q, C, m.I};
    std::vector<double> H[4], sq[4];
    for (int g = 0; g < 4; g++) H[g].assign(dim[g] * dim[g], 0), sq[g].assign(dim[g], 0);
    for (int s = 0; s < 2; s++) {
        model_block_forward(&m, &a, 0, x.data() + s * T * C, out.data() + s * T * C);
        const float *in[4] = {a.layer[0].xn1, a.layer[0].att, a.layer[0].xn2, a.h};
        for (int g = 0; g < 4; g++)
            for (size_t t = 0; t < T; t++)
                for (size_t i = 0; i < dim[g]; i++) {
                    double xi = in[g][t * dim[g] + i];
                    sq[g][i] += xi * xi;
                    for (size_t j = 0; j < dim[g]; j++) H[g][i * dim[g] + j] += xi * in[g][t * dim[g] + j];
                }
    }
    // the device: the walk's buffers for 2 windows, block 0 up, its forward with statistics
    Walk w;
    walk_shape(&w, &m, method, 0, 2, T, 2);
    w.c = ctx_get();
    Carver cv = {NULL, 0};
    walk_layout(&w, &cv);
    cv.base = (char *)malloc(cv.used);
    cv.used = 0;
    walk_layout(&w, &cv);
    rope_table(w.rope_cos, w.rope_sin, 0, T, m.HD, m.cfg.rope_theta);
    memcpy(w.x, x.data(), N * C * sizeof(float));
    block_up(&w, 0);
    for (int g = 0; g < 4; g++) {
        if (w.H[g]) memset(w.H[g], 0, dim[g] * dim[g] * sizeof(float));
        else memset(w.colsq[g], 0, dim[g] * sizeof(double));
    }
    double ts = 0;
    block_forward(&w, w.x, 2, 1, 1, &ts);
    double e = rel_norm(w.x, out.data(), N * C);
    T_OK(e <= 2e-2, "%s: block 0's output over 2 windows %s within 2e-2 of model_block_forward's (%.2e)", name, MODE, e);
    static const char *IN[4] = {"xn1", "att", "xn2", "h"};
    for (int g = 0; g < 4; g++) {
        double eg;
        if (w.H[g]) {
            std::vector<double> hd(dim[g] * dim[g]);
            for (size_t i = 0; i < hd.size(); i++) hd[i] = w.H[g][i];
            eg = rel_norm_d(hd.data(), H[g].data(), hd.size());
        } else {
            eg = rel_norm_d(w.colsq[g], sq[g].data(), dim[g]);
        }
        T_OK(eg <= 3e-2, "%s: %s of %s from the bf16 operand within 3e-2 of the CPU's from fp32 (%.2e)", name,
             w.H[g] ? "X^T X" : "squared norms", IN[g], eg);
    }
    free(cv.base);
    model_acts_free(&a);
    model_free(&m);
}
#endif

// --- the whole walk ----------------------------------------------------------------------------

// Wanda's rows and SparseGPT's blocks pruned exactly as counted; pruned weights 0 in m.
static int counts_exact(const Model *m, const uint8_t *mask, OneShotMethod method, double S) {
    int ok = 1;
    for (int i = 0; i < m->n_info && ok; i++) {
        const ParamInfo *p = &m->info[i];
        if (!p->prunable) continue;
        size_t rows = (size_t)p->shape[0], cols = (size_t)p->shape[1];
        const uint8_t *mk = mask + p->offset;
        for (size_t j = 0; j < p->numel; j++) ok &= mk[j] || m->params[p->offset + j] == 0.0f;
        if (method == ONESHOT_WANDA) {
            for (size_t r = 0; r < rows; r++) {
                size_t pruned = 0;
                for (size_t c = 0; c < cols; c++) pruned += !mk[r * cols + c];
                ok &= pruned == (size_t)floor((double)cols * S);
            }
        } else {
            for (size_t c0 = 0; c0 < cols; c0 += SPARSEGPT_BLOCK) {
                size_t bc = cols - c0 < SPARSEGPT_BLOCK ? cols - c0 : SPARSEGPT_BLOCK, pruned = 0;
                for (size_t r = 0; r < rows; r++)
                    for (size_t c = c0; c < c0 + bc; c++) pruned += !mk[r * cols + c];
                ok &= pruned == (size_t)floor((double)(rows * bc) * S);
            }
        }
    }
    return ok;
}

static void check_walk(const char *name, OneShotMethod method, int fp32, double S, double min_agree,
                       double max_wdist) {
    Model c, d, orig;
    if (!load_fixture(&c, name) || !load_fixture(&d, name) || !load_fixture(&orig, name)) return;
    char mname[64];
    snprintf(mname, sizeof mname, "%s (%s)", oneshot_method_name(method), fp32 ? "fp32" : "bf16");
    std::vector<int32_t> win = windows_make(c.V, 5);
    std::vector<uint8_t> mc(c.n_params), md(d.n_params);
    OneShotSpec spec = {method, S, 0.01, BATCH, fp32, {0, 0}};
    OneShotStats sc, sd;
    T_OK(oneshot_prune(mc.data(), &sc, &c, &spec, win.data(), NWIN, SEQ, NULL) == 0, "%s: %s on the CPU", name,
         mname);
    if (!T_OK(oneshot_prune_cuda(md.data(), &sd, &d, &spec, win.data(), NWIN, SEQ, NULL, ctx_get()) == 0,
              "%s: %s %s: %s", name, mname, MODE, err_msg()))
        return;
    T_OK(counts_exact(&d, md.data(), method, S), "%s: %s at %g: the device's counts exact and pruned weights 0", name,
         mname, S);
    size_t n = 0, same = 0;
    double num = 0, den = 0;
    int kept_same = 1;
    for (int i = 0; i < c.n_info; i++) {
        const ParamInfo *p = &c.info[i];
        if (!p->prunable) {
            kept_same &= memcmp(d.params + p->offset, orig.params + p->offset, p->numel * sizeof(float)) == 0;
            continue;
        }
        for (size_t j = p->offset; j < p->offset + p->numel; j++) {
            n++;
            same += mc[j] == md[j];
            double e = (double)d.params[j] - c.params[j];
            num += e * e;
            den += (double)c.params[j] * c.params[j];
            if (method == ONESHOT_WANDA && md[j]) kept_same &= d.params[j] == orig.params[j];
        }
    }
    double agree = (double)same / (double)n, wdist = sqrt(num / den);
    T_OK(kept_same, "%s: %s: the tensors not pruned%s are untouched", name, mname,
         method == ONESHOT_WANDA ? " and the kept weights" : "");
    T_OK(agree >= min_agree, "%s: %s at %g: the device's mask agrees with the CPU walk's on %.2f%% of %zu weights "
         "(bound %.1f%%)", name, mname, S, 100 * agree, n, 100 * min_agree);
    T_OK(wdist <= max_wdist, "%s: %s at %g: the device's weights within %.2e of the CPU walk's, normwise (bound %.0e)",
         name, mname, S, wdist, max_wdist);
    T_OK(sd.forward > 0 && sd.stats > 0 && sd.update > 0 && (method == ONESHOT_WANDA) == (sd.factor == 0),
         "%s: %s: the device's seconds by phase (forward %.3f, statistics %.3f, factor %.3f, update %.3f)", name, mname,
         sd.forward, sd.stats, sd.factor, sd.update);
    int B = 0;
    size_t want = oneshot_cuda_bytes(&d, method, fp32, NWIN, SEQ, BATCH, 0, &B);
    T_OK(sd.device_bytes == (double)want && B == BATCH &&
             oneshot_cuda_bytes(&d, method, fp32, NWIN, SEQ, 1, 0, NULL) < want,
         "%s: %s: the walk allocated oneshot_cuda_bytes's %zu bytes at batch %d, more than at batch 1", name, mname,
         want, BATCH);
    model_free(&c);
    model_free(&d);
    model_free(&orig);
}

// N:M (issue 39) through the walk: 2:4 for each method, with fp32 products the CPU walk's
// masks and weights (within 1e-5), with bf16 exactly 2:4 and 97% of the mask the CPU's.
static void check_walk_nm(const char *name) {
    static const OneShotMethod METHODS[] = {ONESHOT_MAGNITUDE, ONESHOT_WANDA, ONESHOT_SPARSEGPT};
    for (OneShotMethod me : METHODS)
        for (int fp32 = 0; fp32 < 2; fp32++) {
            Model c, d;
            if (!load_fixture(&c, name) || !load_fixture(&d, name)) return;
            std::vector<int32_t> win = windows_make(c.V, 9);
            std::vector<uint8_t> mc(c.n_params), md(d.n_params);
            OneShotSpec spec = {me, 0.5, 0.01, BATCH, fp32, {2, 4}};
            int ok = oneshot_prune(mc.data(), NULL, &c, &spec, win.data(), NWIN, SEQ, NULL) == 0 &&
                     oneshot_prune_cuda(md.data(), NULL, &d, &spec, win.data(), NWIN, SEQ, NULL, ctx_get()) == 0;
            size_t n = 0, same = 0, bad = 0;
            double num = 0, den = 0;
            for (int i = 0; i < c.n_info && ok; i++) {
                const ParamInfo *p = &c.info[i];
                if (!p->prunable) continue;
                bad += nm_violations(md.data() + p->offset, (size_t)p->shape[0], (size_t)p->shape[1], &spec.pattern);
                for (size_t j = p->offset; j < p->offset + p->numel; j++) {
                    n++, same += mc[j] == md[j];
                    double e = (double)d.params[j] - c.params[j];
                    num += e * e, den += (double)c.params[j] * c.params[j];
                    ok &= md[j] || d.params[j] == 0.0f;
                }
            }
            double agree = n ? (double)same / (double)n : 0, dist = den > 0 ? sqrt(num / den) : 0;
            // bf16: a drift bound, not a rounding one (measured 98.99% to 100%: a group's 4
            // scores are close, so the bf16 forward swaps more of them than a row's or block's)
            int good = fp32 ? agree == 1.0 && dist <= 1e-5 : agree >= 0.97;
            T_OK(ok && bad == 0 && good, "%s: %s --pattern 2:4 (%s) %s: exactly 2:4, pruned weights 0, the mask agrees "
                 "with the CPU walk's on %.2f%%, weights within %.1e (bound: %s)", name, oneshot_method_name(me),
                 fp32 ? "fp32" : "bf16", MODE, 100 * agree, dist, fp32 ? "all, 1e-5" : "97%");
            model_free(&c);
            model_free(&d);
        }
}

// --- stories260K (tests/t_oneshot.sh gives the shards, from ../shared) ----------------------

// exp of the mean NLL of m over the first `nwin` windows of seq + 1 tokens of the shard.
static double perplexity(const Model *m, const int32_t *tok, size_t ntok, int seq, int nwin) {
    ModelActs a;
    model_acts_init(&a, m, 1, seq, 0);
    std::vector<float> nll(seq);
    double sum = 0;
    size_t n = 0;
    for (int w = 0; w < nwin && (size_t)(w + 1) * seq + 1 <= ntok; w++) {
        const int32_t *x = tok + (size_t)w * seq;
        model_eval(NULL, nll.data(), m, &a, x, x + 1);
        for (int t = 0; t < seq; t++) sum += nll[t];
        n += (size_t)seq;
    }
    model_acts_free(&a);
    return exp(sum / (double)n);
}

// Wanda and SparseGPT at 50% and 70% of stories260K from 8 windows of 128 tokens drawn as
// best-mask draws them (calib_windows, seed 0; fewer than t_oneshot's 16 of 256: the
// emulator is slow), on the CPU and on the device, perplexity on 16 windows of the
// validation text: the device's within 1% of the CPU walk's with fp32 products (the
// issue's bound), and bf16's (below), the masks' agreement printed.
static void check_stories(const char *dir, const char *calib, const char *valid) {
    enum { NS = 8, SQ = 128 };
    std::vector<int32_t> win(NS * SQ);
    if (!T_OK(calib_windows(win.data(), calib, NS, SQ, 0) == 0, "stories260K: windows from %s", calib)) return;
    Shard sh;
    if (!T_OK(shard_open(&sh, valid) == 0, "stories260K: the validation shard %s", valid)) return;
    std::vector<int32_t> vt(sh.h.ntokens);
    shard_read(&sh, vt.data(), 0, vt.size());
    shard_close(&sh);
    static const OneShotMethod METHODS[] = {ONESHOT_WANDA, ONESHOT_SPARSEGPT};
    for (int fp32 = 1; fp32 >= 0; fp32--)
    for (OneShotMethod me : METHODS)
        for (double S : {0.5, 0.7}) {
            Model c, d;
            if (!T_OK(model_load(&c, dir) == 0 && model_load(&d, dir) == 0, "stories260K: load %s", dir)) return;
            std::vector<uint8_t> mc(c.n_params), md(d.n_params);
            OneShotSpec spec = {me, S, 0.01, 0, fp32, {0, 0}};
            int ok = oneshot_prune(mc.data(), NULL, &c, &spec, win.data(), NS, SQ, NULL) == 0 &&
                     oneshot_prune_cuda(md.data(), NULL, &d, &spec, win.data(), NS, SQ, NULL, ctx_get()) == 0;
            size_t n = 0, same = 0;
            for (int i = 0; i < c.n_info; i++)
                if (c.info[i].prunable)
                    for (size_t j = c.info[i].offset; j < c.info[i].offset + c.info[i].numel; j++)
                        n++, same += mc[j] == md[j];
            double pc = perplexity(&c, vt.data(), vt.size(), SQ, 16), pd = perplexity(&d, vt.data(), vt.size(), SQ, 16);
            // fp32: the 1% (measured 0.00%). bf16 (the default) is a measurement of
            // the drift its products bring, bounded only against a wrong walk: 5% at 50%, 20% at
            // 70%, where this tiny model's perplexity is 30 times its dense one (measured here
            // -0.08% and +0.90% at 50%, +0.57% and -2.83% at 70%; with 16 windows of 256
            // tokens +8.9% and +2.6% at 70%: docs/best-mask.md)
            double bound = fp32 ? 0.01 : S < 0.6 ? 0.05 : 0.2;
            T_OK(ok && fabs(pd / pc - 1) <= bound,
                 "stories260K, %s at %g, %s products %s: perplexity %.3f, the CPU walk's %.3f (%+.2f%%, bound %g%%); "
                 "masks agree on %.3f%%", oneshot_method_name(me), S, fp32 ? "fp32" : "bf16", MODE, pd, pc,
                 100 * (pd / pc - 1), 100 * bound, 100.0 * same / n);
            model_free(&c);
            model_free(&d);
        }
}

static void check_errors(void) {
    Model m, o;
    if (!load_fixture(&m, "llama") || !load_fixture(&o, "llama")) return;
    std::vector<int32_t> win = windows_make(m.V, 3);
    win[5] = (int32_t)m.V;
    std::vector<uint8_t> mask(m.n_params);
    OneShotSpec spec = {ONESHOT_SPARSEGPT, 0.5, 0.01, 0, 0, {0, 0}};
    int rc = oneshot_prune_cuda(mask.data(), NULL, &m, &spec, win.data(), NWIN, SEQ, NULL, ctx_get());
    T_OK(rc < 0 && strstr(err_msg(), "outside the model's vocabulary") &&
             memcmp(m.params, o.params, m.n_params * sizeof(float)) == 0,
         "a calibration token outside the vocabulary: an error (%s), the weights untouched", err_msg());
    model_free(&m);
    model_free(&o);
}

int main(int argc, char **argv) {
#ifdef TEST_ON_GPU
    T_CUDA_DEVICE_OR_SKIP();
#endif
    printf("# test_calib_cuda: %s\n", MODE);
    if (argc == 5 && strcmp(argv[1], "--stories") == 0) { // test_calib_cuda --stories DIR CALIB.bin VALID.bin
        check_stories(argv[2], argv[3], argv[4]);
        T_DONE();
    }
    static const char *FIX[] = {"llama", "qwen3", "llama_tied"};
    for (const char *f : FIX) {
        check_magnitude(f, 0.5);
        check_magnitude(f, 0.7);
#ifndef TEST_ON_GPU
        check_block(f, ONESHOT_SPARSEGPT);
        check_block(f, ONESHOT_WANDA);
#endif
        for (double S : {0.5, 0.7}) {
            check_walk(f, ONESHOT_WANDA, 0, S, 0.995, 0.1);
            check_walk(f, ONESHOT_SPARSEGPT, 0, S, 0.995, 0.1);
            check_walk(f, ONESHOT_WANDA, 1, S, 0.9999, 1e-6);
            check_walk(f, ONESHOT_SPARSEGPT, 1, S, 0.9999, 1e-5);
        }
    }
    check_walk_nm("llama");
    check_walk_nm("qwen3");
    check_errors();
    T_DONE();
}
