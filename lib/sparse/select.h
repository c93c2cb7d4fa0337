// select.h: the global threshold: exactly the k-th largest of n scores, without sorting
// and without holding the scores.
//
// Scores are floats >= +0 (saliency.h), so their uint32 bit patterns order like the
// floats, and the k-th largest is found on the bit pattern, 16 bits at a time: the
// high 16 bits pick one of 65536 buckets, the low 16 bits the score inside it.
//
// Rounds (each "pass" is one stream over all the scores, chunk by chunk):
//   sample  a pass that reads only 16 of every 1024 scores of each chunk (one cache line
//           in 64) and counts their high 16 bits; from it a bracket of buckets where
//           the k-th largest should fall (the sample's rank estimate +- 4 sigma).
//   main    a pass over everything: counts the scores above the bracket, counts the
//           bracket's buckets, and keeps the few scores inside the bracket in memory
//           (capped at 1/32 of the scores; the bracket is typically under 1%).
//   low     no pass: the kept scores of the chosen bucket, counted by their low 16 bits,
//           give the threshold.
// So about one pass in all, instead of two for a plain two-round radix select. When
// the sample misled (the k-th largest lies outside the bracket) or too many scores
// fell inside it, the exact fallback runs: a full count of the high 16 bits, then of
// the low 16 bits inside the chosen bucket (one or two more passes); never a wrong
// answer. The caller streams the scores in chunks of any size (a tensor at a time, or
// 64K weights at a time, recomputing them each pass), so scores never exist all at once.
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
//         if (select_needs_data(&s))
//             for each chunk of my shard: select_count(&s, scores, n);
//         allreduce_sum(s.hist, SELECT_HIST_LEN);         // uint64 counts
//         TRY(select_advance(&s));                        // same decision everywhere
//     }
//     uint64_t ties = 0;                                   // ties before my shard:
//     for each chunk: ties += select_count_ties(&s, scores, n);
//     ties = exclusive_prefix_sum_over_ranks(ties);        // MPI_Exscan; 0 on rank 0
//     for each chunk, in order: select_mark(mask, &s, scores, n, &ties);
//
// Each rank keeps its own bracket scores; the decisions (bracket, fallback, bucket,
// threshold) depend only on the summed counts, so they agree on every rank. Shards
// must be contiguous in global order (rank r holds the slice before rank r+1's) for
// the tie rule to be "lowest global index first"; any slicing gives exactly k.
//
// On a GPU (select.cu, under BEST_CUDA) the scores live in device memory and the same
// protocol runs with the device counting: a Select started by select_init_exact (no
// sample, no kept scores: each of its two rounds is a plain count of every score into
// the 65536 buckets, FULL_HIGH then FULL_LOW), select_count_cuda in place of
// select_count (the device fills a histogram, only the histogram comes back to the
// host, where select_advance decides as ever), select_count_ties_cuda and
// select_mark_cuda in place of theirs. select_mask_cuda is the whole protocol for one
// shard, the histograms summed with dist_sum_u64 and the ties prefixed with
// dist_exscan_u64 (dist.h), so that with MPI each rank gets the same threshold and mask
// from its own device; a NCCL build would all-reduce the device histogram instead.
//
// Not here: the scores (saliency.h), what a model's mask is made of (mask.h).
#ifndef BEST_SELECT_H
#define BEST_SELECT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus // select.cu and the C++ kernel test include this
extern "C" {
#endif

#define SELECT_BITS 16
#define SELECT_BUCKETS (1u << SELECT_BITS)
// hist holds the buckets then a few counters of the round (all summed over ranks)
#define SELECT_HIST_LEN (SELECT_BUCKETS + 4)

typedef enum { SELECT_SAMPLE, SELECT_MAIN, SELECT_LOW, SELECT_FULL_HIGH, SELECT_FULL_LOW } SelectRound;

typedef struct {
    uint64_t k;           // survivors wanted
    uint64_t *hist;       // (SELECT_HIST_LEN) this round's counts, summed over ranks by the caller
    SelectRound round;    // the round being counted
    int done;             // 1 once the threshold is known (at init when k == 0)
    uint32_t lo, hi;      // the bracket of buckets (main round)
    uint32_t prefix;      // the high 16 bits of the threshold, once chosen
    uint64_t n_scores;    // scores streamed per pass, candidates or not (from the sample pass)
    uint64_t above;       // candidates known to be above the bucket being refined
    uint32_t threshold;   // bit pattern of the k-th largest score (UINT32_MAX when k == 0)
    uint64_t n_above;     // candidates > threshold
    uint64_t ties_keep;   // candidates == threshold that survive: k - n_above
    // this rank's scores inside the bracket, one growing array per thread
    uint32_t **kept;      // (n_kept_arrays)
    size_t *kept_n, *kept_cap;
    int n_kept_arrays;
    size_t kept_max;      // per array, then the round overflows into the fallback
    int overflow;         // this rank's arrays ran full
} Select;

void select_init(Select *s, uint64_t k);
// The same selection started at the exact rounds (FULL_HIGH, then FULL_LOW): two full
// counts, no sample and no kept scores. The same threshold and mask as select_init's,
// always in two passes; what the device path uses (select.cu).
void select_init_exact(Select *s, uint64_t k);
void select_free(Select *s);
// Whether this round reads the scores (the low round counts what the main round kept).
static inline int select_needs_data(const Select *s) { return !s->done && s->round != SELECT_LOW; }
// Adds the scores (n) of one chunk into s->hist. Large chunks are counted with
// OpenMP, one private histogram per thread, summed at the end. Does nothing in a
// round that needs no data.
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
// Small sets in memory (the one-shot methods' rows and blocks): keys (n) reordered so
// that its k smallest come first (in no order), in O(n) on average (quickselect). A
// key of (float bits of a score >= 0) << 32 | place (select_key) orders by score, ties by
// place.
void select_smallest(uint64_t *keys, size_t n, size_t k);
// A score's bit pattern (what the buckets count).
static inline uint32_t select_bits(float x) {
    union { float f; uint32_t u; } c = {x};
    return c.u;
}
// select_smallest's key: score (>= 0) in the high 32 bits, place (< 2^32) in the low ones.
static inline uint64_t select_key(float score, uint64_t place) {
    return (uint64_t)select_bits(score) << 32 | place;
}

// --- on a GPU (select.cu) -----------------------------------------------------------------
// The marking kernels give each block a contiguous run of at least SELECT_CUDA_SPAN
// scores (at most SELECT_CUDA_BLOCKS_MAX blocks), so that ties are numbered in global
// order: a block's ties come after every tie of the blocks before it.
#ifndef SELECT_CUDA_SPAN
#define SELECT_CUDA_SPAN 8192
#endif
#define SELECT_CUDA_BLOCKS_MAX 16384
static inline size_t select_cuda_blocks(size_t n) {
    size_t b = (n + SELECT_CUDA_SPAN - 1) / SELECT_CUDA_SPAN;
    return b == 0 ? 1 : b > SELECT_CUDA_BLOCKS_MAX ? SELECT_CUDA_BLOCKS_MAX : b;
}
// uint64 words of device scratch the _cuda calls need for n scores: the histogram
// (SELECT_BUCKETS), then the blocks' tie counts and offsets (blocks + 1).
static inline size_t select_cuda_scratch(size_t n) { return SELECT_BUCKETS + select_cuda_blocks(n) + 1; }

#ifdef BEST_CUDA
struct CUstream_st; // cudaStream_t
// The device twins of select_count, select_count_ties and select_mark, for a Select
// started by select_init_exact; scores (n) and mask (n) are device memory, scratch
// (select_cuda_scratch(n) uint64) too. Each waits for its stream before returning
// (the counts come back to the host). select_count_cuda adds this round's counts of
// scores (n) into s->hist (host memory, for the caller to all-reduce).
void select_count_cuda(Select *s, uint64_t *scratch, const float *scores, size_t n,
                       struct CUstream_st *stream);
uint64_t select_count_ties_cuda(const Select *s, uint64_t *scratch, const float *scores, size_t n,
                                struct CUstream_st *stream);
void select_mark_cuda(uint8_t *mask, const Select *s, uint64_t *scratch, const float *scores,
                      size_t n, uint64_t *ties_before, struct CUstream_st *stream);
// mask (n) = 1 for the survivors of this rank's scores (n) among the k (over all ranks)
// to keep, by select.h's rule: the whole protocol above, with dist_sum_u64 on the
// histograms and dist_exscan_u64 on the ties. Returns 0, or -1 after ERR when k
// exceeds the candidates.
int select_mask_cuda(uint8_t *mask, uint64_t *scratch, const float *scores, size_t n, uint64_t k,
                     struct CUstream_st *stream);
// select_smallest on the device, for the one-shot methods' rows and blocks: scores
// (nseg, len), floats >= +0; in each segment of len scores the k with the smallest keys
// select_key(score, place in the segment) get flag 1, the others 0 (flags (nseg, len)):
// the set select_smallest leaves first. One block of threads a segment: a radix select on
// the score's bits, 8 at a time, then the ties at the threshold numbered in order of place.
void select_smallest_cuda(uint8_t *flags, const float *scores, size_t nseg, size_t len, size_t k,
                          struct CUstream_st *stream);
#endif

#ifdef __cplusplus
}
#endif

#endif
