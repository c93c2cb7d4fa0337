// pack_tune.c: timing each packed tensor's encodings at load (pack_tune.h).
#include "pack/pack_tune.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"       // defines: xmalloc
#include "pack/pack.h"        // defines: PackTensor, pack_enc_name
#include "pack/pack_model.h"  // defines: pack_model_tensor, pack_model_replace
#include "pack/pack_write.h"  // defines: pack_tensor_encode
#include "pack/spmv.h"        // defines: spmv_forward, spmv_isa, spmv_isa_name

#define TUNE_MARGIN 0.97 // another encoding must be this much faster than the pack's own
#define TUNE_MIN_S 2e-3  // each candidate is timed for at least this long
#define TUNE_MIN_REPS 3
#define TUNE_MAX_REPS 200

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int pack_tune_enabled(void) {
    const char *v = getenv("BEST_PACK_TUNE");
    return !(v && (strcmp(v, "0") == 0 || strcmp(v, "off") == 0));
}

// Seconds of one y = t x: the fastest of the repetitions after one to warm up.
static double time_product(const PackTensor *t, const float *x, float *y) {
    spmv_forward(y, x, t, NULL, 0);
    double best = 1e30, start = now();
    for (int r = 0; r < TUNE_MAX_REPS; r++) {
        double t0 = now();
        spmv_forward(y, x, t, NULL, 0);
        double dt = now() - t0;
        if (dt < best) best = dt;
        if (r + 1 >= TUNE_MIN_REPS && now() - start >= TUNE_MIN_S) break;
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
        st->tensors++;
        double own = time_product(t, x, y), best = own;
        PackTensor keep;
        void *keep_mem = NULL;
        for (int e = 0; e < PACK_N_ENC; e++) {
            if (e == (int)t->enc) continue;
            PackTensor c;
            void *mem;
            if (pack_tensor_encode(&c, &mem, t, (PackEnc)e) != 0) continue;
            double dt = time_product(&c, x, y);
            if (dt < best && dt < own * TUNE_MARGIN) {
                free(keep_mem);
                keep = c, keep_mem = mem, best = dt;
            } else {
                free(mem);
            }
        }
        st->before_s += own;
        st->after_s += best;
        st->moves[t->enc][keep_mem ? keep.enc : t->enc]++;
        if (keep_mem) {
            st->changed++;
            pack_model_replace(m, i, &keep, keep_mem); // (t is the pack's; it stays in the map)
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
    fprintf(f, "%s: encodings tuned for this CPU (%s, %d thread%s): %d of %d tensors re-encoded%s%s%s, one pass of "
            "products %.2f -> %.2f ms, in %.1f s\n", prog, spmv_isa_name(spmv_isa()), threads, threads == 1 ? "" : "s",
            st->changed, st->tensors, n ? " (" : "", moves, n ? ")" : "", 1e3 * st->before_s, 1e3 * st->after_s,
            st->seconds);
}
