// test_kernel_math.c: the shared per-element arithmetic of nn/kernel_math.h, on its own.
// The CPU path calls these functions in its loops (layers.c, adamw.c, saliency.c), so
// test_model's comparisons with PyTorch cover the ones it uses; here are the pieces it
// does not use or that need their own edges: bf16 rounding against io/safetensors'
// converter bit for bit, km_exp's accuracy, the online log-sum-exp (one pass, and two
// halves merged) against a two-pass sum in double, SwiGLU's derivative against finite
// differences, and the launch-geometry helpers. tests/test_kernels.cpp runs the kernels
// built from them.
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "io/safetensors.h" // defines: st_f32_to_bf16, st_bf16_to_f32
#include "nn/kernel_math.h" // defines: km_*
#include "test.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd32(void) { // xorshift64*
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (uint32_t)((rng * 2685821657736338717ull) >> 32);
}
static float rndf(float lo, float hi) { return lo + (hi - lo) * (float)(rnd32() >> 8) / 16777216.0f; }
// *worst = max(*worst, e), where a NaN error is infinitely bad (a plain > would skip it)
static void worse(double *worst, double e) { if (isnan(e) || e > *worst) *worst = isnan(e) ? INFINITY : e; }

static void check_bf16(void) {
    // random bit patterns (every class: NaNs, infinities, subnormals, ties) and the
    // specials, against the safetensors writer's converter
    static const uint32_t special[] = {0, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                                       0xffc00001u, 0x7f800001u, 0x00000001u, 0x807fffffu,
                                       0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x7f7f8000u};
    size_t bad = 0, n = 0;
    for (size_t i = 0; i < sizeof special / sizeof *special; i++, n++) {
        float f;
        memcpy(&f, &special[i], 4);
        bad += km_bf16_from_float(f) != st_f32_to_bf16(f);
    }
    for (int i = 0; i < 1 << 22; i++, n++) {
        uint32_t u = rnd32();
        if (i & 1) u = (u & 0xffff0000u) | 0x8000u; // exact ties: round half to even
        float f;
        memcpy(&f, &u, 4);
        bad += km_bf16_from_float(f) != st_f32_to_bf16(f);
    }
    T_OK(bad == 0, "km_bf16_from_float = st_f32_to_bf16 on %zu floats (%zu differ)", n, bad);
    bad = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        float x = km_float_from_bf16((uint16_t)b), y = st_bf16_to_f32((uint16_t)b);
        bad += memcmp(&x, &y, 4) != 0;
    }
    T_OK(bad == 0, "km_float_from_bf16 = st_bf16_to_f32 on all 65536 bf16 values");
}

static void check_exp(void) {
    double worst = 0;
    for (double x = -86.0; x < 88.7; x += 1e-3) {
        double want = exp((double)(float)x), got = km_exp((float)x);
        double ulp = ldexp(1.0, ilogb(want) - 23);
        double e = fabs(got - want) / ulp;
        worse(&worst, e);
    }
    T_OK(worst <= 1.5, "km_exp within 1.5 ulp of exp on [-86, 88.7] (worst %.2f ulp)", worst);
    T_OK(km_exp(-INFINITY) == 0.0f && km_exp(-100.0f) == 0.0f && isinf(km_exp(INFINITY)) &&
         isnan(km_exp(NAN)) && km_exp(0.0f) == 1.0f,
         "km_exp: exp(-inf) = exp(-100) = 0, exp(inf) = inf, exp(nan) = nan, exp(0) = 1");
}

static double lse_ref(const float *x, size_t n) {
    double mx = -INFINITY, s = 0;
    for (size_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    for (size_t i = 0; i < n; i++) s += exp((double)x[i] - mx);
    return mx + log(s);
}

static void check_lse(void) {
    enum { N = 3000 };
    static float x[N];
    double worst = 0, worst_merge = 0;
    for (int trial = 0; trial < 40; trial++) {
        size_t n = 1 + rnd32() % N;
        float spread = trial % 4 == 0 ? 80.0f : 12.0f; // some rows far beyond exp's range
        for (size_t i = 0; i < n; i++) x[i] = rndf(-spread, spread);
        if (trial % 5 == 0) x[0] = -INFINITY; // a masked logit first
        float m = -INFINITY, s = 0;
        for (size_t i = 0; i < n; i++) km_lse_step(&m, &s, x[i]);
        double want = lse_ref(x, n);
        double e = fabs(km_lse_value(m, s) - want) / fmax(1.0, fabs(want));
        worse(&worst, e);
        // two halves, each online, merged (as the GPU's threads do); one half may be empty
        size_t cut = rnd32() % (n + 1);
        float m1 = -INFINITY, s1 = 0, m2 = -INFINITY, s2 = 0;
        for (size_t i = 0; i < cut; i++) km_lse_step(&m1, &s1, x[i]);
        for (size_t i = cut; i < n; i++) km_lse_step(&m2, &s2, x[i]);
        if (trial & 1) km_lse_merge(&m1, &s1, m2, s2);
        else { km_lse_merge(&m2, &s2, m1, s1); m1 = m2; s1 = s2; }
        e = fabs(km_lse_value(m1, s1) - want) / fmax(1.0, fabs(want));
        worse(&worst_merge, e);
    }
    T_OK(worst < 1e-6, "online log-sum-exp = two-pass in double (rel err %.2e)", worst);
    T_OK(worst_merge < 1e-6, "two online halves merged = two-pass in double (rel err %.2e)",
         worst_merge);
    float m = -INFINITY, s = 0;
    km_lse_merge(&m, &s, -INFINITY, 0.0f);
    T_OK(m == -INFINITY && s == 0.0f, "merging two empty states leaves it empty");
    // the cross-entropy gradient of a row sums to 0 (softmax sums to 1, minus the one-hot)
    for (int i = 0; i < 100; i++) x[i] = rndf(-5, 5);
    double lse = lse_ref(x, 100), sum = 0;
    for (int i = 0; i < 100; i++) sum += km_xent_dlogit(x[i], (float)lse, 0.5f, i == 17);
    T_OK(fabs(sum) < 1e-6, "a row's cross-entropy gradient sums to 0 (%.2e)", sum);
}

static void check_swiglu(void) {
    double worst = 0;
    for (int i = 0; i < 2000; i++) {
        float g = rndf(-8, 8), u = rndf(-3, 3), dh = rndf(-2, 2), dg, du;
        km_swiglu_backward(&dg, &du, dh, g, u);
        // central differences of the forward in double (h = silu(g) u)
        double hstep = 1e-3;
        double fg = (km_swiglu_forward((float)(g + hstep), u) - km_swiglu_forward((float)(g - hstep), u)) /
                    ((double)(float)(g + hstep) - (double)(float)(g - hstep));
        double fu = g / (1.0 + exp(-(double)g));
        double e = fmax(fabs(dg - dh * fg), fabs(du - dh * fu)) / fmax(1.0, fabs(dh * fg));
        worse(&worst, e);
    }
    T_OK(worst < 2e-3, "SwiGLU backward = finite differences of the forward (err %.2e)", worst);
    // RoPE: the backward (with -sin) undoes the forward
    worst = 0;
    for (int i = 0; i < 1000; i++) {
        float a = rndf(-3, 3), z = rndf(-3, 3), ang = rndf(-6.3f, 6.3f);
        float lo = a, hi = z, c = cosf(ang), s = sinf(ang);
        km_rope_pair(&lo, &hi, c, s);
        km_rope_pair(&lo, &hi, c, -s);
        double e = fmax(fabs(lo - a), fabs(hi - z));
        worse(&worst, e);
    }
    T_OK(worst < 1e-5, "RoPE: rotating by -angle undoes +angle (err %.2e)", worst);
}

static void check_geometry(void) {
    T_OK(km_blocks(0, 256, 100) == 1 && km_blocks(1, 256, 100) == 1 &&
         km_blocks(256, 256, 100) == 1 && km_blocks(257, 256, 100) == 2 &&
         km_blocks((size_t)1 << 40, 256, 100) == 100 &&
         km_blocks(((size_t)1 << 32) * 256, 256, 0xffffffffu) == 0xffffffffu,
         "km_blocks: ceil(n / per_block), at least 1, at most the cap (no 32-bit wrap)");
    T_OK(km_row_threads(0, 256) == 32 && km_row_threads(1, 256) == 32 &&
         km_row_threads(96, 256) == 96 && km_row_threads(97, 256) == 128 &&
         km_row_threads(100000, 512) == 512,
         "km_row_threads: whole warps, from 32 to the maximum");
    T_OK(km_thread_index(70000, 1024, 5) == (size_t)70000 * 1024 + 5,
         "km_thread_index: block * dim + thread in size_t (past 2^32)");
}

int main(void) {
    check_bf16();
    check_exp();
    check_lse();
    check_swiglu();
    check_geometry();
    T_DONE();
}
