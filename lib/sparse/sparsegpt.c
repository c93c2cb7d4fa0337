// sparsegpt.c: SparseGPT's factor and pruning (sparsegpt.h), on OpenBLAS's BLAS and
// LAPACK (dpotrf, dpotri: the Fortran symbols, column-major; our matrices are row-major
// and symmetric, so LAPACK's lower triangle is our upper one).
#include "sparse/sparsegpt.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"    // defines: ERR, xmalloc
#include "sparse/select.h" // defines: select_smallest

void spotrf_(const char *uplo, const int *n, float *a, const int *lda, int *info);
void strtri_(const char *uplo, const char *diag, const int *n, float *a, const int *lda, int *info);

void sparsegpt_accumulate(double *H, float *tmp, const float *x, size_t N, size_t d) {
    cblas_ssyrk(CblasRowMajor, CblasLower, CblasTrans, (int)d, (int)N, 1.0f, x, (int)d, 0.0f, tmp, (int)d);
#pragma omp parallel for schedule(dynamic, 16) if (d > 256)
    for (size_t i = 0; i < d; i++)
        for (size_t j = 0; j <= i; j++) H[i * d + j] += tmp[i * d + j];
}

int sparsegpt_retry(int tries, double damp, double mean, int info, const char *what) {
    if (tries == SPARSEGPT_RETRIES)
        return ERR("%s: the Hessian of its inputs is not positive definite even with %g times the mean of "
                   "its diagonal added (LAPACK info %d); more calibration data (--nsamples) may help",
                   what, damp / mean, info);
    fprintf(stderr, "best-mask: warning: %s: Cholesky failed with dampening %g; retrying with %g\n", what,
            damp / mean, 10 * damp / mean);
    return 0;
}

int sparsegpt_factor(float *U, uint8_t *dead, double *H, size_t n, double percdamp, const char *what) {
    if (n > 46340) return ERR("%s: %zu inputs: too many for one LAPACK call", what, n);
    int ni = (int)n, info = 0;
    double mean = 0;
    for (size_t j = 0; j < n; j++) {
        dead[j] = H[j * n + j] == 0.0;
        if (dead[j]) H[j * n + j] = 1.0;
        mean += H[j * n + j];
    }
    mean /= (double)n;
    // In fp32 (as the reference), in U's upper triangle (LAPACK's 'L' on our row-major
    // arrays); H stays for a retry. With J the reversal of the order of rows and columns:
    // J H J = V^T V (Cholesky, V upper), so H^-1 = R^T R with R = J V^-T J upper: the factor
    // wanted, from one Cholesky and one triangular inverse (the reference's Cholesky,
    // inverse, Cholesky cost twice that).
    double damp = percdamp * mean;
    int tries = 0;
    for (;; tries++) {
        for (size_t i = 0; i < n; i++) // the upper triangle of J H J, the diagonal dampened
            for (size_t j = i; j < n; j++)
                U[i * n + j] = (float)(H[(n - 1 - i) * n + (n - 1 - j)] + (i == j ? damp : 0.0));
        spotrf_("L", &ni, U, &ni, &info); // V
        if (info == 0) strtri_("L", "N", &ni, U, &ni, &info); // V^-1
        if (info == 0) break;
        TRY(sparsegpt_retry(tries, damp, mean, info, what));
        damp *= 10;
    }
    // R[i][j] = V^-1[n-1-j][n-1-i] (j >= i): an involution of the upper triangle, swapped in place
    for (size_t i = 0; i < n; i++)
        for (size_t j = i; j < n; j++) {
            size_t a = n - 1 - j, b = n - 1 - i; // the partner (a <= b)
            if (a < i || (a == i && b <= j)) continue; // each pair once (and the fixed points)
            float t = U[i * n + j];
            U[i * n + j] = U[a * n + b];
            U[a * n + b] = t;
        }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++) U[i * n + j] = 0.0f;
    return 0;
}

void sparsegpt_prune(float *w, uint8_t *mask, size_t rows, size_t cols, const float *U, const uint8_t *dead,
                     double sparsity, const NMPattern *nm) {
    size_t m = nm ? (size_t)nm->m : 0, drop = m ? (size_t)(nm->m - nm->n) : 0;
    // N:M: blocks a multiple of M, so that no group straddles two (the lazy update's
    // batching changes only the rounding, not the result)
    const size_t B = m ? SPARSEGPT_BLOCK / m * m : SPARSEGPT_BLOCK;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            if (dead[c]) w[r * cols + c] = 0.0f;
    memset(mask, 1, rows * cols);
    float *err = xmalloc(rows * B * sizeof *err);   // (rows, bc)
    uint64_t *key = xmalloc(rows * B * sizeof *key); // score bits << 32 | place r * bc + j
    for (size_t c0 = 0; c0 < cols; c0 += B) {
        size_t bc = cols - c0 < B ? cols - c0 : B, c1 = c0 + bc;
        // the block's mask: the floor(rows * bc * S) lowest w^2 / U_jj^2
        size_t nb = rows * bc, k = m ? 0 : (size_t)floor((double)nb * sparsity);
        for (size_t r = 0; r < rows && !m; r++)
            for (size_t j = 0; j < bc; j++) {
                float wv = w[r * cols + c0 + j], d = U[(c0 + j) * cols + c0 + j];
                key[r * bc + j] = select_key(wv * wv / (d * d), r * bc + j);
            }
        select_smallest(key, nb, k);
        for (size_t i = 0; i < k; i++) {
            size_t at = (size_t)(key[i] & 0xffffffffu);
            mask[at / bc * cols + c0 + at % bc] = 0;
        }
        // column by column inside the block, each row on its own
#pragma omp parallel for schedule(static) if (rows * bc * bc > (1 << 16))
        for (size_t r = 0; r < rows; r++) {
            float *wr = w + r * cols;
            uint8_t *mr = mask + r * cols;
            for (size_t j = 0; j < bc; j++) {
                size_t c = c0 + j;
                if (m && j % m == 0) { // N:M: the group's M - N lowest w^2 / U_jj^2, as the weights are now
                    uint64_t gk[NM_MAX];
                    for (size_t t = 0; t < m; t++) {
                        float wv = wr[c + t], d = U[(c + t) * cols + c + t];
                        gk[t] = select_key(wv * wv / (d * d), t);
                    }
                    select_smallest(gk, m, drop);
                    for (size_t t = 0; t < drop; t++) mr[c + (gk[t] & 0xffffffffu)] = 0;
                }
                float q = mr[c] ? wr[c] : 0.0f, e = (wr[c] - q) / U[c * cols + c];
                const float *u = U + c * cols + c0;
                if (e != 0.0f) // (a kept weight's error is 0: nothing to spread)
                    for (size_t t = j + 1; t < bc; t++) wr[c0 + t] -= e * u[t];
                wr[c] = q;
                err[r * bc + j] = e;
            }
        }
        // the columns right of the block: W[:, c1:] -= Err (rows, bc) @ U[c0:c1, c1:]
        if (c1 < cols)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)(cols - c1), (int)bc, -1.0f, err,
                        (int)bc, U + c0 * cols + c1, (int)cols, 1.0f, w + c1, (int)cols);
    }
    free(err);
    free(key);
}
