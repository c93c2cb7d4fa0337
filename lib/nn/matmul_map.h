// matmul_map.h: how each matrix product of a Linear layer (layers.h's matmul_forward and
// matmul_backward, row-major, w as torch.nn.Linear stores it) is asked of a column-major
// BLAS, as cuBLASLt is: which buffer is BLAS's A and B, their transposes, m, n, k, the
// leading dimensions, alpha and beta. Pure host arithmetic in C, so that a CPU test
// (tests/test_matmul_map.c) checks it against layers.c with a naive column-major GEMM
// before any GPU runs it; lib/nn/matmul.cu turns each map into one cublasLtMatmul.
//
// The trick is the usual one: a row-major (R, C) array is the column-major (C, R) array
// of its transpose, with leading dimension C. So y = x @ w^T (row-major) is
// y^T = w @ x^T (column-major): BLAS's C is y^T (OC x N, ld OC), A is w read as the
// column-major (IC, OC) matrix w^T and transposed back (ld IC), B is x^T (IC x N, ld IC).
//
// BLAS's definition, which the maps follow: C (m x n) = alpha op(A) op(B) + beta C, op(A)
// m x k, op(B) k x n; A stored column-major as m x k (no transpose) or k x m
// (transposed) with leading dimension lda >= its rows; the same for B; C m x n, ldc >= m.
//
// Not here: the cuBLASLt calls, bf16 and alignment (matmul.cu), the CPU products (layers.c).
#ifndef BEST_MATMUL_MAP_H
#define BEST_MATMUL_MAP_H

#include <stddef.h>

// The buffers of a Linear layer's products (C is always the output buffer).
typedef enum { MM_X, MM_W, MM_DY } MatmulOperand;

typedef struct {
    MatmulOperand a, b; // the buffers that are BLAS's A and B
    int transa, transb; // 1: op(A) = A^T (CUBLAS_OP_T), 0: op(A) = A
    size_t m, n, k;     // op(A) m x k, op(B) k x n, C m x n
    size_t lda, ldb, ldc;
    float alpha, beta;
} MatmulMap;

// y (N, OC) = x (N, IC) @ w^T (+ y when acc): y^T (OC x N) = w (as op(w^T)) @ x^T. The bias
// (OC) runs along C's m rows: the shape cuBLASLt's bias epilogue broadcasts.
static inline MatmulMap matmul_map_forward(size_t N, size_t IC, size_t OC, int acc) {
    MatmulMap p = {MM_W, MM_X, 1, 0, OC, N, IC, IC, IC, OC, 1.0f, acc ? 1.0f : 0.0f};
    return p;
}

// dx (N, IC) = dy (N, OC) @ w (OC, IC) (+ dx when dx_acc): dx^T (IC x N) = w^T (IC x OC,
// w's own memory, ld IC) @ dy^T (OC x N, ld OC).
static inline MatmulMap matmul_map_dx(size_t N, size_t IC, size_t OC, int dx_acc) {
    MatmulMap p = {MM_W, MM_DY, 0, 0, IC, N, OC, IC, OC, IC, 1.0f, dx_acc ? 1.0f : 0.0f};
    return p;
}

// dw (OC, IC) += dy^T (OC, N) @ x (N, IC): dw^T (IC x OC) += x^T (IC x N, ld IC) @ op(dy^T)
// where dy^T is dy's memory as a column-major (OC x N) matrix, transposed to (N x OC).
static inline MatmulMap matmul_map_dw(size_t N, size_t IC, size_t OC) {
    MatmulMap p = {MM_X, MM_DY, 0, 1, IC, OC, N, IC, OC, IC, 1.0f, 1.0f};
    return p;
}

// The stored shape (rows x cols, column-major) of A or B in a map: what cuBLASLt's matrix
// layouts are created with (rows, cols, ld).
static inline void matmul_map_a_shape(const MatmulMap *p, size_t *rows, size_t *cols) {
    *rows = p->transa ? p->k : p->m;
    *cols = p->transa ? p->m : p->k;
}
static inline void matmul_map_b_shape(const MatmulMap *p, size_t *rows, size_t *cols) {
    *rows = p->transb ? p->n : p->k;
    *cols = p->transb ? p->k : p->n;
}

#endif
