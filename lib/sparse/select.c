// select.c: the radix select of select.h.
#include "sparse/select.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h" // defines: ERR, xcalloc

// Below this a chunk is counted by one thread: starting a team and clearing private
// histograms (256 KiB each) costs more than counting 1M scores.
#define PARALLEL_MIN ((size_t)1 << 20)

// Scores are read as their bit patterns in place; may_alias makes that legal C.
typedef uint32_t __attribute__((may_alias)) Bits;

// Extra counters after the buckets in s->hist.
enum { X_ABOVE = SELECT_BUCKETS, X_OVERFLOW, X_SAMPLED, X_SCORES };

// The sample: SAMPLE_RUN consecutive scores out of every SAMPLE_PERIOD of a chunk.
#define SAMPLE_RUN 16
#define SAMPLE_PERIOD 1024
// The bracket: the sample's estimate of the k-th rank +- SIGMAS standard deviations.
#define SIGMAS 4.0

void select_init(Select *s, uint64_t k) {
    memset(s, 0, sizeof *s);
    s->k = k;
    s->hist = xcalloc(SELECT_HIST_LEN, sizeof *s->hist);
    s->round = SELECT_SAMPLE;
    if (k == 0) { s->done = 1; s->threshold = UINT32_MAX; } // no candidate has this pattern
}

void select_init_exact(Select *s, uint64_t k) {
    select_init(s, k);
    if (!s->done) s->round = SELECT_FULL_HIGH;
}

static void kept_free(Select *s) {
    for (int i = 0; i < s->n_kept_arrays; i++) free(s->kept[i]);
    free(s->kept);
    free(s->kept_n);
    free(s->kept_cap);
    s->kept = NULL;
    s->kept_n = s->kept_cap = NULL;
    s->n_kept_arrays = 0;
}

void select_free(Select *s) {
    kept_free(s);
    free(s->hist);
    s->hist = NULL;
}

// Counts into private uint32 histograms: a thread's part of a chunk is below 2^32
// (select_count splits larger chunks). Real scores crowd into a few hundred buckets
// (all of [0.5, 1) is 128), so consecutive increments of one counter may wait on each
// other's store; on the 2-core benchmark VM interleaved copies measured no faster.
static void count_high(uint32_t *h, const Bits *u, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t b = u[i] >> SELECT_BITS;
        if (b < 0x8000u) h[b]++;  // sign bit set: not a candidate
    }
}

static void count_low(uint32_t *h, const Bits *u, size_t n, uint32_t prefix) {
    for (size_t i = 0; i < n; i++)
        if ((u[i] >> SELECT_BITS) == prefix) h[u[i] & (SELECT_BUCKETS - 1)]++;
}

static void count_sample(uint64_t *h, const Bits *u, size_t n) {
    for (size_t i = 0; i < n; i += SAMPLE_PERIOD)
        for (size_t j = i; j < n && j < i + SAMPLE_RUN; j++) {
            uint32_t b = u[j] >> SELECT_BITS;
            if (b < 0x8000u) h[b]++;
        }
}

static size_t sampled_in(size_t n) {
    return n / SAMPLE_PERIOD * SAMPLE_RUN + (n % SAMPLE_PERIOD < SAMPLE_RUN ? n % SAMPLE_PERIOD : SAMPLE_RUN);
}

// A score inside the bracket: counted in h (bucket b - lo) and kept in array a unless
// the array is full (then the round overflows into the exact fallback).
static void keep_score(uint32_t *h, Select *s, int a, size_t cap_max, uint32_t x) {
    h[(x >> SELECT_BITS) - s->lo]++;
    if (s->kept_n[a] == s->kept_cap[a]) {
        if (s->kept_cap[a] >= cap_max) {
#pragma omp atomic write
            s->overflow = 1;
            return;
        }
        size_t cap = s->kept_cap[a] ? 2 * s->kept_cap[a] : 4096;
        s->kept_cap[a] = cap < cap_max ? cap : cap_max;
        s->kept[a] = xrealloc(s->kept[a], s->kept_cap[a] * sizeof **s->kept);
    }
    s->kept[a][s->kept_n[a]++] = x;
}

// The main round over one thread's part: candidates above the bracket are counted,
// those inside it go to keep_score. Compiled for AVX-512, AVX2 and the baseline, chosen
// at load time (like lib/nn/layers.c's kernels): wider compares keep the pass nearer to the
// speed of memory. The result is the same integers whichever runs.
__attribute__((target_clones("avx512f", "avx2", "default")))
static uint64_t count_main(uint32_t *h, Select *s, int a, size_t cap_max, const Bits *u, size_t n) {
    // one unsigned compare each: x is in the bracket when x - lo <= width, above it
    // when x - (hi + 1) < 0x80000000 - (hi + 1) (a candidate has the sign bit clear)
    const uint32_t lo = s->lo << SELECT_BITS, hi = (s->hi << SELECT_BITS) | 0xFFFFu;
    const uint32_t width = hi - lo, up0 = hi + 1, up_n = 0x80000000u - up0;
    uint64_t above = 0;
    size_t i0 = 0;
    for (; i0 + 32 <= n; i0 += 32) {
        // blocks of a constant 32 (the compiler vectorises them); a block with a score
        // in the bracket (a few percent of them) is walked again one by one
        const Bits *b = u + i0;
        uint32_t up = 0, in = 0;
        for (int j = 0; j < 32; j++) {
            up += b[j] - up0 < up_n;
            in |= b[j] - lo <= width;
        }
        above += up;
        if (in)
            for (int j = 0; j < 32; j++)
                if (b[j] - lo <= width) keep_score(h, s, a, cap_max, b[j]);
    }
    for (size_t i = i0; i < n; i++) {
        above += u[i] - up0 < up_n;
        if (u[i] - lo <= width) keep_score(h, s, a, cap_max, u[i]);
    }
    return above;
}

// One thread's share of a chunk, counted into its private histogram h; in the main
// round it keeps its bracket scores in array a, at most cap_max of them.
static uint64_t count_part(uint32_t *h, Select *s, int a, size_t cap_max, const Bits *u, size_t n) {
    switch (s->round) {
    case SELECT_MAIN: return count_main(h, s, a, cap_max, u, n);
    case SELECT_FULL_HIGH: count_high(h, u, n); return 0;
    case SELECT_FULL_LOW: count_low(h, u, n, s->prefix); return 0;
    default: return 0;
    }
}

void select_count(Select *s, const float *scores, size_t n) {
    if (!select_needs_data(s)) return;
    if (s->round == SELECT_SAMPLE) {  // 1/64 of the scores: one thread, straight into hist
        count_sample(s->hist, (const Bits *)scores, n);
        s->hist[X_SCORES] += n;
        s->hist[X_SAMPLED] += sampled_in(n);
        return;
    }
    if (s->round == SELECT_MAIN && !s->kept) {
        s->n_kept_arrays = omp_get_max_threads();
        s->kept = xcalloc((size_t)s->n_kept_arrays, sizeof *s->kept);
        s->kept_n = xcalloc((size_t)s->n_kept_arrays, sizeof *s->kept_n);
        s->kept_cap = xcalloc((size_t)s->n_kept_arrays, sizeof *s->kept_cap);
        s->kept_max = (size_t)(s->n_scores / 32) + 65536;
    }
    // the main round's histogram covers the bracket only
    const size_t per = s->round == SELECT_MAIN ? s->hi - s->lo + 1 : SELECT_BUCKETS;
    const size_t h0 = s->round == SELECT_MAIN ? s->lo : 0;
    // pieces of at most 2^31 so that private uint32 counts cannot wrap
    for (size_t start = 0; start < n; start += (size_t)1 << 31) {
        size_t len = n - start < ((size_t)1 << 31) ? n - start : (size_t)1 << 31;
        const Bits *x = (const Bits *)scores + start;
        int nt = len >= PARALLEL_MIN ? omp_get_max_threads() : 1;
        if (s->round == SELECT_MAIN && nt > s->n_kept_arrays) nt = s->n_kept_arrays;
        // the kept scores stay under kept_max in all (twice that if serial and parallel
        // chunks mix: array 0 is shared by both)
        size_t cap_max = nt > 1 ? s->kept_max / (size_t)nt : s->kept_max;
        uint32_t *priv = xcalloc((size_t)nt * per, sizeof *priv);
        uint64_t above = 0;
#pragma omp parallel num_threads(nt) reduction(+ : above)
        {
            int t = omp_get_thread_num(), T = omp_get_num_threads();
            size_t lo = len * (size_t)t / (size_t)T, hi = len * (size_t)(t + 1) / (size_t)T;
            above += count_part(priv + (size_t)t * per, s, t, cap_max, x + lo, hi - lo);
#pragma omp barrier
            // sum the private histograms, each thread a range of buckets
            size_t b0 = per * (size_t)t / (size_t)T, b1 = per * (size_t)(t + 1) / (size_t)T;
            for (size_t b = b0; b < b1; b++) {
                uint64_t c = 0;
                for (int j = 0; j < T; j++) c += priv[(size_t)j * per + b];
                s->hist[h0 + b] += c;
            }
        }
        free(priv);
        s->hist[X_ABOVE] += above;
        s->hist[X_OVERFLOW] = (uint64_t)s->overflow;
    }
}

// From bucket `top` down: the first bucket b where above + the counts of b..top reach
// k, with *above updated to the candidates above b. UINT32_MAX if they never do.
static uint32_t bucket_of(const uint64_t *hist, uint32_t bottom, uint32_t top, uint64_t k, uint64_t *above) {
    uint64_t a = *above;
    for (uint32_t b = top + 1; b-- > bottom;) {
        if (a + hist[b] >= k) {
            *above = a;
            return b;
        }
        a += hist[b];
    }
    *above = a;
    return UINT32_MAX;
}

// The bracket [lo, hi] of buckets from the sample: the sample's r-th largest, r = k
// scaled by the sampled fraction, is the estimate; the bracket reaches SIGMAS binomial
// standard deviations (at most sqrt(r)) either way, plus a few scores.
static void choose_bracket(Select *s) {
    uint64_t m = 0;
    for (uint32_t b = 0; b < SELECT_BUCKETS; b++) m += s->hist[b];
    s->n_scores = s->hist[X_SCORES];
    double r = s->hist[X_SCORES] ? (double)s->k * (double)s->hist[X_SAMPLED] / (double)s->hist[X_SCORES] : 0;
    double d = SIGMAS * sqrt(r) + 8;
    s->hi = 0x7FFF;  // candidates have the sign bit clear
    s->lo = 0;
    if (r - d >= 1) {
        uint64_t a = 0;
        uint32_t b = bucket_of(s->hist, 0, 0x7FFF, (uint64_t)(r - d), &a);
        if (b != UINT32_MAX) s->hi = b;
    }
    if (r + d <= (double)m) {
        uint64_t a = 0;
        uint32_t b = bucket_of(s->hist, 0, 0x7FFF, (uint64_t)ceil(r + d), &a);
        if (b != UINT32_MAX) s->lo = b;
    }
    if (s->lo > s->hi) s->lo = s->hi;
}

static void finish(Select *s, uint32_t low, uint64_t above) {
    s->threshold = (s->prefix << SELECT_BITS) | low;
    s->n_above = above;
    s->ties_keep = s->k - above;
    s->done = 1;
}

int select_advance(Select *s) {
    if (s->done) return 0;
    uint64_t *h = s->hist;
    SelectRound r = s->round;
    uint64_t above = s->above;
    uint32_t b;
    switch (r) {
    case SELECT_SAMPLE:
        choose_bracket(s);
        s->round = SELECT_MAIN;
        break;
    case SELECT_MAIN:
        above = h[X_ABOVE];
        b = above < s->k ? bucket_of(h, s->lo, s->hi, s->k, &above) : UINT32_MAX;
        if (b == UINT32_MAX) {  // the sample misled: count everything
            s->round = SELECT_FULL_HIGH;
            kept_free(s);
            break;
        }
        s->prefix = b;
        s->above = above;
        if (h[X_OVERFLOW]) {  // some rank could not keep its bracket: count the bucket anew
            s->round = SELECT_FULL_LOW;
            kept_free(s);
            break;
        }
        memset(h, 0, SELECT_HIST_LEN * sizeof *h);
        for (int a = 0; a < s->n_kept_arrays; a++) {
            const uint32_t *k = s->kept[a];
            for (size_t i = 0; i < s->kept_n[a]; i++)
                if (k[i] >> SELECT_BITS == b) h[k[i] & (SELECT_BUCKETS - 1)]++;
        }
        kept_free(s);
        s->round = SELECT_LOW;
        return 0;  // the low round's counts are in hist already
    case SELECT_FULL_HIGH: {
        uint64_t n = 0;
        for (uint32_t i = 0; i < SELECT_BUCKETS; i++) n += h[i];
        if (s->k > n)
            return ERR("cannot keep %llu of %llu candidates", (unsigned long long)s->k, (unsigned long long)n);
        above = 0;
        b = bucket_of(h, 0, SELECT_BUCKETS - 1, s->k, &above);
        s->prefix = b;
        s->above = above;
        s->round = SELECT_FULL_LOW;
        break;
    }
    case SELECT_LOW:
    case SELECT_FULL_LOW:
        b = bucket_of(h, 0, SELECT_BUCKETS - 1, s->k, &above);
        if (b == UINT32_MAX) return ERR("select: histogram does not add up (different k on different ranks?)");
        finish(s, b, above);
        break;
    }
    memset(h, 0, SELECT_HIST_LEN * sizeof *h);
    return 0;
}

uint64_t select_count_ties(const Select *s, const float *scores, size_t n) {
    const Bits *u = (const Bits *)scores;
    uint64_t c = 0;
    for (size_t i = 0; i < n; i++) c += u[i] == s->threshold;
    return s->k ? c : 0;
}

void select_mark(uint8_t *mask, const Select *s, const float *scores, size_t n, uint64_t *ties_before) {
    const Bits *u = (const Bits *)scores;
    uint32_t thr = s->threshold;
    uint64_t ties = *ties_before;
    if (s->k == 0) { memset(mask, 0, n); return; }
    for (size_t i = 0; i < n; i++) {
        uint32_t x = u[i];
        // a candidate (sign clear) above the threshold, or one of the first ties
        uint8_t keep = x < 0x80000000u && x > thr;
        if (x == thr) keep = ties++ < s->ties_keep;
        mask[i] = keep;
    }
    *ties_before = ties;
}

void select_smallest(uint64_t *keys, size_t n, size_t k) {
    size_t lo = 0, hi = n; // the k-th smallest is in [lo, hi)
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    while (k > lo && k < hi && hi - lo > 1) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        uint64_t pivot = keys[lo + rng % (hi - lo)];
        // three ways: [lo, a) < pivot, [a, b) == pivot, [b, hi) > pivot
        size_t a = lo, b = lo, c = hi;
        while (b < c) {
            uint64_t v = keys[b];
            if (v < pivot) keys[b++] = keys[a], keys[a++] = v;
            else if (v > pivot) keys[b] = keys[--c], keys[c] = v;
            else b++;
        }
        if (k < a) hi = a;
        else if (k > b) lo = b;
        else return; // the k smallest are [0, k): everything below a, then pivots
    }
}

uint64_t select_keep_count(double sparsity, uint64_t n) {
    double k = floor((1.0 - sparsity) * (double)n + 0.5);
    if (!(k > 0)) return 0;  // also NaN
    if (k >= (double)n) return n;
    return (uint64_t)k;
}
