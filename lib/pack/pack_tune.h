// pack_tune.h: each packed tensor in the encoding this CPU decodes fastest, chosen by
// timing when the model is opened for decoding.
//
// best-pack plans a pack for one kernel set (pack_write.h's costs, measured on one CPU);
// the encoding that is fastest differs from CPU to CPU (gathers are fast on one AVX2 CPU
// and slow on another). So before one-token decoding, pack_model_tune times
// spmv_forward of every prunable tensor in every encoding that can hold it (the pack's
// own, and the others re-encoded in memory by pack_tensor_encodings: the same weights bit
// for bit) with the threads and kernel set in force, each product from cold caches (as
// decoding reads a model larger than they are), and keeps the fastest: a tensor is
// re-encoded only when another encoding's product is at least 3% faster than its own
// (the timing's noise). Sell is timed with both of AVX2's kernels (vgatherdps, or x loaded
// lane by lane: PackTensor.variant 1), for CPUs whose gathers are slow. The weights do not change, so the products differ only by the
// order of the sums (spmv.h); the chosen encodings can differ from run to run where two
// are within the noise. A dense tensor with no zero is left dense. BEST_PACK_TUNE=0 (or
// off) keeps the pack's encodings.
//
// Not here: the encodings (pack.h), their kernels (spmv.h), the writer's plan (pack_write.h).
#ifndef BEST_PACK_TUNE_H
#define BEST_PACK_TUNE_H

#include <stdio.h>

#include "nn/model.h"         // defines: Model
#include "pack/pack_format.h" // defines: PACK_N_ENC

typedef struct {
    int tensors, changed;               // prunable tensors timed; re-encoded (or given another kernel)
    int no_gather;                      // of those, sell with AVX2's kernel without the gather
    int moves[PACK_N_ENC][PACK_N_ENC];  // [the pack's encoding][the chosen one]: tensors
    double before_s, after_s;           // one product of every timed tensor: the pack's encodings, the chosen
    double seconds;                     // the tuning's own time
} PackTune;

// 0 when BEST_PACK_TUNE is 0 or off, else 1.
int pack_tune_enabled(void);
// Tunes m when it is backed by a pack (else nothing: st->tensors 0). Runs on the kernel
// set and OpenMP threads in force.
void pack_model_tune(PackTune *st, Model *m);
// One line on f: "PROG: encodings tuned for this CPU (avx2, 1 thread): 112 of 154 tensors
// re-encoded or given another kernel (bitmap -> sell 98, ...), 98 to sell without the
// gather, one pass of products 41.2 -> 30.1 ms, in 2.3 s".
void pack_tune_say(FILE *f, const char *prog, const PackTune *st);

#endif
