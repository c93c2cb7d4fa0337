// mask.cu: mask_compute (mask.h) on the device: BEST's mask update with the weights,
// moments and mask there (MaskSpans: spans of the parameter block; mask_spans_of makes
// them of a DevModel, nn/model.h), nothing but counts crossing to the host.
//
//   scores  saliency_score_cuda of each range of prunable weights into ms->scores (a
//           DevModel's gradients, dead between a step's optimizer update and the next
//           step's zeroing), at the weights' own offsets; weights the old mask pruned
//           score -1 (masked_fill_cuda), so they are not candidates (select.h).
//   N:M     with nm_m set, each group's nm_keep best scores become +inf (protect_groups,
//           mask_compute's rule), so the selection keeps them first.
//   select  group global: one select_mask_cuda over the span from the first prunable
//           weight to the last, in block order, which is the parameter table's order, so
//           ties go to the first weight in mask_compute's order. The tensors inside the
//           span that are not prunable (biases, q/k norms) score all bits set, a negative
//           NaN (sign bit set: not candidates), and get their mask bytes back to 1 after.
//           group layer: one select_mask_cuda per prunable tensor, k capped at what the
//           old mask kept in it (mask_compute's rule).
//   apply   the weights the new mask prunes set to 0, their bf16 copy refreshed (ms->share).
// With GPU ranks each rank does all of this on its slice of the block only (own_lo,
// own_hi: its moments and mask), and the counts are summed over the ranks (the
// candidates here, the histograms and ties in select_mask_cuda), as the host's
// mask_compute_slice does; each owner's zeroed weights then reach every rank's bf16 copy
// (a DevModel's share: devmodel_share_weights). Every rank makes every selection, an empty part included, so
// that the ranks' collectives pair up.
// The scores are the CPU's function (kernel_math.h) and select_mask_cuda is select.h's
// selection, so the mask is mask_compute's bit for bit (tests/test_step.cpp checks it).
//
// Before the mask or a weight changes, the bad inputs (saliency_score_cuda's count) and,
// for each selection, the candidates are counted: when mask_compute would fail, nothing
// is changed and the caller runs mask_compute on the host for its message (which names
// the tensor and element). Reads of the scores: one to score, one to count candidates,
// select_mask_cuda's four; at LLaMA-2-7B's 6.5e9 prunable weights that is about 26 GB a
// read. Speed: docs/benchmarks.md (bench/bench_mask_gpu.c, on an H200).
//
// Not here: the selection's kernels (select.cu), the scores' (saliency.cu), the step
// (nn/model.cu), when to update (run/train.c).
#include "sparse/mask.h" // defines: MaskSpec, the mask_update_cuda prototype (BEST_CUDA)

#include "base/error.h"       // defines: ERR, CUDA_CHECK's exit
#include "dist/dist.h"        // defines: dist_sum_u64, dist_part
#include "base/cuda.h"          // defines: CUDA_CHECK, LAUNCH, BEST_KAPI, CudaCtx
#include "nn/kernel_math.h"   // defines: km_bits, km_blocks, km_thread_index
#include "nn/layers.h"        // defines: masked_fill_cuda, cast_bf16_cuda
#include "nn/model.h"         // defines: DevModel, Model
#include "sparse/nm.h"        // defines: nm_protect_cuda, nm_edges_find, nm_edges_protect
#include "sparse/saliency.h"  // defines: saliency_score_cuda
#include "sparse/select.h"    // defines: select_keep_count, select_mask_cuda, select_cuda_scratch

typedef unsigned long long u64; // atomicAdd's 64-bit type

// *count += the candidates among s (n): scores without the sign bit (select.h).
static __global__ void count_candidates_kernel(u64 *count, const float *s, size_t n) {
    u64 c = 0;
    for (size_t i = km_thread_index(blockIdx.x, blockDim.x, threadIdx.x); i < n; i += (size_t)gridDim.x * blockDim.x)
        c += km_bits(s[i]) < 0x80000000u;
    if (c) atomicAdd(count, c); // integer counts commute: exact
}

// The device counter *ctr on the host, then zeroed (waits for the stream).
static uint64_t counter_take(u64 *ctr, cudaStream_t st) {
    u64 v;
    CUDA_CHECK(cudaMemcpyAsync(&v, ctr, sizeof v, cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaMemsetAsync(ctr, 0, sizeof *ctr, st));
    return v;
}

// The candidates among s (n) on all the ranks together.
static uint64_t count_candidates(u64 *ctr, const float *s, size_t n, cudaStream_t st) {
    if (n) {
        LAUNCH(count_candidates_kernel, km_blocks(n, KM_THREADS, KM_GRID_CAP), KM_THREADS, st, ctr, s, n);
        CUDA_CHECK(cudaGetLastError());
    }
    uint64_t c = counter_take(ctr, st);
    dist_sum_u64(&c, 1);
    return c;
}

// [*a, *b): the part of [lo, hi) in the slice of ms (a == b == own_lo when none).
static void own_part(size_t *a, size_t *b, const MaskSpans *ms, size_t lo, size_t hi) {
    dist_part(a, b, lo, hi, ms->own_lo, ms->own_hi);
}

static void share_weights(void *ctx, size_t a, size_t b) { devmodel_share_weights((DevModel *)ctx, a, b); }

BEST_KAPI void mask_spans_of(MaskSpans *ms, DevModel *d) {
    MaskSpans x = {d->m->info, d->m->n_info, d->m->n_prunable, d->pr_off, d->pr_len, d->n_pr, d->own_lo,
                   d->own_hi, d->params, d->adam_m, d->adam_v, d->mask, d->grads, d->ctx->stream,
                   share_weights, d};
    *ms = x;
}

// N:M groups (nm.h): the scores of each group's nm_keep best +inf, mask_compute's way: the
// whole groups of this rank's part of each prunable tensor on the device, the (at most
// two) groups it shares with another rank through the host (nm_edges_protect, every rank).
static void protect_groups(const MaskSpans *ms, const MaskSpec *spec) {
    cudaStream_t st = ms->stream;
    size_t m = (size_t)spec->nm_m;
    for (int i = 0; i < ms->n_info; i++) {
        const ParamInfo *p = &ms->info[i];
        if (!p->prunable) continue;
        size_t a, b;
        own_part(&a, &b, ms, p->offset, p->offset + p->numel);
        size_t g0 = p->offset + (a - p->offset + m - 1) / m * m, g1 = p->offset + (b - p->offset) / m * m;
        if (a < b && g0 < g1) nm_protect_cuda(ms->scores + g0, g1 - g0, spec->nm_m, spec->nm_keep, st);
    }
    NMEdges e;
    nm_edges_find(&e, ms->info, ms->n_info, spec->nm_m, ms->own_lo, ms->own_hi);
    for (int k = 0; k < 2; k++)
        if (e.len[k])
            CUDA_CHECK(cudaMemcpyAsync(e.s[k], ms->scores + e.at[k], e.len[k] * sizeof(float), cudaMemcpyDeviceToHost, st));
    CUDA_CHECK(cudaStreamSynchronize(st));
    nm_edges_protect(&e, spec->nm_m, spec->nm_keep);
    for (int k = 0; k < 2; k++)
        if (e.len[k])
            CUDA_CHECK(cudaMemcpyAsync(ms->scores + e.at[k], e.s[k], e.len[k] * sizeof(float), cudaMemcpyHostToDevice, st));
    CUDA_CHECK(cudaStreamSynchronize(st)); // (e.s is on this stack)
}

BEST_KAPI int mask_update_cuda(const MaskSpans *ms, const MaskSpec *spec) {
    if (!(spec->sparsity >= 0.0 && spec->sparsity < 1.0))
        return ERR("sparsity %g is outside [0, 1)", spec->sparsity);
    if (ms->n_pr == 0) return 0; // nothing is prunable: the mask stays all ones
    cudaStream_t st = ms->stream;
    size_t lo, hi, ol = ms->own_lo; // [lo, hi): the span of prunable weights in this rank's slice
    size_t first = ms->pr_off[0], last = ms->pr_off[ms->n_pr - 1] + ms->pr_len[ms->n_pr - 1];
    own_part(&lo, &hi, ms, first, last);
    float *s = ms->scores; // (n_params) the scores, at the weights' offsets
    u64 *ctr = NULL;
    uint64_t *scratch = NULL;
    if (cudaMalloc((void **)&ctr, sizeof *ctr) != cudaSuccess ||
        cudaMalloc((void **)&scratch, select_cuda_scratch(hi - lo) * sizeof *scratch) != cudaSuccess) {
        (void)cudaGetLastError();
        cudaFree(ctr);
        return ERR("CUDA: no device memory left for the mask update's counters (%.1f KiB)",
                   (double)select_cuda_scratch(hi - lo) * 8 / 1024);
    }
    CUDA_CHECK(cudaMemsetAsync(ctr, 0, sizeof *ctr, st));
    CUDA_CHECK(cudaMemsetAsync(s + lo, 0xff, (hi - lo) * sizeof *s, st)); // the gaps: not candidates
    for (int r = 0; r < ms->n_pr; r++) {
        size_t o, e;
        own_part(&o, &e, ms, ms->pr_off[r], ms->pr_off[r] + ms->pr_len[r]);
        if (o == e) continue;
        saliency_score_cuda(s + o, ctr, spec->saliency, ms->params + (o - ol), ms->adam_m + (o - ol),
                            ms->adam_v + (o - ol), e - o, st);
        masked_fill_cuda(s + o, ms->mask + (o - ol), -1.0f, e - o, st); // pruned already: not a candidate
    }
    uint64_t bad = counter_take(ctr, st);
    dist_sum_u64(&bad, 1); // every rank falls back together
    int rc = bad ? 1 : 0;
    if (rc == 0 && spec->nm_m) protect_groups(ms, spec);
    if (rc == 0 && spec->group == GROUP_GLOBAL) {
        uint64_t k = select_keep_count(spec->sparsity, ms->n_prunable);
        if (k > count_candidates(ctr, s + lo, hi - lo, st)) rc = 1; // mask_compute: "a mask only shrinks"
        else rc = select_mask_cuda(ms->mask + (lo - ol), scratch, s + lo, hi - lo, k, st);
        for (int r = 1; rc == 0 && r < ms->n_pr; r++) { // the gaps' bytes back to 1
            size_t g0, g1;
            own_part(&g0, &g1, ms, ms->pr_off[r - 1] + ms->pr_len[r - 1], ms->pr_off[r]);
            if (g0 < g1) CUDA_CHECK(cudaMemsetAsync(ms->mask + (g0 - ol), 1, g1 - g0, st));
        }
    } else if (rc == 0) {
        // per tensor: k capped by the old mask's survivors, never more than exist
        for (int i = 0; i < ms->n_info && rc == 0; i++) {
            const ParamInfo *p = &ms->info[i];
            if (!p->prunable) continue;
            size_t a, b;
            own_part(&a, &b, ms, p->offset, p->offset + p->numel);
            uint64_t k = select_keep_count(spec->sparsity, p->numel);
            uint64_t c = count_candidates(ctr, s + a, b - a, st);
            rc = select_mask_cuda(ms->mask + (a - ol), scratch, s + a, b - a, k < c ? k : c, st);
        }
    }
    if (rc == 0) {
        masked_fill_cuda(ms->params + (lo - ol), ms->mask + (lo - ol), 0.0f, hi - lo, st);
        ms->share(ms->share_ctx, first, last); // the zeros to every rank's bf16 copy, from every rank's span
    }
    CUDA_CHECK(cudaStreamSynchronize(st));
    CUDA_CHECK(cudaFree(scratch));
    CUDA_CHECK(cudaFree(ctr));
    return rc;
}
