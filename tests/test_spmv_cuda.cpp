// test_spmv_cuda.cpp: the GPU products of packed tensors (lib/pack/spmv.cu,
// spmv_forward_cuda) against the CPU's (lib/pack/spmv.c, spmv_forward with its portable
// kernels, which tests/test_spmv.c checks against a dense reference), on real packs:
// the tiny LLaMA fixture with 0% and 90% of its prunable weights zeroed and the Qwen3
// fixture with 99.9% (rows 24, 48, 64 and cols 32, 48, 64: panels of 32 cut short,
// empty rows), and a one-layer model whose down_proj is (32, 2080) at 30% (panels of
// many slots: runs of more than 32 slots in the tiles kernel), written by pack_write with every encoding the writer has (dense at 0%
// with --index size; bitmap, delta, tiles, sell forced; sell falls back for I8/I4) and
// every value type (F32, F16 from an
// F16 folder, BF16, I8, I4); and nm packs (2:4, 4:8, 3:8, every value type) of the fixtures
// pruned N:M, for the nm kernel. Every tensor of each pack (the dense embedding, head and
// 1-D norms included) is uploaded (devpack_upload) and multiplied by a random x, once
// plain and once with a bias and accumulation into a random y; results must agree with
// the CPU's within 2e-6 of sum |w x| of the row (plus |b| and |y| with them), as
// tests/test_spmv.c asks of the CPU against its reference: the device sums in other
// orders (lanes and butterflies, a panel's slots in runs; delta with one running sum where
// the CPU keeps four). The F16 decoder is checked on all
// 65536 bit patterns against io/safetensors.c's. spmv_decode_cuda (the rows of a packed
// tensor on the device: embeddings, and evaluation's bf16 operands) must give
// pack_decode_rows' bits, all rows in fp32 and as bf16, and rows picked by ids, on every
// pack. The upload, free and product go through
// nn/weight.h's device operations (devpack_weight_*) as a packed model's do.
//
// Built two ways, as test_kernels is: build/tests/test_spmv_cuda (g++, spmv.cu included
// and run by tests/cuda_emu.h) and build/tests/test_spmv_cuda_gpu (nvcc, libbest's
// kernels on a GPU; "skip - no CUDA device" without one; never run yet).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vector>

#ifndef TEST_ON_GPU
#define KM_GRID_CAP 3u   // tiny grids: the grid-stride loops run at tiny sizes
#define BEST_KAPI static // this file's own copy of the kernels' API
#endif
extern "C" { // C headers without their own guards, before spmv.cu includes them
#include "io/safetensors.h"  // defines: st_f16_to_f32
#include "nn/model.h"        // defines: Model, model_load, model_save
#include "pack/pack.h"       // defines: Pack, pack_open
#include "pack/pack_write.h" // defines: pack_write
#include "sparse/nm.h"       // defines: NMPattern, nm_parse, nm_prune
}
#ifdef TEST_ON_GPU
#include "base/cuda.h" // defines: CUDA_CHECK, cuda_device_count
#define MODE "gpu"
#else
#include "cuda_emu.h"
#include "pack/spmv.cu"
#define MODE "emulated"
#endif
#include "base/error.h" // defines: err_msg
#include "nn/decode_fused.h" // defines: DecodeJob
#include "nn/kernel_math.h" // defines: km_bf16_from_float, km_swiglu_forward
#include "pack/spmv.h" // defines: spmv_forward, spmv_set_isa, DevPackTensor, devpack_weight_fused
#include "test.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_u64() {
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1Dull;
}
static float uniform_pm1() { return (float)((double)(next_u64() >> 11) / 4503599627370496.0 - 1.0); }

static float *dev_floats(const std::vector<float> &h) {
    float *p;
    CUDA_CHECK(cudaMalloc((void **)&p, (h.size() ? h.size() : 1) * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(p, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
    return p;
}

// spmv_decode_cuda of t (on the device as dt) against pack_decode_rows: every row in fp32
// and as bf16 bits (bitwise: the same dequantization, then km_bf16_from_float), and rows
// picked by ids (the last, the first, then every third, an embedding's lookup) in fp32.
static bool check_decode(const PackTensor *t, const void *dt) {
    size_t R = t->rows, C = t->cols, n = R * C;
    std::vector<int32_t> ids = {(int32_t)R - 1, 0};
    for (size_t r = 1; r < R; r += 3) ids.push_back((int32_t)r);
    size_t cap = n > ids.size() * C ? n : ids.size() * C;
    std::vector<float> want(n), got(cap);
    std::vector<uint16_t> gotb(n);
    pack_decode_rows(want.data(), t, 0, R);
    void *dout;
    CUDA_CHECK(cudaMalloc(&dout, (cap ? cap : 1) * sizeof(float)));
    bool ok = true;
    for (int bf = 0; bf < 2; bf++) {
        CUDA_CHECK(cudaMemset(dout, 0xff, n * sizeof(float))); // NaN: a place never written
        spmv_decode_cuda(dout, bf, NULL, 0, dt, 0);
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemcpy(bf ? (void *)gotb.data() : (void *)got.data(), dout, n * (bf ? 2 : 4),
                              cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n && ok; i++)
            ok = bf ? gotb[i] == km_bf16_from_float(want[i]) : memcmp(&got[i], &want[i], 4) == 0;
    }
    int32_t *dids;
    CUDA_CHECK(cudaMalloc((void **)&dids, ids.size() * sizeof(int32_t)));
    CUDA_CHECK(cudaMemcpy(dids, ids.data(), ids.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(dout, 0xff, ids.size() * C * sizeof(float)));
    spmv_decode_cuda(dout, 0, dids, ids.size(), dt, 0);
    CUDA_CHECK(cudaDeviceSynchronize());
    CUDA_CHECK(cudaMemcpy(got.data(), dout, ids.size() * C * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t u = 0; u < ids.size() && ok; u++)
        ok = memcmp(&got[u * C], &want[(size_t)ids[u] * C], C * sizeof(float)) == 0;
    CUDA_CHECK(cudaFree(dids));
    CUDA_CHECK(cudaFree(dout));
    return ok;
}

static size_t n_pairs, n_uploads; // tensors uploaded in the pairs layout, and in all
static size_t n_nm;               // tensors uploaded as nm streams (their own kernel)
static size_t n_nm_vec;           // of which the vec kernel takes (spmv.cu's nm_vec_ok)

// spmv.cu's nm_vec_ok, from the outside: 2-byte values, a multiple of 8 values a row, the
// device copy 16-byte aligned.
static int nm_vec_applies(const PackTensor *t, const DevPackTensor &d) {
    size_t per = t->cols / t->nm_m * t->nm_n;
    return (d.val == PACK_BF16 || d.val == PACK_F16) && per % 8 == 0 && ((uintptr_t)d.values & 15) == 0;
}
static size_t fused_cases, fused_bad, fused_refused, fused_streams; // check_fused's counts

// devpack_weight_fused (nn/decode_fused.h) on d against the unfused product on the same
// operand, bit for bit, at each width of the pairs kernel: one weight with residual and
// bias (spmv_forward_cuda accumulating into a copy of the residual, on x rounded to bf16
// as the fused kernel stages it), and gate|up + SwiGLU with d as both (h in bf16 and as
// floats, from the unfused products' values). A tensor in the streams layout is refused.
static void check_fused(const DevPackTensor &d, const std::vector<float> &x, const std::vector<float> &b,
                        const std::vector<float> &y0) {
    if (d.layout != DEVPACK_PAIRS) {
        fused_streams++;
        DecodeJob j = {};
        j.IC = d.cols, j.n = 1, j.rows[0] = d.rows;
        const void *dt[1] = {&d};
        fused_refused += devpack_weight_fused(&j, dt, 0) == -1;
        return;
    }
    std::vector<float> xq(x.size());
    for (size_t c = 0; c < x.size(); c++) xq[c] = km_float_from_bf16(km_bf16_from_float(x[c]));
    float *dx = dev_floats(x), *dxq = dev_floats(xq), *db = dev_floats(b), *dres = dev_floats(y0);
    float *dy = dev_floats(y0), *dz = dev_floats(y0), *dhr = dev_floats(y0);
    uint16_t *dhb;
    CUDA_CHECK(cudaMalloc((void **)&dhb, d.rows * sizeof(uint16_t)));
    std::vector<float> want(d.rows), got(d.rows), hr(d.rows);
    std::vector<uint16_t> hb(d.rows);
    for (int lanes = 32; lanes >= 4; lanes /= 2) {
        DevPackTensor e = d;
        e.pair_lanes = lanes;
        const void *dt[2] = {&e, &e};
        DecodeJob j = {};
        j.x = dx, j.IC = d.cols, j.n = 1, j.rows[0] = d.rows, j.y[0] = dz, j.res[0] = dres, j.b[0] = db;
        CUDA_CHECK(cudaMemcpy(dy, y0.data(), d.rows * sizeof(float), cudaMemcpyHostToDevice));
        spmv_forward_cuda(dy, dxq, &e, db, 1, 0); // the residual's copy, accumulated
        int rc = devpack_weight_fused(&j, dt, 0);
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemcpy(want.data(), dy, d.rows * sizeof(float), cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(got.data(), dz, d.rows * sizeof(float), cudaMemcpyDeviceToHost));
        fused_bad += rc != 0 || memcmp(got.data(), want.data(), d.rows * sizeof(float)) != 0;
        // gate|up with d as both: h = silu(g) * g, g = W x' + b
        spmv_forward_cuda(dy, dxq, &e, db, 0, 0);
        j.n = 2, j.rows[1] = d.rows, j.b[1] = db, j.swiglu = 1, j.hb = dhb, j.hr = dhr, j.res[0] = NULL;
        rc = devpack_weight_fused(&j, dt, 0);
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemcpy(want.data(), dy, d.rows * sizeof(float), cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(hb.data(), dhb, d.rows * sizeof(uint16_t), cudaMemcpyDeviceToHost));
        CUDA_CHECK(cudaMemcpy(hr.data(), dhr, d.rows * sizeof(float), cudaMemcpyDeviceToHost));
        int same = rc == 0;
        for (size_t r = 0; r < d.rows && same; r++) {
            uint16_t h = km_bf16_from_float(km_swiglu_forward(want[r], want[r]));
            same = hb[r] == h && hr[r] == km_float_from_bf16(h);
        }
        fused_bad += !same;
        fused_cases += 2;
    }
    for (float *p : {dx, dxq, db, dres, dy, dz, dhr}) CUDA_CHECK(cudaFree(p));
    CUDA_CHECK(cudaFree(dhb));
}

// The product of every tensor of the pack at path on the device and on the CPU; returns
// the worst error relative to sum |w x| of a row, over all tensors, plain and with bias + acc.
// And check_decode of every tensor.
static double check_pack(const char *path, int *bad) {
    Pack p;
    if (pack_open(&p, path) < 0) {
        T_OK(0, "pack_open %s: %s", path, err_msg());
        *bad = 1;
        return INFINITY;
    }
    double worst = 0;
    for (int i = 0; i < p.n; i++) {
        const PackTensor *t = &p.t[i];
        std::vector<float> x(t->cols), b(t->rows), y0(t->rows), want(t->rows), got(t->rows), w(t->cols);
        for (auto &v : x) v = uniform_pm1();
        for (auto &v : b) v = uniform_pm1();
        for (auto &v : y0) v = uniform_pm1();
        std::vector<double> mag(t->rows); // sum |w x| per row: the scale of a sum's rounding
        for (size_t r = 0; r < t->rows; r++) {
            pack_decode_rows(w.data(), t, r, r + 1);
            for (size_t c = 0; c < t->cols; c++) mag[r] += fabs((double)w[c] * x[c]);
        }
        void *dt; // the weight operations' DevPackTensor (devpack_upload's)
        size_t dbytes;
        if (devpack_weight_upload(&dt, &dbytes, t) < 0) {
            T_OK(0, "%s: devpack_weight_upload %s: %s", path, t->name, err_msg());
            *bad = 1;
            continue;
        }
        const DevPackTensor &d = *(const DevPackTensor *)dt;
        n_pairs += d.layout == DEVPACK_PAIRS;
        n_nm += d.layout == DEVPACK_STREAMS && d.enc == PACK_NM;
        n_uploads++;
        if (!check_decode(t, dt)) {
            T_OK(0, "%s: %s (%s): spmv_decode_cuda's rows are not pack_decode_rows'", path, t->name,
                 spmv_kernel_name(t));
            *bad = 1;
        }
        float *dx = dev_floats(x), *db = dev_floats(b);
        // plain; then with bias and accumulation; then, in the pairs layout, plain at each
        // width of its kernel (32, 16, 8, 4 lanes a row); nm: both again with the lanes
        // kernel (BEST_SPMV_NM=lanes; the default, vec, where it applies)
        int is_nm = d.layout == DEVPACK_STREAMS && d.enc == PACK_NM;
        int runs = d.layout == DEVPACK_PAIRS ? 6 : is_nm ? 4 : 2;
        for (int run = 0; run < runs; run++) {
            int with = run % 2 == 1 && (is_nm || run == 1);
            DevPackTensor e = d;
            if (run >= 2 && !is_nm) e.pair_lanes = 32 >> (run - 2);
            if (is_nm && run == 2) setenv("BEST_SPMV_NM", "lanes", 1);
            n_nm_vec += is_nm && run == 0 && nm_vec_applies(t, d);
            float *dy = dev_floats(with ? y0 : std::vector<float>(t->rows, NAN));
            if (with) devpack_weight_matvec(dy, dx, dt, db, 1, 0);
            else spmv_forward_cuda(dy, dx, &e, NULL, 0, 0);
            CUDA_CHECK(cudaDeviceSynchronize());
            CUDA_CHECK(cudaMemcpy(got.data(), dy, t->rows * sizeof(float), cudaMemcpyDeviceToHost));
            CUDA_CHECK(cudaFree(dy));
            want = y0;
            spmv_forward(want.data(), x.data(), t, with ? b.data() : NULL, with);
            double rel = 0;
            for (size_t r = 0; r < t->rows; r++) {
                double e = fabs((double)got[r] - want[r]) / (mag[r] + (with ? fabs(b[r]) + fabs(y0[r]) : 0) + 1e-30);
                rel = fmax(rel, e != e ? INFINITY : e); // a NaN (a row never written) is the worst
            }
            if (rel > worst) worst = rel;
            if (!(rel <= 2e-6)) {
                T_OK(0, "%s: %s (%s%s, %d lanes) %s: error %.2e of sum |w x|", path, t->name, spmv_kernel_name(t),
                     e.layout == DEVPACK_PAIRS ? ", pairs" : "", e.pair_lanes, with ? "with bias and acc" : "plain", rel);
                *bad = 1;
            }
        }
        unsetenv("BEST_SPMV_NM");
        check_fused(d, x, b, y0);
        CUDA_CHECK(cudaFree(dx));
        CUDA_CHECK(cudaFree(db));
        devpack_weight_free(dt);
    }
    pack_close(&p);
    return worst;
}

// The packs of fixture (a folder of tests/fixtures/model, or src) at each fraction of
// zeros in sparsity (n).
// With pattern ("2:4"), every prunable tensor is then pruned to it (nm_prune, magnitude)
// and packed nm alone.
static void check_fixture(const char *fixture, const char *src_dir, const double *sparsity, int n,
                          const char *only_ix = NULL, const char *only_val = NULL, // those alone
                          const char *pattern = NULL) {
    static const struct { PackIndex index; const char *name; } indexes[] = {
        {INDEX_SIZE, "size"}, {INDEX_BITMAP, "bitmap"}, {INDEX_DELTA, "delta"}, {INDEX_TILES, "tiles"},
        {INDEX_SELL, "sell"}, {INDEX_NM, "nm"}};
    NMPattern pat = {0, 0};
    if (pattern) nm_parse(&pat, pattern);
    static const struct { PackQuant q; int dtype; const char *name; } vals[] = {
        {QUANT_NONE, ST_F32, "F32"}, {QUANT_NONE, ST_F16, "F16"}, {QUANT_BF16, ST_F32, "BF16"},
        {QUANT_INT8, ST_F32, "I8"}, {QUANT_INT4, ST_F32, "I4"}};
    const char *tmp = getenv("TMPDIR");
    char src[256], dir[300], path[320];
    if (src_dir) snprintf(src, sizeof src, "%s", src_dir);
    else snprintf(src, sizeof src, "tests/fixtures/model/%s", fixture);
    for (int k = 0; k < n; k++) {
        double s = sparsity[k];
        Model m;
        if (!T_OK(model_load(&m, src) == 0, "%s: load %s", fixture, src)) return;
        for (int i = 0; i < m.n_info; i++)
            if (m.info[i].prunable)
                for (size_t j = 0; j < m.info[i].numel; j++)
                    if ((double)(next_u64() >> 11) / 9007199254740992.0 < s) m.params[m.info[i].offset + j] = 0;
        for (int i = 0; pat.m && i < m.n_info; i++)
            if (m.info[i].prunable) {
                std::vector<uint8_t> mk(m.info[i].numel);
                nm_prune(m.params + m.info[i].offset, mk.data(), (size_t)m.info[i].shape[0], (size_t)m.info[i].shape[1],
                         NULL, &pat);
            }
        for (const auto &v : vals) {
            if (only_val && strcmp(only_val, v.name) != 0) continue;
            snprintf(dir, sizeof dir, "%s/test_spmv_cuda.%d.%s.%s", tmp && *tmp ? tmp : "/tmp", (int)getpid(),
                     fixture, v.name);
            Model f;
            int rc = model_save(&m, dir, v.dtype);
            if (rc == 0) rc = model_load(&f, dir);
            if (rc < 0) {
                T_OK(0, "%s: save and load as %s: %s", fixture, v.name, err_msg());
                continue;
            }
            for (const auto &ix : indexes) {
                if ((ix.index == INDEX_NM) != (pattern != NULL)) continue; // nm: the pruned copies alone
                if (!pattern && s == 0.0 && ix.index != INDEX_SIZE) continue; // dense: every element stored
                if (!pattern && s > 0.0 && ix.index == INDEX_SIZE) continue;
                if (only_ix && strcmp(only_ix, ix.name) != 0) continue;
                snprintf(path, sizeof path, "%s.%s.pack", dir, ix.name);
                if (pack_write(path, &f, v.q, ix.index) < 0) {
                    T_OK(0, "%s: pack_write %s: %s", fixture, path, err_msg());
                    continue;
                }
                int bad = 0;
                double worst = check_pack(path, &bad);
                T_OK(!bad, "%s %s, %.1f%% zeros%s%s, --index %s, values %s: every tensor's product as the CPU's "
                     "(worst %.1e of sum |w x|, at most 2e-6)", MODE, fixture, 100 * s, pattern ? " then " : "",
                     pattern ? pattern : "", ix.name, v.name, worst);
                unlink(path);
            }
            model_free(&f);
            char cmd[400];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
            if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
        }
        model_free(&m);
    }
}

int main() {
#ifdef TEST_ON_GPU
    T_CUDA_DEVICE_OR_SKIP();
#else
    // the F16 decoder against io/safetensors.c's, every bit pattern (the kernels' own)
    size_t diff = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float a = spmv_f16_to_f32((uint16_t)h), b = st_f16_to_f32((uint16_t)h);
        diff += memcmp(&a, &b, sizeof a) != 0;
    }
    T_OK(diff == 0, "spmv_f16_to_f32 = st_f16_to_f32 on all 65536 halves (%zu differ)", diff);
#endif
    spmv_set_isa(SPMV_PORTABLE); // the CPU's portable kernels: the order of sums the GPU kernels follow
    const double llama[] = {0.0, 0.9}, qwen3[] = {0.999}, wide[] = {0.3}; // (the emulator's time)
    check_fixture("llama", NULL, llama, 2);
    check_fixture("qwen3", NULL, qwen3, 1);
    // nm (its own kernel): 2:4, 4:8 and 3:8 (3-bit positions that straddle bytes), after 30%
    // random zeros (groups short of N: padding values), every value type
    const double nm_zeros[] = {0.3};
    check_fixture("llama", NULL, nm_zeros, 1, "nm", NULL, "2:4");
    check_fixture("qwen3", NULL, nm_zeros, 1, "nm", NULL, "4:8");
    check_fixture("llama", NULL, nm_zeros, 1, "nm", NULL, "3:8");
    T_OK(n_nm >= 3 * 5 * 14, "%s nm: %zu tensors multiplied by the nm kernel (every prunable one of the 15 packs)", MODE, n_nm);
    T_OK(n_nm_vec >= 2 * 2 * 14, "%s nm: %zu of them by the vec kernel too (BF16 and F16 values; every one of the "
         "2:4 and 4:8 packs, 3:8's with a multiple of 8 values a row), and all by the lanes one", MODE, n_nm_vec);
    // A panel of many slots: down_proj (32, 2080) at 30% zeros has ~25 slots in each of its
    // 65 tiles, so each of the tiles kernel's 32 warps walks a run of ~50 slots, in more
    // than one group of 32 (the fixtures' panels give a warp 2 slots at most)
    static const char wide_cfg[] =
        "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 32, "
        "\"intermediate_size\": 2080, \"num_hidden_layers\": 1, \"num_attention_heads\": 2, "
        "\"num_key_value_heads\": 2, \"vocab_size\": 40, \"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0, "
        "\"tie_word_embeddings\": false, \"max_position_embeddings\": 16, \"hidden_act\": \"silu\"}";
    const char *tmp = getenv("TMPDIR");
    char wdir[256];
    snprintf(wdir, sizeof wdir, "%s/test_spmv_cuda.%d.wide", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    Model w;
    int rc = model_plan(&w, wide_cfg, sizeof wide_cfg - 1, "wide", 0);
    if (T_OK(rc == 0, "the wide model's config %s", rc ? err_msg() : "planned")) {
        model_alloc(&w);
        for (size_t j = 0; j < w.n_params; j++) w.params[j] = 0.1f * uniform_pm1();
        rc = model_save(&w, wdir, ST_F32);
        if (T_OK(rc == 0, "the wide model saved to %s%s%s", wdir, rc ? ": " : "", rc ? err_msg() : ""))
            check_fixture("wide", wdir, wide, 1, "tiles", "BF16"); // (the walk is the same for every type)
        model_free(&w);
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", wdir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", wdir);
    }
    // the pairs layout (spmv.h, issue 35): made at upload from every sparse BF16 encoding,
    // products and decoded rows as above; then BEST_SPMV_LAYOUT=auto (both built and timed,
    // one kept: here the emulator's times decide, so only that it works is checked)
    const double llama9[] = {0.9};
    static const char *const layouts[] = {"pairs", "auto"};
    for (const char *lay : layouts) {
        setenv("BEST_SPMV_LAYOUT", lay, 1);
        n_pairs = n_uploads = 0;
        check_fixture("llama", NULL, llama9, 1, NULL, "BF16");
        check_fixture("qwen3", NULL, qwen3, 1, NULL, "BF16");
        if (strcmp(lay, "pairs") == 0)
            T_OK(n_pairs > 0 && n_pairs < n_uploads, "%s BEST_SPMV_LAYOUT=pairs: %zu of %zu tensors uploaded as pairs "
                 "(the sparse BF16 ones; dense ones keep their streams)", MODE, n_pairs, n_uploads);
    }
    T_OK(fused_cases > 0 && fused_bad == 0, "%s devpack_weight_fused: %zu cases (each pairs tensor above at 32, 16, 8 "
         "and 4 lanes; a product with residual and bias, gate|up + SwiGLU) are the unfused pairs kernel's bits (%zu "
         "differ)", MODE, fused_cases, fused_bad);
    T_OK(fused_streams > 0 && fused_refused == fused_streams, "%s devpack_weight_fused: %zu of %zu tensors in the "
         "streams layout refused, nothing launched", MODE, fused_refused, fused_streams);
    setenv("BEST_SPMV_LAYOUT", "bogus", 1);
    {
        Pack p;
        char path[300];
        snprintf(path, sizeof path, "%s/test_spmv_cuda.%d.bogus.pack", tmp && *tmp ? tmp : "/tmp", (int)getpid());
        Model m;
        if (model_load(&m, "tests/fixtures/model/llama") == 0 && pack_write(path, &m, QUANT_BF16, INDEX_TILES) == 0 &&
            pack_open(&p, path) == 0) {
            DevPackTensor d;
            rc = devpack_upload(&d, &p.t[1]);
            T_OK(rc < 0 && strstr(err_msg(), "BEST_SPMV_LAYOUT=bogus"), "BEST_SPMV_LAYOUT=bogus: devpack_upload fails "
                 "saying so (%s)", rc < 0 ? err_msg() : "it did not");
            if (rc == 0) devpack_free(&d);
            pack_close(&p);
            model_free(&m);
        }
        unlink(path);
    }
    unsetenv("BEST_SPMV_LAYOUT");
    T_DONE();
}
