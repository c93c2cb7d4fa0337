// kernel_math.h: the arithmetic of one element (or of one row's scalars) of each layer
// kernel, the optimizer and the saliency scores, written once for both paths: the CPU
// code (layers.c, adamw.c, sparse/saliency.c) calls these in its loops, and the CUDA
// kernels (layers.cu, adamw.cu, sparse/saliency.cu) call the same functions per thread.
// So the two paths compute the same function by construction; what differs is only how
// the work is cut up and the order of sums. Also here: bf16 rounding and the launch
// geometry of the kernels.
//
// C11, C++17 and CUDA alike. Under nvcc every function is __host__ __device__ (KM_HD;
// not "HD", which is the head dimension everywhere else). Only operations that both
// sides round the same way: + - * / and sqrtf are IEEE on both (nvcc's default
// -prec-div, -prec-sqrt), exp is our own polynomial (km_exp) rather than libm's or
// CUDA's, which differ. nvcc contracts a*b+c into fma by default and gcc -std=c11 does
// not, so GPU results can differ from the CPU's in the last bit; the emulator
// (tests/cuda_emu.h, g++) matches the CPU bit for bit on elementwise kernels.
//
// Not here: the kernels themselves, reductions over threads (cuda_reduce.cuh), shapes.
#ifndef BEST_KERNEL_MATH_H
#define BEST_KERNEL_MATH_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define KM_HD static inline __host__ __device__
#else
#define KM_HD static inline
#endif

// --- bits --------------------------------------------------------------------------------

KM_HD uint32_t km_bits(float f) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}

KM_HD float km_float(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

// 1 unless x is NaN or infinite (by the bits: the same on every compiler and flag).
KM_HD int km_finite(float x) { return (km_bits(x) & 0x7f800000u) != 0x7f800000u; }

// --- bf16 --------------------------------------------------------------------------------

// float -> bfloat16 bits, round to nearest even; NaN stays a (quiet) NaN with its sign.
// The same function as io/safetensors' st_f32_to_bf16 (tests/test_kernels checks it).
KM_HD uint16_t km_bf16_from_float(float f) {
    uint32_t x = km_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

KM_HD float km_float_from_bf16(uint16_t b) { return km_float((uint32_t)b << 16); }

// --- exp ---------------------------------------------------------------------------------

// exp(x) to 1 ulp (against exp in double, every 1e-4 of the range), without branches,
// so that the CPU's loops vectorise (layers.c says why that matters) and a GPU thread
// computes the very same polynomial: x = n ln2 + r with |r| <= ln2/2, exp(r) by Cephes'
// expf polynomial, 2^n put straight into exponent bits (as 2 * 2^(n-1), so that n =
// 128, up to expf's overflow at 88.72, stays finite). Below -86.6 (2^-125) the result
// is 0, where expf's is under 2.4e-38; inf and NaN go through. (Bit arithmetic in
// unsigned: a NaN's bits would overflow a signed shift.)
KM_HD float km_exp(float x) {
    uint32_t under = 0u - (x < -86.6f), over = 0u - (x > 88.8f); // all ones or 0
    x = km_float((km_bits(x) & ~over & ~under) | (km_bits(88.8f) & over));
    // round(x / ln2) without a rounding instruction: adding 1.5 * 2^23 leaves the
    // integer in the low mantissa bits (|x / ln2| < 2^22 here).
    float t = x * 1.44269504088896341f + 12582912.0f;
    float n = t - 12582912.0f;
    uint32_t ni = km_bits(t) - km_bits(12582912.0f); // n, as a 2's-complement integer
    float r = x - n * 0.693359375f - n * -2.12194440e-4f; // ln2 in two parts: n*hi is exact
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    p = (p + p) * km_float((ni + 126u) << 23); // 2^(n-1), n in [-125, 128]
    return km_float(km_bits(p) & ~under);
}

// --- RMSNorm: y = w * x / sqrt(mean(x^2) + eps) --------------------------------------------
// A row's sums are taken by the caller (the CPU in double, a GPU block in float).

// 1 / sqrt(mean of squares + eps).
KM_HD float km_rmsnorm_rstd(float mean_sq, float eps) { return 1.0f / sqrtf(mean_sq + eps); }

// (x * rstd) * w in this order, as transformers does (weight * hidden.to(dtype)).
KM_HD float km_rmsnorm_y(float x, float rstd, float w) { return w * (x * rstd); }

// The row's coefficient of x in the input gradient, from dot = sum_c w_c dy_c x_c:
// rstd^3 dot / C, in double (one per row).
KM_HD float km_rmsnorm_dcoef(double dot, float rstd, size_t C) {
    return (float)(dot * rstd * rstd * rstd / (double)C);
}

// dx_k = rstd w_k dy_k - coef x_k.
KM_HD float km_rmsnorm_dx(float dy, float x, float w, float rstd, float coef) {
    return rstd * w * dy - coef * x;
}

// --- RoPE, Hugging Face rotate_half layout -------------------------------------------------

// Rotates the pair (lo, hi) = (x_i, x_{i+HD/2}) by the angle whose cosine and sine are c,
// s, in place. The backward is the same call with -s (a rotation's transpose). On a GPU
// each product and sum is rounded on its own (no fused multiply-add): nvcc contracts
// a * c - z * s into one FMA or the other depending on the code around it, and the fused
// decoding kernel (decode_rope_append_cuda) must give rope_at_cuda's bits (seen on an
// H200, 2026-11-29: 12 of test_kernels_gpu's 24 cases differed before).
KM_HD void km_rope_pair(float *lo, float *hi, float c, float s) {
    float a = *lo, z = *hi;
#ifdef __CUDA_ARCH__
    *lo = __fsub_rn(__fmul_rn(a, c), __fmul_rn(z, s));
    *hi = __fadd_rn(__fmul_rn(z, c), __fmul_rn(a, s));
#else
    *lo = a * c - z * s;
    *hi = z * c + a * s;
#endif
}

// --- SwiGLU: h = silu(gate) * up -------------------------------------------------------------

KM_HD float km_swiglu_forward(float g, float u) { return g / (1.0f + km_exp(-g)) * u; }

// d silu(g)/dg = sig (1 + g (1 - sig)).
KM_HD void km_swiglu_backward(float *dg, float *du, float dh, float g, float u) {
    float sig = 1.0f / (1.0f + km_exp(-g));
    *dg = dh * u * sig * (1.0f + g * (1.0f - sig));
    *du = dh * g * sig;
}

// --- softmax and cross-entropy ---------------------------------------------------------------
// Online log-sum-exp: (m, s) stands for s * exp(m) with m the largest value seen, so
// one pass over a row suffices and partial states of a split row merge. Start from
// (-INFINITY, 0). A row of -inf logits gives NaN, as the CPU's two-pass version does.

KM_HD void km_lse_step(float *m, float *s, float x) {
    if (x > *m) {
        *s = *s * km_exp(*m - x) + 1.0f;
        *m = x;
    } else if (x != -INFINITY) { // adds exp(-inf) = 0; skipped, as -inf - -inf is NaN
        *s += km_exp(x - *m);
    }
}

KM_HD void km_lse_merge(float *m, float *s, float m2, float s2) {
    if (m2 > *m) {
        *s = *s * km_exp(*m - m2) + s2;
        *m = m2;
    } else if (s2 > 0.0f) { // (-inf, 0) is the empty state: nothing to add
        *s += s2 * km_exp(m2 - *m);
    }
}

// The log-sum-exp of a finished state.
KM_HD float km_lse_value(float m, float s) { return m + logf(s); }

// d loss / d logit z for a row with log-sum-exp lse: scale * (softmax(z) - onehot),
// computed as exp(z - lse) * scale - (is_target ? scale : 0).
KM_HD float km_xent_dlogit(float z, float lse, float scale, int is_target) {
    return km_exp(z - lse) * scale - (is_target ? scale : 0.0f);
}

// --- AdamW (adamw.h) -------------------------------------------------------------------------

// The scalars of one step, formed on the host as torch forms them (adamw_scalars).
typedef struct {
    float decay;    // 1 - lr * weight_decay
    float b1, b2;   // beta1, beta2
    float a1, a2;   // 1 - beta1, 1 - beta2
    float step;     // lr / (1 - beta1^t)
    float bc2s;     // sqrt(1 - beta2^t)
    float eps;
} AdamWScalars;

// One element of a masked AdamW step, torch's _single_tensor_adamw operation by
// operation: keep = 0 (pruned) sees a zero gradient (its moments decay) and ends at 0.
KM_HD void km_adamw(float *w, float *m, float *v, float g, int keep, const AdamWScalars *k) {
    float gi = keep ? g : 0.0f;
    float mi = *m * k->b1 + k->a1 * gi;
    float vi = *v * k->b2 + k->a2 * gi * gi;
    *m = mi;
    *v = vi;
    float wi = *w * k->decay;
    wi = wi + -k->step * (mi / (sqrtf(vi) / k->bc2s + k->eps));
    *w = keep ? wi : 0.0f;
}

// 1 unless x is NaN or infinite (x - x is 0 exactly for every finite double).
KM_HD int km_finite_d(double x) { return x - x == 0.0; }

// clip_grad_norm_'s factor for a gradient of norm `norm`: min(1, max_norm / (norm + 1e-6)),
// formed in double and rounded to float; 1 without clipping (max_norm <= 0). The host's
// grad_clip_coef and the device's one-pass optimizer (adamw.cu) both call this.
KM_HD float km_clip_coef(double norm, double max_norm) {
    if (max_norm <= 0) return 1.0f;
    double c = max_norm / (norm + 1e-6);
    return c < 1.0 ? (float)c : 1.0f;
}

// --- saliency (sparse/saliency.h) ------------------------------------------------------------
// A pruned weight (w == 0) scores +0, and no score is -0, so the scores' bits sort like
// the floats. Inputs are not checked here (the callers count non-finite ones).

KM_HD float km_saliency_magnitude(float w) { return fabsf(w); }

// |m * w|
KM_HD float km_saliency_first(float w, float m) { return w == 0.0f ? 0.0f : fabsf(m * w); }

// 0.5 * v * w^2, v * w^2 in float as the paper's PyTorch code; + 0.0f turns -0 into +0.
KM_HD float km_saliency_second(float w, float v) {
    return w == 0.0f ? 0.0f : 0.5f * v * (w * w) + 0.0f;
}

// --- launch geometry -------------------------------------------------------------------------

// Threads per block of the elementwise kernels.
#define KM_THREADS 256
// Threads per block of the row kernels (RMSNorm rows, cross-entropy rows; the fused decode
// products, which sum their RMSNorm as those do).
#define KM_ROW_THREADS_MAX 512
// The most blocks an elementwise launch gets; more elements go round a grid-stride loop.
// (Enough to fill an H100 several times over; tests/test_kernels lowers it to run the
// loop at tiny sizes.)
#ifndef KM_GRID_CAP
#define KM_GRID_CAP 16384u
#endif

// Blocks for n items at `per_block` items a block: ceil(n / per_block), at least 1 (a
// grid of 0 blocks is an error), at most cap.
KM_HD unsigned km_blocks(size_t n, size_t per_block, unsigned cap) {
    size_t b = (n + per_block - 1) / per_block;
    return b == 0 ? 1u : b > cap ? cap : (unsigned)b;
}

// Threads for a kernel that gives one row of C values to a block: C rounded up to whole
// warps (so shuffles see full warps), at most max_threads (a multiple of 32).
KM_HD unsigned km_row_threads(size_t C, unsigned max_threads) {
    size_t t = (C + 31) / 32 * 32;
    return t == 0 ? 32u : t > max_threads ? max_threads : (unsigned)t;
}

// Row chunks of the RMSNorm weight gradient on a GPU (layers.cu): rows in chunks of at
// least 32, at most 256 chunks; its scratch holds chunks * C floats.
KM_HD unsigned km_rmsnorm_dw_chunks(size_t N) { return km_blocks(N, 32, 256); }

// Row chunks of a column sum on a GPU (the bias gradient, bias_backward_cuda): the same
// cut as the RMSNorm weight gradient's; its scratch holds chunks * OC floats.
KM_HD unsigned km_colsum_chunks(size_t N) { return km_blocks(N, 32, 256); }

// The flat index of a thread in its grid, in size_t (a grid can hold more than 2^32).
KM_HD size_t km_thread_index(unsigned block, unsigned block_dim, unsigned thread) {
    return (size_t)block * block_dim + thread;
}

#endif
