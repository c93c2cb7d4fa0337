// attention.cu: causal grouped-query attention on the GPU, forward and backward, fp32,
// the CUDA twins of layers.c's attention_forward / attention_backward (shapes, the
// causal rule, the GQA head mapping and the log-sum-exp are layers.h's).
//
// Flash-attention style: no (T, T) matrix exists anywhere. The forward gives a block a
// tile of query rows of one (batch, head), walks the key tiles the causal mask lets it
// see, and keeps per row an online softmax state (the running maximum m and sum l, merged
// tile by tile with km_lse_merge) and an output accumulator rescaled as m grows; it
// writes out and the row's log-sum-exp m + log(l). The backward recomputes the
// probabilities from that log-sum-exp, p = exp(s - lse), in two kernels that never add
// into the same memory from two blocks (no float atomics, so every run gives the same
// bits): one per key tile (dk, dv of one query head, into the dkh, dvh scratch), one per
// query tile (dq); then the heads of each group are summed in head order, as the CPU
// does. D = dout . out (the row's sum_j p_j dp_j) is recomputed per query tile, by one
// thread per row in the CPU's order, so no scratch is needed for it.
//
// Plain SIMT fp32: tiles in static shared memory (tests/cuda_emu.h has no dynamic shared
// memory), scores as dot products from shared memory, no tensor cores (the emulator
// cannot run mma/wgmma fragments). Tile sizes depend on the head dimension, so that one
// buffer of rows x HD floats stays at 16 KiB (forward) or 8 KiB (backward) and a block's
// static shared memory under 48 KiB: HD up to 64, 128 and 256 are three instantiations;
// a larger HD dies with a message. The arithmetic per element is kernel_math.h's (km_exp,
// km_lse_merge, km_lse_value), as on the CPU; sums run in another order than the CPU's
// BLAS, so results agree to fp32 rounding (docs/cuda.md has the measured errors). The
// threads sharing a row exchange maxima and sums through shared memory at barriers the
// tile needs anyway, not by cuda_reduce.cuh's warp shuffles.
//
// Correctness first: written for the emulator's checks and for readability, not tuned
// (bank conflicts are avoided by padding rows by one float, nothing more). Checked on an
// H200 (tests/gpu/run.sh). Not here: the model's device step that calls these (docs/cuda.md).
#include "base/error.h"     // defines: die_
#include "base/cuda.h"        // defines: CUDA_CHECK, LAUNCH, BEST_KAPI
#include "nn/kernel_math.h" // defines: km_exp, km_lse_merge, km_lse_value, km_blocks
#include "nn/layers.h"      // defines: the _cuda prototypes (with BEST_CUDA)

#define ATT_THREADS 128 // threads of every attention block
#define ATT_HD_MAX 256  // the largest head dimension supported

#ifdef __CUDACC__
#define ATT_UNROLL _Pragma("unroll")
#else
#define ATT_UNROLL // g++ (the emulator) unrolls or not; the result is the same
#endif

// The tiles of the kernels instantiated for head dimensions up to HDMAX (64, 128, 256).
template <int HDMAX> struct AttTiles {
    // forward: FQ query rows a block, FK keys a tile (FQ x HDMAX floats = 16 KiB)
    static constexpr int FQ = 4096 / HDMAX < 64 ? 4096 / HDMAX : 64;
    static constexpr int FK = 4096 / HDMAX < 32 ? 4096 / HDMAX : 32;
    // backward: BT query rows and BT keys a tile; four such buffers (q, dout, k, v)
    static constexpr int BT = 2048 / HDMAX < 32 ? 2048 / HDMAX : 32;
};

// --- forward ------------------------------------------------------------------------------
// Block: FQ query rows (t0 ..) of one (b, h); thread (i, r) = (tid / R, tid % R) owns
// row i's scores of keys r, r + R, ... of each tile and its output dimensions r, r + R, ...
// Per key tile, four barriers: [A] keys loaded; [B] scores' partial maxima posted, keys
// no longer read; [C] probabilities and values in place; [D] the tile's buffers free.
// With vis (packed rows, B = 1, pos0 = 0), row t sees keys [vis[3t], vis[3t+1]) and
// vis[3t+2] .. t instead of 0 .. t (attention_packed_cuda).
template <int HDMAX>
static __global__ void __launch_bounds__(ATT_THREADS)
attention_forward_kernel(float *out, float *lse, const float *q, const float *k, const float *v,
                         const int32_t *vis, size_t B, size_t Tq, size_t Tk, size_t pos0, size_t NH,
                         size_t KV, int HD, float scale) {
    constexpr int BQ = AttTiles<HDMAX>::FQ, BK = AttTiles<HDMAX>::FK;
    constexpr int R = ATT_THREADS / BQ, DR = HDMAX / R, JR = BK / R;
    __shared__ float qs[BQ][HDMAX + 1];  // the block's query rows
    __shared__ float kvs[BK][HDMAX + 1]; // a tile of keys, then of values
    __shared__ float ps[BQ][BK + 1];     // the tile's probabilities, exp(s - m)
    __shared__ float pmax[BQ][R], psum[BQ][R]; // each thread's share of a row's max, sum
    const int tid = threadIdx.x, i = tid / R, r = tid % R;
    const size_t G = NH / KV, Q = NH * HD, KVD = KV * HD, ntiles = (Tq + BQ - 1) / BQ;
    for (size_t item = blockIdx.x; item < B * NH * ntiles; item += gridDim.x) {
        size_t t0 = (ntiles - 1 - item % ntiles) * BQ; // the longest rows first
        size_t h = item / ntiles % NH, b = item / ntiles / NH;
        const float *kb = k + b * Tk * KVD + h / G * HD, *vb = v + b * Tk * KVD + h / G * HD;
        for (int e = tid; e < BQ * HD; e += ATT_THREADS) {
            int ii = e / HD, d = e % HD;
            qs[ii][d] = t0 + ii < Tq ? q[(b * Tq + t0 + ii) * Q + h * HD + d] : 0.0f;
        }
        size_t t = t0 + i, tc = t < Tq ? t : Tq - 1;          // this thread's query row
        size_t last = pos0 + tc;                              // the last key it sees
        size_t kend = pos0 + (t0 + BQ < Tq ? t0 + BQ : Tq);   // keys the block sees
        // packed rows: keys [p0, p1) (the prefix) and [s0, last] (its segment); else s0 = 0
        size_t p0 = 0, p1 = 0, s0 = 0, jlo = 0;
        if (vis) {
            p0 = (size_t)vis[3 * tc], p1 = (size_t)vis[3 * tc + 1], s0 = (size_t)vis[3 * tc + 2];
            jlo = p0; // the first key any row of the block sees: the walk starts there
            for (int ii = 0; ii < BQ && t0 + ii < Tq; ii++)
                jlo = (size_t)vis[3 * (t0 + ii)] < jlo ? (size_t)vis[3 * (t0 + ii)] : jlo;
        }
        float m = -INFINITY, l = 0.0f, acc[DR];
        ATT_UNROLL
        for (int c = 0; c < DR; c++) acc[c] = 0.0f;
        for (size_t j0 = jlo; j0 < kend; j0 += BK) {
            int nk = kend - j0 < (size_t)BK ? (int)(kend - j0) : BK;
            for (int e = tid; e < BK * HD; e += ATT_THREADS) {
                int jj = e / HD, d = e % HD;
                kvs[jj][d] = jj < nk ? kb[(j0 + jj) * KVD + d] : 0.0f;
            }
            __syncthreads(); // [A]
            float s[JR];
            ATT_UNROLL
            for (int u = 0; u < JR; u++) s[u] = 0.0f;
            for (int d = 0; d < HD; d++) {
                float qd = qs[i][d];
                ATT_UNROLL
                for (int u = 0; u < JR; u++) s[u] += qd * kvs[r + R * u][d];
            }
            float mt = -INFINITY;
            ATT_UNROLL
            for (int u = 0; u < JR; u++) {
                size_t j = j0 + r + R * u;
                int seen = j <= last && (j >= s0 || (j >= p0 && j < p1));
                s[u] = seen ? s[u] * scale : -INFINITY;
                mt = s[u] > mt ? s[u] : mt;
            }
            pmax[i][r] = mt;
            __syncthreads(); // [B]
            float mnew = m;
            for (int x = 0; x < R; x++) mnew = pmax[i][x] > mnew ? pmax[i][x] : mnew;
            // -inf only while the row has seen no key (packed rows: tiles before their
            // prefix); (B, T) rows see key 0 in the first tile
            float mref = mnew == -INFINITY ? 0.0f : mnew;
            float st = 0.0f;
            ATT_UNROLL
            for (int u = 0; u < JR; u++) {
                float p = km_exp(s[u] - mref); // a masked -inf gives 0
                ps[i][r + R * u] = p;
                st += p;
            }
            psum[i][r] = st;
            for (int e = tid; e < BK * HD; e += ATT_THREADS) {
                int jj = e / HD, d = e % HD;
                kvs[jj][d] = jj < nk ? vb[(j0 + jj) * KVD + d] : 0.0f;
            }
            __syncthreads(); // [C]
            st = 0.0f;
            for (int x = 0; x < R; x++) st += psum[i][x];
            float alpha = km_exp(m - mref); // the old state's rescale: 1, or 0 at the start
            km_lse_merge(&m, &l, mnew, st);
            ATT_UNROLL
            for (int c = 0; c < DR; c++) acc[c] *= alpha;
            for (int jj = 0; jj < nk; jj++) {
                float p = ps[i][jj];
                ATT_UNROLL
                for (int c = 0; c < DR; c++)
                    if (r + R * c < HD) acc[c] += p * kvs[jj][r + R * c];
            }
            __syncthreads(); // [D]
        }
        if (t < Tq) {
            float inv = 1.0f / l, *o = out + (b * Tq + t) * Q + h * HD;
            ATT_UNROLL
            for (int c = 0; c < DR; c++)
                if (r + R * c < HD) o[r + R * c] = acc[c] * inv;
            if (lse && r == 0) lse[(b * NH + h) * Tq + t] = km_lse_value(m, l);
        }
    }
}

// --- decode: one query row against a cache whose length is in device memory -----------------
// Block: query head h of the token at position *pos, which sees keys 0 .. *pos of the cache
// (kv head h / (NH / KV)). A forward block would give the one row 4 of its threads; here
// the keys are spread over all of them, in tiles of ATT_THREADS: each warp scores every
// fourth key of the tile, its lanes splitting the head dimension (a key row read
// coalesced) and a butterfly summing; the tile's maximum and sum come from the whole
// block, the running state merges as the forward's (km_lse_merge); then thread d adds
// output dimensions d and d + 128 of sum_j p_j v_j in key order. Barriers per tile: [A]
// scores in place; [B] warp maxima posted; [C] scores and maxima read; [D] probabilities
// and warp sums posted; [E] the tile's buffers free.
//
// Split over the keys (flash-decoding; part non-NULL): block (h, c) takes keys
// [c chunk, (c + 1) chunk) of the ones the row sees and writes its unnormalized state into
// part (NH, gridDim.y, HD + 2): m, l, then sum_j exp(s_j - m) v_j; a chunk past the last
// key writes the empty state (-inf, 0, zeros). attention_decode_merge_kernel adds the
// chunks of a head in chunk order. With part NULL, chunk covers all keys (one block a head).
// KVT: the cache's type, fp32 or bf16 bits (BEST_KV=bf16: half the bytes a step reads).
#define DEC_WARPS (ATT_THREADS / 32)
static __device__ __forceinline__ float kv_at(const float *p, size_t i) { return p[i]; }
static __device__ __forceinline__ float kv_at(const uint16_t *p, size_t i) { return km_float_from_bf16(p[i]); }

template <typename KVT>
static __global__ void __launch_bounds__(ATT_THREADS)
attention_decode_kernel(float *out, float *part, const float *q, const KVT *kc, const KVT *vc,
                        const int32_t *pos, size_t NH, size_t KV, int HD, float scale, size_t chunk) {
    __shared__ float qs[ATT_HD_MAX];
    __shared__ float ps[ATT_THREADS]; // the tile's scores, then its probabilities
    __shared__ float red[DEC_WARPS];
    const unsigned full = 0xffffffffu;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const size_t G = NH / KV, KVD = KV * (size_t)HD, seen = (size_t)*pos + 1;
    const size_t jb = part ? blockIdx.y * chunk : 0, nk = part ? (seen < jb + chunk ? seen : jb + chunk) : seen;
    for (size_t h = blockIdx.x; h < NH; h += gridDim.x) {
        const KVT *kb = kc + h / G * HD, *vb = vc + h / G * HD;
        for (int d = tid; d < HD; d += ATT_THREADS) qs[d] = q[h * HD + d];
        float m = -INFINITY, l = 0.0f, acc0 = 0.0f, acc1 = 0.0f; // dimensions tid, tid + 128
        for (size_t j0 = jb; j0 < nk; j0 += ATT_THREADS) {
            __syncthreads(); // qs loaded (first tile); [E] of the previous tile
            for (int jj = warp; jj < ATT_THREADS; jj += DEC_WARPS) {
                size_t j = j0 + (size_t)jj;
                float s = 0.0f;
                if (j < nk)
                    for (int d = lane; d < HD; d += 32) s += qs[d] * kv_at(kb, j * KVD + d);
                for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(full, s, o);
                if (lane == 0) ps[jj] = j < nk ? s * scale : -INFINITY;
            }
            __syncthreads(); // [A]
            float sv = ps[tid], mt = sv;
            for (int o = 16; o > 0; o >>= 1) mt = fmaxf(mt, __shfl_xor_sync(full, mt, o));
            if (lane == 0) red[warp] = mt;
            __syncthreads(); // [B]
            mt = red[0];
            for (int w = 1; w < DEC_WARPS; w++) mt = fmaxf(mt, red[w]);
            float mnew = m > mt ? m : mt; // key j0 is seen: finite
            float p = km_exp(sv - mnew), st = p; // a -inf score gives 0
            for (int o = 16; o > 0; o >>= 1) st += __shfl_xor_sync(full, st, o);
            __syncthreads(); // [C]
            ps[tid] = p;
            if (lane == 0) red[warp] = st;
            __syncthreads(); // [D]
            st = 0.0f;
            for (int w = 0; w < DEC_WARPS; w++) st += red[w];
            float alpha = km_exp(m - mnew); // 1, or 0 at the start
            km_lse_merge(&m, &l, mnew, st);
            acc0 *= alpha;
            acc1 *= alpha;
            size_t nt = nk - j0 < (size_t)ATT_THREADS ? nk - j0 : (size_t)ATT_THREADS;
            for (size_t jj = 0; jj < nt; jj++) {
                const KVT *vr = vb + (j0 + jj) * KVD;
                if (tid < HD) acc0 += ps[jj] * kv_at(vr, tid);
                if (tid + ATT_THREADS < HD) acc1 += ps[jj] * kv_at(vr, tid + ATT_THREADS);
            }
        }
        if (part) { // this chunk's state, unnormalized (empty when it has no key)
            float *ps_out = part + (h * gridDim.y + blockIdx.y) * (size_t)(HD + 2);
            if (tid == 0) ps_out[0] = m, ps_out[1] = l;
            if (tid < HD) ps_out[2 + tid] = acc0;
            if (tid + ATT_THREADS < HD) ps_out[2 + tid + ATT_THREADS] = acc1;
        } else {
            float inv = 1.0f / l;
            if (tid < HD) out[h * HD + tid] = acc0 * inv;
            if (tid + ATT_THREADS < HD) out[h * HD + tid + ATT_THREADS] = acc1 * inv;
        }
        __syncthreads(); // [E] of the last tile: qs, ps free for the next head
    }
}

// out (NH, HD): head h's S chunk states of part (NH, S, HD + 2) merged in chunk order
// (km_lse_merge's rule: each chunk's l and sum rescaled to the running maximum), then
// normalized. A block a head, a thread an output dimension (HD <= 256 threads).
static __global__ void attention_decode_merge_kernel(float *out, const float *part, size_t NH, size_t S, int HD) {
    for (size_t h = blockIdx.x; h < NH; h += gridDim.x) {
        const float *p = part + h * S * (size_t)(HD + 2);
        float m = -INFINITY, l = 0.0f, acc = 0.0f;
        for (size_t c = 0; c < S; c++, p += HD + 2) {
            float mc = p[0], lc = p[1];
            if (!(lc > 0.0f)) continue; // the empty state
            float mn = m > mc ? m : mc, a = km_exp(m - mn), b = km_exp(mc - mn);
            l = l * a + lc * b;
            if ((int)threadIdx.x < HD) acc = acc * a + p[2 + threadIdx.x] * b;
            m = mn;
        }
        if ((int)threadIdx.x < HD) out[h * HD + threadIdx.x] = acc / l;
    }
}

// --- backward -----------------------------------------------------------------------------
// Both kernels hold BT query rows (q, dout, their lse and D) and BT keys (k, v) in shared
// memory and recompute, per pair of tiles, p = exp(scale q.k - lse) and
// ds = p (dout.v - D) scale, 0 where the key is after the query or a row is past T.

// qs, dos (BT, HD): query rows t0 .. of q and dout, 0 past T; lse_s, D_s (BT): their
// log-sum-exp and D = dout . out (in the CPU's order: one thread a row).
template <int HDMAX, int BT>
static __device__ void attention_load_queries(float (*qs)[HDMAX + 1], float (*dos)[HDMAX + 1],
                                              float *lse_s, float *D_s, const float *q,
                                              const float *dout, const float *out,
                                              const float *lse, size_t b, size_t h, size_t t0,
                                              size_t T, size_t NH, int HD) {
    const size_t Q = NH * HD;
    for (int e = threadIdx.x; e < BT * HD; e += ATT_THREADS) {
        int ii = e / HD, d = e % HD;
        size_t at = (b * T + t0 + ii) * Q + h * HD + d;
        qs[ii][d] = t0 + ii < T ? q[at] : 0.0f;
        dos[ii][d] = t0 + ii < T ? dout[at] : 0.0f;
    }
    if (threadIdx.x < BT) {
        size_t t = t0 + threadIdx.x;
        float D = 0.0f;
        if (t < T) {
            const float *a = dout + (b * T + t) * Q + h * HD, *o = out + (b * T + t) * Q + h * HD;
            for (int d = 0; d < HD; d++) D += a[d] * o[d];
        }
        lse_s[threadIdx.x] = t < T ? lse[(b * NH + h) * T + t] : 0.0f;
        D_s[threadIdx.x] = D;
    }
}

// ks, vs (BT, HD): keys j0 .. of k, v for kv head g, 0 past T.
template <int HDMAX, int BT>
static __device__ void attention_load_keys(float (*ks)[HDMAX + 1], float (*vs)[HDMAX + 1],
                                           const float *k, const float *v, size_t b, size_t g,
                                           size_t j0, size_t T, size_t KV, int HD) {
    for (int e = threadIdx.x; e < BT * HD; e += ATT_THREADS) {
        int jj = e / HD, d = e % HD;
        size_t at = (b * T + j0 + jj) * KV * HD + g * HD + d;
        ks[jj][d] = j0 + jj < T ? k[at] : 0.0f;
        vs[jj][d] = j0 + jj < T ? v[at] : 0.0f;
    }
}

// ps, dss (BT, BT): p and ds of query rows t0 .. against keys j0 .. (ps may be NULL).
template <int HDMAX, int BT>
static __device__ void attention_ds_tile(float (*ps)[BT + 1], float (*dss)[BT + 1],
                                         float (*qs)[HDMAX + 1], float (*dos)[HDMAX + 1],
                                         float (*ks)[HDMAX + 1], float (*vs)[HDMAX + 1],
                                         const float *lse_s, const float *D_s, size_t t0,
                                         size_t j0, size_t T, int HD, float scale) {
    for (int e = threadIdx.x; e < BT * BT; e += ATT_THREADS) {
        int ii = e / BT, jj = e % BT;
        float p = 0.0f, ds = 0.0f;
        if (t0 + ii < T && j0 + jj <= t0 + ii) {
            float s = 0.0f, dp = 0.0f;
            for (int d = 0; d < HD; d++) {
                s += qs[ii][d] * ks[jj][d];
                dp += dos[ii][d] * vs[jj][d];
            }
            p = km_exp(s * scale - lse_s[ii]);
            ds = p * (dp - D_s[ii]) * scale;
        }
        if (ps) ps[ii][jj] = p;
        dss[ii][jj] = ds;
    }
}

// dkh, dvh (B, NH, T, HD): block = BT keys (j0 ..) of one (b, h), over the query tiles
// that see them (t0 >= j0); thread (j, r) accumulates key row j's dimensions r, r + R, ...
// of dk += ds^T q and dv += p^T dout. Barriers per query tile: [A] loaded, [B] p and ds
// in place, [C] buffers free.
template <int HDMAX>
static __global__ void __launch_bounds__(ATT_THREADS)
attention_dkdv_kernel(float *dkh, float *dvh, const float *dout, const float *q, const float *k,
                      const float *v, const float *out, const float *lse, size_t B, size_t T,
                      size_t NH, size_t KV, int HD, float scale) {
    constexpr int BT = AttTiles<HDMAX>::BT, R = ATT_THREADS / BT, DR = HDMAX / R;
    __shared__ float qs[BT][HDMAX + 1], dos[BT][HDMAX + 1], ks[BT][HDMAX + 1], vs[BT][HDMAX + 1];
    __shared__ float ps[BT][BT + 1], dss[BT][BT + 1], lse_s[BT], D_s[BT];
    const int j = threadIdx.x / R, r = threadIdx.x % R;
    const size_t ntiles = (T + BT - 1) / BT;
    for (size_t item = blockIdx.x; item < B * NH * ntiles; item += gridDim.x) {
        size_t j0 = item % ntiles * BT; // the first key tiles have the most queries: first
        size_t h = item / ntiles % NH, b = item / ntiles / NH;
        attention_load_keys<HDMAX, BT>(ks, vs, k, v, b, h / (NH / KV), j0, T, KV, HD);
        float dk[DR], dv[DR];
        ATT_UNROLL
        for (int c = 0; c < DR; c++) dk[c] = dv[c] = 0.0f;
        for (size_t t0 = j0; t0 < T; t0 += BT) {
            attention_load_queries<HDMAX, BT>(qs, dos, lse_s, D_s, q, dout, out, lse, b, h, t0, T,
                                              NH, HD);
            __syncthreads(); // [A]
            attention_ds_tile<HDMAX, BT>(ps, dss, qs, dos, ks, vs, lse_s, D_s, t0, j0, T, HD,
                                         scale);
            __syncthreads(); // [B]
            int nq = T - t0 < (size_t)BT ? (int)(T - t0) : BT;
            for (int ii = 0; ii < nq; ii++) {
                float p = ps[ii][j], ds = dss[ii][j];
                ATT_UNROLL
                for (int c = 0; c < DR; c++) {
                    if (r + R * c < HD) {
                        dv[c] += p * dos[ii][r + R * c];
                        dk[c] += ds * qs[ii][r + R * c];
                    }
                }
            }
            __syncthreads(); // [C]
        }
        if (j0 + j < T) {
            size_t at = ((b * NH + h) * T + j0 + j) * HD;
            ATT_UNROLL
            for (int c = 0; c < DR; c++) {
                if (r + R * c < HD) {
                    dkh[at + r + R * c] = dk[c];
                    dvh[at + r + R * c] = dv[c];
                }
            }
        }
    }
}

// dq (B, T, NH, HD): block = BT query rows (t0 ..) of one (b, h), over the key tiles they
// see; thread (i, r) accumulates row i's dimensions r, r + R, ... of dq = ds k.
template <int HDMAX>
static __global__ void __launch_bounds__(ATT_THREADS)
attention_dq_kernel(float *dq, const float *dout, const float *q, const float *k, const float *v,
                    const float *out, const float *lse, size_t B, size_t T, size_t NH, size_t KV,
                    int HD, float scale) {
    constexpr int BT = AttTiles<HDMAX>::BT, R = ATT_THREADS / BT, DR = HDMAX / R;
    __shared__ float qs[BT][HDMAX + 1], dos[BT][HDMAX + 1], ks[BT][HDMAX + 1], vs[BT][HDMAX + 1];
    __shared__ float dss[BT][BT + 1], lse_s[BT], D_s[BT];
    const int i = threadIdx.x / R, r = threadIdx.x % R;
    const size_t ntiles = (T + BT - 1) / BT;
    for (size_t item = blockIdx.x; item < B * NH * ntiles; item += gridDim.x) {
        size_t t0 = (ntiles - 1 - item % ntiles) * BT; // the longest rows first
        size_t h = item / ntiles % NH, b = item / ntiles / NH;
        attention_load_queries<HDMAX, BT>(qs, dos, lse_s, D_s, q, dout, out, lse, b, h, t0, T, NH,
                                          HD);
        float acc[DR];
        ATT_UNROLL
        for (int c = 0; c < DR; c++) acc[c] = 0.0f;
        size_t kend = t0 + BT < T ? t0 + BT : T;
        for (size_t j0 = 0; j0 < kend; j0 += BT) {
            attention_load_keys<HDMAX, BT>(ks, vs, k, v, b, h / (NH / KV), j0, T, KV, HD);
            __syncthreads(); // [A]
            attention_ds_tile<HDMAX, BT>(NULL, dss, qs, dos, ks, vs, lse_s, D_s, t0, j0, T, HD,
                                         scale);
            __syncthreads(); // [B]
            int nk = kend - j0 < (size_t)BT ? (int)(kend - j0) : BT;
            for (int jj = 0; jj < nk; jj++) {
                float ds = dss[i][jj];
                ATT_UNROLL
                for (int c = 0; c < DR; c++)
                    if (r + R * c < HD) acc[c] += ds * ks[jj][r + R * c];
            }
            __syncthreads(); // [C]
        }
        if (t0 + i < T) {
            float *o = dq + ((b * T + t0 + i) * NH + h) * HD;
            ATT_UNROLL
            for (int c = 0; c < DR; c++)
                if (r + R * c < HD) o[r + R * c] = acc[c];
        }
    }
}

// dk, dv (B, T, KV, HD) = the sums of dkh, dvh (B, NH, T, HD) over each group's query
// heads, in head order from 0, as the CPU sums them (the same bits).
static __global__ void attention_group_sum_kernel(float *dk, float *dv, const float *dkh,
                                                  const float *dvh, size_t B, size_t T,
                                                  size_t NH, size_t KV, size_t HD) {
    size_t G = NH / KV, n = B * T * KV * HD;
    for (size_t e = km_thread_index(blockIdx.x, blockDim.x, threadIdx.x); e < n;
         e += (size_t)gridDim.x * blockDim.x) {
        size_t d = e % HD, g = e / HD % KV, t = e / HD / KV % T, b = e / HD / KV / T;
        float sk = 0.0f, sv = 0.0f;
        for (size_t h = g * G; h < (g + 1) * G; h++) {
            size_t at = ((b * NH + h) * T + t) * HD + d;
            sk += dkh[at];
            sv += dvh[at];
        }
        dk[e] = sk;
        dv[e] = sv;
    }
}

// --- the API --------------------------------------------------------------------------------

// Dies unless the shapes are ones these kernels handle.
static void attention_check_shapes(const char *who, size_t NH, size_t KV, size_t HD) {
    if (HD == 0 || HD > ATT_HD_MAX)
        die_(__FILE__, __LINE__, "%s: head dimension %zu not supported (1 to %d)", who, HD,
             ATT_HD_MAX);
    if (KV == 0 || NH % KV != 0)
        die_(__FILE__, __LINE__, "%s: %zu query heads do not divide into %zu key/value heads", who,
             NH, KV);
}

// The forward kernel over B sequences of Tq query rows, or (vis) over packed rows (B = 1).
static void attention_forward_launch(float *out, float *lse, const float *q, const float *k, const float *v,
                                     const int32_t *vis, size_t B, size_t Tq, size_t Tk, size_t pos0, size_t NH,
                                     size_t KV, size_t HD, cudaStream_t stream) {
    if (B * NH * Tq == 0) return;
    float scale = 1.0f / sqrtf((float)HD); // as the CPU forms it
    int hd = (int)HD;
#define ATT_FORWARD(HDMAX)                                                                      \
    LAUNCH(attention_forward_kernel<HDMAX>,                                                     \
           km_blocks(B * NH * ((Tq + AttTiles<HDMAX>::FQ - 1) / AttTiles<HDMAX>::FQ), 1,          \
                     KM_GRID_CAP),                                                              \
           ATT_THREADS, stream, out, lse, q, k, v, vis, B, Tq, Tk, pos0, NH, KV, hd, scale)
    if (HD <= 64) ATT_FORWARD(64);
    else if (HD <= 128) ATT_FORWARD(128);
    else ATT_FORWARD(256);
#undef ATT_FORWARD
    CUDA_CHECK(cudaGetLastError());
}

BEST_KAPI void attention_forward_cuda(float *out, float *lse, const float *q, const float *k,
                                      const float *v, size_t B, size_t Tq, size_t Tk, size_t pos0,
                                      size_t NH, size_t KV, size_t HD, cudaStream_t stream) {
    attention_check_shapes("attention_forward_cuda", NH, KV, HD);
    if (pos0 + Tq > Tk)
        die_(__FILE__, __LINE__,
             "attention_forward_cuda: queries reach position %zu, only %zu keys", pos0 + Tq, Tk);
    attention_forward_launch(out, lse, q, k, v, NULL, B, Tq, Tk, pos0, NH, KV, HD, stream);
}

BEST_KAPI void attention_packed_cuda(float *out, const float *q, const float *k, const float *v, const int32_t *vis,
                                     size_t n, size_t NH, size_t KV, size_t HD, cudaStream_t stream) {
    attention_check_shapes("attention_packed_cuda", NH, KV, HD);
    attention_forward_launch(out, NULL, q, k, v, vis, 1, n, n, 0, NH, KV, HD, stream);
}

// attention_decode_split_cuda's launches for a cache of type KVT.
template <typename KVT>
static void decode_split(float *out, float *part, const float *q, const KVT *kc, const KVT *vc, const int32_t *pos,
                         size_t T, size_t NH, size_t KV, size_t HD, cudaStream_t stream) {
    attention_check_shapes("attention_decode_split_cuda", NH, KV, HD);
    if (NH == 0 || T == 0) return;
    size_t S = (T + ATT_DEC_CHUNK - 1) / ATT_DEC_CHUNK;
    dim3 grid((unsigned)NH, (unsigned)S);
    LAUNCH(attention_decode_kernel<KVT>, grid, ATT_THREADS, stream, out, part, q, kc, vc, pos, NH, KV, (int)HD,
           1.0f / sqrtf((float)HD), (size_t)ATT_DEC_CHUNK);
    CUDA_CHECK(cudaGetLastError());
    LAUNCH(attention_decode_merge_kernel, km_blocks(NH, 1, KM_GRID_CAP), km_row_threads(HD, 256), stream, out, part,
           NH, S, (int)HD);
    CUDA_CHECK(cudaGetLastError());
}

// attention_decode_split_cuda and attention_decode_bf16_cuda for a cache of type KVT: split
// with part, else one block a head.
template <typename KVT>
static void decode_any(float *out, float *part, const float *q, const KVT *kc, const KVT *vc, const int32_t *pos,
                       size_t T, size_t NH, size_t KV, size_t HD, cudaStream_t stream) {
    if (part) {
        decode_split(out, part, q, kc, vc, pos, T, NH, KV, HD, stream);
        return;
    }
    attention_check_shapes("attention_decode_cuda", NH, KV, HD);
    static_assert(2 * ATT_THREADS >= ATT_HD_MAX, "two output dimensions a thread");
    if (NH == 0) return;
    LAUNCH(attention_decode_kernel<KVT>, km_blocks(NH, 1, KM_GRID_CAP), ATT_THREADS, stream, out, (float *)NULL, q,
           kc, vc, pos, NH, KV, (int)HD, 1.0f / sqrtf((float)HD), (size_t)0);
    CUDA_CHECK(cudaGetLastError());
}

BEST_KAPI void attention_decode_cuda(float *out, const float *q, const float *kc, const float *vc,
                                     const int32_t *pos, size_t NH, size_t KV, size_t HD, cudaStream_t stream) {
    decode_any(out, (float *)NULL, q, kc, vc, pos, 0, NH, KV, HD, stream);
}

BEST_KAPI void attention_decode_split_cuda(float *out, float *part, const float *q, const float *kc,
                                           const float *vc, const int32_t *pos, size_t T, size_t NH, size_t KV,
                                           size_t HD, cudaStream_t stream) {
    decode_any(out, part, q, kc, vc, pos, T, NH, KV, HD, stream);
}

BEST_KAPI void attention_decode_bf16_cuda(float *out, float *part, const float *q, const uint16_t *kc,
                                          const uint16_t *vc, const int32_t *pos, size_t T, size_t NH, size_t KV,
                                          size_t HD, cudaStream_t stream) {
    decode_any(out, part, q, kc, vc, pos, T, NH, KV, HD, stream);
}

BEST_KAPI void attention_backward_cuda(float *dq, float *dk, float *dv, float *dkh, float *dvh,
                                       const float *dout, const float *q, const float *k,
                                       const float *v, const float *out, const float *lse, size_t B,
                                       size_t T, size_t NH, size_t KV, size_t HD,
                                       cudaStream_t stream) {
    attention_check_shapes("attention_backward_cuda", NH, KV, HD);
    if (B * NH * T == 0) return;
    float scale = 1.0f / sqrtf((float)HD);
    int hd = (int)HD;
#define ATT_BACKWARD(HDMAX)                                                                     \
    do {                                                                                        \
        unsigned grid = km_blocks(B * NH * ((T + AttTiles<HDMAX>::BT - 1) / AttTiles<HDMAX>::BT), \
                                  1, KM_GRID_CAP);                                              \
        LAUNCH(attention_dkdv_kernel<HDMAX>, grid, ATT_THREADS, stream, dkh, dvh, dout, q, k, v, \
               out, lse, B, T, NH, KV, hd, scale);                                              \
        CUDA_CHECK(cudaGetLastError());                                                         \
        LAUNCH(attention_dq_kernel<HDMAX>, grid, ATT_THREADS, stream, dq, dout, q, k, v, out,    \
               lse, B, T, NH, KV, hd, scale);                                                   \
        CUDA_CHECK(cudaGetLastError());                                                         \
    } while (0)
    if (HD <= 64) ATT_BACKWARD(64);
    else if (HD <= 128) ATT_BACKWARD(128);
    else ATT_BACKWARD(256);
#undef ATT_BACKWARD
    LAUNCH(attention_group_sum_kernel, km_blocks(B * T * KV * HD, KM_THREADS, KM_GRID_CAP),
           KM_THREADS, stream, dk, dv, dkh, dvh, B, T, NH, KV, HD);
    CUDA_CHECK(cudaGetLastError());
}
