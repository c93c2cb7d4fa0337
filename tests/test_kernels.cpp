// test_kernels.cpp: every CUDA kernel of ours (lib/nn/layers.cu, lib/nn/attention.cu,
// lib/nn/adamw.cu, lib/sparse/saliency.cu, lib/sparse/select.cu) against its CPU twin
// (layers.c, adamw.c, saliency.c, select.c), and on a GPU the cuBLASLt products
// (lib/nn/matmul.cu, which the emulator cannot run) against layers.c's, on
// random inputs (never zeros), at shapes chosen to reach every path: rows longer than
// a block, widths that are not whole warps, more rows and elements than the grid has
// blocks (grid-stride loops), repeated tokens, rows without a target, in-place
// variants. Every output buffer is poisoned (NaN bits) first and checked to be written
// everywhere. Each check prints the largest error relative to the reference's scale.
//
// Built two ways from this one file:
//   build/tests/test_kernels      g++: the .cu files are included here and run on the
//                                 CPU by tests/cuda_emu.h, with the grid capped at 3
//                                 blocks so that small sizes reach the grid-stride
//                                 loops. Runs in every `make test`, plain and ASan.
//   build/tests/test_kernels_gpu  nvcc, in builds with CUDA: calls libbest's compiled
//                                 kernels on a real GPU (tests/gpu/run.sh); prints
//                                 "skip - no CUDA device" and exits 0 where there is none.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <vector>

#ifdef TEST_ON_GPU
#include "nn/adamw.h"        // defines: adamw_update_cuda (BEST_CUDA)
#include "base/cuda.h"         // defines: CUDA_CHECK, cuda_device_count, CudaCtx
#include "nn/decode_fused.h" // defines: DecodeJob, decode_fused_gemv_cuda
#include "nn/layers.h"       // defines: the layer kernels and their _cuda twins, matmul_*_cuda
#include "sparse/saliency.h" // defines: saliency_score_cuda
#include "sparse/select.h"   // defines: select_*_cuda
#define MODE "gpu"
#else
#define KM_GRID_CAP 3u      // tiny grids: the grid-stride loops run at tiny sizes
#define SELECT_CUDA_SPAN 512 // short runs: several blocks of marking at small sizes
#define BEST_KAPI static    // this file's own copy of the kernels' API
#include "cuda_emu.h"
#include "nn/layers.cu"
#include "nn/attention.cu"
#include "nn/adamw.cu"
#include "sparse/saliency.cu"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function" // (select_smallest_cuda: test_oneshot_cuda's)
#include "sparse/select.cu"
#pragma GCC diagnostic pop
#define MODE "emulated"
#endif
#include "base/error.h"      // defines: err_msg
#include "nn/adamw.h"        // defines: adamw_update (the CPU reference)
#include "nn/layers.h"       // defines: the CPU layer kernels
#include "sparse/saliency.h" // defines: saliency_score
#include "sparse/select.h"   // defines: select_init, select_count, ... (the CPU reference)
#include "test.h"
extern "C" int32_t sample_token(const float *logits, int V, float temperature, float top_p, uint64_t *rng,
                                float *scratch); // run/eval.h's: the greedy pick argmax_cuda follows

#include "cuda_test.h" // defines: Dev, dev_alloc, to_dev, to_host
static cudaStream_t stream = 0; // the default stream

// --- inputs and comparisons ------------------------------------------------------------
static std::vector<float> rand_vec(size_t n, float a) {
    std::vector<float> v(n);
    for (auto &x : v) x = rnd(a);
    return v;
}

// Elements still holding the poison (never written).
static size_t unwritten(const std::vector<float> &v) {
    size_t k = 0;
    for (float x : v) { uint32_t u; memcpy(&u, &x, 4); k += u == 0xffffffffu; }
    return k;
}

// got against want: every element written, rel_err (max |diff| / max |want|) <= tol.
static void expect_close(const char *what, const std::vector<float> &got,
                         const std::vector<float> &want, double tol) {
    size_t un = unwritten(got);
    double e = rel_err(got.data(), want.data(), got.size());
    int same = memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0;
    T_OK(got.size() == want.size() && un == 0 && e <= tol,
         "%s %s: max rel err %.2e (tolerance %.0e)%s%s", MODE, what, e, tol,
         same ? ", bitwise equal" : "", un ? ", some elements never written" : "");
}
static void expect_equal(const char *what, const std::vector<float> &got, const std::vector<float> &want) {
    size_t un = unwritten(got);
    int same = got.size() == want.size() && memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0;
    T_OK(same && un == 0, "%s %s: bitwise equal to the CPU (%zu values)%s", MODE, what, got.size(),
         same ? "" : ", max rel err differs");
    if (!same) printf("#   max rel err %.3e\n", rel_err(got.data(), want.data(), got.size()));
}

// Tolerances: elementwise kernels compute what the CPU computes; only nvcc's fma
// contraction moves the last bit (the emulator matches bitwise). Kernels that sum a row
// sum it in float across threads where the CPU sums in double, in order.
#define TOL_ELEM 1e-6
#define TOL_ROW 2e-5

// --- the kernels -------------------------------------------------------------------------

static void check_embedding() {
    const size_t V = 150, C = 37, N = 300; // N*C far past 3 blocks x 256; tokens repeat
    std::vector<float> embed = rand_vec(V * C, 1.0f), dx = rand_vec(N * C, 1.0f);
    std::vector<int32_t> tok(N);
    for (auto &t : tok) t = (int32_t)(rnd32() % (rnd32() % 2 ? 8 : V)); // many repeats of 0..7
    Dev<float> d_embed(embed), d_x(N * C), d_dx(dx);
    Dev<int32_t> d_tok(tok);
    d_x.poison();
    embedding_forward_cuda(d_x.p, d_tok.p, d_embed.p, N, C, stream);
    std::vector<float> want(N * C);
    embedding_forward(want.data(), tok.data(), embed.data(), N, C);
    expect_equal("embedding forward", d_x.get(), want);
    // backward adds into a gradient that already holds something
    std::vector<float> dembed = rand_vec(V * C, 0.5f), dwant = dembed;
    Dev<float> d_dembed(dembed);
    embedding_backward_cuda(d_dembed.p, d_dx.p, d_tok.p, N, C, stream);
    embedding_backward(dwant.data(), dx.data(), tok.data(), N, C);
    expect_equal("embedding backward (tokens repeated, added in row order)", d_dembed.get(), dwant);
    // from the host's index of each token's rows: the same bits, and the index itself
    std::vector<int32_t> index(3 * N + 1, -7);
    size_t U = embedding_index(index.data(), tok.data(), N);
    std::vector<int32_t> uniq(tok);
    std::sort(uniq.begin(), uniq.end());
    uniq.erase(std::unique(uniq.begin(), uniq.end()), uniq.end());
    int good = U == uniq.size() && std::equal(uniq.begin(), uniq.end(), index.begin()) && index[U] == 0 &&
               index[2 * U] == (int32_t)N;
    for (size_t u = 0; good && u < U; u++) // each token's rows, ascending, and nothing else
        for (int32_t i = index[U + u]; i < index[U + u + 1]; i++) {
            int32_t row = index[2 * U + 1 + i];
            good &= tok[row] == index[u] && (i == index[U + u] || row > index[2 * U + 1 + i - 1]);
        }
    T_OK(good, "embedding_index: %zu distinct tokens ascending, each one's rows in row order", U);
    Dev<int32_t> d_index(index);
    Dev<float> d_dembed2(dembed);
    embedding_backward_index_cuda(d_dembed2.p, d_dx.p, d_index.p, U, N, C, stream);
    expect_equal("embedding backward from the rows of each token (embedding_index)", d_dembed2.get(), dwant);
}

static void check_rmsnorm() {
    // C: a warp multiple, not one, more than a block's 512 threads. Few rows where the
    // blocks are wide: each barrier of the emulator costs a context switch per thread.
    static const size_t Cs[] = {64, 100, 700}, Ns[] = {13, 13, 5};
    for (int k = 0; k < 3; k++) {
        const size_t C = Cs[k], N = Ns[k];
        const float eps = 1e-5f;
        std::vector<float> x = rand_vec(N * C, 2.0f), w = rand_vec(C, 1.5f), dy = rand_vec(N * C, 1.0f);
        Dev<float> d_x(x), d_w(w), d_y(N * C), d_rstd(N), d_dy(dy);
        d_y.poison();
        d_rstd.poison();
        rmsnorm_forward_cuda(d_y.p, d_rstd.p, d_x.p, d_w.p, N, C, eps, stream);
        std::vector<float> y(N * C), rstd(N);
        rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), N, C, eps);
        char what[96];
        snprintf(what, sizeof what, "rmsnorm forward C=%zu: y", C);
        expect_close(what, d_y.get(), y, TOL_ROW);
        snprintf(what, sizeof what, "rmsnorm forward C=%zu: rstd", C);
        expect_close(what, d_rstd.get(), rstd, TOL_ROW);
        { // writing bf16: the bits of the fp32 kernel's output cast, and the same rstd
            Dev<uint16_t> d_yb(N * C);
            Dev<float> d_rstd2(N);
            d_yb.poison();
            rmsnorm_forward_bf16_cuda(d_yb.p, d_rstd2.p, d_x.p, d_w.p, N, C, eps, stream);
            std::vector<float> yf = d_y.get();
            std::vector<uint16_t> yb = d_yb.get();
            size_t bad = 0;
            for (size_t i = 0; i < N * C; i++) bad += yb[i] != km_bf16_from_float(yf[i]);
            T_OK(bad == 0 && d_rstd2.get() == d_rstd.get(), "%s rmsnorm forward C=%zu into bf16: the fp32 kernel's "
                 "output cast, bit for bit, and its rstd (%zu differ)", MODE, C, bad);
        }
        // backward: dx overwritten, then accumulated, then in place over dy; dw added into
        Dev<float> d_rs(rstd), d_scratch(km_rmsnorm_dw_chunks(N) * C);
        for (int mode = 0; mode < 3; mode++) {
            int acc = mode == 1;
            std::vector<float> dx0 = rand_vec(N * C, 1.0f), dw0 = rand_vec(C, 1.0f);
            std::vector<float> dx = mode == 2 ? dy : dx0, dw = dw0;
            Dev<float> d_dx(dx0), d_dw(dw0), d_dyc(dy);
            if (mode == 0) d_dx.poison();
            d_scratch.poison();
            float *dxp = mode == 2 ? d_dyc.p : d_dx.p;
            rmsnorm_backward_cuda(dxp, d_dw.p, d_scratch.p, d_dyc.p, d_x.p, d_rs.p, d_w.p, N, C, acc, stream);
            std::vector<float> dyc = dy;
            rmsnorm_backward(mode == 2 ? dyc.data() : dx.data(), dw.data(), dyc.data(), x.data(),
                             rstd.data(), w.data(), N, C, acc);
            static const char *name[] = {"dx", "dx accumulated", "dx in place over dy"};
            snprintf(what, sizeof what, "rmsnorm backward C=%zu: %s", C, name[mode]);
            expect_close(what, mode == 2 ? d_dyc.get() : d_dx.get(), mode == 2 ? dyc : dx, TOL_ROW);
            snprintf(what, sizeof what, "rmsnorm backward C=%zu: dw (added, %u row chunks)", C,
                     km_rmsnorm_dw_chunks(N));
            expect_close(what, d_dw.get(), dw, TOL_ROW);
        }
    }
    // many rows: several chunks of the weight gradient, each of many rows
    const size_t N = 200, C = 40;
    std::vector<float> x = rand_vec(N * C, 2.0f), w = rand_vec(C, 1.0f), dy = rand_vec(N * C, 1.0f);
    std::vector<float> rstd(N), y(N * C), dx(N * C), dw = rand_vec(C, 1.0f);
    rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), N, C, 1e-6f);
    Dev<float> d_x(x), d_w(w), d_dy(dy), d_rstd(rstd), d_dx(N * C), d_dw(dw),
        d_scratch(km_rmsnorm_dw_chunks(N) * C);
    d_dx.poison();
    rmsnorm_backward_cuda(d_dx.p, d_dw.p, d_scratch.p, d_dy.p, d_x.p, d_rstd.p, d_w.p, N, C, 0, stream);
    rmsnorm_backward(dx.data(), dw.data(), dy.data(), x.data(), rstd.data(), w.data(), N, C, 0);
    char what[96];
    snprintf(what, sizeof what, "rmsnorm backward N=%zu: dw over %u chunks", N, km_rmsnorm_dw_chunks(N));
    expect_close(what, d_dw.get(), dw, TOL_ROW);
    expect_close("rmsnorm backward N=200: dx", d_dx.get(), dx, TOL_ROW);
}

static void check_rope() {
    const size_t B = 2, T = 5, H = 3, HD = 16, n = B * T * H * HD;
    std::vector<float> cos(T * HD / 2), sin(T * HD / 2), x = rand_vec(n, 2.0f);
    rope_table(cos.data(), sin.data(), 3, T, HD, 10000.0);
    Dev<float> d_cos(cos), d_sin(sin), d_x(x);
    rope_forward_cuda(d_x.p, d_cos.p, d_sin.p, B, T, H, HD, stream);
    std::vector<float> want = x;
    rope_forward(want.data(), cos.data(), sin.data(), B, T, H, HD);
    expect_close("rope forward (in place)", d_x.get(), want, TOL_ELEM);
    std::vector<float> dx = rand_vec(n, 1.0f), dwant = dx;
    Dev<float> d_dx(dx);
    rope_backward_cuda(d_dx.p, d_cos.p, d_sin.p, B, T, H, HD, stream);
    rope_backward(dwant.data(), cos.data(), sin.data(), B, T, H, HD);
    expect_close("rope backward (in place)", d_dx.get(), dwant, TOL_ELEM);
    // one decoded token at a position in device memory; its keys and values into a cache
    const size_t p = 3, KVD = H * HD;
    std::vector<float> t = rand_vec(KVD, 2.0f), v = rand_vec(KVD, 1.0f), tw = t;
    Dev<float> d_t(t), d_v(v), d_kc(T * KVD), d_vc(T * KVD);
    Dev<int32_t> d_p(std::vector<int32_t>{(int32_t)p});
    rope_at_cuda(d_t.p, d_cos.p, d_sin.p, d_p.p, 1, H, HD, stream);
    rope_forward(tw.data(), cos.data() + p * HD / 2, sin.data() + p * HD / 2, 1, 1, H, HD);
    expect_close("rope at position 3 (in device memory)", d_t.get(), tw, TOL_ELEM);
    // packed rows, each at its own position
    const std::vector<int32_t> at = {4, 0, 2, 4};
    std::vector<float> rows = rand_vec(at.size() * KVD, 2.0f), rw = rows;
    Dev<float> d_rows(rows);
    Dev<int32_t> d_at(at);
    rope_at_cuda(d_rows.p, d_cos.p, d_sin.p, d_at.p, at.size(), H, HD, stream);
    for (size_t r = 0; r < at.size(); r++)
        rope_forward(rw.data() + r * KVD, cos.data() + at[r] * HD / 2, sin.data() + at[r] * HD / 2, 1, 1, H, HD);
    expect_close("rope of 4 rows at table rows 4, 0, 2, 4", d_rows.get(), rw, TOL_ELEM);
    d_kc.poison();
    d_vc.poison();
    kv_append_cuda(d_kc.p, d_vc.p, d_t.p, d_v.p, d_p.p, KVD, stream);
    // the row is the device's own rotated keys, bit for bit (nvcc contracts into fma, so
    // they may differ from the CPU's rope, tw, in the last place: checked above)
    std::vector<float> kc = d_kc.get(), vc = d_vc.get(), td = d_t.get();
    T_OK(memcmp(&kc[p * KVD], td.data(), KVD * 4) == 0 && memcmp(&vc[p * KVD], v.data(), KVD * 4) == 0 &&
             unwritten(kc) == (T - 1) * KVD && unwritten(vc) == (T - 1) * KVD,
         "%s kv append at position 3: that row of each cache, nothing else", MODE);
    { // into a bf16 cache: that row rounded, nothing else
        Dev<uint16_t> d_kcb(T * KVD), d_vcb(T * KVD);
        d_kcb.poison();
        d_vcb.poison();
        kv_append_bf16_cuda(d_kcb.p, d_vcb.p, d_t.p, d_v.p, d_p.p, KVD, stream);
        std::vector<uint16_t> kcb = d_kcb.get(), vcb = d_vcb.get();
        size_t bad = 0, other = 0;
        for (size_t i = 0; i < T * KVD; i++) {
            int row = i / KVD == p;
            if (row) bad += kcb[i] != km_bf16_from_float(td[i % KVD]) || vcb[i] != km_bf16_from_float(v[i % KVD]);
            else other += kcb[i] != 0xffffu || vcb[i] != 0xffffu;
        }
        T_OK(bad == 0 && other == 0, "%s kv append into bf16 at position 3: that row rounded (%zu differ), nothing "
             "else (%zu)", MODE, bad, other);
    }
}

// gemv_bf16_cuda against the CPU's matmul_forward on the bf16 weights' values (one row):
// IC a multiple of 8 (16-byte loads) and not, with bias and accumulation; TOL_ROW (a row's
// sum in another order).
static void check_gemv() {
    static const size_t OCs[] = {37, 300}, ICs[] = {64, 100, 1032};
    for (size_t OC : OCs)
        for (size_t IC : ICs)
            for (int acc = 0; acc < 2; acc++) {
                std::vector<float> wf = rand_vec(OC * IC, 1.0f), x = rand_vec(IC, 1.0f), b = rand_vec(OC, 1.0f);
                std::vector<uint16_t> wb(OC * IC);
                for (size_t i = 0; i < wb.size(); i++) wf[i] = km_float_from_bf16(wb[i] = km_bf16_from_float(wf[i]));
                std::vector<float> y0 = rand_vec(OC, 1.0f), want = y0;
                Dev<uint16_t> d_w(wb);
                Dev<float> d_x(x), d_b(b), d_y(y0);
                if (!acc) d_y.poison();
                gemv_bf16_cuda(d_y.p, d_x.p, d_w.p, acc ? d_b.p : NULL, acc ? d_y.p : NULL, OC, IC, stream);
                matmul_forward(want.data(), x.data(), wf.data(), acc ? b.data() : NULL, 1, IC, OC, acc);
                char what[96];
                snprintf(what, sizeof what, "gemv bf16 %zux%zu%s", OC, IC, acc ? " + b, accumulated" : "");
                expect_close(what, d_y.get(), want, TOL_ROW);
            }
}

// decode_fused_gemv_cuda (nn/decode_fused.h) against the unfused kernels it replaces on the
// same weights, bit for bit: the norm (rmsnorm_forward_bf16_cuda) or the operand's cast,
// widen_bf16_cuda, gemv_bf16_cuda per weight (with res and bias), and for SwiGLU
// swiglu_forward_bf16_cuda then widen. Input widths 64, 100 (not a multiple of 8 or of
// 32: the one-weight loop, 128 threads), 1032 (512 threads, a stride); q|k|v of three
// heights, o_proj with residual, gate|up, a head of one weight; each under the emulator's
// three turn orders. And an input over DECODE_STAGE_MAX is refused without a launch.
static void check_decode_fused() {
    static const size_t ICs[] = {64, 100, 1032};
    size_t bad = 0, cases = 0;
    for (size_t IC : ICs)
        for (int kind = 0; kind < 4; kind++) { // q|k|v, o + res, gate|up, head
            int n = kind == 0 ? 3 : kind == 2 ? 2 : 1, norm = kind != 1, swiglu = kind == 2;
            size_t rows[3] = {kind == 3 ? 1000u : 300u, kind == 2 ? 300u : 37u, 5u};
            std::vector<float> x = rand_vec(IC, 2.0f), nw = rand_vec(IC, 1.0f);
            Dev<float> d_x(x), d_nw(nw), d_xr(IC);
            Dev<uint16_t> d_xb(IC);
            Dev<float> d_rstd(1);
            std::vector<std::unique_ptr<Dev<uint16_t>>> d_w;
            std::vector<std::unique_ptr<Dev<float>>> d_b, d_res, d_y0, d_y1;
            const uint16_t *wp[3];
            DecodeJob j;
            memset(&j, 0, sizeof j);
            j.x = d_x.p, j.norm_w = norm ? d_nw.p : NULL, j.eps = 1e-5f, j.IC = IC, j.n = n, j.swiglu = swiglu;
            for (int g = 0; g < n; g++) {
                std::vector<float> wf = rand_vec(rows[g] * IC, 1.0f);
                std::vector<uint16_t> wb(wf.size());
                for (size_t i = 0; i < wf.size(); i++) wb[i] = km_bf16_from_float(wf[i]);
                d_w.emplace_back(new Dev<uint16_t>(wb));
                d_b.emplace_back(new Dev<float>(rand_vec(rows[g], 1.0f)));
                d_res.emplace_back(new Dev<float>(rand_vec(rows[g], 1.0f)));
                d_y0.emplace_back(new Dev<float>(rows[g]));
                d_y1.emplace_back(new Dev<float>(rows[g]));
                wp[g] = d_w[g]->p;
                j.rows[g] = rows[g], j.y[g] = d_y1[g]->p;
                j.b[g] = kind == 3 ? NULL : d_b[g]->p;
                j.res[g] = kind == 1 ? d_res[g]->p : NULL;
            }
            // the unfused kernels
            if (norm) rmsnorm_forward_bf16_cuda(d_xb.p, d_rstd.p, d_x.p, d_nw.p, 1, IC, j.eps, stream);
            else cast_bf16_cuda(d_xb.p, d_x.p, IC, stream);
            widen_bf16_cuda(d_xr.p, d_xb.p, IC, stream);
            for (int g = 0; g < n; g++) gemv_bf16_cuda(d_y0[g]->p, d_xr.p, wp[g], j.b[g], j.res[g], rows[g], IC, stream);
            size_t I = rows[0];
            Dev<uint16_t> hb0(I), hb1(I);
            Dev<float> hr0(I), hr1(I);
            if (swiglu) {
                swiglu_forward_bf16_cuda(hb0.p, d_y0[0]->p, d_y0[1]->p, I, stream);
                widen_bf16_cuda(hr0.p, hb0.p, I, stream);
                j.hb = hb1.p, j.hr = hr1.p;
            }
            for (int k = 0; k < 3; k++) {
                for (auto &y : d_y1) y->poison();
                hb1.poison();
                hr1.poison();
#ifndef TEST_ON_GPU
                emu_set_turn_order((unsigned)k);
#endif
                int rc = decode_fused_gemv_cuda(&j, wp, stream);
                int same = rc == 0;
                if (swiglu) same = same && hb1.get() == hb0.get() && memcmp(hr1.get().data(), hr0.get().data(), I * 4) == 0;
                else
                    for (int g = 0; g < n; g++)
                        same = same && memcmp(d_y1[g]->get().data(), d_y0[g]->get().data(), rows[g] * 4) == 0;
                bad += !same;
                cases++;
            }
        }
    T_OK(bad == 0, "%s decode_fused_gemv: %zu cases (widths 64, 100, 1032; q|k|v, o + residual, gate|up + SwiGLU, a "
         "head; 3 turn orders) are the unfused norm, cast, widen, gemv and SwiGLU kernels' bits (%zu differ)", MODE,
         cases, bad);
    DecodeJob big;
    memset(&big, 0, sizeof big);
    big.IC = DECODE_STAGE_MAX + 8, big.n = 1, big.rows[0] = 1;
    const uint16_t *none[1] = {NULL};
    T_OK(decode_fused_gemv_cuda(&big, none, stream) == -1, "%s decode_fused_gemv: an input of %d values (over "
         "DECODE_STAGE_MAX) is refused, nothing launched", MODE, DECODE_STAGE_MAX + 8);
}

// decode_rope_append_cuda against the kernels it replaces, bit for bit: Qwen3's q/k norms
// (rmsnorm_forward_cuda over heads of HD), rope_at_cuda on q and k, kv_append(_bf16)_cuda;
// HD 12 (32 threads), 64, 130 (160 threads, 65 pairs); with and without norms (in place);
// fp32 and bf16 caches of 6 positions, at positions 0 and 5 (the rest of the cache untouched).
static void check_rope_append() {
    static const size_t HDs[] = {12, 64, 130};
    const size_t NH = 4, KV = 2, T = 6;
    size_t bad = 0, cases = 0;
    for (size_t HD : HDs)
        for (int norm = 0; norm < 2; norm++)
            for (int bf = 0; bf < 2; bf++)
                for (int32_t p : {0, 5}) {
                    size_t half = HD / 2, KVD = KV * HD;
                    std::vector<float> qraw = rand_vec(NH * HD, 2.0f), kraw = rand_vec(KVD, 2.0f), v = rand_vec(KVD, 1.0f);
                    std::vector<float> qn = rand_vec(HD, 1.0f), kn = rand_vec(HD, 1.0f), cs(T * half), sn(T * half);
                    rope_table(cs.data(), sn.data(), 0, T, HD, 10000.0);
                    std::vector<float> cache = rand_vec(T * KVD, 1.0f);
                    std::vector<uint16_t> cache16(T * KVD);
                    for (size_t i = 0; i < cache.size(); i++) cache16[i] = km_bf16_from_float(cache[i]);
                    Dev<float> a_qraw(qraw), a_kraw(kraw), b_qraw(qraw), b_kraw(kraw), d_v(v), d_qn(qn), d_kn(kn);
                    Dev<float> d_cos(cs), d_sin(sn), a_q(NH * HD), a_k(KVD), b_q(NH * HD), b_k(KVD), rstd(NH);
                    Dev<float> a_kc(cache), a_vc(cache), b_kc(cache), b_vc(cache);
                    Dev<uint16_t> a_kc16(cache16), a_vc16(cache16), b_kc16(cache16), b_vc16(cache16);
                    Dev<int32_t> d_pos(std::vector<int32_t>{p});
                    // the unfused kernels (without norms: in place on the products, as decoding does)
                    float *aq = norm ? a_q.p : a_qraw.p, *ak = norm ? a_k.p : a_kraw.p;
                    if (norm) {
                        rmsnorm_forward_cuda(aq, rstd.p, a_qraw.p, d_qn.p, NH, HD, 1e-6f, stream);
                        rmsnorm_forward_cuda(ak, rstd.p, a_kraw.p, d_kn.p, KV, HD, 1e-6f, stream);
                    }
                    rope_at_cuda(aq, d_cos.p, d_sin.p, d_pos.p, 1, NH, HD, stream);
                    rope_at_cuda(ak, d_cos.p, d_sin.p, d_pos.p, 1, KV, HD, stream);
                    if (bf) kv_append_bf16_cuda(a_kc16.p, a_vc16.p, ak, d_v.p, d_pos.p, KVD, stream);
                    else kv_append_cuda(a_kc.p, a_vc.p, ak, d_v.p, d_pos.p, KVD, stream);
                    RopeAppendJob j = {norm ? b_q.p : b_qraw.p, norm ? b_k.p : b_kraw.p, b_qraw.p, b_kraw.p,
                                       norm ? d_qn.p : NULL, norm ? d_kn.p : NULL, 1e-6f, d_v.p,
                                       bf ? (void *)b_kc16.p : (void *)b_kc.p, bf ? (void *)b_vc16.p : (void *)b_vc.p,
                                       bf, d_cos.p, d_sin.p, d_pos.p, NH, KV, HD};
                    decode_rope_append_cuda(&j, stream);
                    auto same_f = [](const Dev<float> &x, const Dev<float> &y) {
                        return memcmp(x.get().data(), y.get().data(), x.n * sizeof(float)) == 0;
                    };
                    int ok = same_f(norm ? a_q : a_qraw, norm ? b_q : b_qraw) &&
                             same_f(norm ? a_k : a_kraw, norm ? b_k : b_kraw) &&
                             (bf ? a_kc16.get() == b_kc16.get() && a_vc16.get() == b_vc16.get()
                                 : same_f(a_kc, b_kc) && same_f(a_vc, b_vc));
                    bad += !ok;
                    cases++;
                }
    T_OK(bad == 0, "%s decode_rope_append: %zu cases (head widths 12, 64, 130; with and without q/k norms; fp32 and "
         "bf16 caches; positions 0 and 5) are the q/k norm, RoPE and append kernels' bits (%zu differ)", MODE, cases,
         bad);
}

// argmax_cuda against sample_token at temperature 0: random logits (several maxima ties
// planted), NaNs among them, x[0] NaN, all NaN, all -inf, one value, and sizes around the
// block's 1024 threads.
static void check_argmax() {
    std::vector<float> scratch(2 * 5000);
    size_t bad = 0, cases = 0;
    static const size_t ns[] = {1, 7, 1023, 1024, 1025, 5000};
    for (size_t n : ns)
        for (int kind = 0; kind < 6; kind++) {
            std::vector<float> x = rand_vec(n, 3.0f);
            if (kind == 1 && n > 3) x[n / 3] = x[n - 1] = x[1] = 50.0f; // ties: the first wins
            if (kind == 2) for (size_t i = 1; i < n; i += 3) x[i] = NAN;
            if (kind == 3) x[0] = NAN;
            if (kind == 4) for (auto &v : x) v = NAN;
            if (kind == 5) for (auto &v : x) v = -INFINITY;
            Dev<float> d_x(x);
            Dev<int32_t> d_out(1);
            d_out.poison();
            argmax_cuda(d_out.p, d_x.p, n, stream);
            uint64_t rng = 1;
            int32_t want = sample_token(x.data(), (int)n, 0.0f, 1.0f, &rng, scratch.data());
            bad += d_out.get()[0] != want;
            cases++;
        }
    T_OK(bad == 0, "%s argmax: %zu cases of 6 sizes (1 to 5000; ties, NaNs, x[0] NaN, all NaN, all -inf) are "
         "sample_token's greedy pick (%zu differ)", MODE, cases, bad);
}

static void check_elementwise() {
    const size_t n = 5000;
    std::vector<float> g = rand_vec(n, 9.0f), u = rand_vec(n, 2.0f), dh = rand_vec(n, 1.0f);
    Dev<float> d_g(g), d_u(u), d_dh(dh), d_h(n), d_dg(n), d_du(n);
    d_h.poison();
    d_dg.poison();
    d_du.poison();
    swiglu_forward_cuda(d_h.p, d_g.p, d_u.p, n, stream);
    swiglu_backward_cuda(d_dg.p, d_du.p, d_dh.p, d_g.p, d_u.p, n, stream);
    std::vector<float> h(n), dg(n), du(n);
    swiglu_forward(h.data(), g.data(), u.data(), n);
    swiglu_backward(dg.data(), du.data(), dh.data(), g.data(), u.data(), n);
    expect_close("swiglu forward", d_h.get(), h, TOL_ELEM);
    expect_close("swiglu backward: dgate", d_dg.get(), dg, TOL_ELEM);
    expect_close("swiglu backward: dup", d_du.get(), du, TOL_ELEM);
    { // into bf16: the fp32 kernel's output cast, bit for bit
        Dev<uint16_t> d_hb(n);
        d_hb.poison();
        swiglu_forward_bf16_cuda(d_hb.p, d_g.p, d_u.p, n, stream);
        std::vector<float> hf = d_h.get();
        std::vector<uint16_t> hb = d_hb.get();
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) bad += hb[i] != km_bf16_from_float(hf[i]);
        T_OK(bad == 0, "%s swiglu forward into bf16: the fp32 kernel's output cast, bit for bit (%zu differ)", MODE,
             bad);
        Dev<uint16_t> d_dgb(n), d_dub(n);
        d_dgb.poison();
        d_dub.poison();
        swiglu_backward_bf16_cuda(d_dgb.p, d_dub.p, d_dh.p, d_g.p, d_u.p, n, stream);
        std::vector<float> dgf = d_dg.get(), duf = d_du.get();
        std::vector<uint16_t> dgb = d_dgb.get(), dub = d_dub.get();
        bad = 0;
        for (size_t i = 0; i < n; i++) bad += dgb[i] != km_bf16_from_float(dgf[i]) || dub[i] != km_bf16_from_float(duf[i]);
        T_OK(bad == 0, "%s swiglu backward into bf16: dgate and dup the fp32 kernel's cast, bit for bit (%zu differ)",
             MODE, bad);
    }
    // residual: out = a + b, and in place (out = a)
    Dev<float> d_out(n);
    d_out.poison();
    residual_forward_cuda(d_out.p, d_g.p, d_u.p, n, stream);
    residual_forward_cuda(d_g.p, d_g.p, d_u.p, n, stream);
    std::vector<float> sum(n);
    for (size_t i = 0; i < n; i++) sum[i] = g[i] + u[i];
    expect_equal("residual add", d_out.get(), sum);
    expect_equal("residual add in place", d_g.get(), sum);
    // masked fill: 0 (mask.c's mask_apply, which the fallback build of tests/gpu/run.sh
    // does not link) or -1 where the mask is 0
    std::vector<uint8_t> keep(n);
    for (size_t i = 0; i < n; i++) keep[i] = rnd32() % 3 != 0;
    Dev<uint8_t> d_keep(keep);
    for (float value : {0.0f, -1.0f}) {
        Dev<float> d_x(u);
        masked_fill_cuda(d_x.p, d_keep.p, value, n, stream);
        std::vector<float> want = u;
        for (size_t i = 0; i < n; i++)
            if (!keep[i]) want[i] = value;
        expect_equal(value == 0.0f ? "masked fill 0" : "masked fill -1", d_x.get(), want);
    }
    // bf16: random floats of every magnitude, and the specials
    std::vector<float> f(n);
    for (size_t i = 0; i < n; i++) {
        uint32_t b = rnd32();
        memcpy(&f[i], &b, 4);
    }
    f[0] = INFINITY, f[1] = -INFINITY, f[2] = NAN, f[3] = 0.0f, f[4] = -0.0f, f[5] = 1.00390625f;
    Dev<float> d_f(f);
    Dev<uint16_t> d_b(n);
    d_b.poison();
    cast_bf16_cuda(d_b.p, d_f.p, n, stream);
    std::vector<uint16_t> b = d_b.get();
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += b[i] != km_bf16_from_float(f[i]);
    T_OK(bad == 0, "%s cast to bf16: every value rounds as km_bf16_from_float (%zu differ of %zu)",
         MODE, bad, n);
    // and back: every bf16 bit pattern of the cast's output widens to its exact float
    Dev<float> d_w(n);
    d_w.poison();
    widen_bf16_cuda(d_w.p, d_b.p, n, stream);
    std::vector<float> w = d_w.get();
    bad = 0;
    for (size_t i = 0; i < n; i++) {
        float want = km_float_from_bf16(b[i]);
        bad += memcmp(&w[i], &want, 4) != 0;
    }
    T_OK(bad == 0, "%s widen bf16: every value is km_float_from_bf16's, bit for bit (%zu differ of %zu)", MODE,
         bad, n);
}

static void check_crossentropy() {
    static const size_t Vs[] = {100, 1500}; // one pass of threads; several (over 1024)
    for (size_t V : Vs) {
        const size_t N = V > 1024 ? 4 : 9; // (few rows of 1024 threads: see check_rmsnorm)
        std::vector<float> z = rand_vec(N * V, 6.0f);
        std::vector<int32_t> tgt(N);
        size_t count = 0;
        for (size_t i = 0; i < N; i++) {
            tgt[i] = i % 4 == 3 ? -1 : (int32_t)(rnd32() % V); // some rows without a target
            count += tgt[i] >= 0;
        }
        tgt[0] = (int32_t)V - 1; // the last logit as a target
        float scale = 1.0f / (float)count;
        std::vector<float> nll(N), lse(N), d(N * V);
        crossentropy_forward(nll.data(), lse.data(), z.data(), tgt.data(), N, V);
        crossentropy_backward(d.data(), z.data(), lse.data(), tgt.data(), scale, N, V);
        Dev<float> d_z(z), d_nll(N), d_lse(N), d_d(N * V);
        Dev<int32_t> d_t(tgt);
        d_nll.poison();
        d_lse.poison();
        d_d.poison();
        crossentropy_chunk_cuda(d_d.p, d_nll.p, d_lse.p, d_z.p, d_t.p, scale, N, V, stream);
        char what[96];
        snprintf(what, sizeof what, "cross-entropy chunk V=%zu: nll", V);
        expect_close(what, d_nll.get(), nll, TOL_ROW);
        snprintf(what, sizeof what, "cross-entropy chunk V=%zu: lse", V);
        expect_close(what, d_lse.get(), lse, TOL_ROW);
        snprintf(what, sizeof what, "cross-entropy chunk V=%zu: dlogits", V);
        expect_close(what, d_d.get(), d, TOL_ROW);
        // in place (dlogits over logits: the loss must read the target's logit before it
        // is overwritten), and the loss alone (no dlogits, no lse)
        d_nll.poison();
        crossentropy_chunk_cuda(d_z.p, d_nll.p, NULL, d_z.p, d_t.p, scale, N, V, stream);
        snprintf(what, sizeof what, "cross-entropy chunk V=%zu: dlogits in place", V);
        expect_close(what, d_z.get(), d, TOL_ROW);
        snprintf(what, sizeof what, "cross-entropy chunk V=%zu: nll of the in-place run", V);
        expect_close(what, d_nll.get(), nll, TOL_ROW);
        Dev<float> d_z2(z);
        d_nll.poison();
        crossentropy_chunk_cuda(NULL, d_nll.p, NULL, d_z2.p, d_t.p, scale, N, V, stream);
        snprintf(what, sizeof what, "cross-entropy chunk V=%zu: nll without dlogits", V);
        expect_close(what, d_nll.get(), nll, TOL_ROW);
    }
}

#ifndef TEST_ON_GPU
// Runs f in a child with its stdout and stderr into got (NUL-terminated); returns the
// child's exit status (-1 if it did not exit).
template <class F> static int run_child(char *got, size_t size, F f) {
    int fd[2];
    got[0] = 0;
    if (pipe(fd) != 0) return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        dup2(fd[1], 2);
        close(fd[0]);
        f();
        _exit(0);
    }
    close(fd[1]);
    size_t n = 0;
    ssize_t r;
    while (n < size - 1 && (r = read(fd[0], got + n, size - 1 - n)) > 0) n += (size_t)r;
    got[n] = 0;
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
#endif

// Attention: the forward and the backward against layers.c's, each case run 3 times
// (under the emulator, every block of every launch takes turns in each of the three
// orders once; the results must be the same bits each time). Shapes reach every path: several query and key tiles and a
// partial last one (T = 37, 70 against tiles of 32 or 64 rows at HD <= 64, 32 and 16 at
// HD <= 128, 16 and 8 at HD <= 256), groups of 1, 2, 4 query heads, B > 1, the three
// instantiations (HD 8, 12: the fixtures and stories260K; 64; 65 and 128; 256), and
// forward calls after a cache (pos0 > 0, Tq < Tk; keys past the last query unseen).
struct AttCase {
    size_t B, Tq, Tk, pos0, NH, KV, HD;
};

static std::vector<float> att_scratch(size_t Tk) {
    return std::vector<float>((size_t)layers_threads() * attention_scratch(Tk));
}

// Runs f 3 times on poisoned outputs; checks each output of each run against want and
// that the runs agree bitwise.
template <class F>
static void expect_runs(const char *what, F run, std::vector<Dev<float> *> outs,
                        std::vector<const std::vector<float> *> want, std::vector<const char *> names) {
    std::vector<std::vector<float>> first(outs.size());
    double worst[8] = {0};
    size_t unw = 0;
    int same = 1;
    for (int k = 0; k < 3; k++) {
        for (Dev<float> *o : outs) o->poison();
#ifndef TEST_ON_GPU
        emu_set_turn_order((unsigned)k); // block i of each launch: order k + i
#endif
        run();
        for (size_t x = 0; x < outs.size(); x++) {
            std::vector<float> got = outs[x]->get();
            unw += unwritten(got);
            double e = rel_err(got.data(), want[x]->data(), got.size());
            worst[x] = e > worst[x] || isnan(e) ? e : worst[x];
            if (k == 0) first[x] = got;
            else same &= memcmp(got.data(), first[x].data(), got.size() * sizeof(float)) == 0;
        }
    }
    for (size_t x = 0; x < outs.size(); x++)
        T_OK(worst[x] <= TOL_ROW && unw == 0, "%s %s: %s max rel err %.2e (tolerance %.0e)%s", MODE,
             what, names[x], worst[x], TOL_ROW, unw ? ", some elements never written" : "");
    T_OK(same, "%s %s: 3 runs give the same bits", MODE, what);
}

static void check_attention_forward(const AttCase &c) {
    size_t nq = c.B * c.Tq * c.NH * c.HD, nk = c.B * c.Tk * c.KV * c.HD;
    std::vector<float> q = rand_vec(nq, 2.0f), k = rand_vec(nk, 2.0f), v = rand_vec(nk, 1.0f);
    std::vector<float> out(nq), lse(c.B * c.NH * c.Tq), scratch = att_scratch(c.Tk);
    attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), scratch.data(), c.B,
                      c.Tq, c.Tk, c.pos0, c.NH, c.KV, c.HD, layers_threads());
    Dev<float> d_q(q), d_k(k), d_v(v), d_out(nq), d_lse(lse.size());
    char what[128];
    snprintf(what, sizeof what, "attention forward B=%zu Tq=%zu Tk=%zu pos0=%zu NH=%zu KV=%zu HD=%zu",
             c.B, c.Tq, c.Tk, c.pos0, c.NH, c.KV, c.HD);
    expect_runs(what, [&] {
        attention_forward_cuda(d_out.p, d_lse.p, d_q.p, d_k.p, d_v.p, c.B, c.Tq, c.Tk, c.pos0, c.NH,
                               c.KV, c.HD, stream);
    }, {&d_out, &d_lse}, {&out, &lse}, {"out", "lse"});
}

static void check_attention_decode(const AttCase &c) {
    size_t nq = c.NH * c.HD, nk = c.Tk * c.KV * c.HD;
    std::vector<float> q = rand_vec(nq, 2.0f), k = rand_vec(nk, 2.0f), v = rand_vec(nk, 1.0f);
    std::vector<float> out(nq), lse(c.NH), scratch = att_scratch(c.Tk);
    attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), scratch.data(), 1, 1, c.Tk, c.pos0,
                      c.NH, c.KV, c.HD, layers_threads());
    // a cache longer than the keys seen: rows past *pos must not count
    std::vector<float> kl = k, vl = v;
    kl.resize(nk + 3 * c.KV * c.HD, 1e3f);
    vl.resize(nk + 3 * c.KV * c.HD, 1e3f);
    Dev<float> d_q(q), d_k(kl), d_v(vl), d_out(nq);
    Dev<int32_t> d_pos(std::vector<int32_t>{(int32_t)c.pos0});
    char what[128];
    snprintf(what, sizeof what, "attention decode pos=%zu NH=%zu KV=%zu HD=%zu", c.pos0, c.NH, c.KV, c.HD);
    expect_runs(what, [&] {
        attention_decode_cuda(d_out.p, d_q.p, d_k.p, d_v.p, d_pos.p, c.NH, c.KV, c.HD, stream);
    }, {&d_out}, {&out}, {"out"});
    // split over the keys (chunks of ATT_DEC_CHUNK): a cache of Tk + 3 positions, so that
    // chunks past the row's keys are empty; the same function, sums grouped by chunk
    size_t T = c.Tk + 3;
    Dev<float> d_part(attention_decode_part_floats(T, c.NH, c.HD));
    snprintf(what, sizeof what, "attention decode split over %zu-key chunks pos=%zu NH=%zu KV=%zu HD=%zu",
             (size_t)ATT_DEC_CHUNK, c.pos0, c.NH, c.KV, c.HD);
    expect_runs(what, [&] {
        attention_decode_split_cuda(d_out.p, d_part.p, d_q.p, d_k.p, d_v.p, d_pos.p, T, c.NH, c.KV, c.HD, stream);
    }, {&d_out}, {&out}, {"out"});
    // a bf16 cache (BEST_KV=bf16): against the CPU on the keys and values rounded to bf16,
    // one block a head and split
    std::vector<float> kr = k, vr = v, outr(nq);
    for (auto &x : kr) x = km_float_from_bf16(km_bf16_from_float(x));
    for (auto &x : vr) x = km_float_from_bf16(km_bf16_from_float(x));
    attention_forward(outr.data(), lse.data(), q.data(), kr.data(), vr.data(), scratch.data(), 1, 1, c.Tk, c.pos0,
                      c.NH, c.KV, c.HD, layers_threads());
    std::vector<uint16_t> kb(kl.size()), vb(vl.size());
    for (size_t i = 0; i < kl.size(); i++) kb[i] = km_bf16_from_float(kl[i]), vb[i] = km_bf16_from_float(vl[i]);
    Dev<uint16_t> d_kb(kb), d_vb(vb);
    for (int split = 0; split < 2; split++) {
        snprintf(what, sizeof what, "attention decode, bf16 cache%s, pos=%zu NH=%zu KV=%zu HD=%zu",
                 split ? ", split" : "", c.pos0, c.NH, c.KV, c.HD);
        expect_runs(what, [&] {
            attention_decode_bf16_cuda(d_out.p, split ? d_part.p : NULL, d_q.p, d_kb.p, d_vb.p, d_pos.p, T, c.NH, c.KV,
                                       c.HD, stream);
        }, {&d_out}, {&outr}, {"out"});
    }
}

// Packed rows (best-eval --tasks on the device): three documents as zeroshot.c packs them
// (a shared prefix once, each request's rest after it; one document without a prefix),
// 247 rows, so blocks of query rows straddle documents and segments, and some walk keys
// of other segments before their own; against layers.c's attention_packed.
static void check_attention_packed(size_t NH, size_t KV, size_t HD) {
    // {prefix rows, then each rest's rows} per document (prefix 0: none)
    static const std::vector<std::vector<int32_t>> docs = {{40, 30, 20, 5}, {0, 12, 3}, {70, 1, 66}};
    std::vector<int32_t> seg, vis;
    int32_t n = 0, max_keys = 1;
    for (const auto &d : docs) {
        int32_t o = n, p = d[0];
        if (p) seg.insert(seg.end(), {o, p, o, 0});
        n += p;
        for (size_t i = 1; i < d.size(); i++) {
            seg.insert(seg.end(), {n, d[i], o, p});
            n += d[i];
            max_keys = p + d[i] > max_keys ? p + d[i] : max_keys;
        }
    }
    vis.resize(3 * (size_t)n);
    for (size_t g = 0; g < seg.size(); g += 4)
        for (int32_t r = seg[g]; r < seg[g] + seg[g + 1]; r++)
            vis[3 * r] = seg[g + 2], vis[3 * r + 1] = seg[g + 2] + seg[g + 3], vis[3 * r + 2] = seg[g];
    size_t nq = (size_t)n * NH * HD, nk = (size_t)n * KV * HD;
    std::vector<float> q = rand_vec(nq, 2.0f), k = rand_vec(nk, 2.0f), v = rand_vec(nk, 1.0f), out(nq);
    std::vector<float> scratch((size_t)layers_threads() * attention_packed_scratch((size_t)max_keys, HD));
    attention_packed(out.data(), q.data(), k.data(), v.data(), seg.data(), seg.size() / 4, scratch.data(),
                     (size_t)max_keys, NH, KV, HD, layers_threads());
    Dev<float> d_q(q), d_k(k), d_v(v), d_out(nq);
    Dev<int32_t> d_vis(vis);
    char what[128];
    snprintf(what, sizeof what, "attention packed n=%d segments=%zu NH=%zu KV=%zu HD=%zu", n, seg.size() / 4, NH,
             KV, HD);
    expect_runs(what, [&] { attention_packed_cuda(d_out.p, d_q.p, d_k.p, d_v.p, d_vis.p, (size_t)n, NH, KV, HD, stream); },
                {&d_out}, {&out}, {"out"});
}

static void check_attention_backward(const AttCase &c) {
    size_t T = c.Tq, nq = c.B * T * c.NH * c.HD, nk = c.B * T * c.KV * c.HD, nh = c.B * c.NH * T * c.HD;
    std::vector<float> q = rand_vec(nq, 2.0f), k = rand_vec(nk, 2.0f), v = rand_vec(nk, 1.0f);
    std::vector<float> dout = rand_vec(nq, 1.0f), out(nq), lse(c.B * c.NH * T), scratch = att_scratch(T);
    attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), scratch.data(), c.B, T, T,
                      0, c.NH, c.KV, c.HD, layers_threads());
    std::vector<float> dq(nq), dk(nk), dv(nk), dkh(nh), dvh(nh);
    attention_backward(dq.data(), dk.data(), dv.data(), dkh.data(), dvh.data(), dout.data(), q.data(),
                       k.data(), v.data(), out.data(), lse.data(), scratch.data(), c.B, T, c.NH, c.KV,
                       c.HD, layers_threads());
    // the same out and lse in: the check is of the backward alone
    Dev<float> d_q(q), d_k(k), d_v(v), d_dout(dout), d_out(out), d_lse(lse);
    Dev<float> d_dq(nq), d_dk(nk), d_dv(nk), d_dkh(nh), d_dvh(nh);
    char what[128];
    snprintf(what, sizeof what, "attention backward B=%zu T=%zu NH=%zu KV=%zu HD=%zu", c.B, T, c.NH,
             c.KV, c.HD);
    expect_runs(what, [&] {
        d_dkh.poison();
        d_dvh.poison();
        attention_backward_cuda(d_dq.p, d_dk.p, d_dv.p, d_dkh.p, d_dvh.p, d_dout.p, d_q.p, d_k.p,
                                d_v.p, d_out.p, d_lse.p, c.B, T, c.NH, c.KV, c.HD, stream);
    }, {&d_dq, &d_dk, &d_dv}, {&dq, &dk, &dv}, {"dq", "dk", "dv"});
}

static void check_attention() {
    static const AttCase train[] = {
        {2, 70, 70, 0, 4, 2, 12},  // the LLaMA fixture's heads; 2 x 64 query rows, 3 x 32 keys
        {1, 37, 37, 0, 2, 1, 8},   // stories260K's HD
        {1, 37, 37, 0, 4, 1, 64},  // groups of 4
        {2, 37, 37, 0, 2, 2, 128}, // LLaMA / Qwen3's HD; groups of 1
        {1, 20, 20, 0, 2, 1, 65},  // an odd HD in the 128 tiles: threads with one dimension less
        {1, 20, 20, 0, 2, 1, 256}, // the largest HD: 16-row forward, 8-row backward tiles
    };
    for (const AttCase &c : train) {
        check_attention_forward(c);
        check_attention_backward(c);
    }
    static const AttCase prefill[] = {
        {2, 21, 70, 49, 4, 2, 12}, // prefill after a cache of 49 tokens
        {1, 5, 40, 20, 2, 1, 128}, // keys 25 .. 39 after the last query: never seen
        {2, 1, 37, 36, 4, 2, 64},  // one decoded token
        {1, 9, 30, 21, 4, 4, 256},
    };
    for (const AttCase &c : prefill) check_attention_forward(c);
    // one decoded token, its position in device memory: B = 1, Tq = 1, pos0 = Tk - 1
    static const AttCase decode[] = {
        {1, 1, 1, 0, 4, 2, 12},     // the first token: one key
        {1, 1, 300, 299, 4, 2, 12}, // 3 tiles of 128 keys, the last short
        {1, 1, 129, 128, 4, 1, 128},
        {1, 1, 70, 69, 2, 2, 256},  // two output dimensions a thread
        {1, 1, 40, 39, 2, 1, 65},
        {1, 1, 600, 599, 4, 2, 64}, // 3 chunks of the split kernel, the last short
    };
    for (const AttCase &c : decode) check_attention_decode(c);
    check_attention_packed(4, 2, 12); // the fixture's heads: 64-row query blocks, 32-key tiles
    check_attention_packed(8, 4, 8);  // stories260K's
    check_attention_packed(4, 1, 128); // LLaMA's HD: 32-row blocks
#ifndef TEST_ON_GPU
    // shapes the kernels do not handle stop the program with a message (in a child)
    static const struct { size_t NH, KV, HD; const char *want; } bad[] = {
        {2, 1, 257, "head dimension 257 not supported (1 to 256)"},
        {3, 2, 64, "3 query heads do not divide into 2 key/value heads"},
    };
    for (const auto &x : bad) {
        std::vector<float> buf(2 * x.NH * x.HD);
        char got[512];
        int rc = run_child(got, sizeof got, [&] {
            attention_forward_cuda(buf.data(), NULL, buf.data(), buf.data(), buf.data(), 1, 1, 1, 0,
                                   x.NH, x.KV, x.HD, stream);
        });
        T_OK(rc == 1 && strstr(got, x.want), "%s attention NH=%zu KV=%zu HD=%zu: exit %d, \"%.*s\"",
             MODE, x.NH, x.KV, x.HD, rc, (int)strcspn(got, "\n"), got);
    }
#endif
}

static void check_adamw() {
    const size_t n = 5000;
    AdamWHyper h = {1e-2, 0.9, 0.999, 1e-8, 0.1};
    for (int masked = 0; masked < 2; masked++) {
        std::vector<float> w = rand_vec(n, 1.0f), m = rand_vec(n, 0.1f), v(n), g = rand_vec(n, 1.0f);
        for (auto &x : v) x = fabsf(rnd(0.01f));
        std::vector<uint8_t> mask(n);
        for (auto &k : mask) k = rnd32() % 3 != 0;
        const uint8_t *mk = masked ? mask.data() : NULL;
        Dev<float> d_w(w), d_m(m), d_v(v), d_g(g);
        Dev<uint8_t> d_mask(mask);
        for (int t = 1; t <= 3; t++) { // three steps, as torch's test
            adamw_update_cuda(d_w.p, d_m.p, d_v.p, d_g.p, masked ? d_mask.p : NULL, &h, t, n, stream);
            adamw_update(w.data(), m.data(), v.data(), g.data(), mk, &h, t, n);
        }
        char what[96];
        snprintf(what, sizeof what, "adamw %s, 3 steps: weights", masked ? "masked" : "unmasked");
        expect_close(what, d_w.get(), w, TOL_ELEM);
        snprintf(what, sizeof what, "adamw %s, 3 steps: exp_avg", masked ? "masked" : "unmasked");
        expect_close(what, d_m.get(), m, TOL_ELEM);
        snprintf(what, sizeof what, "adamw %s, 3 steps: exp_avg_sq", masked ? "masked" : "unmasked");
        expect_close(what, d_v.get(), v, TOL_ELEM);
        if (masked) {
            std::vector<float> wg = d_w.get();
            size_t live = 0;
            for (size_t i = 0; i < n; i++) live += !mask[i] && wg[i] != 0.0f;
            T_OK(live == 0, "%s adamw masked: pruned weights are exactly 0 (%zu are not)", MODE, live);
        }
    }
}

// The one-pass optimizer (adamw_fused_cuda) against the passes it replaces, on the CPU:
// the masked gradient's clip coefficient from the sum of squares given to the device,
// grad_scale, adamw_update, the bf16 cast. 3 steps each of: masked or not; clipping
// active (the coefficient below 1), inactive (above 1: no scaling) and off (max_norm 0);
// 16-byte loads or one element a thread; from the arrays' start (n % 4 = 3 left to the
// scalar kernel) and one element in (nothing aligned: all scalar). Then a non-finite sum
// changes nothing, and g is never written.
static void check_adamw_fused() {
    const size_t n = 5003;
    AdamWHyper h = {1e-2, 0.9, 0.999, 1e-8, 0.1};
    size_t bad_case = 0, cases = 0, g_written = 0;
    double worst = 0;
    for (int masked = 0; masked < 2; masked++)
        for (double max_norm : {1.0, 1e6, 0.0})
            for (int vec : {4, 1})
                for (size_t off : {(size_t)0, (size_t)1}) {
                    std::vector<float> w = rand_vec(n, 1.0f), m = rand_vec(n, 0.1f), v(n), g = rand_vec(n, 1.0f);
                    for (auto &x : v) x = fabsf(rnd(0.01f));
                    std::vector<uint8_t> mask(n);
                    for (auto &k : mask) k = rnd32() % 3 != 0;
                    Dev<float> d_w(w), d_m(m), d_v(v), d_g(g);
                    Dev<uint8_t> d_mask(mask);
                    Dev<uint16_t> d_bf(n);
                    Dev<double> d_sumsq(1);
                    size_t k = n - off;
                    const uint8_t *mk = masked ? mask.data() + off : NULL;
                    std::vector<uint16_t> bf(n, 0xffffu);
                    for (int t = 1; t <= 3; t++) {
                        std::vector<float> gs(g.begin() + off, g.end()); // the passes' gradient
                        for (size_t i = 0; mk && i < k; i++) gs[i] = mk[i] ? gs[i] : 0.0f;
                        double sumsq = grad_sumsq(gs.data(), k);
                        d_sumsq.put(std::vector<double>(1, sumsq));
                        adamw_fused_cuda(d_w.p + off, d_m.p + off, d_v.p + off, d_bf.p + off, d_g.p + off,
                                         masked ? d_mask.p + off : NULL, d_sumsq.p, max_norm, &h, t, k, vec, stream);
                        float coef = grad_clip_coef(sqrt(sumsq), max_norm);
                        if (coef < 1.0f) grad_scale(gs.data(), coef, k);
                        adamw_update(w.data() + off, m.data() + off, v.data() + off, gs.data(), mk, &h, t, k);
                        for (size_t i = off; i < n; i++) bf[i] = km_bf16_from_float(w[i]);
                    }
                    std::vector<float> gw = d_w.get(), gm = d_m.get(), gv = d_v.get();
                    std::vector<uint16_t> gb = d_bf.get();
                    int same = memcmp(gw.data(), w.data(), n * 4) == 0 && memcmp(gm.data(), m.data(), n * 4) == 0 &&
                               memcmp(gv.data(), v.data(), n * 4) == 0 &&
                               memcmp(gb.data() + off, bf.data() + off, (n - off) * 2) == 0;
                    double e = std::max(rel_err(gw.data(), w.data(), n),
                                        std::max(rel_err(gm.data(), m.data(), n), rel_err(gv.data(), v.data(), n)));
                    worst = std::max(worst, e);
#ifdef TEST_ON_GPU
                    bad_case += e > TOL_ELEM; // nvcc's fma contraction may move a last bit
#else
                    bad_case += !same;
#endif
                    cases++;
                    std::vector<float> gg = d_g.get();
                    g_written += memcmp(gg.data(), g.data(), n * 4) != 0;
                }
    T_OK(bad_case == 0 && cases == 24, "%s adamw fused, %zu cases of 3 steps: weights, moments and the bf16 copy are "
         "the passes' (masked fill, clip, scale, adamw, cast)%s (%zu differ; max rel err %.2e)", MODE, cases,
#ifdef TEST_ON_GPU
         " within 1e-6",
#else
         " bit for bit",
#endif
         bad_case, worst);
    T_OK(g_written == 0, "%s adamw fused: the gradients are only read (%zu cases wrote them)", MODE, g_written);
    // a non-finite sum of squares (a NaN or infinite gradient): nothing changes
    for (double bad : {(double)NAN, (double)INFINITY}) {
        std::vector<float> w = rand_vec(n, 1.0f), m = rand_vec(n, 0.1f), v(n, 0.5f), g = rand_vec(n, 1.0f);
        Dev<float> d_w(w), d_m(m), d_v(v), d_g(g);
        Dev<uint16_t> d_bf(n);
        std::vector<uint16_t> bf0(n, 0x1234u);
        d_bf.put(bf0);
        Dev<double> d_sumsq(std::vector<double>(1, bad));
        adamw_fused_cuda(d_w.p, d_m.p, d_v.p, d_bf.p, d_g.p, NULL, d_sumsq.p, 1.0, &h, 1, n, 4, stream);
        std::vector<float> gw = d_w.get(), gm = d_m.get(), gv = d_v.get();
        std::vector<uint16_t> gb = d_bf.get();
        T_OK(gw == w && gm == m && gv == v && gb == bf0, "%s adamw fused with a sum of squares of %g: weights, "
             "moments and bf16 copy untouched", MODE, bad);
    }
}

static void check_saliency() {
    const size_t n = 3000;
    std::vector<float> w = rand_vec(n, 1.0f), m = rand_vec(n, 0.1f), v(n);
    for (auto &x : v) x = fabsf(rnd(0.01f));
    for (size_t i = 0; i < n; i += 7) w[i] = 0.0f; // pruned weights score +0
    for (size_t i = 3; i < n; i += 11) w[i] = -w[i];
    Dev<float> d_w(w), d_m(m), d_v(v), d_out(n);
    Dev<unsigned long long> d_bad(1);
    static const Saliency kinds[] = {SAL_MAGNITUDE, SAL_FIRST, SAL_SECOND};
    for (Saliency s : kinds) {
        d_out.poison();
        d_bad.put(std::vector<unsigned long long>(1, 0));
        saliency_score_cuda(d_out.p, d_bad.p, s, d_w.p, d_m.p, d_v.p, n, stream);
        std::vector<float> want(n);
        int rc = saliency_score(want.data(), s, w.data(), m.data(), v.data(), n);
        char what[96];
        snprintf(what, sizeof what, "saliency %s", saliency_name(s));
        if (rc == 0) expect_equal(what, d_out.get(), want);
        else T_OK(0, "saliency %s on the CPU: %s", saliency_name(s), err_msg());
        T_OK(d_bad.get()[0] == 0, "%s saliency %s: no bad input counted", MODE, saliency_name(s));
    }
    // three bad inputs: a NaN weight, an infinite exp_avg_sq, a negative one
    w[5] = NAN, v[8] = INFINITY, v[9] = -1e-3f;
    d_w.put(w);
    d_v.put(v);
    d_bad.put(std::vector<unsigned long long>(1, 0));
    saliency_score_cuda(d_out.p, d_bad.p, SAL_SECOND, d_w.p, d_m.p, d_v.p, n, stream);
    unsigned long long nbad = d_bad.get()[0];
    T_OK(nbad == 3, "%s saliency second: counts 3 bad inputs (NaN w, inf v, negative v): %llu",
         MODE, nbad);
}

static void check_bias_backward() {
    // rows: fewer than a chunk, several chunks (km_colsum_chunks); OC past a block of 256
    static const size_t Ns[] = {5, 200}, OCs[] = {300, 37};
    for (int t = 0; t < 2; t++) {
        const size_t N = Ns[t], OC = OCs[t], IC = 3;
        std::vector<float> dy = rand_vec(N * OC, 1.0f), db = rand_vec(OC, 1.0f), want = db;
        std::vector<float> x = rand_vec(N * IC, 1.0f), w = rand_vec(OC * IC, 1.0f), dw(OC * IC);
        matmul_backward(NULL, dw.data(), want.data(), dy.data(), x.data(), w.data(), N, IC, OC, 0);
        Dev<float> d_dy(dy), d_db(db), d_scratch(km_colsum_chunks(N) * OC);
        d_scratch.poison();
        bias_backward_cuda(d_db.p, d_scratch.p, d_dy.p, N, OC, stream);
        char what[96];
        snprintf(what, sizeof what, "bias backward N=%zu OC=%zu (added, %u row chunks)", N, OC, km_colsum_chunks(N));
        expect_close(what, d_db.get(), want, TOL_ROW);
    }
}

// --- the global select: the device path against select.c, bit for bit ---------------------

// The CPU path of select.h for one rank: the mask of the k survivors of x (n), or -1.
static int select_cpu(std::vector<uint8_t> &mask, const std::vector<float> &x, uint64_t k) {
    Select s;
    select_init(&s, k);
    int rc = 0;
    while (!s.done && rc == 0) {
        select_count(&s, x.data(), x.size());
        rc = select_advance(&s);
    }
    uint64_t ties = 0;
    mask.assign(x.size(), 0);
    if (rc == 0) select_mark(mask.data(), &s, x.data(), x.size(), &ties);
    select_free(&s);
    return rc;
}

// Three simulated ranks holding the slices [cut[r], cut[r+1]) of the device scores,
// each with its own Select: histograms summed, ties prefixed over the ranks.
static int select_ranks_cuda(std::vector<uint8_t> &mask, const Dev<float> &d_x, uint64_t k,
                             const size_t cut[4]) {
    Select s[3];
    Dev<uint64_t> scratch(select_cuda_scratch(d_x.n));
    Dev<uint8_t> d_mask(d_x.n);
    d_mask.poison();
    for (int r = 0; r < 3; r++) select_init_exact(&s[r], k);
    int rc = 0;
    while (!s[0].done && rc == 0) {
        for (int r = 0; r < 3; r++) select_count_cuda(&s[r], scratch.p, d_x.p + cut[r], cut[r + 1] - cut[r], stream);
        for (size_t b = 0; b < SELECT_HIST_LEN; b++) {
            uint64_t sum = s[0].hist[b] + s[1].hist[b] + s[2].hist[b];
            for (int r = 0; r < 3; r++) s[r].hist[b] = sum;
        }
        for (int r = 0; r < 3 && rc == 0; r++) rc = select_advance(&s[r]);
    }
    if (rc == 0) {
        uint64_t ties[3], before = 0;
        for (int r = 0; r < 3; r++)
            ties[r] = select_count_ties_cuda(&s[r], scratch.p, d_x.p + cut[r], cut[r + 1] - cut[r], stream);
        for (int r = 0; r < 3; r++) {
            uint64_t mine = before; // the exclusive prefix over ranks
            before += ties[r];
            select_mark_cuda(d_mask.p + cut[r], &s[r], scratch.p, d_x.p + cut[r], cut[r + 1] - cut[r], &mine, stream);
        }
        mask = d_mask.get();
    }
    for (int r = 0; r < 3; r++) select_free(&s[r]);
    return rc;
}

static void check_select() {
    // several marking blocks of SELECT_CUDA_SPAN scores, the last one partial
    const size_t n = 5 * SELECT_CUDA_SPAN + 123;
    static const char *kinds[] = {"5 values, excluded, -0", "spread", "all equal"};
    Dev<uint64_t> scratch(select_cuda_scratch(n));
    for (int kind = 0; kind < 3; kind++) {
        std::vector<float> x(n);
        static const float five[5] = {0.0f, 0.25f, 1.0f, 3.5f, 1e-30f};
        for (size_t i = 0; i < n; i++) {
            uint32_t r = rnd32();
            x[i] = kind == 1 ? fabsf(rnd(2.0f)) : kind == 2 ? 0.75f : r % 7 == 0 ? -1.0f : r % 13 == 0 ? -0.0f
                                                                               : five[r / 16 % 5];
        }
        uint64_t cand = 0;
        for (float v : x) cand += !signbit(v);
        const uint64_t ks[] = {0, 1, cand / 3, cand / 2 + 1, cand - 1, cand, rnd32() % cand, cand + 1};
        Dev<float> d_x(x);
        int bad = 0, bad_ranks = 0, cases = 0, rank_cases = 0;
        for (uint64_t k : ks) {
            std::vector<uint8_t> want, got;
            int rc_cpu = select_cpu(want, x, k);
            Dev<uint8_t> d_mask(n);
            d_mask.poison();
            int rc = select_mask_cuda(d_mask.p, scratch.p, d_x.p, n, k, stream);
            if (rc == 0) got = d_mask.get();
            int ok = rc == rc_cpu && (rc != 0 || got == want);
            if (!ok) printf("# %s, k %llu of %llu candidates: device %s (rc %d, cpu %d)\n", kinds[kind],
                            (unsigned long long)k, (unsigned long long)cand, rc ? err_msg() : "mask differs", rc, rc_cpu);
            bad += !ok;
            cases++;
            // three ranks with uneven slices, cut inside marking blocks, for two k (each
            // emulated launch starts 256 threads: the 15 launches of three ranks add up)
            if (k != cand / 3 && k != ks[6]) continue;
            size_t cut[4] = {0, n / 3 + 7, 2 * n / 3 + SELECT_CUDA_SPAN / 2, n};
            std::vector<uint8_t> rk;
            int rr = select_ranks_cuda(rk, d_x, k, cut);
            int okr = rr == rc_cpu && (rr != 0 || rk == want);
            if (!okr) printf("# 3 ranks, %s, k %llu: differ from the CPU\n", kinds[kind], (unsigned long long)k);
            bad_ranks += !okr;
            rank_cases++;
        }
        T_OK(bad == 0, "%s select_mask_cuda, %s: the CPU select's mask bit for bit, or its error for k > "
             "candidates (%d values of k from 0 to %llu, %zu scores, %zu marking blocks; %d differ)",
             MODE, kinds[kind], cases, (unsigned long long)cand + 1, n, select_cuda_blocks(n), bad);
        T_OK(bad_ranks == 0, "%s select, 3 simulated ranks (summed histograms, ties prefixed over ranks), %s: "
             "the one-rank CPU mask (%d values of k; %d differ)", MODE, kinds[kind], rank_cases, bad_ranks);
    }
}

#ifdef TEST_ON_GPU
// --- cuBLASLt products against layers.c (a GPU only) ---------------------------------------

// bf16 bits of x (n), and x rounded to them (what the CPU reference multiplies).
static std::vector<uint16_t> to_bf16(std::vector<float> &x) {
    std::vector<uint16_t> b(x.size());
    for (size_t i = 0; i < x.size(); i++) {
        b[i] = km_bf16_from_float(x[i]);
        x[i] = km_float_from_bf16(b[i]);
    }
    return b;
}

// bf16 operands are exact in both paths; only the order of fp32 sums differs.
#define TOL_MATMUL 1e-2

static void check_matmul(CudaCtx *c) {
    // odd sizes (unaligned leading dimensions), multiples of 8 (tensor-core shapes),
    // and the same with x one element past an aligned address (2-byte alignment)
    static const size_t shapes[][4] = {{37, 70, 53, 0}, {64, 128, 96, 0}, {1, 64, 40, 0}, {48, 256, 80, 1}};
    for (auto &sh : shapes) {
        const size_t N = sh[0], IC = sh[1], OC = sh[2], off = sh[3];
        std::vector<float> x = rand_vec(N * IC, 1.0f), w = rand_vec(OC * IC, 1.0f), dy = rand_vec(N * OC, 1.0f);
        std::vector<float> b = rand_vec(OC, 1.0f), y0 = rand_vec(N * OC, 1.0f);
        std::vector<float> dx0 = rand_vec(N * IC, 1.0f), dw0 = rand_vec(OC * IC, 1.0f);
        std::vector<uint16_t> xb = to_bf16(x), wb = to_bf16(w), dyb = to_bf16(dy);
        std::vector<uint16_t> xpad(off + xb.size());
        std::copy(xb.begin(), xb.end(), xpad.begin() + off);
        Dev<uint16_t> d_x(xpad), d_w(wb), d_dy(dyb);
        Dev<float> d_b(b);
        const uint16_t *xp = d_x.p + off;
        char what[128];
        for (int acc = 0; acc < 2; acc++)
            for (int bias = 0; bias < 2; bias++) {
                std::vector<float> want = y0;
                Dev<float> d_y(y0);
                if (!acc) d_y.poison();
                matmul_forward(want.data(), x.data(), w.data(), bias ? b.data() : NULL, N, IC, OC, acc);
                matmul_forward_cuda(c, d_y.p, xp, d_w.p, bias ? d_b.p : NULL, N, IC, OC, acc);
                snprintf(what, sizeof what, "matmul forward N=%zu IC=%zu OC=%zu%s acc=%d bias=%d", N, IC, OC,
                         off ? " (x 2-byte aligned)" : "", acc, bias);
                expect_close(what, d_y.get(), want, TOL_MATMUL);
            }
        for (int bias = 0; bias < 2; bias++) { // the residual in the epilogue: y = res + x w^T + b, res left
            std::vector<float> want = y0;
            Dev<float> d_y(N * OC), d_res(y0);
            d_y.poison();
            matmul_forward(want.data(), x.data(), w.data(), bias ? b.data() : NULL, N, IC, OC, 1);
            matmul_forward_add_cuda(c, d_y.p, xp, d_w.p, bias ? d_b.p : NULL, d_res.p, N, IC, OC);
            snprintf(what, sizeof what, "matmul forward + residual (C != D) N=%zu IC=%zu OC=%zu%s bias=%d", N, IC, OC,
                     off ? " (x 2-byte aligned)" : "", bias);
            expect_close(what, d_y.get(), want, TOL_MATMUL);
            T_OK(d_res.get() == y0, "%s %s: the residual is only read", MODE, what);
        }
        for (int dx_acc = 0; dx_acc < 2; dx_acc++) {
            std::vector<float> wdx = dx0, wdw = dw0;
            Dev<float> d_dx(dx0), d_dw(dw0);
            if (!dx_acc) d_dx.poison();
            matmul_backward(wdx.data(), wdw.data(), NULL, dy.data(), x.data(), w.data(), N, IC, OC, dx_acc);
            matmul_backward_cuda(c, d_dx.p, d_dw.p, d_dy.p, xp, d_w.p, N, IC, OC, dx_acc);
            snprintf(what, sizeof what, "matmul backward N=%zu IC=%zu OC=%zu%s: dx (dx_acc=%d)", N, IC, OC,
                     off ? " (x 2-byte aligned)" : "", dx_acc);
            expect_close(what, d_dx.get(), wdx, TOL_MATMUL);
            snprintf(what, sizeof what, "matmul backward N=%zu IC=%zu OC=%zu%s: dw (added)", N, IC, OC,
                     off ? " (x 2-byte aligned)" : "");
            expect_close(what, d_dw.get(), wdw, TOL_MATMUL);
        }
        // dx or dw alone: the other is skipped (NULL) and left as it was
        std::vector<float> wdx = dx0, wdw = dw0, unused(OC * IC);
        Dev<float> d_dx(dx0), d_dw(dw0);
        matmul_backward(wdx.data(), unused.data(), NULL, dy.data(), x.data(), w.data(), N, IC, OC, 1);
        matmul_backward_cuda(c, d_dx.p, NULL, d_dy.p, xp, d_w.p, N, IC, OC, 1);
        matmul_backward(NULL, wdw.data(), NULL, dy.data(), x.data(), w.data(), N, IC, OC, 0);
        matmul_backward_cuda(c, NULL, d_dw.p, d_dy.p, xp, d_w.p, N, IC, OC, 0);
        snprintf(what, sizeof what, "matmul backward N=%zu IC=%zu OC=%zu: dx alone (dw NULL)", N, IC, OC);
        expect_close(what, d_dx.get(), wdx, TOL_MATMUL);
        snprintf(what, sizeof what, "matmul backward N=%zu IC=%zu OC=%zu: dw alone (dx NULL)", N, IC, OC);
        expect_close(what, d_dw.get(), wdw, TOL_MATMUL);
    }
}
#endif

#ifndef TEST_ON_GPU
// --- the emulator itself: atomics, shuffles, launch errors, divergent barriers ----------

static __global__ void emu_histogram_kernel(unsigned *hist, const int32_t *x, size_t n) {
    for (size_t i = km_thread_index(blockIdx.x, blockDim.x, threadIdx.x); i < n;
         i += (size_t)gridDim.x * blockDim.x)
        atomicAdd(&hist[x[i]], 1u);
}

// out[warp] = the sum of the warp's thread indices by a __shfl_down_sync tree; out2[warp]
// = lane 5's index, broadcast by __shfl_sync.
static __global__ void emu_shuffle_kernel(unsigned *out, unsigned *out2) {
    unsigned v = threadIdx.x;
    for (unsigned o = 16; o > 0; o >>= 1) v += __shfl_down_sync(FULL_MASK, v, o);
    unsigned b = __shfl_sync(FULL_MASK, threadIdx.x, 5);
    if (threadIdx.x % 32 == 0) {
        out[blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32] = v;
        out2[blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32] = b;
    }
}

// Thread 0 leaves before the barrier the others wait at: undefined in CUDA.
static __global__ void emu_divergent_kernel(float *x) {
    if (threadIdx.x == 0) return;
    x[threadIdx.x] = 1.0f;
    __syncthreads();
}

static void check_emulator() {
    std::vector<int32_t> x(1000);
    std::vector<unsigned> want(10, 0), hist(10, 0);
    for (auto &v : x) { v = (int32_t)(rnd32() % 10); want[v]++; }
    LAUNCH(emu_histogram_kernel, 3, 64, stream, hist.data(), x.data(), x.size());
    CUDA_CHECK(cudaGetLastError());
    T_OK(hist == want, "emulator: atomicAdd histogram of 1000 values over 3 x 64 threads");
    std::vector<unsigned> sum(8), lane5(8);
    LAUNCH(emu_shuffle_kernel, 2, 128, stream, sum.data(), lane5.data());
    CUDA_CHECK(cudaGetLastError());
    int ok = 1;
    for (unsigned w = 0; w < 8; w++) {
        unsigned base = (w % 4) * 32;
        ok &= sum[w] == 32 * base + 496 && lane5[w] == base + 5;
    }
    T_OK(ok, "emulator: __shfl_down_sync tree sums and __shfl_sync broadcasts within each warp");
    LAUNCH(emu_histogram_kernel, 1, 1025, stream, hist.data(), x.data(), x.size());
    cudaError_t e = cudaGetLastError();
    T_OK(e == cudaErrorInvalidConfiguration && cudaGetLastError() == cudaSuccess,
         "emulator: a block of 1025 threads is a launch error (%d), reported once", e);
    LAUNCH(emu_histogram_kernel, 0, 64, stream, hist.data(), x.data(), x.size());
    T_OK(cudaGetLastError() == cudaErrorInvalidConfiguration, "emulator: a grid of 0 blocks is a launch error");
    // a divergent barrier stops the program: in a child, whose output we read
    char out[512];
    int rc = run_child(out, sizeof out, [] {
        std::vector<float> buf(64);
        LAUNCH(emu_divergent_kernel, 1, 64, stream, buf.data());
    });
    const char *msg = strstr(out, "cuda_emu: ");
    msg = msg ? msg + 10 : out;
    T_OK(rc == 1 && strstr(out, "met different barriers"),
         "emulator: a thread returning before a __syncthreads the others reach stops the test "
         "(\"%.*s\")", (int)strcspn(msg, "\n"), msg);
}
#endif

int main() {
#ifdef TEST_ON_GPU
    T_CUDA_DEVICE_OR_SKIP();
#else
    printf("# kernels run by tests/cuda_emu.h on the CPU, grids capped at %u blocks\n", KM_GRID_CAP);
    check_emulator();
#endif
    check_embedding();
    check_rmsnorm();
    check_rope();
    check_elementwise();
    check_argmax();
    check_gemv();
    check_decode_fused();
    check_rope_append();
    check_crossentropy();
    check_attention();
    check_adamw();
    check_adamw_fused();
    check_saliency();
    check_bias_backward();
    check_select();
#ifdef TEST_ON_GPU
    CudaCtx *c;
    if (cuda_ctx_create(&c, 0, (size_t)32 << 20) == 0) {
        check_matmul(c);
        cuda_ctx_free(c);
    } else {
        T_OK(0, "gpu: a CudaCtx for the matrix products: %s", err_msg());
    }
#endif
    T_DONE();
}
