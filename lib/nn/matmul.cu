// matmul.cu: the Linear layer's matrix products on the GPU with cuBLASLt: bf16 operands
// (x, w, dy as bf16 bits, cast by cast_bf16_cuda), fp32 accumulation on tensor cores
// (CUBLAS_COMPUTE_32F), fp32 results, on the CudaCtx's stream and workspace. The
// semantics are layers.h's matmul_forward / matmul_backward; the row-major to
// column-major translation of each product is matmul_map.h's (checked on the CPU by
// tests/test_matmul_map.c), so this file only turns a MatmulMap into one cublasLtMatmul.
//
// Residual: matmul_forward_add_cuda reads C from another buffer than the D it writes (beta
// 1), so a residual connection costs no copy (never run on a GPU, 2026-11-29).
//
// Bias: cuBLASLt's CUBLASLT_EPILOGUE_BIAS with an fp32 bias (the output's type), fused
// into the forward product: the bias runs along the map's m rows (OC), broadcast over
// the N columns, and is added to alpha op(A) op(B) + beta C, so acc and bias combine as
// on the CPU. The bias gradient is a kernel of ours (bias_backward_cuda, layers.cu).
//
// Alignment: cuBLASLt's heuristic assumes 256-byte aligned buffers unless told
// otherwise, and its tensor-core kernels want 16-byte aligned pointers and leading
// dimensions (8 bf16 elements). We tell it the alignment each buffer really has (the
// largest power of two, up to 256, dividing both the address and the leading dimension
// in bytes), so an odd size or an offset pointer gets an algorithm that copes (slower,
// possibly not on tensor cores) instead of a fault; if cuBLASLt has none, the program
// stops with the shape and alignments (CUBLAS_STATUS_NOT_SUPPORTED's hint). The model's
// shapes (multiples of 64, cudaMalloc'd blocks cut at such offsets) are 16-byte aligned.
//
// The heuristic is asked once per distinct product (shape, transposes, bias, beta,
// alignments, device, workspace size); answers are kept in a small table (ALGO_CACHE entries; past
// that, the heuristic is asked each time). By default its first choice is used: the same
// algorithm in every process, so the same bits (stop and resume, --recompute, ranks).
// BEST_LT_TUNE=1 asks it for its best LT_TUNE_CANDIDATES instead and times each on the
// product's own operands (into a scratch output: C is left as it was; one warm-up, then
// the median of 3 runs, CUDA events), keeping the fastest for the process; which one wins
// can differ between processes, so results are then not bitwise across a resume.
// BEST_LT_TUNE=1 has never run on a GPU (2026-11-29). Descriptors are created per call: host
// work of a few microseconds against products of milliseconds. Not thread-safe: one
// host thread drives a device (DESIGN.md: one process per device).
//
// Not here: the bias gradient and the bf16 cast (layers.cu), attention's products.
// None of this has run on a GPU yet (docs/cuda.md).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/cuda.h"       // defines: CudaCtx, CUBLAS_CHECK, BEST_KAPI
#include "nn/layers.h"     // defines: the _cuda prototypes (with BEST_CUDA)
#include "nn/matmul_map.h" // defines: MatmulMap, matmul_map_*

// The alignment in bytes (a power of two, at most 256) of a buffer at p whose columns
// are ld_bytes apart.
static uint32_t alignment(const void *p, size_t ld_bytes) {
    uintptr_t a = (uintptr_t)p | (uintptr_t)ld_bytes | 256;
    return (uint32_t)(a & (~a + 1)); // the lowest set bit
}

// What the heuristic's answer depends on.
typedef struct {
    int device, transa, transb, bias, beta1, c_apart, f32; // f32: fp32 operands (matmul_f32_cuda)
    size_t m, n, k, lda, ldb, ldc, workspace_bytes;
    uint32_t align_a, align_b, align_c, align_bias, align_cin;
} AlgoKey;

#define ALGO_CACHE 64
static struct {
    AlgoKey key;
    cublasLtMatmulAlgo_t algo;
} algo_cache[ALGO_CACHE];
static int algo_cached;

#define LT_TUNE_CANDIDATES 8

// BEST_LT_TUNE=1 in the environment: time the heuristic's candidates (above).
static int lt_tune(void) {
    static int v = -1;
    if (v < 0) v = getenv("BEST_LT_TUNE") && strcmp(getenv("BEST_LT_TUNE"), "1") == 0;
    return v;
}

// One product, as lt_matmul runs it, with a given algorithm into out (C's copy or C).
typedef struct {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    const float *alpha, *beta;
    const void *A, *B;         // bf16 or fp32
    const float *C;            // the C read (beta 1): D's own memory or another buffer
    size_t c_bytes;
} LtRun;

// The index among cands[0..n) of the fastest algorithm on run's operands: each runs into a
// scratch copy of C (beta may read it), one warm-up and 3 timed; one that fails to launch
// is skipped (the heuristic's first, index 0, when none else works).
static int lt_fastest(CudaCtx *c, const LtRun *run, const cublasLtMatmulHeuristicResult_t *cands, int n) {
    cudaStreamCaptureStatus cap;
    CUDA_CHECK(cudaStreamIsCapturing(c->stream, &cap));
    if (cap != cudaStreamCaptureStatusNone) return 0; // inside a CUDA graph's capture: nothing may sync
    float *out = NULL;
    if (cudaMalloc(&out, run->c_bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0; // no room to try: the first
    }
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    int best = 0, have = 0;
    float best_ms = 0;
    for (int i = 0; i < n; i++) {
        if (cands[i].state != CUBLAS_STATUS_SUCCESS) continue;
        float t[3];
        int ok = 1;
        for (int r = 0; r < 4 && ok; r++) {
            CUDA_CHECK(cudaMemcpyAsync(out, run->C, run->c_bytes, cudaMemcpyDeviceToDevice, c->stream));
            CUDA_CHECK(cudaEventRecord(e0, c->stream));
            ok = cublasLtMatmul(c->lt, run->op, run->alpha, run->A, run->la, run->B, run->lb, run->beta, out, run->lc,
                                out, run->lc, &cands[i].algo, c->workspace, c->workspace_bytes,
                                c->stream) == CUBLAS_STATUS_SUCCESS;
            CUDA_CHECK(cudaEventRecord(e1, c->stream));
            CUDA_CHECK(cudaEventSynchronize(e1));
            if (ok && r > 0) CUDA_CHECK(cudaEventElapsedTime(&t[r - 1], e0, e1));
        }
        if (!ok) continue;
        float lo = t[0] < t[1] ? t[0] : t[1], hi = t[0] < t[1] ? t[1] : t[0];
        float med = t[2] < lo ? lo : t[2] > hi ? hi : t[2];
        if (!have || med < best_ms) best = i, best_ms = med, have = 1;
    }
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    CUDA_CHECK(cudaFree(out));
    return best;
}

// The algorithm for this product: from the table, or the heuristic's first choice (with
// BEST_LT_TUNE=1 the fastest of its candidates on run's operands).
static cublasLtMatmulAlgo_t algo_for(CudaCtx *c, const AlgoKey *key, cublasLtMatmulDesc_t op,
                                     cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                                     cublasLtMatrixLayout_t lc, const LtRun *run) {
    for (int i = 0; i < algo_cached; i++)
        if (memcmp(&algo_cache[i].key, key, sizeof *key) == 0) return algo_cache[i].algo;
    cublasLtMatmulPreference_t pref;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                      &c->workspace_bytes, sizeof c->workspace_bytes));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                      &key->align_a, sizeof key->align_a));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                      &key->align_b, sizeof key->align_b));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                      &key->align_c, sizeof key->align_c));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                      &key->align_c, sizeof key->align_c));
    cublasLtMatmulHeuristicResult_t cands[LT_TUNE_CANDIDATES];
    int found = 0, want = lt_tune() ? LT_TUNE_CANDIDATES : 1;
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(c->lt, op, la, lb, lc, lc, pref, want, cands, &found));
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    cublasLtMatmulHeuristicResult_t res = cands[0];
    if (found > 1) res = cands[lt_fastest(c, run, cands, found)];
    if (found == 0 || res.state != CUBLAS_STATUS_SUCCESS)
        DIE("cuBLASLt has no algorithm for a%s product m=%zu n=%zu k=%zu (lda %zu, ldb %zu, ldc "
            "%zu, transa %d, transb %d, bias %d) with buffers aligned to %u, %u, %u bytes",
            key->f32 ? "n fp32" : " bf16", key->m, key->n, key->k, key->lda, key->ldb, key->ldc, key->transa, key->transb,
            key->bias, key->align_a, key->align_b, key->align_c);
    if (algo_cached < ALGO_CACHE) {
        algo_cache[algo_cached].key = *key;
        algo_cache[algo_cached++].algo = res.algo;
    }
    return res.algo;
}

// D (column-major m x n, fp32) = alpha op(A) op(B) + beta Cin (+ bias along the rows), A
// and B bf16 (f32 0) or fp32 (f32 1), as the map says; Cin is D (Cin NULL) or another
// buffer of D's layout (the residual added in the epilogue instead of a copy first).
static void lt_matmul(CudaCtx *c, const MatmulMap *p, const void *A, const void *B, float *C, const float *bias,
                      const float *Cin, int f32) {
    if (p->m == 0 || p->n == 0) return;
    CHECK(p->k > 0, "matmul: an empty inner dimension (m=%zu n=%zu k=0)", p->m, p->n);
    AlgoKey key;
    memset(&key, 0, sizeof key); // padding too: keys are compared with memcmp
    key.device = c->device, key.transa = p->transa, key.transb = p->transb;
    key.bias = bias != NULL, key.beta1 = p->beta != 0.0f, key.f32 = f32;
    size_t ab = f32 ? 4 : 2; // bytes an operand element
    key.m = p->m, key.n = p->n, key.k = p->k, key.lda = p->lda, key.ldb = p->ldb, key.ldc = p->ldc;
    key.workspace_bytes = c->workspace_bytes;
    key.align_a = alignment(A, p->lda * ab), key.align_b = alignment(B, p->ldb * ab);
    key.align_c = alignment(C, p->ldc * 4), key.align_bias = bias ? alignment(bias, 0) : 0;
    key.c_apart = Cin && Cin != C;
    key.align_cin = key.c_apart ? alignment(Cin, p->ldc * 4) : 0;
    if (!Cin) Cin = C;

    cublasLtMatmulDesc_t op;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = p->transa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = p->transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (bias) {
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        cudaDataType_t bt = CUDA_R_32F;
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
        CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    }
    size_t ar, ac, br, bc;
    matmul_map_a_shape(p, &ar, &ac);
    matmul_map_b_shape(p, &br, &bc);
    cublasLtMatrixLayout_t la, lb, lc;
    cudaDataType_t at = f32 ? CUDA_R_32F : CUDA_R_16BF;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, at, ar, ac, (int64_t)p->lda));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, at, br, bc, (int64_t)p->ldb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, p->m, p->n, (int64_t)p->ldc));
    LtRun run = {op, la, lb, lc, &p->alpha, &p->beta, A, B, Cin, p->ldc * p->n * sizeof(float)};
    cublasLtMatmulAlgo_t algo = algo_for(c, &key, op, la, lb, lc, &run);
    CUBLAS_CHECK(cublasLtMatmul(c->lt, op, &p->alpha, A, la, B, lb, &p->beta, Cin, lc, C, lc, &algo,
                                c->workspace, c->workspace_bytes, c->stream));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lc));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(lb));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(la));
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(op));
}

// The buffer a map names.
static const uint16_t *operand(MatmulOperand o, const uint16_t *x, const uint16_t *w, const uint16_t *dy) {
    return o == MM_X ? x : o == MM_W ? w : dy;
}

BEST_KAPI void matmul_forward_cuda(CudaCtx *c, float *y, const uint16_t *x, const uint16_t *w,
                                   const float *b, size_t N, size_t IC, size_t OC, int acc) {
    MatmulMap p = matmul_map_forward(N, IC, OC, acc);
    lt_matmul(c, &p, operand(p.a, x, w, NULL), operand(p.b, x, w, NULL), y, b, NULL, 0);
}

BEST_KAPI void matmul_forward_add_cuda(CudaCtx *c, float *y, const uint16_t *x, const uint16_t *w, const float *b,
                                       const float *res, size_t N, size_t IC, size_t OC) {
    MatmulMap p = matmul_map_forward(N, IC, OC, 1);
    lt_matmul(c, &p, operand(p.a, x, w, NULL), operand(p.b, x, w, NULL), y, b, res, 0);
}

BEST_KAPI void matmul_backward_cuda(CudaCtx *c, float *dx, float *dw, const uint16_t *dy,
                                    const uint16_t *x, const uint16_t *w, size_t N, size_t IC,
                                    size_t OC, int dx_acc) {
    if (dx) {
        MatmulMap p = matmul_map_dx(N, IC, OC, dx_acc);
        lt_matmul(c, &p, operand(p.a, x, w, dy), operand(p.b, x, w, dy), dx, NULL, NULL, 0);
    }
    if (dw) {
        MatmulMap p = matmul_map_dw(N, IC, OC);
        lt_matmul(c, &p, operand(p.a, x, w, dy), operand(p.b, x, w, dy), dw, NULL, NULL, 0);
    }
}

// Row-major C = alpha op(A) op(B) + beta C is column-major C^T = alpha op(B)^T op(A)^T +
// beta C^T. A row-major buffer read column-major is its transpose, so cuBLASLt's A is B's
// storage, transposed when transb, and its B is A's storage, transposed when transa; the
// bias runs along cuBLASLt's m rows, our N columns.
BEST_KAPI void matmul_f32_cuda(CudaCtx *c, float *C, const float *A, const float *B, const float *bias, size_t M,
                               size_t N, size_t K, size_t lda, size_t ldb, size_t ldc, int transa, int transb,
                               float alpha, float beta) {
    MatmulMap p;
    memset(&p, 0, sizeof p);
    p.transa = transb, p.transb = transa;
    p.m = N, p.n = M, p.k = K, p.lda = ldb, p.ldb = lda, p.ldc = ldc, p.alpha = alpha, p.beta = beta;
    lt_matmul(c, &p, B, A, C, bias, NULL, 1);
}
