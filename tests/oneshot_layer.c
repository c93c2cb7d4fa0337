// oneshot_layer.c: one Linear layer through Wanda or SparseGPT (lib/sparse/wanda.c,
// sparsegpt.c) for tests/oneshot_ref.py, which compares the result with its own numpy
// implementation of each paper's algorithm (tests/t_oneshot.sh), and for
// bench/sparsegpt_speed.py, which times it against PyTorch.
//
//   oneshot_layer [--device cpu|cuda] [--pattern N:M] wanda|sparsegpt|magnitude SPARSITY ROWS COLS N
//                 W.f32 X.f32 OUT_W.f32 OUT_MASK.u8
//
// --pattern N:M (the CPU only): each method's N:M rule (sparse/nm.h; SPARSITY unused);
// magnitude only with it (its unstructured rule is mask.h's, not here; X unused).
//
// W (ROWS, COLS) and X (N, COLS) raw little-endian float32; OUT_W the pruned (SparseGPT:
// updated) weights, OUT_MASK one byte a weight (1 = kept). Exit 1 on an error. stderr:
// "seconds N" for the work after reading the inputs and "blas CONFIG", OpenBLAS's build and
// kernels (bench/sparsegpt_speed.py).
//
// --device cuda: the device path of best-mask --device cuda on the same layer (issue 38):
// W and X uploaded in fp32, X cast to bf16 (cast_bf16_cuda: the products' operand, as the
// walk's forward writes it), then SparseGPT: H (fp32, zeroed) += X^T X by cuBLASLt
// (matmul_backward_cuda's dw = dy^T x with dy = x), sparsegpt_factor_cuda and
// sparsegpt_prune_cuda; Wanda: wanda_accumulate_cuda and wanda_prune_cuda. The whole of
// that runs once untimed first (module loading, cuBLASLt's and cuSOLVER's first calls; W
// restored from a device copy after), then once timed between two
// cudaDeviceSynchronize: "seconds N" excludes reading and uploading the inputs and
// includes the cast. The results come back and are written as on the CPU; stderr says
// "device ..." (cuda_info) instead of "blas ...". In a build without CUDA the device mode
// is one error line saying so.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/blas.h"        // defines: blas_init
#include "base/cuda.h"        // defines: CudaCtx, cuda_ctx_create, cuda_info
#include "base/error.h"       // defines: err_msg, xmalloc, xcalloc
#include "base/progress.h"    // defines: now_seconds
#include "nn/layers.h"        // defines: cast_bf16_cuda, matmul_backward_cuda
#include "sparse/sparsegpt.h" // defines: sparsegpt_accumulate, sparsegpt_factor, sparsegpt_prune (and _cuda)
#include "sparse/nm.h"        // defines: NMPattern, nm_parse, nm_prune
#include "sparse/wanda.h"     // defines: wanda_accumulate, wanda_prune (and _cuda)

#ifdef BEST_CUDA
#include <cuda_runtime.h> // the C API: buffers, copies, synchronisation
#endif

char *openblas_get_config(void); // OpenBLAS's (Debian's cblas.h may be the reference one)

static int rw(const char *path, void *buf, size_t n, int write) {
    FILE *f = fopen(path, write ? "wb" : "rb");
    size_t got = f ? (write ? fwrite(buf, 1, n, f) : fread(buf, 1, n, f)) : 0;
    if (f) fclose(f);
    if (got != n) fprintf(stderr, "oneshot_layer: %s: cannot %s %zu bytes\n", path, write ? "write" : "read", n);
    return got == n;
}

// The CPU path, in place on w; mask written. 0, or 1 after an error line.
static int prune_cpu(float *w, uint8_t *mask, const float *x, size_t rows, size_t cols, size_t N, int gpt, double s,
                     const NMPattern *nm) {
    if (gpt < 0) { // magnitude, N:M
        nm_prune(w, mask, rows, cols, NULL, nm);
        return 0;
    }
    if (gpt) {
        double *H = xcalloc(cols * cols, sizeof *H);
        float *tmp = xmalloc(cols * cols * sizeof *tmp);
        uint8_t *dead = xmalloc(cols);
        // in two halves of the rows, as windows are summed
        sparsegpt_accumulate(H, tmp, x, N / 2, cols);
        sparsegpt_accumulate(H, tmp, x + N / 2 * cols, N - N / 2, cols);
        int rc = sparsegpt_factor(tmp, dead, H, cols, 0.01, "the layer");
        if (rc == 0) sparsegpt_prune(w, mask, rows, cols, tmp, dead, s, nm);
        else fprintf(stderr, "oneshot_layer: %s\n", err_msg());
        free(H);
        free(tmp);
        free(dead);
        return rc < 0;
    }
    double *colsq = xcalloc(cols, sizeof *colsq);
    wanda_accumulate(colsq, x, N, cols);
    wanda_prune(w, mask, rows, cols, colsq, s, nm);
    free(colsq);
    return 0;
}

#ifdef BEST_CUDA
#define RT_CHECK(call)                                                                           \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess) DIE("%s: %s", #call, cudaGetErrorString(e_));                     \
    } while (0)

// The device path: *seconds the timed pass's; w and mask downloaded. 0, or 1 after an
// error line. The kernels of cast and Wanda go to the legacy default stream, the
// context's work (cuBLASLt, SparseGPT) to its own: a synchronisation between the two.
static int prune_cuda(double *seconds, float *w, uint8_t *mask, const float *x, size_t rows, size_t cols, size_t N,
                      int gpt, double s) {
    CudaCtx *c;
    if (cuda_ctx_create(&c, 0, (size_t)32 << 20) < 0) {
        fprintf(stderr, "oneshot_layer: --device cuda: %s\n", err_msg());
        return 1;
    }
    size_t nw = rows * cols, nx = N * cols;
    float *dw, *dw0, *dx, *dH = NULL, *dU = NULL;
    uint16_t *dxb;
    uint8_t *dmask, *ddead = NULL;
    double *dcolsq = NULL;
    void *scratch = NULL;
    RT_CHECK(cudaMalloc((void **)&dw, nw * sizeof *dw));   // (rows, cols) pruned in place
    RT_CHECK(cudaMalloc((void **)&dw0, nw * sizeof *dw0)); // (rows, cols) W as read
    RT_CHECK(cudaMalloc((void **)&dx, nx * sizeof *dx));   // (N, cols) fp32
    RT_CHECK(cudaMalloc((void **)&dxb, nx * sizeof *dxb)); // (N, cols) bf16 bits
    RT_CHECK(cudaMalloc((void **)&dmask, nw));
    if (gpt) {
        RT_CHECK(cudaMalloc((void **)&dH, cols * cols * sizeof *dH)); // (cols, cols) X^T X
        RT_CHECK(cudaMalloc((void **)&dU, cols * cols * sizeof *dU)); // (cols, cols) the factor
        RT_CHECK(cudaMalloc((void **)&ddead, cols));
        RT_CHECK(cudaMalloc(&scratch, sparsegpt_prune_scratch(rows)));
    } else {
        RT_CHECK(cudaMalloc((void **)&dcolsq, cols * sizeof *dcolsq));
    }
    RT_CHECK(cudaMemcpy(dw0, w, nw * sizeof *w, cudaMemcpyHostToDevice));
    RT_CHECK(cudaMemcpy(dx, x, nx * sizeof *x, cudaMemcpyHostToDevice));
    int rc = 0;
    for (int pass = 0; pass < 2 && rc == 0; pass++) { // the first untimed
        RT_CHECK(cudaMemcpy(dw, dw0, nw * sizeof *dw, cudaMemcpyDeviceToDevice));
        if (gpt) RT_CHECK(cudaMemset(dH, 0, cols * cols * sizeof *dH));
        else RT_CHECK(cudaMemset(dcolsq, 0, cols * sizeof *dcolsq));
        RT_CHECK(cudaDeviceSynchronize());
        double t0 = now_seconds();
        cast_bf16_cuda(dxb, dx, nx, NULL);
        if (gpt) {
            RT_CHECK(cudaDeviceSynchronize()); // (the cast on the default stream, the rest on c's)
            matmul_backward_cuda(c, NULL, dH, dxb, dxb, NULL, N, cols, cols, 0);
            rc = sparsegpt_factor_cuda(dU, ddead, dH, cols, 0.01, "the layer", c);
            if (rc == 0) sparsegpt_prune_cuda(dw, dmask, rows, cols, dU, ddead, s, NULL, scratch, c);
            else fprintf(stderr, "oneshot_layer: %s\n", err_msg());
        } else {
            wanda_accumulate_cuda(dcolsq, dxb, N, cols, NULL);
            wanda_prune_cuda(dw, dmask, rows, cols, dcolsq, s, NULL);
        }
        RT_CHECK(cudaGetLastError());
        RT_CHECK(cudaDeviceSynchronize());
        *seconds = now_seconds() - t0;
    }
    RT_CHECK(cudaMemcpy(w, dw, nw * sizeof *w, cudaMemcpyDeviceToHost));
    RT_CHECK(cudaMemcpy(mask, dmask, nw, cudaMemcpyDeviceToHost));
    void *bufs[] = {dw, dw0, dx, dxb, dmask, dH, dU, ddead, dcolsq, scratch};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) RT_CHECK(cudaFree(bufs[i]));
    cuda_ctx_free(c);
    return rc != 0;
}
#else
static int prune_cuda(double *seconds, float *w, uint8_t *mask, const float *x, size_t rows, size_t cols, size_t N,
                      int gpt, double s) {
    (void)seconds;
    (void)w;
    (void)mask;
    (void)x;
    (void)rows;
    (void)cols;
    (void)N;
    (void)s;
    (void)gpt;
    fprintf(stderr, "oneshot_layer: --device cuda: %s\n", cuda_info()); // ("built without CUDA (...)")
    return 1;
}
#endif

int main(int argc, char **argv) {
    blas_init(argv);
    const char *device = "cpu";
    if (argc > 2 && !strcmp(argv[1], "--device")) {
        device = argv[2];
        argv += 2;
        argc -= 2;
    }
    NMPattern nm = {0, 0};
    int bad = 0;
    if (argc > 2 && !strcmp(argv[1], "--pattern")) {
        bad = nm_parse(&nm, argv[2]) < 0;
        argv += 2;
        argc -= 2;
    }
    int on_device = !strcmp(device, "cuda");
    if (argc != 10 || bad || (!on_device && strcmp(device, "cpu")) || (on_device && nm.m) ||
        (strcmp(argv[1], "sparsegpt") && strcmp(argv[1], "wanda") && (strcmp(argv[1], "magnitude") || !nm.m))) {
        fprintf(stderr, "usage: oneshot_layer [--device cpu|cuda] [--pattern N:M] wanda|sparsegpt|magnitude S ROWS COLS "
                        "N W X OUT_W OUT_MASK\n");
        return 2;
    }
    int gpt = strcmp(argv[1], "sparsegpt") == 0 ? 1 : strcmp(argv[1], "wanda") == 0 ? 0 : -1;
    double s = atof(argv[2]);
    size_t rows = strtoul(argv[3], NULL, 10), cols = strtoul(argv[4], NULL, 10), N = strtoul(argv[5], NULL, 10);
    float *w = xmalloc(rows * cols * 4), *x = xmalloc(N * cols * 4);
    uint8_t *mask = xmalloc(rows * cols);
    if (!rw(argv[6], w, rows * cols * 4, 0) || !rw(argv[7], x, N * cols * 4, 0)) return 1;
    double seconds = 0;
    if (on_device) {
        if (prune_cuda(&seconds, w, mask, x, rows, cols, N, gpt, s)) return 1;
        fprintf(stderr, "seconds %.6f\ndevice %s\n", seconds, cuda_info());
    } else {
        double t0 = now_seconds();
        if (prune_cpu(w, mask, x, rows, cols, N, gpt, s, &nm)) return 1;
        seconds = now_seconds() - t0;
        fprintf(stderr, "seconds %.6f\nblas %s\n", seconds, openblas_get_config());
    }
    int ok = rw(argv[8], w, rows * cols * 4, 1) && rw(argv[9], mask, rows * cols, 1);
    free(w);
    free(x);
    free(mask);
    return ok ? 0 : 1;
}
