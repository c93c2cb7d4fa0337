// layers.c: the decoder's layer kernels on the CPU (see layers.h for shapes).
//
// Threading: one pool, OpenMP's. Matrix products are split into slices of their output
// (or, when too narrow for that, of their rows) across OpenMP threads, each slice one
// single-threaded BLAS call. We tried letting
// OpenBLAS thread each product itself from serial code: with Debian's default pthread
// build, its worker threads spin for a while after every call while libgomp's workers
// spin after every OpenMP loop; on a 2-core machine tests/test_model took 5-25 s with
// 2 threads against 0.4 s with OMP_NUM_THREADS=1. Slicing also keeps every output
// element's arithmetic the same whatever the thread count, except where OpenBLAS picks
// a different kernel for a narrower slice (results are bitwise reproducible for a
// given thread count in any case).
//
// Speed (bench/model.py, docs/benchmarks.md): the kernels that call exp (softmax,
// cross-entropy, SwiGLU) use a vectorised exp compiled for the CPU's vector width, and
// attention runs with denormals flushed to zero; both sections below say why.
#include "nn/layers.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h> // _mm_getcsr, _mm_setcsr
#endif

#include "base/error.h" // defines: CHECK, xmalloc
#include "nn/kernel_math.h" // defines: km_exp and the per-element arithmetic of each kernel

// OpenMP loops fork only when there is enough work: a fork-join costs a few
// microseconds, more than a whole kernel of a tiny model or of one decoded token.
#define PAR_MIN_WORK 32768

// OpenBLAS extensions. Declared here because Debian's cblas.h may be the reference
// one (the alternatives system picks it), which does not declare them; we link
// -lopenblas, which always defines them.
void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
int openblas_get_parallel(void);
char *openblas_get_config(void);

int layers_threads(void) { return omp_get_max_threads(); }

// OpenBLAS runs single-threaded inside our slices: with the pthread build a second
// pool would fight libgomp's; the OpenMP build would do this by itself in a parallel
// region but not in a team of one.
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static void blas_single_thread(void) { openblas_set_num_threads(1); }
void layers_init(void) { pthread_once(&blas_once, blas_single_thread); }

const char *layers_blas_info(void) {
    static char buf[256];
    const char *kind[] = {"sequential", "pthread", "openmp"};
    int p = openblas_get_parallel();
    layers_init();
    snprintf(buf, sizeof buf, "%s (%s build), called single-threaded on slices across %d "
             "OpenMP threads", openblas_get_config(), p >= 0 && p <= 2 ? kind[p] : "?",
             omp_get_max_threads());
    return buf;
}

// BLAS takes int sizes; every caller's sizes were checked when buffers were sized,
// this is the last line of defence against a silent wrap.
static int bi(size_t n) {
    CHECK(n <= 0x7fffffff, "matrix dimension %zu exceeds the BLAS int range", n);
    return (int)n;
}

// out (C) += sum over the N rows of x (N, C). Columns are split across threads and
// every column is summed in row order in double: deterministic for any thread count.
static void colsum_add(float *out, const float *x, size_t N, size_t C) {
    enum { CB = 64 };
#pragma omp parallel for schedule(static) if (N * C > PAR_MIN_WORK)
    for (size_t c0 = 0; c0 < C; c0 += CB) {
        size_t nc = C - c0 < CB ? C - c0 : CB;
        double acc[CB] = {0};
        for (size_t n = 0; n < N; n++) {
            const float *row = x + n * C + c0;
            for (size_t c = 0; c < nc; c++) acc[c] += row[c];
        }
        for (size_t c = 0; c < nc; c++) out[c0 + c] += (float)acc[c];
    }
}

// --- vectorised exp and row kernels ----------------------------------------------------
//
// expf dominated the small models: 2M calls per layer for the attention softmax of
// stories260K at B=8, T=256, and B*T*V calls per cross-entropy (33M at V = 32000), each a
// call into libm that the compiler cannot vectorise. Here exp is branch-free C (below)
// and the loops that call it are `omp simd` loops, which GCC vectorises even at -O2;
// each such kernel is compiled three times (target_clones: AVX-512, AVX2, SSE2) and the
// loader picks the widest the CPU has (on stories260K, 1 thread, SSE2 alone gave 60-70%
// of the AVX-512 speed). We tried GCC's vector extensions first: at a fixed 16 lanes they
// ran 1.5-2.4x slower under SSE2 and AVX2 than at those units' own 4 and 8 lanes.
//
// Sums inside a vectorised loop are taken lane by lane, so their rounding depends on the
// vector width: the same machine always gives the same bits, another CPU (like another
// BLAS kernel) may differ in the last place. FMA contraction stays off (-std=c11).
#define VEC_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#ifdef __clang__
// clang reports an `omp simd` loop it did not vectorise (at -O1 under the sanitizers, as
// the fuzz build compiles lib/) as a warning, an error with -Werror: it is only slower.
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

// exp is km_exp (kernel_math.h): the branch-free polynomial these loops were tuned with,
// shared with the CUDA kernels so both paths compute the same exp.

// The row functions below reduce ROW_LANES lanes at a time (lane l takes elements l,
// l + ROW_LANES, ...) and add the lanes pairwise at the end; the last n % ROW_LANES
// elements go as one more block, padded with -INFINITY (nothing to a max; km_exp(-inf)
// is 0, nothing to a sum), so no scalar loop runs. (gcc's `omp simd reduction` left a
// scalar epilogue and a serial sum of its lanes: over half of a softmax row's time at the
// rows of a few hundred keys that zero-shot scoring of small models makes.)
#define ROW_LANES 16

// The last n % ROW_LANES of x (n) into pad (ROW_LANES), -INFINITY after them; how many.
static size_t row_tail(float *pad, const float *x, size_t n) {
    size_t k = n % ROW_LANES;
    for (size_t j = 0; j < ROW_LANES; j++) pad[j] = j < k ? x[n - k + j] : -INFINITY;
    return k;
}

// The largest of lane (ROW_LANES), folded pairwise: halves, quarters, then the last four
// as (0 2)(1 3). Each step is a loop of fixed length, so that it is one vector operation
// (a loop over a variable width compiled to scalar code: in attention, with a fold per
// output element, the folds took a fifth of the time).
static inline float lanes_max(const float *lane) {
    float a[ROW_LANES / 2], b[ROW_LANES / 4];
#pragma omp simd
    for (size_t l = 0; l < ROW_LANES / 2; l++) a[l] = lane[l + ROW_LANES / 2] > lane[l] ? lane[l + ROW_LANES / 2] : lane[l];
#pragma omp simd
    for (size_t l = 0; l < ROW_LANES / 4; l++) b[l] = a[l + ROW_LANES / 4] > a[l] ? a[l + ROW_LANES / 4] : a[l];
    float c0 = b[2] > b[0] ? b[2] : b[0], c1 = b[3] > b[1] ? b[3] : b[1];
    return c1 > c0 ? c1 : c0;
}

// The sum of lane (ROW_LANES), folded the same way, in double and in float.
static inline double lanes_sum(const double *lane) {
    double a[ROW_LANES / 2], b[ROW_LANES / 4];
#pragma omp simd
    for (size_t l = 0; l < ROW_LANES / 2; l++) a[l] = lane[l] + lane[l + ROW_LANES / 2];
#pragma omp simd
    for (size_t l = 0; l < ROW_LANES / 4; l++) b[l] = a[l] + a[l + ROW_LANES / 4];
    return (b[0] + b[2]) + (b[1] + b[3]);
}

static inline float lanes_sumf(const float *lane) {
    float a[ROW_LANES / 2], b[ROW_LANES / 4];
#pragma omp simd
    for (size_t l = 0; l < ROW_LANES / 2; l++) a[l] = lane[l] + lane[l + ROW_LANES / 2];
#pragma omp simd
    for (size_t l = 0; l < ROW_LANES / 4; l++) b[l] = a[l] + a[l + ROW_LANES / 4];
    return (b[0] + b[2]) + (b[1] + b[3]);
}

// The largest of x (n), -INFINITY for n = 0.
VEC_CLONES static float row_max(const float *x, size_t n) {
    float lane[ROW_LANES];
    size_t k = row_tail(lane, x, n);
    for (size_t j = 0; j < n - k; j += ROW_LANES)
#pragma omp simd
        for (size_t l = 0; l < ROW_LANES; l++) lane[l] = x[j + l] > lane[l] ? x[j + l] : lane[l];
    return lanes_max(lane);
}

// y (n) = exp(x - shift) (y may be x, or NULL to only sum); returns the sum of those,
// accumulated in double.
VEC_CLONES static double row_exp_sum(float *y, const float *x, float shift, size_t n) {
    if (n == 0) return 0; // (the padding alone: -inf - shift is NaN when shift is -inf)
    double lane[ROW_LANES];
    float pad[ROW_LANES];
    size_t k = row_tail(pad, x, n);
#pragma omp simd
    for (size_t l = 0; l < ROW_LANES; l++) { // the padded tail first: it sets the lanes
        pad[l] = km_exp(pad[l] - shift);
        lane[l] = pad[l];
    }
    if (y) {
        memcpy(y + n - k, pad, k * sizeof *y); // (x's tail was copied already)
        for (size_t j = 0; j < n - k; j += ROW_LANES)
#pragma omp simd
            for (size_t l = 0; l < ROW_LANES; l++) {
                float e = km_exp(x[j + l] - shift);
                y[j + l] = e;
                lane[l] += e;
            }
    } else {
        for (size_t j = 0; j < n - k; j += ROW_LANES)
#pragma omp simd
            for (size_t l = 0; l < ROW_LANES; l++) lane[l] += km_exp(x[j + l] - shift);
    }
    return lanes_sum(lane);
}

// x (n) *= s.
VEC_CLONES static void row_scale(float *x, float s, size_t n) {
#pragma omp simd
    for (size_t j = 0; j < n; j++) x[j] *= s;
}

// d (n) = scale * (exp(z - lse) - onehot(t)), by km_xent_dlogit (d may be z). The target
// is done apart, so that the loop has no index compare (SSE2 has no 64-bit one: that
// clone would not vectorise).
VEC_CLONES static void row_xent_grad(float *d, const float *z, float lse, float scale, size_t t,
                                     size_t n) {
    float zt = z[t];
#pragma omp simd
    for (size_t j = 0; j < n; j++) d[j] = km_xent_dlogit(z[j], lse, scale, 0);
    d[t] = km_xent_dlogit(zt, lse, scale, 1);
}

// --- linear -----------------------------------------------------------------------------

// The width of the slices a product's `width` outputs are cut into: about 4 per thread
// (multiples of 16, at least 64), handed out dynamically so that a thread whose core is
// busy with another process does not hold the rest at the barrier (a slice's result
// does not depend on which thread computes it); or all of it in one piece when the
// product is too small for threads to pay.
static size_t slice_width(size_t width, size_t flops) {
    size_t nt = (size_t)omp_get_max_threads();
    if (flops < ((size_t)1 << 18) || nt < 2) return width;
    size_t w = (width + 4 * nt - 1) / (4 * nt);
    w = (w + 15) & ~(size_t)15;
    return w < 64 ? 64 : w;
}

void matmul_forward(float *y, const float *x, const float *w, const float *b,
                    size_t N, size_t IC, size_t OC, int acc) {
    layers_init();
    float beta = acc ? 1.0f : 0.0f;
    // slices of the outputs; a product too narrow to cut there (a small model's over many
    // rows: stories260K's are 32 to 172 wide, and ran on one thread while the other waited)
    // is cut into slices of its rows instead
    size_t sw = slice_width(OC, N * IC * OC), sr = sw < OC ? N : slice_width(N, N * IC * OC);
    size_t nr = (N + sr - 1) / sr, nc = (OC + sw - 1) / sw;
    // tile t: y[r0:r0+m, o0:o0+n] = x[r0:r0+m] @ w[o0:o0+n]^T
#pragma omp parallel for schedule(dynamic) if (nr * nc > 1)
    for (size_t t = 0; t < nr * nc; t++) {
        size_t r0 = t / nc * sr, o0 = t % nc * sw;
        size_t m = N - r0 < sr ? N - r0 : sr, n = OC - o0 < sw ? OC - o0 : sw;
        if (N == 1) // decoding one token: gemv is what gemm would do, minus the packing
            cblas_sgemv(CblasRowMajor, CblasNoTrans, bi(n), bi(IC), 1.0f, w + o0 * IC, bi(IC),
                        x, 1, beta, y + o0, 1);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bi(m), bi(n), bi(IC), 1.0f,
                        x + r0 * IC, bi(IC), w + o0 * IC, bi(IC), beta, y + r0 * OC + o0, bi(OC));
        if (b)
            for (size_t r = r0; r < r0 + m; r++)
                for (size_t o = o0; o < o0 + n; o++) y[r * OC + o] += b[o];
    }
}

void matmul_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                     const float *w, size_t N, size_t IC, size_t OC, int dx_acc) {
    layers_init();
    size_t flops = N * IC * OC;
    if (dx) { // dx[:, i0:i0+n] = or += dy (N, OC) @ w[:, i0:i0+n]
        size_t sw = slice_width(IC, flops);
#pragma omp parallel for schedule(dynamic) if (sw < IC)
        for (size_t i0 = 0; i0 < IC; i0 += sw) {
            size_t n = IC - i0 < sw ? IC - i0 : sw;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bi(N), bi(n), bi(OC), 1.0f,
                        dy, bi(OC), w + i0, bi(IC), dx_acc ? 1.0f : 0.0f, dx + i0, bi(IC));
        }
    }
    // dw[o0:o0+n, :] += dy[:, o0:o0+n]^T @ x (N, IC)
    size_t sw = slice_width(OC, flops);
#pragma omp parallel for schedule(dynamic) if (sw < OC)
    for (size_t o0 = 0; o0 < OC; o0 += sw) {
        size_t n = OC - o0 < sw ? OC - o0 : sw;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bi(n), bi(IC), bi(N), 1.0f,
                    dy + o0, bi(OC), x, bi(IC), 1.0f, dw + o0 * IC, bi(IC));
    }
    if (db) colsum_add(db, dy, N, OC);
}

// --- RMSNorm ----------------------------------------------------------------------------

// The sum of squares of x (n) in double (C can be 8192, and fp32 sums drift), lane by lane
// (lane l takes elements l, l + ROW_LANES, ...; the tail into the first lanes), folded as
// lanes_sum: one running sum is a chain of dependent adds, 4 cycles an element (rmsnorm
// was 7% of zero-shot scoring on stories260K, C = 64). Double sums in another order:
// the float mean of squares comes out the same but for a tie once in ~10^8 rows.
VEC_CLONES static double row_sumsq(const float *x, size_t n) {
    double lane[ROW_LANES] = {0};
    size_t j = 0;
    for (; j + ROW_LANES <= n; j += ROW_LANES)
#pragma omp simd
        for (size_t l = 0; l < ROW_LANES; l++) lane[l] += (double)x[j + l] * x[j + l];
    for (size_t l = 0; j + l < n; l++) lane[l] += (double)x[j + l] * x[j + l];
    return lanes_sum(lane);
}

// y (n) = km_rmsnorm_y(x, r, w) elementwise.
VEC_CLONES static void rmsnorm_row(float *y, const float *x, const float *w, float r, size_t n) {
#pragma omp simd
    for (size_t c = 0; c < n; c++) y[c] = km_rmsnorm_y(x[c], r, w[c]);
}

void rmsnorm_forward(float *y, float *rstd, const float *x, const float *w,
                     size_t N, size_t C, float eps) {
#pragma omp parallel for schedule(static) if (N * C > PAR_MIN_WORK)
    for (size_t n = 0; n < N; n++) {
        float r = km_rmsnorm_rstd((float)(row_sumsq(x + n * C, C) / (double)C), eps);
        rstd[n] = r;
        rmsnorm_row(y + n * C, x + n * C, w, r, C);
    }
}

void rmsnorm_backward(float *dx, float *dw, const float *dy, const float *x,
                      const float *rstd, const float *w, size_t N, size_t C, int dx_acc) {
    // dw first: it reads dy, which dx may overwrite (dx == dy is allowed).
    enum { CB = 64 };
#pragma omp parallel for schedule(static) if (N * C > PAR_MIN_WORK)
    for (size_t c0 = 0; c0 < C; c0 += CB) {
        size_t nc = C - c0 < CB ? C - c0 : CB;
        double acc[CB] = {0};
        for (size_t n = 0; n < N; n++)
            for (size_t c = 0; c < nc; c++)
                acc[c] += (double)dy[n * C + c0 + c] * x[n * C + c0 + c] * rstd[n];
        for (size_t c = 0; c < nc; c++) dw[c0 + c] += (float)acc[c];
    }
    // dx_k = r w_k dy_k - (r^3 / C) x_k sum_c w_c dy_c x_c
#pragma omp parallel for schedule(static) if (N * C > PAR_MIN_WORK)
    for (size_t n = 0; n < N; n++) {
        const float *dyr = dy + n * C, *xr = x + n * C;
        float *dxr = dx + n * C;
        float r = rstd[n];
        double dot = 0;
        for (size_t c = 0; c < C; c++) dot += (double)w[c] * dyr[c] * xr[c];
        float k = km_rmsnorm_dcoef(dot, r, C);
        for (size_t c = 0; c < C; c++) {
            float g = km_rmsnorm_dx(dyr[c], xr[c], w[c], r, k);
            dxr[c] = dx_acc ? dxr[c] + g : g;
        }
    }
}

// --- RoPE -------------------------------------------------------------------------------

void rope_table(float *cos, float *sin, size_t pos0, size_t T, size_t HD, double theta) {
    size_t half = HD / 2;
    for (size_t i = 0; i < half; i++) {
        // float on purpose: transformers computes inv_freq and the angle in fp32, and
        // at position 4000 the angle's rounding (~2e-4 rad) is visible in the logits.
        float inv = 1.0f / powf((float)theta, (float)(2 * i) / (float)HD);
        for (size_t t = 0; t < T; t++) {
            float ang = (float)(pos0 + t) * inv;
            cos[t * half + i] = cosf(ang);
            sin[t * half + i] = sinf(ang);
        }
    }
}

// Rotates every head of x (B, T, H, HD) by +angle (dir = 1) or -angle (dir = -1).
static void rope_rotate(float *x, const float *cos, const float *sin, size_t B, size_t T,
                        size_t H, size_t HD, float dir) {
    size_t half = HD / 2;
#pragma omp parallel for collapse(2) schedule(static) if (B * T * H * HD > PAR_MIN_WORK)
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++) {
            const float *c = cos + t * half, *s = sin + t * half;
            for (size_t h = 0; h < H; h++) {
                float *v = x + ((b * T + t) * H + h) * HD;
                for (size_t i = 0; i < half; i++) km_rope_pair(v + i, v + i + half, c[i], dir * s[i]);
            }
        }
}

void rope_forward(float *x, const float *cos, const float *sin,
                  size_t B, size_t T, size_t H, size_t HD) {
    rope_rotate(x, cos, sin, B, T, H, HD, 1.0f);
}

void rope_backward(float *dx, const float *cos, const float *sin,
                   size_t B, size_t T, size_t H, size_t HD) {
    rope_rotate(dx, cos, sin, B, T, H, HD, -1.0f); // a rotation's transpose is its inverse
}

// --- attention --------------------------------------------------------------------------

static float dotf(const float *a, const float *b, size_t n) {
    float s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

// Attention runs with denormals flushed to zero (FTZ and DAZ in MXCSR, on this thread,
// restored after each task). A peaked softmax has probabilities down to 1e-38, and their
// products with gradients and values land in the denormal range, where each operation
// takes a microcode assist: on stories260K (random tokens, 1 thread) training ran at
// 7.8k tokens/s without this and 10.3k with it. Only values below 1.2e-38 change, to 0;
// results stay deterministic. Other kernels keep the default (IEEE) mode.
static inline unsigned denormals_flush(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned old = _mm_getcsr();
    _mm_setcsr(old | 0x8040); // FTZ (bit 15) | DAZ (bit 6)
    return old;
#else
    return 0;
#endif
}

static inline void denormals_restore(unsigned old) {
#if defined(__x86_64__) || defined(__i386__)
    _mm_setcsr(old);
#else
    (void)old;
#endif
}

static int team_size(int nscratch) {
    int nt = omp_get_max_threads();
    return nt < nscratch ? nt : nscratch;
}

size_t attention_scratch(size_t Tk) { return 2 * (size_t)ATT_BLOCK * Tk; }

// s (nb, nk) = scale * q (nb rows, stride ldq) @ k^T (nk rows, stride ldk), HD columns.
static void scores(float *s, const float *q, size_t ldq, const float *k, size_t ldk,
                   size_t nb, size_t nk, size_t HD, float scale) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bi(nb), bi(nk), bi(HD), scale, q,
                bi(ldq), k, bi(ldk), 0.0f, s, bi(nk));
}

void attention_forward(float *out, float *lse, const float *q, const float *k,
                       const float *v, float *scratch, size_t B, size_t Tq, size_t Tk,
                       size_t pos0, size_t NH, size_t KV, size_t HD, int nscratch) {
    layers_init();
    size_t G = NH / KV, Q = NH * HD, KVD = KV * HD;
    float scale = 1.0f / sqrtf((float)HD);
    CHECK(pos0 + Tq <= Tk, "attention: queries reach position %zu, only %zu keys",
          pos0 + Tq, Tk);
#pragma omp parallel for collapse(2) schedule(dynamic) num_threads(team_size(nscratch)) \
    if (B * NH * Tq * (pos0 + Tq) * HD > PAR_MIN_WORK)
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < NH; h++) {
            float *s = scratch + (size_t)omp_get_thread_num() * attention_scratch(Tk);
            unsigned csr = denormals_flush();
            const float *kb = k + b * Tk * KVD + (h / G) * HD;
            const float *vb = v + b * Tk * KVD + (h / G) * HD;
            for (size_t t0 = 0; t0 < Tq; t0 += ATT_BLOCK) {
                size_t nb = Tq - t0 < ATT_BLOCK ? Tq - t0 : ATT_BLOCK;
                size_t nk = pos0 + t0 + nb; // keys the block's last row sees
                const float *qb = q + (b * Tq + t0) * Q + h * HD;
                scores(s, qb, Q, kb, KVD, nb, nk, HD, scale);
                for (size_t i = 0; i < nb; i++) { // causal softmax of row i
                    float *r = s + i * nk;
                    size_t seen = pos0 + t0 + i + 1;
                    float mx = row_max(r, seen);
                    float sum = (float)row_exp_sum(r, r, mx, seen);
                    row_scale(r, 1.0f / sum, seen);
                    memset(r + seen, 0, (nk - seen) * sizeof *r);
                    if (lse) lse[(b * NH + h) * Tq + t0 + i] = mx + logf(sum);
                }
                // out rows (nb, HD) = p (nb, nk) @ v (nk, HD)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bi(nb), bi(HD), bi(nk),
                            1.0f, s, bi(nk), vb, bi(KVD), 0.0f, out + (b * Tq + t0) * Q + h * HD,
                            bi(Q));
            }
            denormals_restore(csr);
        }
}

// --- attention over packed segments (zero-shot scoring) -----------------------------------
//
// attention_forward's BLAS products have a depth of HD: at stories260K's HD = 8 the
// packing cost more than the multiply, and on its zero-shot scoring (rows of a few
// hundred keys) attention took 88% of the time. Here a segment's keys and values are
// held transposed, one (HD, ld) block each per thread (column j = key j, ld = the keys
// rounded up to ROW_LANES), so that ROW_LANES keys' scores are one vector sum over the
// HD dimensions, and ATT_ROWS query rows go together: their sums are independent (one
// sum alone waits on each add's latency) and each key vector loaded serves them all. A
// row's scores, exps and outputs stay in L1. HellaSwag on stories260K, 2 threads: 62.9 s
// before, 48.7 s after (docs/benchmarks.md). attention_forward keeps its products: a
// decoded token has one query row, and transposing its whole KV cache for it would triple
// the cache's traffic.

#define ATT_ROWS 4 // (attention_rows writes its four rows' sums out by hand)
_Static_assert(ATT_ROWS == 4, "attention_rows has one named sum per row");

// Keys rounded up to whole vectors: the row stride of the transposed blocks.
static size_t keys_ld(size_t n) { return (n + ROW_LANES - 1) / ROW_LANES * ROW_LANES; }

size_t attention_packed_scratch(size_t max_keys, size_t HD) {
    return (2 * HD + ATT_ROWS) * keys_ld(max_keys + ATT_ROWS - 1) + ATT_ROWS * HD;
}

// xt (HD, ld) columns j0 .. j0 + n - 1 = the rows of x (n, stride ldx; HD used).
static void rows_transpose(float *xt, size_t ld, size_t j0, const float *x, size_t ldx, size_t n,
                           size_t HD) {
    for (size_t j = 0; j < n; j++)
        for (size_t d = 0; d < HD; d++) xt[d * ld + j0 + j] = x[j * ldx + d];
}

// Columns n .. ld - 1 of xt (HD, ld) = 0: the last vector's lanes past the keys are read
// (and their scores then replaced by -inf), so they must hold numbers.
static void cols_zero(float *xt, size_t ld, size_t n, size_t HD) {
    for (size_t d = 0; d < HD; d++) memset(xt + d * ld + n, 0, (ld - n) * sizeof *xt);
}

// s (ROW_LANES) = scale * acc, -inf past the first n (n may exceed ROW_LANES); mx (ROW_LANES)
// = the larger of itself and s, lane by lane.
static inline void scores_put(float *s, float *mx, const float *acc, size_t n, float scale) {
#pragma omp simd
    for (size_t l = 0; l < ROW_LANES; l++) {
        float x = l < n ? acc[l] * scale : -INFINITY;
        s[l] = x;
        mx[l] = x > mx[l] ? x : mx[l];
    }
}

// Query rows q[r] (HD each), r < ATT_ROWS, row r seeing keys 0 .. n + r - 1 of kt, vt
// (HD, ld), transposed (ld >= keys_ld(n + ATT_ROWS - 1), the columns past the keys
// finite): o[r] (HD) = softmax(scale * q[r] . k_j) @ v; s (ATT_ROWS, ld) scratch. (A
// caller with fewer rows repeats its last one.) The exps are summed in float.
VEC_CLONES static void attention_rows(float *const o[ATT_ROWS], const float *const q[ATT_ROWS],
                                      const float *kt, const float *vt, size_t ld, size_t n, size_t HD, float scale,
                                      float *s) {
    size_t nv = keys_ld(n + ATT_ROWS - 1);
    float mx[ATT_ROWS][ROW_LANES], sum[ATT_ROWS];
    for (size_t r = 0; r < ATT_ROWS; r++)
        for (size_t l = 0; l < ROW_LANES; l++) mx[r][l] = -INFINITY;
    for (size_t j = 0; j < nv; j += ROW_LANES) { // scores and their maxima
        float a0[ROW_LANES] = {0}, a1[ROW_LANES] = {0}, a2[ROW_LANES] = {0}, a3[ROW_LANES] = {0};
        for (size_t d = 0; d < HD; d++) {
            const float *kd = kt + d * ld + j;
            float q0 = q[0][d], q1 = q[1][d], q2 = q[2][d], q3 = q[3][d];
#pragma omp simd
            for (size_t l = 0; l < ROW_LANES; l++) {
                a0[l] += q0 * kd[l];
                a1[l] += q1 * kd[l];
                a2[l] += q2 * kd[l];
                a3[l] += q3 * kd[l];
            }
        }
        scores_put(s + j, mx[0], a0, n > j ? n - j : 0, scale);
        scores_put(s + ld + j, mx[1], a1, n + 1 > j ? n + 1 - j : 0, scale);
        scores_put(s + 2 * ld + j, mx[2], a2, n + 2 > j ? n + 2 - j : 0, scale);
        scores_put(s + 3 * ld + j, mx[3], a3, n + 3 > j ? n + 3 - j : 0, scale);
    }
    for (size_t r = 0; r < ATT_ROWS; r++) { // exps (the keys a row does not see give 0)
        float m = lanes_max(mx[r]), acc[ROW_LANES] = {0}, *sr = s + r * ld;
        for (size_t j = 0; j < nv; j += ROW_LANES)
#pragma omp simd
            for (size_t l = 0; l < ROW_LANES; l++) {
                float e = km_exp(sr[j + l] - m);
                sr[j + l] = e;
                acc[l] += e;
            }
        sum[r] = 1.0f / lanes_sumf(acc);
    }
    const float *s0 = s, *s1 = s + ld, *s2 = s + 2 * ld, *s3 = s + 3 * ld;
    for (size_t d = 0; d < HD; d++) { // o[r]_d = sum_j exp_rj v_jd / sum_r
        float a0[ROW_LANES] = {0}, a1[ROW_LANES] = {0}, a2[ROW_LANES] = {0}, a3[ROW_LANES] = {0};
        const float *vd = vt + d * ld;
        for (size_t j = 0; j < nv; j += ROW_LANES)
#pragma omp simd
            for (size_t l = 0; l < ROW_LANES; l++) {
                a0[l] += s0[j + l] * vd[j + l];
                a1[l] += s1[j + l] * vd[j + l];
                a2[l] += s2[j + l] * vd[j + l];
                a3[l] += s3[j + l] * vd[j + l];
            }
        o[0][d] = lanes_sumf(a0) * sum[0], o[1][d] = lanes_sumf(a1) * sum[1];
        o[2][d] = lanes_sumf(a2) * sum[2], o[3][d] = lanes_sumf(a3) * sum[3];
    }
}

// Query rows i = 0 .. nq - 1 of one head (row i at q + i * ldq, its output at out + i *
// ldq), row i seeing keys 0 .. n0 + i of kt, vt (HD, ld), ld >= keys_ld(n0 + nq +
// ATT_ROWS - 1); s scratch (ATT_ROWS * (ld + HD): a group's scores, and the outputs of
// the rows past nq that fill it).
static void attention_head(float *out, const float *q, size_t ldq, size_t nq, size_t n0,
                           const float *kt, const float *vt, size_t ld, size_t HD, float scale, float *s) {
    float *spare = s + ATT_ROWS * ld;
    for (size_t i = 0; i < nq; i += ATT_ROWS) {
        float *o[ATT_ROWS];
        const float *qr[ATT_ROWS];
        for (size_t r = 0; r < ATT_ROWS; r++) {
            size_t t = i + r < nq ? i + r : nq - 1;
            qr[r] = q + t * ldq;
            o[r] = i + r < nq ? out + t * ldq : spare + r * HD;
        }
        attention_rows(o, qr, kt, vt, ld, n0 + i + 1, HD, scale, s);
    }
}

void attention_packed(float *out, const float *q, const float *k, const float *v, const int32_t *seg, size_t nseg,
                      float *scratch, size_t max_keys, size_t NH, size_t KV, size_t HD, int nscratch) {
    size_t G = NH / KV, Q = NH * HD, KVD = KV * HD;
    float scale = 1.0f / sqrtf((float)HD);
#pragma omp parallel for schedule(dynamic, 1) num_threads(team_size(nscratch)) if (nseg > 1)
    for (size_t s = 0; s < nseg; s++) {
        size_t r0 = (size_t)seg[4 * s], n = (size_t)seg[4 * s + 1], p0 = (size_t)seg[4 * s + 2], p = (size_t)seg[4 * s + 3];
        CHECK(p + n <= max_keys, "attention_packed: a segment of %zu keys, scratch for %zu", p + n, max_keys);
        size_t ld = keys_ld(p + n + ATT_ROWS - 1);
        float *kt = scratch + (size_t)omp_get_thread_num() * attention_packed_scratch(max_keys, HD);
        float *vt = kt + HD * ld;
        unsigned csr = denormals_flush();
        for (size_t h = 0; h < NH; h++) {
            if (h % G == 0) { // the prefix's keys and values, then the segment's
                size_t g = (h / G) * HD;
                rows_transpose(kt, ld, 0, k + p0 * KVD + g, KVD, p, HD);
                rows_transpose(kt, ld, p, k + r0 * KVD + g, KVD, n, HD);
                rows_transpose(vt, ld, 0, v + p0 * KVD + g, KVD, p, HD);
                rows_transpose(vt, ld, p, v + r0 * KVD + g, KVD, n, HD);
                cols_zero(kt, ld, p + n, HD), cols_zero(vt, ld, p + n, HD);
            }
            attention_head(out + r0 * Q + h * HD, q + r0 * Q + h * HD, Q, n, p, kt, vt, ld, HD, scale,
                           vt + HD * ld);
        }
        denormals_restore(csr);
    }
}

// One row of the attention backward: p (n) = exp(s - lse) from the scores s it holds on
// entry, and d (n) = p * (dp - D) * scale from dp it holds on entry (d score, through
// the softmax and the scale).
VEC_CLONES static void softmax_grad_row(float *p, float *d, float lse, float D, float scale,
                                        size_t n) {
#pragma omp simd
    for (size_t j = 0; j < n; j++) {
        p[j] = km_exp(p[j] - lse);
        d[j] = p[j] * (d[j] - D) * scale;
    }
}

void attention_backward(float *dq, float *dk, float *dv, float *dkh, float *dvh,
                        const float *dout, const float *q, const float *k, const float *v,
                        const float *out, const float *lse, float *scratch,
                        size_t B, size_t T, size_t NH, size_t KV, size_t HD, int nscratch) {
    layers_init();
    size_t G = NH / KV, Q = NH * HD, KVD = KV * HD;
    float scale = 1.0f / sqrtf((float)HD);
    // Pass 1, one task per (b, h): dq for that head, and that head's share of dk, dv in
    // its own slice of dkh, dvh (no two tasks write the same memory).
#pragma omp parallel for collapse(2) schedule(dynamic) num_threads(team_size(nscratch)) \
    if (B * NH * T * T * HD > PAR_MIN_WORK)
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < NH; h++) {
            float *p = scratch + (size_t)omp_get_thread_num() * attention_scratch(T);
            float *ds = p + (size_t)ATT_BLOCK * T;
            unsigned csr = denormals_flush();
            const float *kb = k + b * T * KVD + (h / G) * HD;
            const float *vb = v + b * T * KVD + (h / G) * HD;
            float *dkb = dkh + (b * NH + h) * T * HD, *dvb = dvh + (b * NH + h) * T * HD;
            memset(dkb, 0, T * HD * sizeof *dkb);
            memset(dvb, 0, T * HD * sizeof *dvb);
            for (size_t t0 = 0; t0 < T; t0 += ATT_BLOCK) {
                size_t nb = T - t0 < ATT_BLOCK ? T - t0 : ATT_BLOCK, nk = t0 + nb;
                size_t row0 = (b * T + t0) * Q + h * HD; // (b, t0, h, 0) in q, dout, out, dq
                scores(p, q + row0, Q, kb, KVD, nb, nk, HD, scale);
                // dp (nb, nk) = dout rows @ v^T
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bi(nb), bi(nk), bi(HD),
                            1.0f, dout + row0, bi(Q), vb, bi(KVD), 0.0f, ds, bi(nk));
                for (size_t i = 0; i < nb; i++) {
                    float *pr = p + i * nk, *dr = ds + i * nk;
                    float l = lse[(b * NH + h) * T + t0 + i];
                    // sum_j p_j (dout . v_j) = dout . out: one dot instead of a row sum
                    float D = dotf(dout + row0 + i * Q, out + row0 + i * Q, HD);
                    size_t seen = t0 + i + 1;
                    softmax_grad_row(pr, dr, l, D, scale, seen);
                    memset(pr + seen, 0, (nk - seen) * sizeof *pr);
                    memset(dr + seen, 0, (nk - seen) * sizeof *dr);
                }
                // dq rows = ds @ k;  dk += ds^T @ q rows;  dv += p^T @ dout rows
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bi(nb), bi(HD), bi(nk),
                            1.0f, ds, bi(nk), kb, bi(KVD), 0.0f, dq + row0, bi(Q));
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bi(nk), bi(HD), bi(nb),
                            1.0f, ds, bi(nk), q + row0, bi(Q), 1.0f, dkb, bi(HD));
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, bi(nk), bi(HD), bi(nb),
                            1.0f, p, bi(nk), dout + row0, bi(Q), 1.0f, dvb, bi(HD));
            }
            denormals_restore(csr);
        }
    // Pass 2: sum each group's query heads into its key/value head, in head order.
#pragma omp parallel for collapse(2) schedule(static) if (B * T * NH * HD > PAR_MIN_WORK)
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++)
            for (size_t g = 0; g < KV; g++) {
                float *dkt = dk + (b * T + t) * KVD + g * HD, *dvt = dv + (b * T + t) * KVD + g * HD;
                memset(dkt, 0, HD * sizeof *dkt);
                memset(dvt, 0, HD * sizeof *dvt);
                for (size_t h = g * G; h < (g + 1) * G; h++) {
                    const float *a = dkh + ((b * NH + h) * T + t) * HD;
                    const float *c = dvh + ((b * NH + h) * T + t) * HD;
                    for (size_t d = 0; d < HD; d++) { dkt[d] += a[d]; dvt[d] += c[d]; }
                }
            }
}

// --- SwiGLU -----------------------------------------------------------------------------

// h (n) = silu(gate) * up over one span (vectorised; the OpenMP loops below cut spans).
VEC_CLONES static void swiglu_span(float *h, const float *gate, const float *up, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) h[i] = km_swiglu_forward(gate[i], up[i]);
}

VEC_CLONES static void swiglu_back_span(float *dgate, float *dup, const float *dh,
                                        const float *gate, const float *up, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) km_swiglu_backward(dgate + i, dup + i, dh[i], gate[i], up[i]);
}

enum { SPAN = 4096 }; // elements per OpenMP task of the elementwise kernels

void swiglu_forward(float *h, const float *gate, const float *up, size_t n) {
#pragma omp parallel for schedule(static) if (n > PAR_MIN_WORK)
    for (size_t i = 0; i < n; i += SPAN)
        swiglu_span(h + i, gate + i, up + i, n - i < SPAN ? n - i : SPAN);
}

void swiglu_backward(float *dgate, float *dup, const float *dh, const float *gate,
                     const float *up, size_t n) {
#pragma omp parallel for schedule(static) if (n > PAR_MIN_WORK)
    for (size_t i = 0; i < n; i += SPAN)
        swiglu_back_span(dgate + i, dup + i, dh + i, gate + i, up + i,
                         n - i < SPAN ? n - i : SPAN);
}

// --- embedding --------------------------------------------------------------------------

void embedding_forward(float *x, const int32_t *tokens, const float *embed, size_t N, size_t C) {
#pragma omp parallel for schedule(static) if (N * C > PAR_MIN_WORK)
    for (size_t n = 0; n < N; n++)
        memcpy(x + n * C, embed + (size_t)tokens[n] * C, C * sizeof *x);
}

void embedding_backward(float *dembed, const float *dx, const int32_t *tokens,
                        size_t N, size_t C) {
    // Serial over rows: a token repeated in the batch would race, and this is N*C adds.
    for (size_t n = 0; n < N; n++) {
        float *d = dembed + (size_t)tokens[n] * C;
        const float *g = dx + n * C;
        for (size_t c = 0; c < C; c++) d[c] += g[c];
    }
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

size_t embedding_index(int32_t *index, const int32_t *tokens, size_t N) {
    // (token, row) pairs sorted: by token, each token's rows in order
    uint64_t *key = xmalloc((N ? N : 1) * sizeof *key);
    for (size_t n = 0; n < N; n++) key[n] = (uint64_t)(uint32_t)tokens[n] << 32 | (uint64_t)n;
    qsort(key, N, sizeof *key, cmp_u64);
    size_t U = 0;
    for (size_t n = 0; n < N; n++) U += n == 0 || key[n] >> 32 != key[n - 1] >> 32;
    int32_t *uniq = index, *off = index + U, *rows = index + 2 * U + 1;
    size_t u = 0;
    for (size_t n = 0; n < N; n++) {
        if (n == 0 || key[n] >> 32 != key[n - 1] >> 32) {
            uniq[u] = (int32_t)(key[n] >> 32);
            off[u++] = (int32_t)n;
        }
        rows[n] = (int32_t)(key[n] & 0xffffffffu);
    }
    off[U] = (int32_t)N;
    free(key);
    return U;
}

// --- cross-entropy ----------------------------------------------------------------------

double crossentropy_forward(float *nll, float *lse, const float *logits,
                            const int32_t *targets, size_t N, size_t V) {
#pragma omp parallel for schedule(static) if (N * V > PAR_MIN_WORK)
    for (size_t n = 0; n < N; n++) {
        const float *z = logits + n * V;
        float mx = row_max(z, V);
        float l = mx + (float)log(row_exp_sum(NULL, z, mx, V));
        if (lse) lse[n] = l;
        nll[n] = targets[n] >= 0 ? l - z[targets[n]] : 0.0f;
    }
    double total = 0;
    for (size_t n = 0; n < N; n++) if (targets[n] >= 0) total += nll[n];
    return total;
}

void crossentropy_backward(float *dlogits, const float *logits, const float *lse,
                           const int32_t *targets, float scale, size_t N, size_t V) {
#pragma omp parallel for schedule(static) if (N * V > PAR_MIN_WORK)
    for (size_t n = 0; n < N; n++) {
        float *d = dlogits + n * V;
        const float *z = logits + n * V;
        if (targets[n] < 0) { memset(d, 0, V * sizeof *d); continue; }
        row_xent_grad(d, z, lse[n], scale, (size_t)targets[n], V);
    }
}
