// pack_tune.c: timing each packed tensor's encodings at load (pack_tune.h).
#include "pack/pack_tune.h"

#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h> // _mm_clflush, _mm_mfence (SSE2: every x86-64)
#endif

#include "base/error.h"       // defines: xmalloc
#include "pack/pack.h"        // defines: PackTensor, pack_enc_name
#include "pack/pack_model.h"  // defines: pack_model_tensor, pack_model_replace
#include "pack/pack_write.h"  // defines: pack_tensor_encodings
#include "pack/spmv.h"        // defines: spmv_forward, spmv_isa, spmv_isa_name

#define TUNE_MARGIN 0.97 // another encoding must be this much faster than the pack's own
#define TUNE_REPS 3      // timed products of each candidate, each from cold caches
#define TUNE_SAMPLE (1u << 21) // elements of a tensor's first rows the candidates are timed on

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int pack_tune_enabled(void) {
    const char *v = getenv("BEST_PACK_TUNE");
    return !(v && (strcmp(v, "0") == 0 || strcmp(v, "off") == 0));
}

// Decoding reads every weight once a token, from memory: a model is larger than the caches.
// A tensor timed again and again would sit in them and favour the encoding with the least
// work over the one with the fewest bytes (measured: at 70% on the 220M model, AVX2, warm
// timing picked encodings that decode at 29 tokens/s where the pack's own gave 50). So
// before each timed product the tensor's streams are flushed from every cache level
// (clflush of each line; x, which decoding reads hot, stays).
static void flush_bytes(const void *p, size_t n) {
#if defined(__x86_64__) || defined(__i386__)
    const char *c = (const char *)((uintptr_t)p & ~(uintptr_t)63), *end = (const char *)p + n;
    for (; p && c < end; c += 64) _mm_clflush(c);
#else
    (void)p, (void)n; // (elsewhere the timing is warm)
#endif
}

static void tensor_evict(const PackTensor *t) {
    size_t units = t->enc == PACK_TILES ? (t->rows + TILE - 1) / TILE : t->enc == PACK_SELL ? (t->rows + SELL - 1) / SELL
                                                                                            : t->rows;
    flush_bytes(t->nnz_ptr, 4 * ((t->enc == PACK_SELL ? t->rows : units) + 1));
    flush_bytes(t->ix_ptr, 4 * (units + 1));
    flush_bytes(t->index, t->index_bytes);
    flush_bytes(t->masks, 5 * t->slots);
    flush_bytes(t->values, t->values_bytes);
    flush_bytes(t->scales, t->scales ? 4 * t->rows : 0);
#if defined(__x86_64__) || defined(__i386__)
    _mm_mfence();
#endif
}

// Seconds of one y = t x from cold caches: the fastest of TUNE_REPS, after one product
// that faults the pages in.
static double time_product(const PackTensor *t, const float *x, float *y) {
    spmv_forward(y, x, t, NULL, 0);
    double best = 1e30;
    for (int r = 0; r < TUNE_REPS; r++) {
        tensor_evict(t);
        double t0 = now();
        spmv_forward(y, x, t, NULL, 0);
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    return best;
}

void pack_model_tune(PackTune *st, Model *m) {
    memset(st, 0, sizeof *st);
    double start = now();
    size_t maxc = 0, maxr = 0;
    for (int i = 0; i < m->n_info; i++) {
        const PackTensor *t = pack_model_tensor(m, i);
        if (t && t->prunable) {
            if (t->cols > maxc) maxc = t->cols;
            if (t->rows > maxr) maxr = t->rows;
        }
    }
    if (maxc == 0) return;
    float *x = xmalloc(maxc * sizeof *x), *y = xmalloc(maxr * sizeof *y);
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (size_t c = 0; c < maxc; c++) { // an activation-like x, the same for every candidate
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[c] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5);
    }
    for (int i = 0; i < m->n_info; i++) {
        const PackTensor *t = pack_model_tensor(m, i);
        if (!t || !t->prunable || t->ndim != 2) continue;
        // a dense tensor without a zero: every encoding stores all of it, and only dense
        // reads no index (so its products stay the dense kernels' bits, run after run)
        if (t->enc == PACK_DENSE && pack_tensor_nonzeros(t) == t->rows * t->cols) continue;
        // every encoding of the tensor's first rows (at most TUNE_SAMPLE elements: the cost of
        // tuning stays bounded on a 7B model), its own re-encoded too, so that all are timed on
        // the same rows
        size_t rows = t->cols ? TUNE_SAMPLE / t->cols : t->rows;
        if (rows < 64) rows = 64;
        PackTensor c[PACK_N_ENC];
        void *mem[PACK_N_ENC];
        pack_tensor_encodings(c, mem, t, rows, ~0u); // (none: quantized values; -1 cannot happen here)
        double sec[PACK_N_ENC], own_s = 0; // own_s: the pack's encoding with its default kernel
        int sell_variant = 0;
        unsigned made = 0; // the encodings made (bit e)
        for (int e = 0; e < PACK_N_ENC; e++) {
            if (!mem[e]) continue;
            made |= 1u << e;
            sec[e] = time_product(&c[e], x, y);
            if (e == (int)t->enc) own_s = sec[e];
            if (e == PACK_SELL && spmv_isa() >= SPMV_AVX2) { // and its kernel without the gather
                c[e].variant = 1;
                double ng = time_product(&c[e], x, y);
                if (ng < sec[e] * TUNE_MARGIN) sec[e] = ng, sell_variant = 1;
            }
            free(mem[e]);
        }
        int own = (int)t->enc, best = own;
        if (!(made >> own & 1)) continue; // (quantized: the pack's encoding stays)
        st->tensors++;
        for (int e = 0; e < PACK_N_ENC; e++)
            if ((made >> e & 1) && sec[e] < sec[best] && sec[e] < sec[own] * TUNE_MARGIN) best = e;
        double scale = (double)t->rows / (double)c[own].rows; // the sample's times to the tensor's
        st->before_s += own_s * scale;
        st->after_s += sec[best] * scale;
        st->moves[own][best]++;
        int variant = best == PACK_SELL ? sell_variant : 0;
        if (best != own) { // the whole tensor in the chosen encoding (t is the pack's; it stays in the map)
            PackTensor full[PACK_N_ENC];
            void *fm[PACK_N_ENC];
            pack_tensor_encodings(full, fm, t, 0, 1u << best);
            full[best].variant = variant;
            pack_model_replace(m, i, &full[best], fm[best]);
        } else if (variant != t->variant) { // its own streams, another kernel: nothing to encode
            PackTensor same = *t;
            same.variant = variant;
            pack_model_replace(m, i, &same, NULL);
        }
        if (best != own || variant != t->variant) {
            st->changed++;
            st->no_gather += variant == 1;
        }
    }
    free(x);
    free(y);
    st->seconds = now() - start;
}

void pack_tune_say(FILE *f, const char *prog, const PackTune *st) {
    if (!st->tensors) return;
    char moves[512] = "";
    size_t n = 0;
    for (int a = 0; a < PACK_N_ENC; a++)
        for (int b = 0; b < PACK_N_ENC; b++)
            if (a != b && st->moves[a][b] && n < sizeof moves)
                n += (size_t)snprintf(moves + n, sizeof moves - n, "%s%s -> %s %d", n ? ", " : "",
                                      pack_enc_name((PackEnc)a), pack_enc_name((PackEnc)b), st->moves[a][b]);
    int threads = omp_get_max_threads();
    char ng[64] = "";
    if (st->no_gather) snprintf(ng, sizeof ng, ", %d to sell without the gather", st->no_gather);
    fprintf(f, "%s: encodings tuned for this CPU (%s, %d thread%s): %d of %d tensors re-encoded or given another "
            "kernel%s%s%s%s, one pass of "
            "products %.2f -> %.2f ms, in %.1f s\n", prog, spmv_isa_name(spmv_isa()), threads, threads == 1 ? "" : "s",
            st->changed, st->tensors, n ? " (" : "", moves, n ? ")" : "", ng, 1e3 * st->before_s, 1e3 * st->after_s,
            st->seconds);
}
