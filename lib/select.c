// select.c: the radix select of select.h.
#include "select.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "error.h" // defines: ERR, xcalloc

// Below this a chunk is counted by one thread: starting a team and clearing private
// histograms (256 KiB each) costs more than counting 1M scores.
#define PARALLEL_MIN ((size_t)1 << 20)

// Scores are read as their bit patterns in place; may_alias makes that legal C.
typedef uint32_t __attribute__((may_alias)) Bits;

void select_init(Select *s, uint64_t k) {
    memset(s, 0, sizeof *s);
    s->k = k;
    s->hist = xcalloc(SELECT_BUCKETS, sizeof *s->hist);
    if (k == 0) { s->done = 1; s->threshold = UINT32_MAX; } // no candidate has this pattern
}

void select_free(Select *s) {
    free(s->hist);
    s->hist = NULL;
}

// Counts into private uint32 histograms: a thread's part of a chunk is below 2^32
// (select_count splits larger chunks). Round 0 can spread its counts over COPIES
// interleaved histograms h[c * SELECT_BUCKETS + b]: real scores crowd into a few
// hundred buckets (all of [0.5, 1) is 128), so consecutive increments of one counter
// may wait on each other's store. On the 2-core benchmark VM (memory-bound, about
// 3.5 GB/s) 4 copies measured no faster than 1, so 1 it is until a machine shows
// otherwise.
#define COPIES 1
static void count_into(uint32_t *h, const float *x, size_t n, int round, uint32_t prefix) {
    const Bits *u = (const Bits *)x;
    if (round == 0) {
        size_t i = 0;
        for (; i + COPIES <= n; i += COPIES)
            for (int c = 0; c < COPIES; c++) {
                uint32_t b = u[i + c] >> SELECT_BITS;
                if (b < 0x8000u) h[(size_t)c * SELECT_BUCKETS + b]++;  // sign bit set: not a candidate
            }
        for (; i < n; i++) {
            uint32_t b = u[i] >> SELECT_BITS;
            if (b < 0x8000u) h[b]++;
        }
    } else {
        for (size_t i = 0; i < n; i++)
            if ((u[i] >> SELECT_BITS) == prefix) h[u[i] & (SELECT_BUCKETS - 1)]++;
    }
}

void select_count(Select *s, const float *scores, size_t n) {
    if (s->done) return;
    // pieces of at most 2^31 so that private uint32 counts cannot wrap
    for (size_t start = 0; start < n; start += (size_t)1 << 31) {
        size_t len = n - start < ((size_t)1 << 31) ? n - start : (size_t)1 << 31;
        const float *x = scores + start;
        int nt = len >= PARALLEL_MIN ? omp_get_max_threads() : 1;
        if (nt == 1) {
            uint32_t *h = xcalloc((size_t)COPIES * SELECT_BUCKETS, sizeof *h);
            count_into(h, x, len, s->round, s->prefix);
            for (size_t b = 0; b < (size_t)COPIES * SELECT_BUCKETS; b++) s->hist[b % SELECT_BUCKETS] += h[b];
            free(h);
            continue;
        }
        const size_t per = (size_t)COPIES * SELECT_BUCKETS;  // counters per thread
        uint32_t *priv = xcalloc((size_t)nt * per, sizeof *priv);
#pragma omp parallel num_threads(nt)
        {
            int t = omp_get_thread_num(), T = omp_get_num_threads();
            size_t lo = len * (size_t)t / (size_t)T, hi = len * (size_t)(t + 1) / (size_t)T;
            count_into(priv + (size_t)t * per, x + lo, hi - lo, s->round, s->prefix);
#pragma omp barrier
            // sum the private histograms, each thread a range of buckets
            uint32_t b0 = (uint32_t)((uint64_t)SELECT_BUCKETS * (uint64_t)t / (uint64_t)T);
            uint32_t b1 = (uint32_t)((uint64_t)SELECT_BUCKETS * (uint64_t)(t + 1) / (uint64_t)T);
            for (uint32_t b = b0; b < b1; b++) {
                uint64_t c = 0;
                for (int j = 0; j < T * COPIES; j++) c += priv[(size_t)j * SELECT_BUCKETS + b];
                s->hist[b] += c;
            }
        }
        free(priv);
    }
}

int select_advance(Select *s) {
    if (s->done) return 0;
    if (s->round == 0) {
        uint64_t n = 0;
        for (uint32_t b = 0; b < SELECT_BUCKETS; b++) n += s->hist[b];
        s->n = n;
        if (s->k > n)
            return ERR("cannot keep %llu of %llu candidates", (unsigned long long)s->k, (unsigned long long)n);
    }
    // From the top bucket down: the k-th largest is in the first bucket b where the
    // candidates above it plus those in it reach k.
    uint64_t above = s->above;
    uint32_t b = SELECT_BUCKETS - 1;
    for (;; b--) {
        if (above + s->hist[b] >= s->k) break;
        above += s->hist[b];
        if (b == 0) return ERR("select: histogram does not add up (different k on different ranks?)");
    }
    memset(s->hist, 0, SELECT_BUCKETS * sizeof *s->hist);
    s->above = above;
    if (s->round == 0) {
        s->prefix = b;
        s->round = 1;
        return 0;
    }
    s->threshold = (s->prefix << SELECT_BITS) | b;
    s->n_above = above;
    s->ties_keep = s->k - above;
    s->done = 1;
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

uint64_t select_keep_count(double sparsity, uint64_t n) {
    double k = floor((1.0 - sparsity) * (double)n + 0.5);
    if (!(k > 0)) return 0;  // also NaN
    if (k >= (double)n) return n;
    return (uint64_t)k;
}
