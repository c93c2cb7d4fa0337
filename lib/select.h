// select.h: the global threshold: exactly the k-th largest of n scores, without sorting
// and without holding the scores.
//
// Scores are floats >= +0 (saliency.h), so their uint32 bit patterns order like the
// floats, and the k-th largest is found digit by digit on the bit pattern: round 0
// counts the high 16 bits of every score into 65536 buckets and picks the bucket
// where the k-th largest falls; round 1 counts the low 16 bits of the scores inside
// that bucket. Two passes over the scores, 512 KiB of counts, exact. The caller
// streams the scores in chunks of any size (a tensor at a time, or 64K weights at a
// time, recomputing them each round), so scores never exist all at once.
//
// Candidates: a score with the sign bit set (say -1.0f) is not a candidate; it is
// never counted and never kept. Callers mark weights excluded in advance that way
// (weights an earlier mask pruned: a mask only shrinks). NaN is not a score.
//
// Ties: exactly k candidates survive. All candidates above the threshold survive;
// of those equal to it, the first (k - n_above) in global order survive, global order
// being the order in which the caller streams them (for a model: the parameter block,
// i.e. tensor order then offset).
//
// Several ranks, each scoring its own shard of the weights, get the same threshold
// and the same mask by exchanging counts only:
//
//     Select s;  select_init(&s, k);                     // same k on every rank
//     while (!s.done) {
//         for each chunk of my shard: select_count(&s, scores, n);
//         allreduce_sum(s.hist, SELECT_BUCKETS);          // uint64 counts
//         TRY(select_advance(&s));                        // same decision everywhere
//     }
//     uint64_t ties = 0;                                   // ties before my shard:
//     for each chunk: ties += select_count_ties(&s, scores, n);
//     ties = exclusive_prefix_sum_over_ranks(ties);        // MPI_Exscan; 0 on rank 0
//     for each chunk, in order: select_mark(mask, &s, scores, n, &ties);
//
// Shards must be contiguous in global order (rank r holds the slice before rank r+1's)
// for the tie rule to be "lowest global index first"; any slicing gives exactly k.
//
// Not here: the scores (saliency.h), what a model's mask is made of (mask.h).
#ifndef BEST_SELECT_H
#define BEST_SELECT_H

#include <stddef.h>
#include <stdint.h>

#define SELECT_BITS 16
#define SELECT_BUCKETS (1u << SELECT_BITS)
#define SELECT_ROUNDS 2

typedef struct {
    uint64_t k;           // survivors wanted
    uint64_t *hist;       // (SELECT_BUCKETS) this round's counts, summed over ranks by the caller
    int round;            // the round being counted: 0 or 1
    int done;             // 1 once the threshold is known (at init when k == 0)
    uint32_t prefix;      // high 16 bits chosen by round 0
    uint64_t n;           // candidates in all (known after round 0)
    uint64_t above;       // candidates known to be above the bucket being refined
    uint32_t threshold;   // bit pattern of the k-th largest score (UINT32_MAX when k == 0)
    uint64_t n_above;     // candidates > threshold
    uint64_t ties_keep;   // candidates == threshold that survive: k - n_above
} Select;

void select_init(Select *s, uint64_t k);
void select_free(Select *s);
// Adds the scores (n) of one chunk into s->hist. Large chunks are counted with
// OpenMP, one private histogram per thread, summed at the end.
void select_count(Select *s, const float *scores, size_t n);
// Chooses this round's bucket from s->hist (after the caller's all-reduce) and clears
// it for the next round. Returns 0, or -1 after ERR when k exceeds the candidates.
int select_advance(Select *s);
// Candidates in scores (n) equal to the threshold (for the ranks' prefix count).
uint64_t select_count_ties(const Select *s, const float *scores, size_t n);
// mask (n) = 1 for the survivors among scores (n), 0 otherwise. *ties_before counts
// the ties met so far in global order (in/out): start it at 0 on one rank, at the
// exclusive prefix sum of select_count_ties over ranks otherwise.
void select_mark(uint8_t *mask, const Select *s, const float *scores, size_t n, uint64_t *ties_before);

// Survivors for sparsity S of n weights: k = floor((1 - S) * n + 0.5) in double, i.e.
// round half up, at most n. S = 0.5 of 7 keeps 4; S = 0.9 of 10 keeps 1.
uint64_t select_keep_count(double sparsity, uint64_t n);
// A score's bit pattern (what the buckets count).
static inline uint32_t select_bits(float x) {
    union { float f; uint32_t u; } c = {x};
    return c.u;
}

#endif
