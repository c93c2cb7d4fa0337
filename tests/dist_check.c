// dist_check: dist.h's collectives and the distributed mask selection, run by
// tests/t_mpi.sh under `mpirun -np N` (N = 1..4) and without mpirun.
//
//   dist_check collectives   every collective against the value each rank can work out
//                            alone (sums in rank order, bit for bit); exit 1 on a mismatch
//   dist_check select FILE   masks of a small uneven model (5 tensors, 611 weights, values
//                            drawn from 5 levels: ties everywhere) under several specs,
//                            each computed by the ranks on their slices
//                            (mask_compute_slice), gathered, and written by rank 0 to FILE;
//                            t_mpi.sh compares FILE with the one-process run's, byte for byte;
//                            then BEST's N:M updates, whose groups the slices cut (nm.h's edges)
//   dist_check watch         rank 0 marks a wait (dist_watch), takes part in a collective
//                            inside it, then sleeps 5 s: with BEST_DIST_TIMEOUT=1 the
//                            watchdog must end it, naming the wait (t_mpi.sh)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"   // defines: xmalloc, err_msg
#include "dist/dist.h"    // defines: dist_init, dist_slice, dist_*
#include "sparse/mask.h"  // defines: mask_compute_slice, MaskSpec, Moments
#include "sparse/nm.h"    // defines: NMPattern, nm_ramp_at

static int fails, checks;
#define EXPECT(cond, ...)                                                              \
    do {                                                                               \
        checks++;                                                                      \
        if (!(cond)) {                                                                 \
            fails++;                                                                   \
            fprintf(stderr, "rank %d: FAIL %s:%d: ", dist_rank(), __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                              \
            fprintf(stderr, "\n");                                                     \
        }                                                                              \
    } while (0)

// A value rank r holds at element i, the same formula on every rank.
static float value_of(int r, size_t i) {
    return (float)((i * 2654435761u + (size_t)r * 40503u) % 1000) * 1e-3f + (float)r * 0.37f;
}

static void check_collectives(void) {
    int R = dist_rank(), N = dist_size();
    size_t sizes[] = {0, 1, 5, 611, 100003};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) { // slices tile [0, n) in rank order
        size_t n = sizes[k], next = 0;
        for (int r = 0; r < N; r++) {
            size_t lo, hi;
            dist_slice(&lo, &hi, n, r, N);
            EXPECT(lo == next && hi >= lo && hi - lo <= n / (size_t)N + 1, "slice %d of %zu: [%zu, %zu)", r, n, lo, hi);
            next = hi;
        }
        EXPECT(next == n, "slices of %zu end at %zu", n, next);
    }
    uint64_t u[2] = {(uint64_t)R + 1, 1000};
    dist_sum_u64(u, 2);
    EXPECT(u[0] == (uint64_t)N * (N + 1) / 2 && u[1] == 1000u * (uint64_t)N, "sum_u64 %llu %llu",
           (unsigned long long)u[0], (unsigned long long)u[1]);
    EXPECT(dist_exscan_u64((uint64_t)R + 1) == (uint64_t)R * (R + 1) / 2, "exscan");
    double d[3], want[3];
    for (int i = 0; i < 3; i++) {
        d[i] = 0.1 * (R + 1) + 1e-17 * i + (i == 2 ? 1e16 * (R % 2 ? -1 : 1) : 0);
        want[i] = 0.1 * 1 + 1e-17 * i + (i == 2 ? 1e16 : 0);
        for (int r = 1; r < N; r++) want[i] += 0.1 * (r + 1) + 1e-17 * i + (i == 2 ? 1e16 * (r % 2 ? -1 : 1) : 0);
    }
    dist_sum_f64(d, 3);
    EXPECT(memcmp(d, want, sizeof d) == 0, "sum_f64 not the rank-order sum: %.17g %.17g %.17g", d[0], d[1], d[2]);
    // reduce-scatter: the sum over ranks in rank order, bit for bit, over several rounds
    size_t n = 100003, lo, hi;
    dist_slice(&lo, &hi, n, R, N);
    float *x = xmalloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = value_of(R, i);
    dist_reduce_scatter_f32(x, n);
    size_t bad = 0;
    for (size_t i = lo; i < hi; i++) {
        float s = value_of(0, i);
        for (int r = 1; r < N; r++) s += value_of(r, i);
        bad += memcmp(&s, &x[i], sizeof s) != 0;
    }
    EXPECT(bad == 0, "reduce-scatter: %zu of %zu elements differ from the rank-order sum", bad, hi - lo);
    // all-gather in place, and gather to rank 0 from a separate slice
    for (size_t i = lo; i < hi; i++) x[i] = value_of(7, i);
    dist_gather(x, x + lo, n, sizeof *x, 1);
    bad = 0;
    for (size_t i = 0; i < n; i++) bad += x[i] != value_of(7, i);
    EXPECT(bad == 0, "all-gather: %zu elements wrong", bad);
    uint8_t *mine = xmalloc(hi - lo + 1), *full = R == 0 ? xmalloc(n) : NULL;
    for (size_t i = lo; i < hi; i++) mine[i - lo] = (uint8_t)(i * 31 % 251);
    dist_gather(full, mine, n, 1, 0);
    bad = 0;
    for (size_t i = 0; full && i < n; i++) bad += full[i] != (uint8_t)(i * 31 % 251);
    EXPECT(bad == 0, "gather to rank 0: %zu bytes wrong", bad);
    // broadcast from the last rank: its bytes everywhere
    char id[130];
    for (size_t i = 0; i < sizeof id; i++) id[i] = (char)(R == N - 1 ? i * 7 + 1 : 0);
    dist_bcast(id, sizeof id, N - 1);
    bad = 0;
    for (size_t i = 0; i < sizeof id; i++) bad += id[i] != (char)(i * 7 + 1);
    EXPECT(bad == 0, "broadcast from rank %d: %zu bytes wrong", N - 1, bad);
    // agreement: one failing rank fails all; none failing, none
    EXPECT(dist_agree(0) == 0, "agree(0 everywhere)");
    EXPECT(dist_agree(R == N - 1 ? -1 : 0) == -1, "agree(the last rank failed)");
    EXPECT(N == 1 || dist_bytes() > 0, "bytes counted");
    free(x);
    free(mine);
    free(full);
}

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// BEST with an N:M target (nm.h): a model whose tensors start off the groups' grid and
// whose slices cut groups on every rank count (3 ranks: [202, 403): the cut at 403 inside a
// group of up; 4 ranks: cuts inside q, up and down), five updates of each ramp, each from
// the last mask; the masks appended to FILE.
static int check_select_nm(const char *path) {
    ParamInfo info[5] = {
        {"model.embed_tokens.weight", 0, 37, 2, {37, 1}, 0},
        {"model.layers.0.self_attn.q_proj.weight", 37, 156, 2, {13, 12}, 1},
        {"model.layers.0.input_layernorm.weight", 193, 11, 1, {11, 0}, 0},
        {"model.layers.0.mlp.up_proj.weight", 204, 232, 2, {29, 8}, 1},
        {"model.layers.0.mlp.down_proj.weight", 436, 168, 2, {7, 24}, 1},
    };
    size_t n = 604, lo, hi;
    dist_slice(&lo, &hi, n, dist_rank(), dist_size());
    float *w = xmalloc(n * sizeof *w), *v = xmalloc(n * sizeof *v);
    uint8_t *slice = xmalloc(hi - lo + 1), *old = xmalloc(hi - lo + 1), *full = xmalloc(n);
    const char *pats[] = {"2:4", "1:4", "3:4", "1:2"};
    int rc = 0;
    FILE *f = dist_rank() == 0 ? fopen(path, "ab") : NULL;
    if (dist_rank() == 0 && !f) rc = ERR("%s: cannot append", path);
    rc = dist_agree(rc);
    for (int k = 0; k < 8 && rc == 0; k++) {
        NMPattern p;
        nm_parse(&p, pats[k / 2]);
        memset(old, 1, hi - lo);
        for (int u = 1; u <= 5 && rc == 0; u++) {
            for (size_t i = 0; i < n; i++) { // 5 levels again; v from 4: ties everywhere
                w[i] = (float)((int)(mix(i * 31 + (size_t)(k * 5 + u)) % 5) - 2) * 0.25f;
                v[i] = (float)(mix(i + 9999 + (size_t)u) % 4) * 0.1f;
            }
            Moments mo;
            moments_from_block(&mo, w + lo, v + lo, lo); // (exp_avg: unread by the second order)
            int keep;
            double S;
            nm_ramp_at(&keep, &S, &p, k % 2 ? NM_RAMP_GROUP : NM_RAMP_GLOBAL, nm_sparsity(&p) * u / 5);
            MaskSpec spec = {SAL_SECOND, k % 4 == 3 ? GROUP_LAYER : GROUP_GLOBAL, S, NULL, 0, p.m, keep};
            rc = mask_compute_slice(slice, &spec, info, 5, w, lo, hi, &mo, old);
            memcpy(old, slice, hi - lo);
            dist_gather(full, slice, n, 1, 0);
            if (rc == 0 && f && fwrite(full, 1, n, f) != n) rc = ERR("%s: cannot write", path);
            for (int t = 1; rc == 0 && f && u == 5 && t < 5; t += 2) { // the last: exactly N of M
                const ParamInfo *q = &info[t];
                size_t kept = 0;
                for (size_t j = 0; j < q->numel; j++) kept += full[q->offset + j];
                if (nm_violations(full + q->offset, (size_t)q->shape[0], (size_t)q->shape[1], &p) ||
                    kept != q->numel / (size_t)p.m * (size_t)p.n)
                    rc = ERR("%s %s: the last update keeps %zu of %zu, not %s", pats[k / 2], q->name, kept, q->numel,
                             pats[k / 2]);
            }
            rc = dist_agree(rc);
        }
    }
    if (f && fclose(f) != 0 && rc == 0) rc = ERR("%s: cannot write", path);
    free(w), free(v), free(slice), free(old), free(full);
    return rc;
}

static int check_select(const char *path) {
    ParamInfo info[5] = {
        {"model.embed_tokens.weight", 0, 37, 2, {37, 1}, 0},
        {"model.layers.0.self_attn.q_proj.weight", 37, 143, 2, {13, 11}, 1},
        {"model.layers.0.input_layernorm.weight", 180, 11, 1, {11, 0}, 0},
        {"model.layers.0.mlp.up_proj.weight", 191, 203, 2, {29, 7}, 1},
        {"model.layers.0.mlp.down_proj.weight", 394, 217, 2, {7, 31}, 1},
    };
    size_t n = 611, lo, hi;
    dist_slice(&lo, &hi, n, dist_rank(), dist_size());
    float *w = xmalloc(n * sizeof *w), *m = xmalloc(n * sizeof *m), *v = xmalloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) {
        w[i] = (float)((int)(mix(i) % 5) - 2) * 0.25f; // 5 levels: ties everywhere
        m[i] = (float)(mix(i + 7777) % 3) * 0.5f - 0.5f;
        v[i] = (float)(mix(i + 9999) % 4) * 0.1f;
    }
    Moments mo;
    moments_from_block(&mo, m + lo, v + lo, lo); // the slice only, as best-train holds it
    struct { Saliency s; MaskGroup g; double S; int use_old; } specs[] = {
        {SAL_MAGNITUDE, GROUP_GLOBAL, 0.3, 0}, {SAL_MAGNITUDE, GROUP_GLOBAL, 0.7, 1},
        {SAL_SECOND, GROUP_GLOBAL, 0.5, 0},    {SAL_SECOND, GROUP_GLOBAL, 0.95, 1},
        {SAL_FIRST, GROUP_LAYER, 0.6, 0},      {SAL_SECOND, GROUP_LAYER, 0.9, 1},
    };
    size_t ns = sizeof specs / sizeof *specs;
    uint8_t *slice = xmalloc(hi - lo + 1), *old = xmalloc(hi - lo + 1), *full = xmalloc(n * ns);
    int rc = 0;
    for (size_t k = 0; k < ns && rc == 0; k++) {
        MaskSpec spec = {specs[k].s, specs[k].g, specs[k].S, NULL, 0, 0, 0};
        rc = mask_compute_slice(slice, &spec, info, 5, w, lo, hi, &mo, specs[k].use_old ? old : NULL);
        memcpy(old, slice, hi - lo);
        dist_gather(full + k * n, slice, n, 1, 0);
    }
    if (rc == 0 && dist_rank() == 0) {
        FILE *f = fopen(path, "wb");
        rc = f && fwrite(full, 1, n * ns, f) == n * ns && fclose(f) == 0 ? 0 : ERR("%s: cannot write", path);
    }
    free(w), free(m), free(v), free(slice), free(old), free(full);
    return rc == 0 ? check_select_nm(path) : rc;
}

int main(int argc, char **argv) {
    err_set_prog("dist_check");
    TRY_OR_DIE(dist_init(&argc, &argv));
    if (argc >= 2 && strcmp(argv[1], "collectives") == 0) {
        check_collectives();
        printf("dist_check: rank %d of %d: %d checks, %d failed\n", dist_rank(), dist_size(), checks, fails);
    } else if (argc == 3 && strcmp(argv[1], "select") == 0) {
        TRY_OR_DIE(check_select(argv[2]));
    } else if (argc == 2 && strcmp(argv[1], "watch") == 0) {
        if (dist_rank() == 0) dist_watch("a marked wait");
        uint64_t one = 1;
        dist_sum_u64(&one, 1); // a collective inside the span: it must not end it
        if (dist_rank() == 0) sleep(5);
        dist_watch(NULL);
    } else {
        fprintf(stderr, "usage: dist_check collectives | select FILE | watch\n");
        return 2;
    }
    dist_finalize();
    return fails ? 1 : 0;
}
