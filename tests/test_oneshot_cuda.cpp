// test_oneshot_cuda.cpp: the device twins of the one-shot methods (lib/sparse/wanda.cu,
// sparsegpt.cu, select.cu's select_smallest_cuda) against their CPU versions (wanda.c,
// sparsegpt.c, select.c), on random inputs at shapes that reach every path: rows and
// columns not multiples of 128 nor of a block's 256 threads, more rows and columns than
// the (capped) grid has blocks, dead columns, k = 0 and k = all, many exact ties.
//
//   * wanda_accumulate_cuda (bf16 x) against wanda_accumulate on the same values widened
//     to float: every column within 1e-12 relative (the sums run in another order), and
//     the same bits on a second run;
//   * wanda_prune_cuda: w and the mask bit for bit (the same scores and ties);
//   * select_smallest_cuda: the flagged set is select_smallest's first k, every segment;
//   * sparsegpt_factor_cuda (fp32 H) against sparsegpt_factor (the doubles of the same
//     floats): U and dead; a rank-deficient H whose Cholesky needs retries (the same
//     warnings), and one that fails (the same error); H left as it was;
//   * sparsegpt_prune_cuda against sparsegpt_prune with the same U and dead: the mask and
//     the weights.
// In the emulator U, masks and weights must be bit for bit the CPU's (LAPACK stands in for
// cuSOLVER, cblas_sgemm for cuBLASLt: the CPU's own calls). On a GPU cuSOLVER and
// cuBLASLt sum in other orders: U within 1e-4 normwise, the pruned weights within 1e-5
// normwise with at least 99.9% of the mask the same (a near-tie of scores may flip);
// wanda and the select stay bit for bit.
//
// Built two ways, as test_kernels is: build/tests/test_oneshot_cuda (g++: the .cu files
// are included here and run by tests/cuda_emu.h, grids capped at 3 blocks; cuBLASLt and
// cuSOLVER stood in for by tests/cuda_shims.h) and
// build/tests/test_oneshot_cuda_gpu (nvcc: libbest's kernels, cuSOLVER and cuBLASLt on a
// GPU; "skip - no CUDA device" without one; never run yet).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#ifdef TEST_ON_GPU
#include "base/cuda.h" // defines: CudaCtx, CUDA_CHECK, cuda_ctx_create
#define MODE "gpu"
#else
#define KM_GRID_CAP 3u   // tiny grids: the grid-stride loops run at tiny sizes
#define BEST_KAPI static // this file's own copy of the kernels' API
#include "cuda_emu.h"
#include "cuda_shims.h" // defines: CudaCtx, matmul_f32_cuda, solver_*_cuda (stand-ins: sgemm, LAPACK)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function" // (select.cu's global select, unused here)
#include "sparse/select.cu"
#include "sparse/wanda.cu"
#include "sparse/sparsegpt.cu"
#include "sparse/nm.cu"
#pragma GCC diagnostic pop
#define MODE "emulated"
#endif
#include "base/error.h"        // defines: err_msg
#include "nn/kernel_math.h"    // defines: km_bf16_from_float, km_float_from_bf16
#include "sparse/select.h"     // defines: select_smallest, select_key (and select_smallest_cuda)
#include "sparse/sparsegpt.h"  // defines: sparsegpt_factor, sparsegpt_prune (and the _cuda twins)
#include "sparse/wanda.h"      // defines: wanda_accumulate, wanda_prune (and the _cuda twins)
#include "test.h"
#ifdef TEST_ON_GPU
#define TEST_BIT_OR_TOL "within tolerance of"
#define TEST_BIT_OR_TOL_RETRY "finite, compared with"
#else
#define TEST_BIT_OR_TOL "bit for bit"
#define TEST_BIT_OR_TOL_RETRY "bit for bit"
#endif

#include "cuda_test.h" // defines: Dev, dev_alloc, ctx_get

// --- inputs and comparisons ------------------------------------------------------------
// One of a few values, signs mixed: exact ties of |w| and w^2.
static float rnd_few() {
    static const float v[4] = {0.5f, 0.25f, 1.0f, 0.75f};
    uint32_t r = rnd32();
    return (r & 1 ? -1.0f : 1.0f) * v[(r >> 1) % 4];
}

static int same_bits(const void *a, const void *b, size_t bytes) { return memcmp(a, b, bytes) == 0; }

// ||a - b|| / ||b|| (Frobenius).
static double norm_err(const std::vector<float> &a, const std::vector<float> &b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

// What f writes to stderr (captured through a temporary file).
static std::string stderr_of(const std::function<void()> &f) {
    fflush(stderr);
    int saved = dup(2);
    FILE *t = tmpfile();
    CHECK(saved >= 0 && t, "stderr_of: no temporary file");
    dup2(fileno(t), 2);
    f();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    std::string s;
    rewind(t);
    for (int ch; (ch = fgetc(t)) != EOF;) s += (char)ch;
    fclose(t);
    return s;
}

// --- Wanda --------------------------------------------------------------------------------

static void check_wanda_accumulate() {
    // columns: under one block's 32, and 10 groups of 32 on a grid of 3; rows not multiples of 8
    static const size_t Ns[] = {70, 33}, Cs[] = {45, 300};
    for (int s = 0; s < 2; s++) {
        size_t N = Ns[s], C = Cs[s];
        std::vector<uint16_t> x(N * C);
        std::vector<float> xf(N * C);
        for (size_t i = 0; i < N * C; i++) {
            x[i] = km_bf16_from_float(rnd(3.0f));
            xf[i] = km_float_from_bf16(x[i]);
        }
        std::vector<double> colsq(C), want;
        for (auto &v : colsq) v = fabs(rnd(10.0f)); // accumulated into
        want = colsq;
        wanda_accumulate(want.data(), xf.data(), N, C);
        Dev<uint16_t> d_x(x);
        Dev<double> d_c(colsq), d_c2(colsq);
        wanda_accumulate_cuda(d_c.p, d_x.p, N, C, ctx_get()->stream);
        wanda_accumulate_cuda(d_c2.p, d_x.p, N, C, ctx_get()->stream);
        std::vector<double> got = d_c.get(), got2 = d_c2.get();
        double e = 0;
        for (size_t c = 0; c < C; c++) e = fmax(e, fabs(got[c] - want[c]) / fabs(want[c]));
        if (isnan(e)) e = INFINITY;
        T_OK(e <= 1e-12 && same_bits(got.data(), got2.data(), C * sizeof(double)),
             "%s wanda_accumulate_cuda (%zu, %zu) bf16: every column within %.1e of the CPU's (tolerance 1e-12), "
             "the same bits twice", MODE, N, C, e);
    }
}

static void check_wanda_prune() {
    static const size_t Rs[] = {37, 5}, Cs[] = {300, 777};
    static const double Ss[] = {0.0, 0.3, 0.5, 0.9, 0.999, 1.0};
    for (int s = 0; s < 2; s++)
        for (int ties = 0; ties < 2; ties++) {
            size_t R = Rs[s], C = Cs[s];
            std::vector<float> w(R * C);
            std::vector<double> colsq(C);
            for (auto &v : w) v = ties ? (rnd32() % 9 == 0 ? 0.0f : rnd_few()) : rnd(1.0f);
            for (size_t c = 0; c < C; c++) // a dead column (score 0) in each case; with ties, norms of 4 values
                colsq[c] = c == 7 ? 0.0 : ties ? (double)(1 + rnd32() % 4) : fabs(rnd(5.0f));
            Dev<double> d_colsq(colsq);
            int bad = 0;
            for (double S : Ss) {
                std::vector<float> ww = w;
                std::vector<uint8_t> wm(R * C);
                wanda_prune(ww.data(), wm.data(), R, C, colsq.data(), S, NULL);
                Dev<float> d_w(w);
                Dev<uint8_t> d_m(R * C);
                d_m.poison();
                wanda_prune_cuda(d_w.p, d_m.p, R, C, d_colsq.p, S, ctx_get()->stream);
                std::vector<float> gw = d_w.get();
                std::vector<uint8_t> gm = d_m.get();
                int ok = gm == wm && same_bits(gw.data(), ww.data(), R * C * sizeof(float));
                if (!ok) printf("# wanda (%zu, %zu)%s at %g: %s differ\n", R, C, ties ? " ties" : "", S,
                                gm == wm ? "weights" : "masks");
                bad += !ok;
            }
            T_OK(bad == 0, "%s wanda_prune_cuda (%zu, %zu)%s, a dead column, sparsity 0 to 1 (%d cases): mask and "
                 "weights bit for bit the CPU's (%d differ)", MODE, R, C,
                 ties ? ", weights and norms of 4 values (ties)" : "", (int)(sizeof Ss / sizeof *Ss), bad);
        }
}

// --- select_smallest ----------------------------------------------------------------------

static void check_select_smallest() {
    static const size_t lens[] = {1000, 37, 512};
    static const char *kinds[] = {"spread", "4 values and zeros", "all equal"};
    const size_t nseg = 4;
    for (size_t len : lens)
        for (int kind = 0; kind < 3; kind++) {
            std::vector<float> x(nseg * len);
            static const float four[4] = {0.0f, 0.25f, 1.0f, 3.5f};
            for (auto &v : x) v = kind == 0 ? fabsf(rnd(2.0f)) : kind == 1 ? four[rnd32() % 4] : 0.75f;
            Dev<float> d_x(x);
            const size_t ks[] = {0, 1, len / 3, len / 2, len - 1, len, rnd32() % len};
            int bad = 0;
            for (size_t k : ks) {
                std::vector<uint8_t> want(nseg * len, 0);
                std::vector<uint64_t> key(len);
                for (size_t sg = 0; sg < nseg; sg++) {
                    for (size_t i = 0; i < len; i++) key[i] = select_key(x[sg * len + i], i);
                    select_smallest(key.data(), len, k);
                    for (size_t i = 0; i < k; i++) want[sg * len + (key[i] & 0xffffffffu)] = 1;
                }
                Dev<uint8_t> d_f(nseg * len);
                d_f.poison();
                select_smallest_cuda(d_f.p, d_x.p, nseg, len, k, ctx_get()->stream);
                int ok = d_f.get() == want;
                if (!ok) printf("# select_smallest %s, len %zu, k %zu: differs\n", kinds[kind], len, k);
                bad += !ok;
            }
            T_OK(bad == 0, "%s select_smallest_cuda, %zu segments of %zu, %s, k from 0 to all (7 cases): "
                 "select_smallest's first k (%d differ)", MODE, nseg, len, kinds[kind], bad);
        }
}

// --- SparseGPT ------------------------------------------------------------------------------

// H (n, n) = X^T X (+ a little on the diagonal when ridge) for X (N, n) random, column
// `dead` of X 0; in float (its sums in double), both triangles.
static std::vector<float> make_H(size_t N, size_t n, size_t dead, float ridge) {
    std::vector<float> X(N * n), H(n * n);
    for (size_t i = 0; i < N * n; i++) X[i] = i % n == dead ? 0.0f : rnd(1.0f);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j <= i; j++) {
            double s = 0;
            for (size_t r = 0; r < N; r++) s += (double)X[r * n + i] * X[r * n + j];
            H[i * n + j] = H[j * n + i] = (float)s + (i == j && i != dead ? ridge : 0.0f);
        }
    return H;
}

// sparsegpt_factor on the doubles of H's floats: rc, U, dead, err_msg and stderr.
struct Factor {
    int rc;
    std::vector<float> U;
    std::vector<uint8_t> dead;
    std::string msg, warn;
};
static Factor factor_cpu(const std::vector<float> &H, size_t n, double percdamp) {
    Factor f{0, std::vector<float>(n * n), std::vector<uint8_t>(n), "", ""};
    std::vector<double> Hd(H.begin(), H.end());
    f.warn = stderr_of([&] { f.rc = sparsegpt_factor(f.U.data(), f.dead.data(), Hd.data(), n, percdamp, "layer t"); });
    if (f.rc) f.msg = err_msg();
    return f;
}
static Factor factor_dev(const std::vector<float> &H, size_t n, double percdamp, int *H_kept) {
    Factor f{0, {}, {}, "", ""};
    Dev<float> d_H(H), d_U(n * n);
    Dev<uint8_t> d_dead(n);
    d_U.poison();
    d_dead.poison();
    f.warn = stderr_of(
        [&] { f.rc = sparsegpt_factor_cuda(d_U.p, d_dead.p, d_H.p, n, percdamp, "layer t", ctx_get()); });
    if (f.rc) f.msg = err_msg();
    f.U = d_U.get();
    f.dead = d_dead.get();
    *H_kept = d_H.get() == H;
    return f;
}

static void check_factor() {
    const size_t n = 150;
    int H_kept = 0;
    { // well-posed, one dead input
        std::vector<float> H = make_H(300, n, 17, 0.0f);
        Factor c = factor_cpu(H, n, 0.01), g = factor_dev(H, n, 0.01, &H_kept);
#ifdef TEST_ON_GPU
        double e = norm_err(g.U, c.U);
        int ok = e <= 1e-4;
#else
        double e = norm_err(g.U, c.U);
        int ok = same_bits(g.U.data(), c.U.data(), n * n * sizeof(float));
#endif
        T_OK(c.rc == 0 && g.rc == 0 && ok && g.dead == c.dead && c.dead[17] == 1 && g.warn.empty() && H_kept,
             "%s sparsegpt_factor_cuda (%zu inputs, one dead): U %s the CPU's (normwise %.1e), dead the same, "
             "no warning, H left as it was", MODE, n, TEST_BIT_OR_TOL, e);
    }
    { // rank 20 of 150: the first dampenings too small in fp32, retried
        std::vector<float> H = make_H(20, n, 3, 0.0f);
        Factor c = factor_cpu(H, n, 1e-9), g = factor_dev(H, n, 1e-9, &H_kept);
        double e = norm_err(g.U, c.U);
#ifdef TEST_ON_GPU
        // cuSOLVER may need another number of retries, and U is ill-conditioned here: the
        // normwise error is printed, not bounded
        int ok = !g.warn.empty() && !isnan(e) && !isinf(e);
#else
        int ok = same_bits(g.U.data(), c.U.data(), n * n * sizeof(float)) && g.warn == c.warn;
#endif
        T_OK(c.rc == 0 && g.rc == 0 && !c.warn.empty() && ok && g.dead == c.dead,
             "%s sparsegpt_factor_cuda, rank-deficient H retried (the CPU warned %d times): the CPU's warnings, "
             "U %s the CPU's (normwise %.1e)", MODE, (int)std::count(c.warn.begin(), c.warn.end(), '\n'),
             TEST_BIT_OR_TOL_RETRY, e);
        if (!c.warn.empty()) printf("# CPU: %s", c.warn.substr(0, c.warn.find('\n') + 1).c_str());
    }
    { // rank 20, no dampening at all: every try fails
        std::vector<float> H = make_H(20, n, 3, 0.0f);
        Factor c = factor_cpu(H, n, 0.0), g = factor_dev(H, n, 0.0, &H_kept);
#ifdef TEST_ON_GPU
        int ok = 1; // cuSOLVER's info may name another minor
#else
        int ok = g.msg == c.msg && g.warn == c.warn;
#endif
        T_OK(c.rc != 0 && g.rc != 0 && ok && strstr(g.msg.c_str(), "not positive definite"),
             "%s sparsegpt_factor_cuda, singular H without dampening: fails as the CPU does (\"%s\")", MODE,
             g.msg.c_str());
    }
}

static void check_prune() {
    const size_t R = 30, C = 300; // column blocks 128, 128, 44; 4 groups of 8 rows on 3 blocks
    std::vector<float> H = make_H(400, C, 200, 0.5f);
    for (size_t i = 0; i < C; i++) H[i * C + 17] = H[17 * C + i] = 0.0f; // a second dead input, in block 0
    Factor f = factor_cpu(H, C, 0.01);
    if (!T_OK(f.rc == 0 && f.dead[17] && f.dead[200], "sparsegpt_factor for the pruning's U (dead inputs 17, 200)"))
        return;
    Dev<float> d_U(f.U);
    Dev<uint8_t> d_dead(f.dead);
    Dev<uint8_t> scratch(sparsegpt_prune_scratch(R));
    static const double Ss[] = {0.0, 0.3, 0.5, 0.7, 1.0};
    for (int ties = 0; ties < 2; ties++) {
        std::vector<float> w(R * C);
        for (auto &v : w) v = ties ? (rnd32() % 3 == 0 ? 0.0f : rnd_few()) : rnd(1.0f); // 0: score 0, ties
        int bad = 0;
        double worst_e = 0, worst_agree = 1;
        for (double S : Ss) {
            std::vector<float> ww = w;
            std::vector<uint8_t> wm(R * C);
            sparsegpt_prune(ww.data(), wm.data(), R, C, f.U.data(), f.dead.data(), S, NULL);
            Dev<float> d_w(w);
            Dev<uint8_t> d_m(R * C);
            d_m.poison();
            sparsegpt_prune_cuda(d_w.p, d_m.p, R, C, d_U.p, d_dead.p, S, NULL, scratch.p, ctx_get());
            std::vector<float> gw = d_w.get();
            std::vector<uint8_t> gm = d_m.get();
            size_t same = 0, bytes_ok = 1;
            for (size_t i = 0; i < R * C; i++) same += gm[i] == wm[i], bytes_ok &= gm[i] <= 1;
            double agree = (double)same / (double)(R * C), e = norm_err(gw, ww);
#ifdef TEST_ON_GPU
            int ok = bytes_ok && agree >= 0.999 && e <= 1e-5;
#else
            int ok = gm == wm && same_bits(gw.data(), ww.data(), R * C * sizeof(float));
#endif
            if (!ok) printf("# sparsegpt%s at %g: mask agreement %.5f, weights normwise %.2e\n",
                            ties ? " ties" : "", S, agree, e);
            bad += !ok;
            worst_e = fmax(worst_e, e), worst_agree = fmin(worst_agree, agree);
        }
        T_OK(bad == 0, "%s sparsegpt_prune_cuda (%zu, %zu)%s, two dead inputs, sparsity 0, 0.3, 0.5, 0.7, 1: mask and "
             "weights %s the CPU's (worst: mask agreement %.5f, normwise %.1e; %d differ)", MODE, R, C,
             ties ? ", a third of the weights 0 and the rest of 4 values (ties)" : "", TEST_BIT_OR_TOL, worst_agree, worst_e, bad);
    }
}

// N:M (issue 39): nm_prune_cuda (magnitude's and Wanda's scores) and sparsegpt_prune_cuda
// with a pattern against the CPU's (nm_prune, wanda_prune, sparsegpt_prune with it):
// masks and weights bit for bit in the emulator (on a GPU: masks and Wanda's, magnitude's
// weights bit for bit; SparseGPT's weights within 1e-5 and 99.9% of the mask, as above).
static void check_nm() {
    const size_t R = 30, C = 384; // 384: a multiple of 4, 8, 3, 32; SparseGPT's blocks of 128, 126, 96
    std::vector<float> H = make_H(500, C, 5, 0.5f);
    Factor f = factor_cpu(H, C, 0.01);
    if (!T_OK(f.rc == 0, "sparsegpt_factor for the N:M checks")) return;
    Dev<float> d_U(f.U);
    Dev<uint8_t> d_dead(f.dead);
    Dev<uint8_t> scratch(sparsegpt_prune_scratch(R));
    std::vector<double> colsq(C);
    for (auto &v : colsq) v = (double)(rnd32() % 4 + 1) * 0.25; // 4 values: ties of the scores
    Dev<double> d_colsq(colsq);
    static const int PAT[][2] = {{2, 4}, {4, 8}, {1, 3}, {16, 32}};
    for (const auto &pt : PAT) {
        NMPattern p = {pt[0], pt[1]};
        for (int ties = 0; ties < 2; ties++) {
            std::vector<float> w(R * C);
            for (auto &v : w) v = ties ? (rnd32() % 3 == 0 ? 0.0f : rnd_few()) : rnd(1.0f);
            int ok = 1;
            for (int meth = 0; meth < 3; meth++) { // magnitude, wanda, sparsegpt
                std::vector<float> ww = w;
                std::vector<uint8_t> wm(R * C);
                if (meth == 0) {
                    nm_prune(ww.data(), wm.data(), R, C, NULL, &p);
                } else if (meth == 1) {
                    wanda_prune(ww.data(), wm.data(), R, C, colsq.data(), 0.0, &p);
                } else {
                    sparsegpt_prune(ww.data(), wm.data(), R, C, f.U.data(), f.dead.data(), 0.0, &p);
                }
                Dev<float> d_w(w);
                Dev<uint8_t> d_m(R * C);
                d_m.poison();
                if (meth < 2) nm_prune_cuda(d_w.p, d_m.p, R, C, meth ? d_colsq.p : NULL, &p, ctx_get()->stream);
                else sparsegpt_prune_cuda(d_w.p, d_m.p, R, C, d_U.p, d_dead.p, 0.0, &p, scratch.p, ctx_get());
                std::vector<float> gw = d_w.get();
                std::vector<uint8_t> gm = d_m.get();
                size_t same = 0;
                for (size_t i = 0; i < R * C; i++) same += gm[i] == wm[i];
                int exact = gm == wm && same_bits(gw.data(), ww.data(), R * C * sizeof(float));
#ifdef TEST_ON_GPU
                int good = meth < 2 ? exact : (double)same / (double)(R * C) >= 0.999 && norm_err(gw, ww) <= 1e-5;
#else
                int good = exact;
#endif
                if (!good) printf("# %d:%d %s%s: mask agreement %zu of %zu\n", p.n, p.m,
                                  meth == 0 ? "magnitude" : meth == 1 ? "wanda" : "sparsegpt", ties ? " ties" : "",
                                  same, R * C);
                ok &= good && nm_violations(gm.data(), R, C, &p) == 0;
            }
            T_OK(ok, "%s N:M %d:%d (%zu, %zu)%s: nm_prune_cuda (magnitude, Wanda) and sparsegpt_prune_cuda give the "
                 "CPU's masks and weights %s, exactly N:M", MODE, p.n, p.m, R, C, ties ? ", ties" : "", TEST_BIT_OR_TOL);
        }
    }
}

int main() {
#ifdef TEST_ON_GPU
    T_CUDA_DEVICE_OR_SKIP();
#else
    printf("# kernels run by tests/cuda_emu.h on the CPU, grids capped at %u blocks\n", KM_GRID_CAP);
#endif
    check_wanda_accumulate();
    check_wanda_prune();
    check_select_smallest();
    check_factor();
    check_prune();
    check_nm();
    T_DONE();
}
