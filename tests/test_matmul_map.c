// test_matmul_map.c: the row-major to column-major maps of lib/nn/matmul_map.h, which
// lib/nn/matmul.cu hands to cuBLASLt, checked on the CPU: each map is carried out by a
// naive column-major GEMM written from BLAS's definition (op(A) m x k, op(B) k x n, C
// m x n, leading dimensions, alpha, beta; every index bound-checked against the buffer
// it reads), on bf16-rounded inputs, and compared with layers.c's matmul_forward and
// matmul_backward (the CPU path, OpenBLAS) at odd sizes, with and without bias,
// accumulation into y and into dx; and at sizes that layers.c cuts across 3 threads, by
// the outputs and by the rows.
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"     // defines: xmalloc
#include "nn/kernel_math.h" // defines: km_bf16_from_float, km_float_from_bf16
#include "nn/layers.h"      // defines: matmul_forward, matmul_backward (the reference)
#include "nn/matmul_map.h"  // defines: MatmulMap, matmul_map_*
#include "test.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float rnd(void) { // uniform in [-1, 1), rounded to bf16 (the GPU's operands)
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    float x = (float)((double)(rng >> 11) / 4503599627370496.0 - 1.0);
    return km_float_from_bf16(km_bf16_from_float(x));
}
static float *rand_vec(size_t n) {
    float *v = xmalloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = rnd();
    return v;
}

// A buffer and its length in floats.
typedef struct { const float *p; size_t n; } Buf;

// Reads element (r, c) of the column-major matrix stored in buf with leading dimension
// ld; *bad is set instead of reading outside the buffer (a wrong map).
static double at(Buf buf, size_t r, size_t c, size_t ld, int *bad) {
    size_t i = r + c * ld;
    if (i >= buf.n) { *bad = 1; return 0; }
    return buf.p[i];
}

// C = alpha op(A) op(B) + beta C (+ bias[i] on row i when bias), as BLAS defines it; the
// sums in double. ops[] are the Linear layer's buffers, indexed by MatmulOperand. Returns
// 0, or -1 when the map is not a valid BLAS call on these buffers.
static int gemm_ref(float *C, size_t c_len, const MatmulMap *p, const Buf ops[3], const float *bias) {
    size_t ar, ac, br, bc;
    matmul_map_a_shape(p, &ar, &ac);
    matmul_map_b_shape(p, &br, &bc);
    if (p->lda < ar || p->ldb < br || p->ldc < p->m) return -1;
    if ((p->n - 1) * p->ldc + p->m > c_len) return -1; // C must fit its buffer
    int bad = 0;
    for (size_t j = 0; j < p->n; j++)
        for (size_t i = 0; i < p->m; i++) {
            double s = 0;
            for (size_t l = 0; l < p->k; l++) {
                double a = p->transa ? at(ops[p->a], l, i, p->lda, &bad) : at(ops[p->a], i, l, p->lda, &bad);
                double b = p->transb ? at(ops[p->b], j, l, p->ldb, &bad) : at(ops[p->b], l, j, p->ldb, &bad);
                s += a * b;
            }
            float *c = &C[i + j * p->ldc];
            float v = (float)(p->alpha * s + (p->beta != 0.0f ? p->beta * (double)*c : 0.0));
            *c = bias ? v + bias[i] : v;
        }
    return bad ? -1 : 0;
}

static void check_shape(size_t N, size_t IC, size_t OC) {
    float *x = rand_vec(N * IC), *w = rand_vec(OC * IC), *dy = rand_vec(N * OC), *b = rand_vec(OC);
    Buf ops[3] = {{x, N * IC}, {w, OC * IC}, {dy, N * OC}};
    float *y0 = rand_vec(N * OC), *dx0 = rand_vec(N * IC), *dw0 = rand_vec(OC * IC);
    float *got = xmalloc((N * IC + OC * IC + N * OC) * sizeof *got);
    float *want = xmalloc((N * IC + OC * IC + N * OC) * sizeof *want);
    for (int acc = 0; acc < 2; acc++)
        for (int bias = 0; bias < 2; bias++) {
            MatmulMap p = matmul_map_forward(N, IC, OC, acc);
            memcpy(got, y0, N * OC * sizeof *got);
            memcpy(want, y0, N * OC * sizeof *want);
            int rc = gemm_ref(got, N * OC, &p, ops, bias ? b : NULL);
            matmul_forward(want, x, w, bias ? b : NULL, N, IC, OC, acc);
            double e = rel_err(got, want, N * OC);
            T_OK(rc == 0 && e <= 1e-5, "map forward N=%zu IC=%zu OC=%zu acc=%d bias=%d: %s, max rel err %.1e",
                 N, IC, OC, acc, bias, rc ? "not a valid BLAS call" : "valid", e);
        }
    for (int dx_acc = 0; dx_acc < 2; dx_acc++) {
        MatmulMap px = matmul_map_dx(N, IC, OC, dx_acc), pw = matmul_map_dw(N, IC, OC);
        float *gx = got, *gw = got + N * IC, *wx = want, *ww = want + N * IC;
        memcpy(gx, dx0, N * IC * sizeof *gx);
        memcpy(wx, dx0, N * IC * sizeof *wx);
        memcpy(gw, dw0, OC * IC * sizeof *gw);
        memcpy(ww, dw0, OC * IC * sizeof *ww);
        int rx = gemm_ref(gx, N * IC, &px, ops, NULL), rw = gemm_ref(gw, OC * IC, &pw, ops, NULL);
        matmul_backward(wx, ww, NULL, dy, x, w, N, IC, OC, dx_acc);
        double ex = rel_err(gx, wx, N * IC), ew = rel_err(gw, ww, OC * IC);
        T_OK(rx == 0 && ex <= 1e-5, "map dx N=%zu IC=%zu OC=%zu dx_acc=%d: %s, max rel err %.1e", N, IC, OC,
             dx_acc, rx ? "not a valid BLAS call" : "valid", ex);
        T_OK(rw == 0 && ew <= 1e-5, "map dw (added) N=%zu IC=%zu OC=%zu: %s, max rel err %.1e", N, IC, OC,
             rw ? "not a valid BLAS call" : "valid", ew);
    }
    free(x), free(w), free(dy), free(b), free(y0), free(dx0), free(dw0), free(got), free(want);
}

int main(void) {
    // odd sizes (nothing a multiple of 8 or of another), a row, a square, and shapes
    // where two of N, IC, OC agree (a map that swaps them may still stay in bounds)
    static const size_t shapes[][3] = {{37, 70, 53}, {1, 19, 7}, {5, 1, 3}, {13, 13, 13}, {9, 31, 9}, {64, 48, 80}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) check_shape(shapes[i][0], shapes[i][1], shapes[i][2]);
    // products big enough for layers.c to cut across threads (3 of them: uneven slices):
    // by their outputs (OC = 530), and, too narrow for that, by their rows (N = 1001)
    omp_set_num_threads(3);
    static const size_t cut[][3] = {{37, 70, 530}, {1001, 64, 40}, {1001, 33, 172}};
    for (size_t i = 0; i < sizeof cut / sizeof *cut; i++) check_shape(cut[i][0], cut[i][1], cut[i][2]);
    T_DONE();
}
