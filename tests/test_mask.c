// test_mask.c: model masks (mask.h) on a small hand-made parameter table: the global
// and per-tensor (layer) selections keep exactly k, match a full sort, never touch
// non-prunable tensors, never resurrect what an old mask pruned; mask files round-trip
// as BOOL and bit-packed, and bad files fail with the file and tensor named; Adam's raw
// exp_avg_sq and the bias-corrected v / (1 - beta2^t) give the same second-order mask.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "sparse/mask.h"
#include "sparse/select.h"
#include "test.h"

// embed (10, 4) | q of layer 0 (6, 5) | norm (4) | q of layer 1 (6, 5) | down of layer 0 (3, 7)
static ParamInfo INFO[5] = {
    {"model.embed_tokens.weight", 0, 40, 2, {10, 4}, 0},
    {"model.layers.0.self_attn.q_proj.weight", 40, 30, 2, {6, 5}, 1},
    {"model.norm.weight", 70, 4, 1, {4, 0}, 0},
    {"model.layers.1.self_attn.q_proj.weight", 74, 30, 2, {6, 5}, 1},
    {"model.layers.0.mlp.down_proj.weight", 104, 21, 2, {3, 7}, 1},
};
#define NP 125

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float next_w(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((int)(rng % 9) - 4) * 0.5f;  // few distinct values: many ties and zeros
}

// first k by (|score| desc, index asc) over the prunable positions listed
static void reference(uint8_t *mask, const float *score, const int *pos, int n, uint64_t k) {
    int *ix = xmalloc((size_t)n * sizeof *ix);
    memcpy(ix, pos, (size_t)n * sizeof *ix);
    for (int i = 1; i < n; i++)  // insertion sort: stable, so ties stay in index order
        for (int j = i; j > 0 && score[ix[j]] > score[ix[j - 1]]; j--) { int t = ix[j]; ix[j] = ix[j - 1]; ix[j - 1] = t; }
    for (int i = 0; i < n; i++) mask[ix[i]] = (uint64_t)i < k;
    free(ix);
}

static int prunable_pos(int *pos, int only) {
    int n = 0;
    for (int t = 0; t < 5; t++)
        if (INFO[t].prunable && (only < 0 || only == t))
            for (size_t j = 0; j < INFO[t].numel; j++) pos[n++] = (int)(INFO[t].offset + j);
    return n;
}

static void test_compute(void) {
    float w[NP], v[NP], m[NP], score[NP];
    for (int i = 0; i < NP; i++) w[i] = next_w(), v[i] = fabsf(next_w()), m[i] = next_w();
    uint8_t mask[NP], want[NP];
    int pos[NP];
    Moments mo;
    moments_from_block(&mo, m, v, 0);
    // global, second order
    MaskSpec sp = {SAL_SECOND, GROUP_GLOBAL, 0.6, NULL, 0, 0, 0};
    for (int i = 0; i < NP; i++) score[i] = w[i] == 0 ? 0 : 0.5f * v[i] * w[i] * w[i];
    int n = prunable_pos(pos, -1);
    uint64_t k = select_keep_count(0.6, (uint64_t)n);
    memset(want, 1, NP);
    reference(want, score, pos, n, k);
    int ok = mask_compute(mask, &sp, INFO, 5, w, NP, &mo, NULL) == 0;
    T_OK(ok && memcmp(mask, want, NP) == 0 && mask_count(mask, NP) == k + 44,
         "global second order == sort over all prunable weights, %llu kept, others untouched", (unsigned long long)k);
    // layer group, magnitude: each tensor its own k
    sp = (MaskSpec){SAL_MAGNITUDE, GROUP_LAYER, 0.7, NULL, 0, 0, 0};
    for (int i = 0; i < NP; i++) score[i] = fabsf(w[i]);
    memset(want, 1, NP);
    for (int t = 0; t < 5; t++) {
        if (!INFO[t].prunable) continue;
        n = prunable_pos(pos, t);
        reference(want, score, pos, n, select_keep_count(0.7, (uint64_t)n));
    }
    ok = mask_compute(mask, &sp, INFO, 5, w, NP, NULL, NULL) == 0;
    T_OK(ok && memcmp(mask, want, NP) == 0 && mask_count(mask + 40, 30) == 9 && mask_count(mask + 104, 21) == 6,
         "group layer: every tensor keeps round(0.3 n) (9 of 30, 6 of 21), == per-tensor sort");
    // the one-shot baselines' count: exactly floor(0.7 n) pruned (21 of 30, 14 of 21)
    sp.prune_floor = 1;
    memset(want, 1, NP);
    for (int t = 0; t < 5; t++) {
        if (!INFO[t].prunable) continue;
        n = prunable_pos(pos, t);
        reference(want, score, pos, n, (uint64_t)n - (uint64_t)floor(0.7 * n));
    }
    ok = mask_compute(mask, &sp, INFO, 5, w, NP, NULL, NULL) == 0;
    T_OK(ok && memcmp(mask, want, NP) == 0 && mask_count(mask + 40, 30) == 9 && mask_count(mask + 104, 21) == 7,
         "prune_floor: every tensor prunes floor(0.7 n) (keeps 9 of 30, 7 of 21), == per-tensor sort");
    // --from-mask: pruned weights keep their (nonzero) values here, so only the
    // exclusion stops them from coming back
    uint8_t old[NP], nw[NP];
    sp = (MaskSpec){SAL_FIRST, GROUP_GLOBAL, 0.5, NULL, 0, 0, 0};
    ok = mask_compute(old, &sp, INFO, 5, w, NP, &mo, NULL) == 0;
    for (int i = 0; i < NP; i++) m[i] = old[i] ? 0.01f : 100.0f;  // make the pruned ones look great
    sp.sparsity = 0.75;
    ok = ok && mask_compute(nw, &sp, INFO, 5, w, NP, &mo, old) == 0;
    int resurrected = 0;
    for (int i = 0; i < NP; i++) resurrected += nw[i] && !old[i];
    uint64_t kept = mask_count(nw + 40, 30) + mask_count(nw + 74, 30) + mask_count(nw + 104, 21);
    T_OK(ok && resurrected == 0 && kept == select_keep_count(0.75, 81),
         "--from-mask: nothing the old mask pruned comes back (%d resurrected)", resurrected);
    sp.sparsity = 0.2;
    T_OK(mask_compute(nw, &sp, INFO, 5, w, NP, &mo, old) < 0 && strstr(err_msg(), "only shrinks"),
         "global: a lower sparsity than the old mask's is an error: %s", err_msg());
    sp.group = GROUP_LAYER;
    ok = mask_compute(nw, &sp, INFO, 5, w, NP, &mo, old) == 0;
    resurrected = 0;
    for (int i = 0; i < NP; i++) resurrected += nw[i] && !old[i];
    T_OK(ok && resurrected == 0, "group layer: clamps to the old mask per tensor, nothing resurrected");
    sp = (MaskSpec){SAL_SECOND, GROUP_GLOBAL, 0.5, NULL, 0, 0, 0};
    T_OK(mask_compute(nw, &sp, INFO, 5, w, NP, NULL, NULL) < 0 && strstr(err_msg(), "needs Adam moments"),
         "second order without moments is an error");
    sp.sparsity = 1.0;
    T_OK(mask_compute(nw, &sp, INFO, 5, w, NP, &mo, NULL) < 0, "sparsity 1 is an error");
}

// Torch keeps exp_avg_sq raw; Adam's update uses v / (1 - beta2^t). Every parameter has
// the same t, so the correction divides all scores 0.5 v w^2 by one constant and cannot
// change their ranking (in fp32 the division rounds, which could only swap scores equal
// to a few ulps). Checked on continuous values spread over many decades, as real v are.
static void test_bias_correction(void) {
    enum { R = 64, C = 64, T = R * C, N = 3 * T };
    ParamInfo info[3] = {
        {"model.layers.0.self_attn.v_proj.weight", 0, T, 2, {R, C}, 1},
        {"model.layers.0.self_attn.o_proj.weight", T, T, 2, {R, C}, 1},
        {"model.layers.1.mlp.up_proj.weight", 2 * T, T, 2, {R, C}, 1},
    };
    float *w = xmalloc(N * sizeof *w), *v = xmalloc(N * sizeof *v), *vhat = xmalloc(N * sizeof *vhat);
    uint8_t *raw = xmalloc(N), *hat = xmalloc(N);
    for (int i = 0; i < N; i++) {
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        w[i] = (float)((double)(rng >> 11) / 9007199254740992.0 * 2 - 1) * (i < T ? 0.02f : 0.1f);
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        v[i] = (float)exp(-28.0 * (double)(rng >> 11) / 9007199254740992.0); // 7e-13 .. 1
    }
    const int steps[] = {1, 8, 64, 1000, 4000};
    const double sparsities[] = {0.5, 0.9, 0.99};
    int checked = 0, differ = 0;
    for (int a = 0; a < 5; a++) {
        double bc2 = 1.0 - pow(0.999, steps[a]);
        for (int i = 0; i < N; i++) vhat[i] = v[i] / (float)bc2;  // torch: exp_avg_sq / bias_correction2
        Moments mr, mh;
        moments_from_block(&mr, v, v, 0);
        moments_from_block(&mh, vhat, vhat, 0);
        for (int g = 0; g < 2; g++)
            for (int b = 0; b < 3; b++) {
                MaskSpec sp = {SAL_SECOND, g ? GROUP_LAYER : GROUP_GLOBAL, sparsities[b], NULL, 0, 0, 0};
                int ok = mask_compute(raw, &sp, info, 3, w, N, &mr, NULL) == 0 &&
                         mask_compute(hat, &sp, info, 3, w, N, &mh, NULL) == 0;
                differ += !ok || memcmp(raw, hat, N) != 0;
                checked++;
            }
    }
    T_OK(differ == 0, "second order: raw exp_avg_sq and bias-corrected v give the same mask (%d of %d differ; "
         "t 1..4000, global and layer, sparsity 0.5..0.99)", differ, checked);
    free(w), free(v), free(vhat), free(raw), free(hat);
}

static void test_files(void) {
    uint8_t mask[NP], back[NP];
    for (int i = 0; i < NP; i++) mask[i] = (next_w() > 0) || !INFO[0].prunable;
    for (int t = 0; t < 5; t++)
        if (!INFO[t].prunable) memset(mask + INFO[t].offset, 1, INFO[t].numel);
    char path[64];
    snprintf(path, sizeof path, "/tmp/test_mask_%d.safetensors", (int)getpid());
    for (int packed = 0; packed < 2; packed++) {
        MaskMeta meta = {0.5, "magnitude", "global", 12, packed, packed ? "BEST" : NULL, packed ? "cubic" : NULL, 0, NULL};
        memset(back, 7, NP);
        int ok = mask_save(path, mask, &meta, INFO, 5) == 0 && mask_load(back, path, INFO, 5, NP) == 0;
        T_OK(ok && memcmp(mask, back, NP) == 0, "mask file round trip (%s)", packed ? "bit-packed U8" : "BOOL");
        SafeTensors st;
        ok = st_open(&st, path) == 0;
        const char *pk = ok ? st_meta(&st, "packing") : NULL;
        const StTensor *t = ok ? st_find(&st, "model.layers.0.mlp.down_proj.weight") : NULL;
        const char *method = ok ? st_meta(&st, "method") : NULL, *sched = ok ? st_meta(&st, "schedule") : NULL;
        T_OK(pk && strcmp(pk, packed ? "bits" : "bytes") == 0 && t && t->nbytes == (packed ? 3u : 21u) &&
                 strcmp(st_meta(&st, "step"), "12") == 0 && !st_find(&st, "model.norm.weight") &&
                 (packed ? method && sched && strcmp(method, "BEST") == 0 && strcmp(sched, "cubic") == 0
                         : !method && !sched),
             "metadata (method and schedule only when given), sizes, and only prunable tensors in the file");
        if (ok) st_close(&st);
    }
    // the same file read against a table with another shape
    ParamInfo other[5];
    memcpy(other, INFO, sizeof other);
    other[4].shape[0] = 7, other[4].shape[1] = 3;
    MaskMeta meta = {0.5, NULL, NULL, -1, 0, NULL, NULL, 0, NULL};
    T_OK(mask_save(path, mask, &meta, INFO, 5) == 0 && mask_load(back, path, other, 5, NP) < 0 &&
             strstr(err_msg(), path) && strstr(err_msg(), "down_proj.weight is BOOL [3,7], want BOOL [7,3]"),
         "wrong shape: %s", err_msg());
    other[4] = INFO[4];
    snprintf(other[3].name, sizeof other[3].name, "model.layers.1.self_attn.k_proj.weight");
    T_OK(mask_load(back, path, other, 5, NP) < 0 && strstr(err_msg(), "no tensor model.layers.1.self_attn.k_proj"),
         "missing tensor: %s", err_msg());
    other[3] = INFO[3];
    other[1].prunable = 0;
    T_OK(mask_load(back, path, other, 5, NP) < 0 && strstr(err_msg(), "q_proj.weight is not prunable"),
         "tensor of a non-prunable parameter: %s", err_msg());
    // a value that is not 0/1, written through the plain writer
    uint8_t bad[30];
    memset(bad, 1, sizeof bad);
    bad[29] = 2;
    StWriter w;
    st_writer_init(&w);
    for (int t = 0; t < 5; t++)
        if (INFO[t].prunable) st_writer_add(&w, INFO[t].name, ST_BOOL, 2, INFO[t].shape, t == 1 ? bad : mask + INFO[t].offset);
    st_writer_write(&w, path);
    st_writer_free(&w);
    T_OK(mask_load(back, path, INFO, 5, NP) < 0 && strstr(err_msg(), "element 29 is 2"), "non 0/1 value: %s", err_msg());
    unlink(path);
}

// A NaN weight or moment names the file it came from, the tensor, and the element within
// the tensor (past the first chunk of 65536 scores, so not the chunk's own index).
static void test_bad_values(void) {
    enum { N = 100000, AT = 70000 };
    ParamInfo info[1] = {{"model.layers.0.mlp.up_proj.weight", 0, N, 2, {1000, 100}, 1}};
    float *w = xcalloc(N, sizeof *w), *m = xcalloc(N, sizeof *m), *v = xcalloc(N, sizeof *v);
    uint8_t *mask = xmalloc(N);
    for (int i = 0; i < N; i++) w[i] = 1.0f + (float)(i % 7);
    Moments mo;
    moments_from_block(&mo, m, v, 0);
    MaskSpec sp = {SAL_MAGNITUDE, GROUP_GLOBAL, 0.5, "models/m", 0, 0, 0};
    w[AT] = NAN;
    T_OK(mask_compute(mask, &sp, info, 1, w, N, NULL, NULL) < 0 &&
             strstr(err_msg(), "models/m: tensor model.layers.0.mlp.up_proj.weight: weight 70000 is nan"),
         "a NaN weight: %s", err_msg());
    w[AT] = 1.0f;
    v[AT] = -INFINITY;
    sp.saliency = SAL_SECOND;
    T_OK(mask_compute(mask, &sp, info, 1, w, N, &mo, NULL) < 0 &&
             strstr(err_msg(), "the Adam moments: tensor model.layers.0.mlp.up_proj.weight.exp_avg_sq: element 70000 is inf"),
         "an inf moment: %s", err_msg());
    v[AT] = -1.0f;
    T_OK(mask_compute(mask, &sp, info, 1, w, N, &mo, NULL) < 0 && strstr(err_msg(), "element 70000 is negative"),
         "a negative exp_avg_sq: %s", err_msg());
    free(w), free(m), free(v), free(mask);
}

static void test_module_of(void) {
    int l = -1;
    T_OK(mask_module_of(&l, "model.layers.31.mlp.gate_proj.weight") == 4 && l == 31 &&
             mask_module_of(&l, "model.layers.3.self_attn.q_proj.bias") < 0 && mask_module_of(&l, "lm_head.weight") < 0,
         "module and layer from HF names");
}

// --- BEST with an N:M target (nm.h's protection) ------------------------------------------

// embed (3, 5) | q (6, 8) | norm (3) | up (4, 12) | down (5, 4): tensors at offsets that are
// not multiples of 4, so that groups start at each tensor's offset, not the block's
static ParamInfo INFO_NM[5] = {
    {"model.embed_tokens.weight", 0, 15, 2, {3, 5}, 0},
    {"model.layers.0.self_attn.q_proj.weight", 15, 48, 2, {6, 8}, 1},
    {"model.norm.weight", 63, 3, 1, {3, 0}, 0},
    {"model.layers.0.mlp.up_proj.weight", 66, 48, 2, {4, 12}, 1},
    {"model.layers.0.mlp.down_proj.weight", 114, 20, 2, {5, 4}, 1},
};
#define NP_NM 134

// The reference of an N:M update, written from the rule and not from nm.c: in every group
// of m, the `keep` best alive (score desc, then the higher column) score +inf; then the
// global first k by (score desc, index asc) among the alive (reference()).
static void reference_nm(uint8_t *mask, const float *score0, const uint8_t *old, int m, int keep, uint64_t k) {
    float score[NP_NM];
    int pos[NP_NM], n = 0;
    memcpy(score, score0, sizeof score);
    for (int t = 0; t < 5; t++) {
        if (!INFO_NM[t].prunable) continue;
        for (size_t g = INFO_NM[t].offset; g < INFO_NM[t].offset + INFO_NM[t].numel; g += (size_t)m) {
            int taken[32] = {0};
            for (int r = 0; r < keep; r++) { // the best untaken alive member, ties to the higher column
                int best = -1;
                for (int j = 0; j < m; j++)
                    if (old[g + j] && !taken[j] && (best < 0 || score[g + j] >= score[g + best])) best = j;
                if (best >= 0) taken[best] = 1;
            }
            for (int j = 0; j < m; j++)
                if (taken[j]) score[g + j] = INFINITY;
        }
        for (size_t j = 0; j < INFO_NM[t].numel; j++)
            if (old[INFO_NM[t].offset + j]) pos[n++] = (int)(INFO_NM[t].offset + j);
    }
    memset(mask, 1, NP_NM);
    for (int i = 0; i < 5; i++) // pruned by the old mask: stay pruned
        if (INFO_NM[i].prunable)
            for (size_t j = 0; j < INFO_NM[i].numel; j++) mask[INFO_NM[i].offset + j] = 0;
    reference(mask, score, pos, n, k);
}

// Kept weights of the tensor's fewest-kept group, and most-kept.
static void group_range(int *lo, int *hi, const uint8_t *mask, int m) {
    *lo = m, *hi = 0;
    for (int t = 0; t < 5; t++)
        for (size_t g = 0; INFO_NM[t].prunable && g < INFO_NM[t].numel; g += (size_t)m) {
            int c = 0;
            for (int j = 0; j < m; j++) c += mask[INFO_NM[t].offset + g + j];
            if (c < *lo) *lo = c;
            if (c > *hi) *hi = c;
        }
}

static void test_nm_ramp(void) {
    const char *pats[] = {"2:4", "1:4", "3:4"};
    for (int ip = 0; ip < 3; ip++)
        for (int r = 0; r < 2; r++) {
            NMPattern p;
            nm_parse(&p, pats[ip]);
            NMRamp ramp = r ? NM_RAMP_GROUP : NM_RAMP_GLOBAL;
            double Sf = nm_sparsity(&p);
            float w[NP_NM], v[NP_NM], score[NP_NM];
            uint8_t old[NP_NM], mask[NP_NM], want[NP_NM];
            memset(old, 1, sizeof old);
            Moments mo;
            moments_from_block(&mo, w, v, 0); // (exp_avg unread by the second order)
            int ok = 1, floor_ok = 1, at_end = 0;
            const double f[] = {0.05, 0.3, 0.55, 0.8, 1.0}; // the schedule's S / S_f at the updates
            for (int u = 0; u < 5; u++) {
                for (int i = 0; i < NP_NM; i++) { // training moved the weights; pruned ones are 0
                    w[i] = old[i] ? next_w() : 0.0f;
                    v[i] = fabsf(next_w()) + 0.25f;
                    score[i] = 0.5f * v[i] * w[i] * w[i];
                }
                int keep;
                double S;
                nm_ramp_at(&keep, &S, &p, ramp, f[u] * Sf);
                MaskSpec sp = {SAL_SECOND, GROUP_GLOBAL, S, NULL, 0, p.m, keep};
                ok &= mask_compute(mask, &sp, INFO_NM, 5, w, NP_NM, &mo, old) == 0;
                reference_nm(want, score, old, p.m, keep, select_keep_count(S, 116));
                ok &= memcmp(mask, want, NP_NM) == 0;
                int lo, hi;
                group_range(&lo, &hi, mask, p.m);
                floor_ok &= lo >= keep && mask_count(mask, NP_NM) == select_keep_count(S, 116) + 18;
                if (u == 4) at_end = lo == p.n && hi == p.n;
                memcpy(old, mask, NP_NM);
            }
            T_OK(ok && floor_ok && at_end,
                 "N:M %s, ramp %s: five updates == the reference (protect the best alive of each group, then "
                 "the global first k), every group keeps its protected count, the last leaves exactly %d of %d",
                 pats[ip], nm_ramp_name(ramp), p.n, p.m);
        }
    // the ramps' arithmetic
    NMPattern p = {4, 8};
    int keep;
    double S;
    nm_ramp_at(&keep, &S, &p, NM_RAMP_GROUP, 0.0);
    T_OK(keep == 8 && S == 0, "group ramp at S 0: 8 of 8, sparsity 0");
    nm_ramp_at(&keep, &S, &p, NM_RAMP_GROUP, 0.5 * 0.26);
    T_OK(keep == 7 && S == 0.125, "group ramp at 26%% of the way: 7 of 8 (%d), sparsity 0.125 (%g)", keep, S);
    nm_ramp_at(&keep, &S, &p, NM_RAMP_GROUP, 0.5 * 0.99);
    T_OK(keep == 5 && S == 0.375, "group ramp at 99%%: 5 of 8 (%d), never ahead of the schedule", keep);
    nm_ramp_at(&keep, &S, &p, NM_RAMP_GROUP, 0.5);
    T_OK(keep == 4 && S == 0.5, "group ramp at the end: 4 of 8");
    nm_ramp_at(&keep, &S, &p, NM_RAMP_GLOBAL, 0.3);
    T_OK(keep == 4 && S == 0.3, "global ramp: protects N, prunes to S(t)");
    MaskSpec bad = {SAL_MAGNITUDE, GROUP_GLOBAL, 0.5, NULL, 0, 4, 5};
    uint8_t mask[NP_NM];
    float w[NP_NM] = {0};
    T_OK(mask_compute(mask, &bad, INFO_NM, 5, w, NP_NM, NULL, NULL) < 0 && strstr(err_msg(), "keeping 5"),
         "keep > M is an error: %s", err_msg());
    // edges: a rank's slice cutting groups (nm_edges_find on its own: the exchange is dist_check's)
    NMEdges e;
    nm_edges_find(&e, INFO_NM, 5, 4, 17, 70);
    T_OK(e.len[0] == 2 && e.at[0] == 17 && e.first[0] == 15 && e.tensor[0] == 1 && e.len[1] == 0,
         "edges of [17, 70): the q group [15, 19) cut at 17 (own 2); 70 ends up's first group [66, 70)");
    nm_edges_find(&e, INFO_NM, 5, 4, 64, 68);
    T_OK(e.len[0] == 0 && e.len[1] == 2 && e.at[1] == 66 && e.first[1] == 66,
         "edges of [64, 68): the norm holds 64 (not prunable); up's group [66, 70) owned [66, 68)");
    nm_edges_find(&e, INFO_NM, 5, 4, 116, 117);
    T_OK(e.len[0] == 1 && e.first[0] == 114 && e.len[1] == 0, "a slice inside one group: one edge of 1");
}

int main(void) {
    test_compute();
    test_bias_correction();
    test_files();
    test_bad_values();
    test_module_of();
    test_nm_ramp();
    T_DONE();
}
