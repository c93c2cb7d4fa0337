// bench_spmv_gpu.c: batch-1 products of packed weights on a GPU (spmv_forward_cuda,
// lib/pack/spmv.cu) at LLaMA-2-7B's shapes, against two peers in the same program on the
// same matrices: the dense bf16 product through cuBLASLt (matmul_forward_cuda, one row
// of x) and cuSPARSE's CSR SpMV (cusparseSpMV, fp32 values, int32 indices). Also the
// floor: the format's bytes (pack_tensor_bytes) over the bandwidth of a device-to-device copy
// measured here.
//
//   bench_spmv_gpu [--json FILE] [--index tiles|bitmap|delta|sell] [--iters N]
//                  [--layout streams|pairs|auto] [--warm] [--pattern N:M]
//
// The matrices: one LLaMA-2-7B decoder layer (q_proj 4096 x 4096, gate_proj 11008 x 4096,
// down_proj 4096 x 11008), random weights with a random fraction S of each zeroed, for S
// in 70, 90, 95, 99%; packed by pack_write with bf16 values (--index tiles by default).
// Times are the mean of --iters products after 10 untimed ones, the device synchronised
// around the loop. L2-cold by default (issue 35): each side cycles through copies of its
// matrix, as many distinct device allocations as make 400 MB (an H200's L2 is 60 MB), as a
// decode step reads each weight once; --warm repeats one copy (the figures before
// 2026-11-29: the matrix stays in L2). --layout picks the device layout of the pack
// (BEST_SPMV_LAYOUT, spmv.h; "dev MB" is what it takes on the device). The results are
// compared with the dense product (printed: the largest difference over the largest |y|).
// --pattern N:M (issue 39): the matrices are N:M instead (N random columns of each M kept,
// sparsity 1 - N/M, the one row), packed nm, and ours is timed with both nm kernels
// (BEST_SPMV_NM=vec, the default, then lanes: spmv.cu), the table's "spmv us" vec's.
// Results: docs/benchmarks.md.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"      // defines: TRY_OR_DIE, DIE
#include "base/progress.h"   // defines: now_seconds
#include "base/cuda.h"         // defines: CudaCtx, cuda_ctx_create, cuda_info
#include "nn/kernel_math.h"  // defines: km_bf16_from_float
#include "nn/layers.h"       // defines: matmul_forward_cuda (BEST_CUDA)
#include "nn/model.h"        // defines: Model, model_plan, model_alloc
#include "pack/pack.h"       // defines: Pack, pack_open
#include "pack/pack_write.h" // defines: pack_write
#include "pack/spmv.h"       // defines: DevPackTensor, spmv_forward_cuda
#include "sparse/nm.h"       // defines: NMPattern, nm_parse

#ifdef BEST_CUDA
#include <cuda_runtime.h>
#ifdef BEST_CUSPARSE // the Makefile found cuSPARSE in the toolkit
#include <cusparse.h>
#endif

#define RT(call)                                                                                 \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess) DIE("%s: %s", #call, cudaGetErrorString(e_));                     \
    } while (0)
#ifdef BEST_CUSPARSE
#define SP(call)                                                                                 \
    do {                                                                                         \
        cusparseStatus_t s_ = (call);                                                            \
        if (s_ != CUSPARSE_STATUS_SUCCESS) DIE("%s: %s", #call, cusparseGetErrorString(s_));     \
    } while (0)
#endif


static uint64_t rng = 88172645463325252ull;
static double uniform(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static void *dev_copy(const void *h, size_t bytes) {
    void *d;
    RT(cudaMalloc(&d, bytes ? bytes : 1));
    if (bytes) RT(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
}

// The cuSPARSE peer: ysp (rows) = the CSR matrix (fp32 values, int32 indices) times x.
// Without cuSPARSE in the toolkit (the Makefile's probe) it is absent: ok 0, no times.
typedef struct {
    int ok;
#ifdef BEST_CUSPARSE
    cusparseHandle_t h;
    cusparseSpMatDescr_t A;
    cusparseDnVecDescr_t X, Y;
    void *buf;
#endif
} CsrPeer;

static void csr_init(CsrPeer *c, size_t R, size_t Cn, size_t nnz, void *drow, void *dcol, void *dval, float *x,
                     float *y) {
    memset(c, 0, sizeof *c);
#ifdef BEST_CUSPARSE
    float one = 1, zero = 0;
    size_t bsz = 0;
    SP(cusparseCreate(&c->h));
    SP(cusparseCreateCsr(&c->A, (int64_t)R, (int64_t)Cn, (int64_t)nnz, drow, dcol, dval, CUSPARSE_INDEX_32I,
                         CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
    SP(cusparseCreateDnVec(&c->X, (int64_t)Cn, x, CUDA_R_32F));
    SP(cusparseCreateDnVec(&c->Y, (int64_t)R, y, CUDA_R_32F));
    SP(cusparseSpMV_bufferSize(c->h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, c->A, c->X, &zero, c->Y, CUDA_R_32F,
                               CUSPARSE_SPMV_ALG_DEFAULT, &bsz));
    RT(cudaMalloc(&c->buf, bsz ? bsz : 1));
    c->ok = 1;
#else
    (void)R, (void)Cn, (void)nnz, (void)drow, (void)dcol, (void)dval, (void)x, (void)y;
#endif
}

static void csr_run(CsrPeer *c) {
#ifdef BEST_CUSPARSE
    float one = 1, zero = 0;
    SP(cusparseSpMV(c->h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, c->A, c->X, &zero, c->Y, CUDA_R_32F,
                    CUSPARSE_SPMV_ALG_DEFAULT, c->buf));
#else
    (void)c;
#endif
}

static void csr_free(CsrPeer *c) {
#ifdef BEST_CUSPARSE
    if (!c->ok) return;
    SP(cusparseDestroySpMat(c->A));
    SP(cusparseDestroyDnVec(c->X));
    SP(cusparseDestroyDnVec(c->Y));
    SP(cusparseDestroy(c->h));
    RT(cudaFree(c->buf));
#endif
    memset(c, 0, sizeof *c);
}

// One product of each kind (0 ours, 1 dense through cuBLASLt, 2 cuSPARSE), timed; each
// kind cycles through its copies (L2-cold), copy 0 being the one checked.
#define ROTATE_BYTES 400e6
#define MAX_COPIES 64
typedef struct {
    DevPackTensor d[MAX_COPIES];
    int nd;
    CudaCtx *ctx;
    CsrPeer csr[MAX_COPIES];
    int nc;
    float *y, *x;
    uint16_t *xbf, *wbf[MAX_COPIES];
    int nw;
    size_t rows, cols;
    unsigned turn;
} Bench;

// Copies of something of `bytes` that make ROTATE_BYTES (1 with warm).
static int copies(double bytes, int warm) {
    double k = warm || bytes <= 0 ? 1 : ceil(ROTATE_BYTES / bytes);
    return k > MAX_COPIES ? MAX_COPIES : (int)k;
}

static void run_once(Bench *b, int what) {
    unsigned i = b->turn++;
    if (what == 0) spmv_forward_cuda(b->y, b->x, &b->d[i % b->nd], NULL, 0, 0);
    else if (what == 1) matmul_forward_cuda(b->ctx, b->y, b->xbf, b->wbf[i % b->nw], NULL, 1, b->cols, b->rows, 0);
    else csr_run(&b->csr[i % b->nc]);
}

// Seconds per call of the product `what`, the mean of iters; NaN for an absent peer.
static double time_it(Bench *b, int what, int iters) {
    if (what == 2 && !b->csr[0].ok) return NAN;
    for (int i = 0; i < 10; i++) run_once(b, what);
    RT(cudaDeviceSynchronize());
    double t = now_seconds();
    for (int i = 0; i < iters; i++) run_once(b, what);
    RT(cudaDeviceSynchronize());
    return (now_seconds() - t) / iters;
}
#endif

int main(int argc, char **argv) {
    err_set_prog("bench_spmv_gpu");
#ifndef BEST_CUDA
    (void)argc;
    (void)argv;
    printf("bench_spmv_gpu: built without CUDA (no nvcc): nothing to run\n");
    return 0;
#else
    const char *json_out = NULL, *index = "tiles", *layout = NULL, *pattern = NULL;
    int iters = 200, warm = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--json")) json_out = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--index")) index = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--iters")) iters = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--layout")) layout = argv[++i];
        else if (!strcmp(argv[i], "--warm")) warm = 1;
        else if (i + 1 < argc && !strcmp(argv[i], "--pattern")) pattern = argv[++i];
        else {
            fprintf(stderr, "usage: bench_spmv_gpu [--json FILE] [--index tiles|bitmap|delta|sell] [--iters N] "
                            "[--layout streams|pairs|auto] [--warm] [--pattern N:M]\n");
            return 2;
        }
    }
    if (layout) setenv("BEST_SPMV_LAYOUT", layout, 1);
    if (devpack_layout_env() < 0) DIE("--layout %s: expected streams, pairs or auto", layout);
    PackIndex pi = !strcmp(index, "bitmap") ? INDEX_BITMAP : !strcmp(index, "delta") ? INDEX_DELTA
                 : !strcmp(index, "sell")   ? INDEX_SELL
                                            : INDEX_TILES;
    if (iters < 1 || (pi == INDEX_TILES && strcmp(index, "tiles"))) DIE("--index %s / --iters %d", index, iters);
    NMPattern pat = {0, 0};
    if (pattern) {
        if (nm_parse(&pat, pattern) < 0) DIE("--pattern %s: %s", pattern, err_msg());
        pi = INDEX_NM;
        pack_plan_pattern(pat.n, pat.m);
    }
    CudaCtx *ctx;
    TRY_OR_DIE(cuda_ctx_create(&ctx, 0, (size_t)32 << 20));
    printf("# device: %s\n", cuda_info());
    // the peer of every byte count: a device-to-device copy of 1 GiB (read + write)
    size_t cb = (size_t)1 << 30;
    void *c0, *c1;
    RT(cudaMalloc(&c0, cb));
    RT(cudaMalloc(&c1, cb));
    RT(cudaMemcpy(c1, c0, cb, cudaMemcpyDeviceToDevice));
    RT(cudaDeviceSynchronize());
    double t = now_seconds();
    for (int i = 0; i < 5; i++) RT(cudaMemcpy(c1, c0, cb, cudaMemcpyDeviceToDevice));
    RT(cudaDeviceSynchronize());
    double bw = 2.0 * cb * 5 / (now_seconds() - t);
    RT(cudaFree(c0));
    RT(cudaFree(c1));
    printf("# bandwidth of a device-to-device copy: %.0f GB/s (read + write)\n", bw / 1e9);
#ifndef BEST_CUSPARSE
    printf("# cuSPARSE: not in this toolkit at build time: its column stays empty\n");
#endif
    static const char cfg[] =
        "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_size\":4096,"
        "\"intermediate_size\":11008,\"num_hidden_layers\":1,\"num_attention_heads\":32,\"num_key_value_heads\":32,"
        "\"vocab_size\":256,\"max_position_embeddings\":4096,\"rms_norm_eps\":1e-5,\"rope_theta\":10000.0,"
        "\"tie_word_embeddings\":false}";
    static const char *const names[3] = {"model.layers.0.self_attn.q_proj.weight", "model.layers.0.mlp.gate_proj.weight",
                                         "model.layers.0.mlp.down_proj.weight"};
    double S[4] = {0.70, 0.90, 0.95, 0.99};
    int nS = 4;
    if (pattern) S[0] = 1.0 - (double)pat.n / pat.m, nS = 1;
    FILE *jf = json_out ? fopen(json_out, "w") : NULL;
    if (json_out && !jf) DIE("%s: cannot write", json_out);
    if (jf)
        fprintf(jf, "{\"device\":\"%s\",\"bandwidth\":%.0f,\"index\":\"%s\",\"layout\":\"%s\",\"l2\":\"%s\","
                    "\"results\":[", cuda_info(), bw, index, layout ? layout : "streams", warm ? "warm" : "cold");
    printf("# %s: %s\n", warm ? "L2-warm (one copy of each matrix)" : "L2-cold (each side cycles through 400 MB of copies)",
           layout ? layout : "streams");
    printf("%-10s %6s %6s %7s %10s %10s %10s %9s %9s %10s %9s\n", "shape", "S", "MB", "dev MB", "spmv us", "dense us",
           "cusparse us", "x dense", "x cusp", "floor us", "x floor");
    int first = 1;
    for (int k = 0; k < nS; k++) {
        Model m;
        memset(&m, 0, sizeof m);
        TRY_OR_DIE(model_plan(&m, cfg, strlen(cfg), "bench config", 0));
        model_alloc(&m);
        m.dtype = ST_F32;
        for (size_t i = 0; i < m.n_params; i++) m.params[i] = (float)(uniform() - 0.5) * 0.04f;
        for (int i = 0; i < m.n_info; i++) {
            if (!m.info[i].prunable) continue;
            if (!pattern) {
                for (size_t j = 0; j < m.info[i].numel; j++)
                    if (uniform() < S[k]) m.params[m.info[i].offset + j] = 0;
                continue;
            }
            size_t M = (size_t)pat.m, Z = (size_t)(pat.m - pat.n);
            for (size_t g = 0; g < m.info[i].numel; g += M) // each group: Z of its M columns zeroed, at random
                for (size_t z = 0; z < Z;) {
                    float *w = m.params + m.info[i].offset + g + (size_t)(uniform() * (double)M) % M;
                    if (*w != 0) *w = 0, z++;
                }
        }
        char path[64];
        snprintf(path, sizeof path, "/tmp/bench_spmv_gpu.%d.pack", (int)getpid());
        TRY_OR_DIE(pack_write(path, &m, QUANT_BF16, pi));
        Pack p;
        TRY_OR_DIE(pack_open(&p, path));
        for (int n = 0; n < 3; n++) {
            const PackTensor *pt = pack_find(&p, names[n]);
            if (!pt) DIE("%s: no %s", path, names[n]);
            const float *w = NULL; // the same tensor in the model's block
            for (int i = 0; i < m.n_info; i++)
                if (!strcmp(m.info[i].name, names[n])) w = m.params + m.info[i].offset;
            if (!w) DIE("no %s in the model's table", names[n]);
            size_t R = pt->rows, Cn = pt->cols, nnz = 0;
            // the peers' inputs: bf16 dense weights, CSR (fp32 values of the bf16 weights)
            uint16_t *wbf = xmalloc(R * Cn * sizeof *wbf);
            int32_t *rowp = xmalloc((R + 1) * sizeof *rowp);
            for (size_t i = 0; i < R * Cn; i++) wbf[i] = km_bf16_from_float(w[i]);
            for (size_t i = 0; i < R * Cn; i++) nnz += w[i] != 0;
            int32_t *coli = xmalloc((nnz ? nnz : 1) * sizeof *coli);
            float *vals = xmalloc((nnz ? nnz : 1) * sizeof *vals), *x = xmalloc(Cn * sizeof *x);
            uint16_t *xb = xmalloc(Cn * sizeof *xb);
            size_t e = 0;
            for (size_t r = 0; r < R; r++) {
                rowp[r] = (int32_t)e;
                for (size_t c = 0; c < Cn; c++)
                    if (w[r * Cn + c] != 0) {
                        coli[e] = (int32_t)c;
                        vals[e++] = km_float_from_bf16(wbf[r * Cn + c]);
                    }
            }
            rowp[R] = (int32_t)e;
            for (size_t c = 0; c < Cn; c++) {
                xb[c] = km_bf16_from_float((float)(uniform() - 0.5));
                x[c] = km_float_from_bf16(xb[c]); // both sides multiply the same x
            }
            static Bench b; // (64 copies of each: kept off the stack)
            memset(&b, 0, sizeof b);
            b.ctx = ctx;
            b.rows = R;
            b.cols = Cn;
            TRY_OR_DIE(devpack_upload(&b.d[0], pt));
            b.nd = copies((double)b.d[0].bytes, warm);
            for (int i = 1; i < b.nd; i++) TRY_OR_DIE(devpack_upload(&b.d[i], pt));
            b.x = dev_copy(x, Cn * 4);
            b.xbf = dev_copy(xb, Cn * 2);
            b.nw = copies((double)R * Cn * 2, warm);
            for (int i = 0; i < b.nw; i++) b.wbf[i] = dev_copy(wbf, R * Cn * 2);
            RT(cudaMalloc((void **)&b.y, R * 4));
            float *ysp;
            RT(cudaMalloc((void **)&ysp, R * 4));
            b.nc = copies((double)(R + 1) * 4 + (double)nnz * 8, warm);
            void *drow[MAX_COPIES], *dcol[MAX_COPIES], *dval[MAX_COPIES];
            for (int i = 0; i < b.nc; i++) {
                drow[i] = dev_copy(rowp, (R + 1) * 4);
                dcol[i] = dev_copy(coli, nnz * 4);
                dval[i] = dev_copy(vals, nnz * 4);
                csr_init(&b.csr[i], R, Cn, nnz, drow[i], dcol[i], dval[i], b.x, ysp);
            }
            double ts = time_it(&b, 0, iters), td = time_it(&b, 1, iters), tc = time_it(&b, 2, iters), tl = NAN;
            if (pattern) { // the lanes kernel on the same copies
                setenv("BEST_SPMV_NM", "lanes", 1);
                tl = time_it(&b, 0, iters);
                unsetenv("BEST_SPMV_NM");
            }
            // correctness: ours against the dense product and cuSPARSE's
            float *y1 = xmalloc(R * 4), *y2 = xmalloc(R * 4), *y3 = xmalloc(R * 4);
            b.turn = 0; // copy 0 of each
            run_once(&b, 0);
            RT(cudaDeviceSynchronize());
            RT(cudaMemcpy(y1, b.y, R * 4, cudaMemcpyDeviceToHost));
            b.turn = 0;
            run_once(&b, 1);
            RT(cudaDeviceSynchronize());
            RT(cudaMemcpy(y2, b.y, R * 4, cudaMemcpyDeviceToHost));
            b.turn = 0;
            if (b.csr[0].ok) run_once(&b, 2);
            RT(cudaDeviceSynchronize());
            RT(cudaMemcpy(y3, ysp, R * 4, cudaMemcpyDeviceToHost));
            double dmax = 0, ymax = 0, cmax = b.csr[0].ok ? 0 : NAN;
            for (size_t r = 0; r < R; r++) {
                dmax = fmax(dmax, fabs((double)y1[r] - y2[r]));
                if (b.csr[0].ok) cmax = fmax(cmax, fabs((double)y1[r] - y3[r]));
                ymax = fmax(ymax, fabs((double)y2[r]));
            }
            double floor_s = (double)pack_tensor_bytes(pt) / (bw / 2); // reads only: half the copy's traffic
            char shape[48]; // two size_t in decimal and an x: at most 41 bytes
            snprintf(shape, sizeof shape, "%zux%zu", R, Cn);
            printf("%-10s %5.0f%% %6.1f %7.1f %10.1f %10.1f %10.1f %8.2fx %8.2fx %10.1f %8.2fx  (%s; |ours - dense| "
                   "%.1e, |ours - cusparse| %.1e of max |y|)\n",
                   shape, 100 * S[k], (double)pack_tensor_bytes(pt) / 1e6, (double)b.d[0].bytes / 1e6, ts * 1e6, td * 1e6,
                   tc * 1e6, td / ts, tc / ts, floor_s * 1e6, ts / floor_s,
                   b.d[0].layout == DEVPACK_PAIRS ? "pairs" : "streams", dmax / ymax, cmax / ymax);
            if (jf)
                fprintf(jf, "%s{\"shape\":\"%s\",\"sparsity\":%.2f,\"bytes\":%zu,\"device_bytes\":%zu,\"layout\":\"%s\","
                            "\"spmv_s\":%.9f,\"dense_s\":%.9f,\"cusparse_s\":%.9f,\"floor_s\":%.9f}",
                        first ? "" : ",", shape, S[k], pack_tensor_bytes(pt), b.d[0].bytes,
                        b.d[0].layout == DEVPACK_PAIRS ? "pairs" : "streams", ts, td, tc, floor_s);
            if (jf && pattern) fprintf(jf, ",{\"shape\":\"%s\",\"pattern\":\"%s\",\"nm_lanes_s\":%.9f}", shape, pattern, tl);
            if (pattern)
                printf("%-10s %s: the nm kernels: vec %.1f us, lanes %.1f us (vec %.2fx lanes; %s)\n", shape, pattern,
                       ts * 1e6, tl * 1e6, tl / ts, b.d[0].enc == PACK_NM ? "nm" : "NOT nm: the writer chose another");
            first = 0;
            for (int i = 0; i < b.nc; i++) {
                csr_free(&b.csr[i]);
                RT(cudaFree(drow[i]));
                RT(cudaFree(dcol[i]));
                RT(cudaFree(dval[i]));
            }
            for (int i = 0; i < b.nw; i++) RT(cudaFree(b.wbf[i]));
            for (int i = 0; i < b.nd; i++) devpack_free(&b.d[i]);
            void *frees[] = {b.x, b.xbf, b.y, ysp};
            for (size_t i = 0; i < sizeof frees / sizeof *frees; i++) RT(cudaFree(frees[i]));
            free(y1), free(y2), free(y3), free(wbf), free(rowp), free(coli), free(vals), free(x), free(xb);
        }
        pack_close(&p);
        unlink(path);
        model_free(&m);
    }
    if (jf) {
        fprintf(jf, "]}\n");
        if (fclose(jf) != 0) DIE("%s: cannot write", json_out);
    }
    cuda_ctx_free(ctx);
    return 0;
#endif
}
