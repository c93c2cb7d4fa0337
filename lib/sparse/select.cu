// select.cu: BEST's global mask update with the scores in device memory: select.h's
// selection (exactly k candidates survive; a score with the sign bit set is not a
// candidate; ties go to the first in global order) with the device doing the passes
// over the scores and the host doing what select.c does with the counts.
//
//   count   (two rounds, FULL_HIGH then FULL_LOW of a Select from select_init_exact):
//           a thread per score adds it to a 65536-bucket uint64 histogram in device
//           memory, by its high 16 bits (candidates only), then, inside the bucket the
//           host chose, by its low 16 bits. Integer atomics: counts commute, so the
//           histogram is exact and the same on every run. Only the histogram (512 KiB)
//           comes back; select_advance picks the bucket and the threshold.
//   ties    each block owns a contiguous run of the scores (select_cuda_blocks) and
//           counts the ties (candidates equal to the threshold) in it; the host turns
//           the counts into an exclusive prefix over the blocks, starting at the ties
//           of the ranks before this one (the caller's *ties_before).
//   mark    a block marks its run: above the threshold survives; a tie survives when
//           fewer than ties_keep ties precede it. In a run whose ties all survive, or
//           none of them, that needs no numbering; the one run where the last kept tie
//           falls numbers its ties tile by tile with a block scan (warp shuffles, then
//           the warps' totals), in index order.
// Reads of the scores: four on one rank (the two counts, the runs' tie counts, the
// marking), five with several ranks (the shard's tie count for the prefix over ranks).
//
// Also here, apart from that protocol: select_smallest_cuda, select.h's select_smallest
// for the one-shot methods' rows and blocks, a thread block per segment
// (smallest_block, select_block.cuh, which holds the block scan both use).
//
// Written for tests/cuda_emu.h too (tests/test_kernels.cpp includes this file and
// compares the mask bit for bit with select.c's): LAUNCH, BEST_KAPI, static shared
// memory, full warps for the shuffles, barriers reached by every thread of a block (a
// block's path is chosen by values the whole block shares).
//
// Speed is unmeasured: scores crowd into a few hundred buckets, so the histogram's
// atomics contend; per-block histograms in shared memory (32768 candidate buckets of
// uint32: 128 KiB, dynamic shared memory, which the emulator lacks) are the first thing
// to try once a GPU measures it. None of this has run on a GPU yet (docs/cuda.md).
#include "sparse/select.h" // defines: Select, select_init_exact, select_advance, the _cuda prototypes

#include <stdlib.h>
#include <string.h>

#include "base/error.h"     // defines: CHECK, xmalloc
#include "dist/dist.h"      // defines: dist_sum_u64, dist_exscan_u64, dist_size
#include "base/cuda.h"        // defines: CUDA_CHECK, LAUNCH, BEST_KAPI
#include "nn/kernel_math.h" // defines: km_bits, km_blocks, km_thread_index
#include "sparse/select_block.cuh" // defines: block_exscan, smallest_block

#define SELECT_THREADS 256 // a multiple of 32: the scan's shuffles need full warps

typedef unsigned long long u64; // atomicAdd's 64-bit type (uint64_t is unsigned long here)

// hist (SELECT_BUCKETS) += the counts of scores (n): candidates by their high 16 bits
// (low = 0), or the scores whose high 16 bits are prefix by their low 16 bits (low = 1).
static __global__ void select_count_kernel(u64 *hist, const float *scores, size_t n, int low,
                                           uint32_t prefix) {
    for (size_t i = km_thread_index(blockIdx.x, blockDim.x, threadIdx.x); i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t u = km_bits(scores[i]), hi = u >> SELECT_BITS;
        if (!low) {
            if (hi < 0x8000u) atomicAdd(&hist[hi], 1ull); // sign bit set: not a candidate
        } else if (hi == prefix) {
            atomicAdd(&hist[u & (SELECT_BUCKETS - 1)], 1ull);
        }
    }
}

// This block's run [*lo, *hi) of n scores: runs are contiguous and in block order.
static __device__ void block_run(size_t n, size_t *lo, size_t *hi) {
    size_t per = (n + gridDim.x - 1) / gridDim.x, a = (size_t)blockIdx.x * per;
    *lo = a < n ? a : n;
    *hi = a + per < n ? a + per : n;
}

// ties[block] += the candidates equal to thr in the block's run (ties zeroed before).
static __global__ void select_ties_kernel(u64 *ties, const float *scores, size_t n, uint32_t thr) {
    size_t lo, hi;
    block_run(n, &lo, &hi);
    u64 c = 0;
    for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) c += km_bits(scores[i]) == thr;
    if (c) atomicAdd(&ties[blockIdx.x], c);
}

// mask over the block's run: offs[b] ties precede run b, offs[b + 1] - offs[b] lie in
// it; the first `keep` ties in global order survive, and every candidate above thr.
static __global__ void select_mark_kernel(uint8_t *mask, const float *scores, const u64 *offs,
                                          size_t n, uint32_t thr, u64 keep) {
    size_t lo, hi;
    block_run(n, &lo, &hi);
    u64 before = offs[blockIdx.x], in = offs[blockIdx.x + 1] - before;
    if (in == 0 || before >= keep || before + in <= keep) { // all of the run's ties or none
        int ties_survive = before < keep;
        for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
            uint32_t u = km_bits(scores[i]);
            mask[i] = (u < 0x80000000u && u > thr) || (u == thr && ties_survive);
        }
        return; // the whole block returns here or none of it: no barrier is skipped
    }
    for (size_t t0 = lo; t0 < hi; t0 += blockDim.x) { // the same trips for every thread
        size_t i = t0 + threadIdx.x;
        uint32_t u = i < hi ? km_bits(scores[i]) : 0;
        unsigned tie = i < hi && u == thr, pre, total;
        block_exscan(tie, &pre, &total);
        if (i < hi) mask[i] = (u < 0x80000000u && u > thr) || (tie && before + pre < keep);
        before += total;
    }
}

// Device to host, waiting for the stream (our stream is non-blocking: a plain
// cudaMemcpy on the legacy stream would not wait for its kernels).
static void copy_to_host(void *dst, const void *src, size_t bytes, cudaStream_t stream) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
}

BEST_KAPI void select_count_cuda(Select *s, uint64_t *scratch, const float *scores, size_t n,
                                 cudaStream_t stream) {
    if (!select_needs_data(s) || n == 0) return;
    CHECK(s->round == SELECT_FULL_HIGH || s->round == SELECT_FULL_LOW,
          "select_count_cuda: the Select must come from select_init_exact (round %d)", (int)s->round);
    CUDA_CHECK(cudaMemsetAsync(scratch, 0, SELECT_BUCKETS * sizeof *scratch, stream));
    LAUNCH(select_count_kernel, km_blocks(n, SELECT_THREADS, KM_GRID_CAP), SELECT_THREADS, stream,
           (u64 *)scratch, scores, n, s->round == SELECT_FULL_LOW, s->prefix);
    CUDA_CHECK(cudaGetLastError());
    uint64_t *h = (uint64_t *)xmalloc(SELECT_BUCKETS * sizeof *h);
    copy_to_host(h, scratch, SELECT_BUCKETS * sizeof *h, stream);
    for (size_t b = 0; b < SELECT_BUCKETS; b++) s->hist[b] += h[b];
    free(h);
}

// The blocks' tie counts of scores (n) into offs (blocks + 1, device) and back to
// host (blocks + 1 words); returns the number of blocks.
static size_t count_block_ties(uint64_t *host, uint64_t *offs, const Select *s, const float *scores,
                               size_t n, cudaStream_t stream) {
    size_t nb = select_cuda_blocks(n);
    CUDA_CHECK(cudaMemsetAsync(offs, 0, (nb + 1) * sizeof *offs, stream));
    LAUNCH(select_ties_kernel, (unsigned)nb, SELECT_THREADS, stream, (u64 *)offs, scores, n, s->threshold);
    CUDA_CHECK(cudaGetLastError());
    copy_to_host(host, offs, nb * sizeof *host, stream);
    return nb;
}

BEST_KAPI uint64_t select_count_ties_cuda(const Select *s, uint64_t *scratch, const float *scores,
                                          size_t n, cudaStream_t stream) {
    CHECK(s->done, "select_count_ties_cuda: the threshold is not known yet");
    if (s->k == 0 || n == 0) return 0;
    uint64_t *c = (uint64_t *)xmalloc((select_cuda_blocks(n) + 1) * sizeof *c);
    size_t nb = count_block_ties(c, scratch + SELECT_BUCKETS, s, scores, n, stream);
    uint64_t total = 0;
    for (size_t b = 0; b < nb; b++) total += c[b];
    free(c);
    return total;
}

BEST_KAPI void select_mark_cuda(uint8_t *mask, const Select *s, uint64_t *scratch, const float *scores,
                                size_t n, uint64_t *ties_before, cudaStream_t stream) {
    CHECK(s->done, "select_mark_cuda: the threshold is not known yet");
    if (n == 0) return;
    if (s->k == 0) { // nothing survives (select_mark's memset)
        CUDA_CHECK(cudaMemsetAsync(mask, 0, n, stream));
        CUDA_CHECK(cudaStreamSynchronize(stream));
        return;
    }
    uint64_t *offs = scratch + SELECT_BUCKETS;
    uint64_t *c = (uint64_t *)xmalloc((select_cuda_blocks(n) + 1) * sizeof *c);
    size_t nb = count_block_ties(c, offs, s, scores, n, stream);
    uint64_t before = *ties_before; // in place: counts to an exclusive prefix
    for (size_t b = 0; b < nb; b++) {
        uint64_t t = c[b];
        c[b] = before;
        before += t;
    }
    c[nb] = before;
    *ties_before = before;
    CUDA_CHECK(cudaMemcpyAsync(offs, c, (nb + 1) * sizeof *c, cudaMemcpyHostToDevice, stream));
    LAUNCH(select_mark_kernel, (unsigned)nb, SELECT_THREADS, stream, mask, scores, (const u64 *)offs, n,
           s->threshold, (u64)s->ties_keep);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaStreamSynchronize(stream)); // c is read by the copy until then
    free(c);
}

BEST_KAPI int select_mask_cuda(uint8_t *mask, uint64_t *scratch, const float *scores, size_t n,
                               uint64_t k, cudaStream_t stream) {
    Select s;
    select_init_exact(&s, k);
    int rc = 0;
    while (!s.done && rc == 0) {
        select_count_cuda(&s, scratch, scores, n, stream);
        dist_sum_u64(s.hist, SELECT_HIST_LEN); // the ranks' counts (host memory)
        rc = select_advance(&s);
    }
    uint64_t ties = 0; // ties on the ranks before this one
    if (rc == 0 && dist_size() > 1) ties = dist_exscan_u64(select_count_ties_cuda(&s, scratch, scores, n, stream));
    if (rc == 0) select_mark_cuda(mask, &s, scratch, scores, n, &ties, stream);
    select_free(&s);
    return rc;
}

// --- select_smallest on the device (the one-shot methods' rows and blocks) -------------------

struct SegScore { // score i of a segment
    const float *s;
    __device__ float operator()(size_t i) const { return s[i]; }
};
struct SegFlag { // flag i of a segment
    uint8_t *f;
    __device__ void operator()(size_t i, int sel) const { f[i] = (uint8_t)sel; }
};

// Segment blockIdx.x of scores (nseg, len) into flags (nseg, len).
static __global__ void select_smallest_kernel(uint8_t *flags, const float *scores, size_t len, size_t k) {
    size_t at = (size_t)blockIdx.x * len;
    smallest_block(len, k, SegScore{scores + at}, SegFlag{flags + at});
}

BEST_KAPI void select_smallest_cuda(uint8_t *flags, const float *scores, size_t nseg, size_t len, size_t k,
                                    cudaStream_t stream) {
    if (nseg == 0 || len == 0) return;
    CHECK(len <= UINT32_MAX && nseg <= INT32_MAX && k <= len,
          "select_smallest_cuda: %zu segments of %zu scores, k %zu: out of range", nseg, len, k);
    LAUNCH(select_smallest_kernel, (unsigned)nseg, SELECT_THREADS, stream, flags, scores, len, k);
    CUDA_CHECK(cudaGetLastError());
}
