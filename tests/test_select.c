// test_select.c: the radix select (select.h) and the saliency formulas (saliency.h)
// against a full sort: exactly k survivors, the same set as "sort by score, ties by
// lowest index", for many sizes and k, heavy ties, all-equal scores, k = 0 and k = n,
// scores streamed in chunks of random sizes; three simulated ranks that only add their
// histograms and prefix their tie counts give the single rank's mask; a Select started
// at the exact rounds (select_init_exact, the device path's start) gives the same mask.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "sparse/saliency.h"
#include "sparse/select.h"
#include "test.h"

static uint64_t rng = 88172645463325252ull;
static uint64_t next_u64(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }
static double next_unit(void) { return (double)(next_u64() >> 11) / 9007199254740992.0; }

static const float *g_scores;
// descending score, then ascending index; candidates (sign clear) before the rest
static int by_rank(const void *a, const void *b) {
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    float x = g_scores[i], y = g_scores[j];
    int ci = !signbit(x), cj = !signbit(y);
    if (ci != cj) return cj - ci;
    if (x != y) return x > y ? -1 : 1;
    return i < j ? -1 : 1;
}

// The reference: the first k of a full sort.
static void reference_mask(uint8_t *mask, const float *s, size_t n, uint64_t k) {
    size_t *ix = xmalloc((n ? n : 1) * sizeof *ix);
    for (size_t i = 0; i < n; i++) ix[i] = i;
    g_scores = s;
    qsort(ix, n, sizeof *ix, by_rank);
    memset(mask, 0, n);
    for (uint64_t i = 0; i < k; i++) mask[ix[i]] = 1;
    free(ix);
}

// One rank over all n scores, streamed in chunks of random sizes; exact: started by
// select_init_exact.
static int select_one(uint8_t *mask, Select *s, const float *x, size_t n, uint64_t k, int exact) {
    if (exact) select_init_exact(s, k);
    else select_init(s, k);
    while (!s->done) {
        for (size_t off = 0; off < n && select_needs_data(s);) {
            size_t c = 1 + next_u64() % (n / 3 + 1);
            if (c > n - off) c = n - off;
            select_count(s, x + off, c);
            off += c;
        }
        if (select_advance(s) < 0) return -1;
    }
    uint64_t ties = 0;
    for (size_t off = 0; off < n;) {
        size_t c = 1 + next_u64() % (n / 2 + 1);
        if (c > n - off) c = n - off;
        select_mark(mask + off, s, x + off, c, &ties);
        off += c;
    }
    return 0;
}

// Three ranks holding contiguous slices [cut[r], cut[r+1]); the all-reduce is a sum.
static int select_ranks(uint8_t *mask, uint32_t thr[3], const float *x, size_t n, uint64_t k) {
    size_t cut[4] = {0, next_u64() % (n + 1), 0, n};
    cut[2] = cut[1] + next_u64() % (n - cut[1] + 1);
    Select s[3];
    for (int r = 0; r < 3; r++) select_init(&s[r], k);
    while (!s[0].done) {
        if (select_needs_data(&s[0]))
            for (int r = 0; r < 3; r++) select_count(&s[r], x + cut[r], cut[r + 1] - cut[r]);
        for (uint32_t b = 0; b < SELECT_HIST_LEN; b++) {
            uint64_t sum = s[0].hist[b] + s[1].hist[b] + s[2].hist[b];
            for (int r = 0; r < 3; r++) s[r].hist[b] = sum;
        }
        for (int r = 0; r < 3; r++)
            if (select_advance(&s[r]) < 0) return -1;
    }
    uint64_t ties[3], before = 0;
    for (int r = 0; r < 3; r++) ties[r] = select_count_ties(&s[r], x + cut[r], cut[r + 1] - cut[r]);
    for (int r = 0; r < 3; r++) {
        uint64_t mine = before; // exclusive prefix sum
        before += ties[r];
        select_mark(mask + cut[r], &s[r], x + cut[r], cut[r + 1] - cut[r], &mine);
        thr[r] = s[r].threshold;
        select_free(&s[r]);
    }
    return 0;
}

static void fill(float *x, size_t n, int kind) {
    static const float five[5] = {0.0f, 0.25f, 1.0f, 3.5f, 1e-30f};
    for (size_t i = 0; i < n; i++) {
        switch (kind) {
        case 0: x[i] = (float)(next_unit() * next_unit()); break;         // spread out
        case 1: x[i] = five[next_u64() % 5]; break;                       // heavy ties
        case 2: x[i] = 0.75f; break;                                      // all equal
        case 3: x[i] = next_u64() % 4 == 0 ? -1.0f : (float)next_unit(); break; // with excluded
        default: x[i] = (float)ldexp(next_unit(), -(int)(next_u64() % 140)); break; // tiny + denormals
        }
    }
}

static void test_against_sort(void) {
    static const size_t sizes[] = {1, 2, 3, 7, 100, 1000, 4097, 65537, 300001};
    static const char *kinds[] = {"spread", "5 values", "all equal", "excluded", "tiny"};
    int bad = 0, cases = 0, bad_ranks = 0, bad_exact = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        size_t n = sizes[si];
        float *x = xmalloc(n * sizeof *x);
        uint8_t *a = xmalloc(n), *b = xmalloc(n), *c = xmalloc(n);
        for (int kind = 0; kind < 5; kind++) {
            fill(x, n, kind);
            uint64_t cand = 0;
            for (size_t i = 0; i < n; i++) cand += !signbit(x[i]);
            uint64_t ks[6] = {0, cand, cand / 2, cand ? cand - 1 : 0, 1 < cand ? 1 : cand, cand ? next_u64() % cand : 0};
            for (int ki = 0; ki < 6; ki++) {
                uint64_t k = ks[ki];
                Select s;
                reference_mask(a, x, n, k);
                int ok = select_one(b, &s, x, n, k, 0) == 0 && memcmp(a, b, n) == 0;
                uint64_t kept = 0;
                for (size_t i = 0; i < n; i++) kept += b[i];
                ok = ok && kept == k;
                // the threshold is the k-th largest score itself
                if (ok && k > 0) {
                    float kth = INFINITY;
                    for (size_t i = 0; i < n; i++)
                        if (a[i] && x[i] < kth) kth = x[i];
                    ok = select_bits(kth) == s.threshold;
                }
                uint32_t thr_sampled = s.threshold;
                select_free(&s);
                int oke = select_one(c, &s, x, n, k, 1) == 0 && memcmp(a, c, n) == 0 &&
                          s.threshold == thr_sampled;
                select_free(&s);
                if (!oke) { bad_exact++; printf("# exact start differs: n %zu, %s, k %llu\n", n, kinds[kind], (unsigned long long)k); }
                uint32_t thr[3];
                int okr = select_ranks(c, thr, x, n, k) == 0 && memcmp(b, c, n) == 0 && thr[0] == thr[1] &&
                          thr[1] == thr[2];
                if (!ok) { bad++; printf("# mismatch: n %zu, %s, k %llu\n", n, kinds[kind], (unsigned long long)k); }
                if (!okr) { bad_ranks++; printf("# 3 ranks differ: n %zu, %s, k %llu\n", n, kinds[kind], (unsigned long long)k); }
                cases++;
            }
        }
        free(x), free(a), free(b), free(c);
    }
    T_OK(bad == 0, "radix select == full sort with lowest-index ties, exactly k kept (%d cases, %d bad)", cases, bad);
    T_OK(bad_ranks == 0, "3 simulated ranks (summed histograms, prefix tie counts) == 1 rank (%d cases)", cases);
    T_OK(bad_exact == 0, "select_init_exact (two full counts, no sample) == full sort, same threshold (%d cases, %d bad)",
         cases, bad_exact);
}

// One chunk of n scores, the way bench_select runs it; *passes counts the passes over
// the data (2 on the fast path: sample + main).
static int select_passes(uint8_t *mask, const float *x, size_t n, uint64_t k, int *passes, int exact) {
    Select s;
    if (exact) select_init_exact(&s, k);
    else select_init(&s, k);
    *passes = 0;
    int rc = 0;
    while (!s.done && rc == 0) {
        if (select_needs_data(&s)) {
            select_count(&s, x, n);
            ++*passes;
        }
        rc = select_advance(&s);
    }
    uint64_t ties = 0;
    if (rc == 0) select_mark(mask, &s, x, n, &ties);
    select_free(&s);
    return rc;
}

static void test_large_parallel(void) {
    // above the OpenMP threshold, so the per-thread histograms are exercised
    size_t n = (size_t)3 << 20;
    float *x = xmalloc(n * sizeof *x);
    uint8_t *a = xmalloc(n), *b = xmalloc(n);
    static const char *what[] = {
        "spread scores: one sample pass + one main pass",
        "5 values (heavy ties): the bracket overflows, exact fallback",
        "a misleading sample (sampled positions hold the largest scores): exact fallback",
    };
    static const int want_passes[] = {2, 3, 4};
    for (int c = 0; c < 3; c++) {
        if (c == 0) fill(x, n, 0);
        if (c == 1) fill(x, n, 1);
        if (c == 2)
            for (size_t i = 0; i < n; i++) x[i] = (float)(i % 1024 < 16 ? 2 + next_unit() : next_unit());
        uint64_t k = n / 3 + 17;
        reference_mask(a, x, n, k);
        int passes = 0;
        int ok = select_passes(b, x, n, k, &passes, 0) == 0 && memcmp(a, b, n) == 0;
        T_OK(ok && passes == want_passes[c], "3M scores in one chunk, %s == full sort (%d passes)", what[c], passes);
        ok = select_passes(b, x, n, k, &passes, 1) == 0 && memcmp(a, b, n) == 0;
        T_OK(ok && passes == 2, "the same from select_init_exact == full sort (%d passes: the two full counts)", passes);
    }
    Select s;
    select_init(&s, n + 1);
    int rc = 0;
    while (!s.done && rc == 0) {
        select_count(&s, x, n);
        rc = select_advance(&s);
    }
    T_OK(rc < 0 && strstr(err_msg(), "cannot keep"), "k > n is an error: %s", err_msg());
    select_free(&s);
    select_init_exact(&s, n + 1);
    rc = 0;
    while (!s.done && rc == 0) {
        select_count(&s, x, n);
        rc = select_advance(&s);
    }
    T_OK(rc < 0 && strstr(err_msg(), "cannot keep"), "k > n is an error from select_init_exact too: %s", err_msg());
    select_free(&s);
    free(x), free(a), free(b);
}

static void test_keep_count(void) {
    T_OK(select_keep_count(0.5, 7) == 4 && select_keep_count(0.9, 10) == 1 && select_keep_count(0.0, 5) == 5 &&
             select_keep_count(0.999999, 10) == 0 && select_keep_count(0.5, 0) == 0 && select_keep_count(0.7, 10) == 3,
         "keep count = floor((1 - S) n + 0.5)");
}

static void test_saliency(void) {
    float w[5] = {2.0f, -3.0f, 0.0f, -0.0f, 0.5f}, m[5] = {1.0f, 2.0f, 5.0f, 1.0f, -4.0f},
          v[5] = {0.5f, 2.0f, 9.0f, 0.0f, 1.0f}, s[5];
    int ok = saliency_score(s, SAL_SECOND, w, m, v, 5) == 0;
    ok = ok && s[0] == 1.0f && s[1] == 9.0f && s[2] == 0.0f && s[3] == 0.0f && s[4] == 0.125f && !signbit(s[3]);
    T_OK(ok, "second order 0.5 v w^2, pruned weights score +0");
    ok = saliency_score(s, SAL_FIRST, w, m, v, 5) == 0;
    ok = ok && s[0] == 2.0f && s[1] == 6.0f && s[2] == 0.0f && !signbit(s[3]) && s[4] == 2.0f;
    T_OK(ok, "first order |m w|");
    ok = saliency_score(s, SAL_MAGNITUDE, w, NULL, NULL, 5) == 0;
    ok = ok && s[0] == 2.0f && s[1] == 3.0f && s[2] == 0.0f && !signbit(s[3]) && s[4] == 0.5f;
    T_OK(ok, "magnitude |w|");
    v[4] = NAN;
    T_OK(saliency_score(s, SAL_SECOND, w, m, v, 5) < 0 && strstr(err_msg(), "element 4: exp_avg_sq is nan"),
         "NaN exp_avg_sq rejected: %s", err_msg());
    v[4] = -1.0f;
    T_OK(saliency_score(s, SAL_SECOND, w, m, v, 5) < 0 && strstr(err_msg(), "negative"), "negative exp_avg_sq rejected");
    w[1] = INFINITY;
    T_OK(saliency_score(s, SAL_MAGNITUDE, w, NULL, NULL, 5) < 0 && strstr(err_msg(), "element 1: weight is inf"),
         "inf weight rejected: %s", err_msg());
    m[0] = NAN;
    w[1] = 1.0f;
    T_OK(saliency_score(s, SAL_FIRST, w, m, v, 5) < 0 && strstr(err_msg(), "exp_avg is nan"), "NaN exp_avg rejected");
    Saliency sal;
    T_OK(saliency_parse(&sal, "first") == 0 && sal == SAL_FIRST && saliency_parse(&sal, "hessian") < 0,
         "saliency names parse");
}

static int u64_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

// select_smallest against qsort: the first k after it are the k smallest, for keys
// unique, with many equal (a few distinct values), all equal, and k at 0, 1, n/2, n-1, n.
static void test_smallest(void) {
    enum { N = 1001 };
    static uint64_t keys[N], sorted[N], got[N];
    int bad = 0, cases = 0;
    for (int kind = 0; kind < 3; kind++) {
        uint64_t r = 12345;
        for (size_t i = 0; i < N; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            keys[i] = kind == 0 ? (r >> 20) << 32 | i : kind == 1 ? (r >> 61) : 7;
        }
        memcpy(sorted, keys, sizeof keys);
        qsort(sorted, N, sizeof *sorted, u64_cmp);
        size_t ks[] = {0, 1, N / 2, N - 1, N};
        for (size_t j = 0; j < 5; j++) {
            memcpy(got, keys, sizeof keys);
            select_smallest(got, N, ks[j]);
            qsort(got, ks[j], sizeof *got, u64_cmp);
            bad += memcmp(got, sorted, ks[j] * sizeof *got) != 0;
            cases++;
        }
    }
    T_OK(bad == 0, "select_smallest: the k smallest first, as qsort's (%d of %d cases differ)", bad, cases);
}

int main(void) {
    test_smallest();
    test_saliency();
    test_keep_count();
    test_against_sort();
    test_large_parallel();
    T_DONE();
}
