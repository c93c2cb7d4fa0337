// test_train.c: the schedules (schedule.h) against their formulas at every step, and
// the loader's window order (loader.h): every window once per epoch, reproducible,
// resumable from a cursor. The loop itself is tested end to end by t_train.sh.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"      // defines: xmalloc
#include "io/loader.h"       // defines: Loader, loader_permute
#include "sparse/schedule.h" // defines: PruneSchedule, lr_at
#include "test.h"            // defines: T_OK

static double cubic(double Sf, double t, double t0, double P) {
    double f = (t - t0) / P;
    f = f < 0 ? 0 : f > 1 ? 1 : f;
    return Sf + (0 - Sf) * pow(1 - f, 3);
}

static void test_sparsity(void) {
    // Paper defaults: T 4000, start 0, end 0.5, 50 updates: after steps 40, 80, ..., 2000.
    PruneSchedule p = {SCHED_CUBIC, 0.9, 4000, 0.0, 0.5, 50};
    int ok = schedule_n_updates(&p) == 50;
    for (int j = 1; j <= 50; j++) ok = ok && schedule_update_step(&p, j) == 40 * j;
    T_OK(ok, "cubic, paper defaults: 50 updates after steps 40, 80, ..., 2000");
    ok = 1;
    int n_upd = 0;
    for (int t = 0; t <= 4000; t++) {
        ok = ok && fabs(schedule_sparsity(&p, t) - cubic(0.9, t, 0, 2000)) < 1e-12;
        int j = schedule_update_at(&p, t);
        if (j) n_upd++;
        ok = ok && (j ? t % 40 == 0 && t <= 2000 && j == t / 40 : !(t % 40 == 0 && t >= 40 && t <= 2000));
        double want = t < 40 ? 0 : cubic(0.9, t > 2000 ? 2000 : 40 * (t / 40), 0, 2000);
        ok = ok && fabs(schedule_mask_target(&p, t) - want) < 1e-12;
    }
    T_OK(ok && n_upd == 50, "cubic: S(t) at every step 0..4000 == the formula; updates and mask targets");
    T_OK(schedule_sparsity(&p, 2000) == 0.9 && schedule_sparsity(&p, 0) == 0, "cubic: S(t0) = 0, S(t0 + T_prune) = S_f");

    // start/end fractions and rounding: T 100, start 0.1, end 0.6, U 3 -> t0 10, P 50,
    // s_j = floor(10 + j*50/3 + 0.5) = 27, 43, 60.
    PruneSchedule q = {SCHED_LINEAR, 0.75, 100, 0.1, 0.6, 3};
    ok = schedule_update_step(&q, 1) == 27 && schedule_update_step(&q, 2) == 43 && schedule_update_step(&q, 3) == 60;
    T_OK(ok, "update steps with start 0.1, end 0.6, 3 updates of 100 steps: 27, 43, 60");
    ok = 1;
    for (int t = 0; t <= 100; t++) {
        double f = (t - 10) / 50.0;
        f = f < 0 ? 0 : f > 1 ? 1 : f;
        ok = ok && fabs(schedule_sparsity(&q, t) - 0.75 * f) < 1e-12;
    }
    T_OK(ok, "linear: S(t) = S_f * clamp((t - t0)/T_prune) at every step");
    q.kind = SCHED_CUBIC;
    ok = 1;
    for (int t = 0; t <= 100; t++) ok = ok && fabs(schedule_sparsity(&q, t) - cubic(0.75, t, 10, 50)) < 1e-12;
    T_OK(ok, "cubic with start 0.1, end 0.6 at every step");

    PruneSchedule o = {SCHED_ONESHOT, 0.5, 100, 0.0, 0.5, 10};
    ok = schedule_n_updates(&o) == 1 && schedule_update_step(&o, 1) == 5;
    for (int t = 0; t <= 100; t++) {
        ok = ok && schedule_sparsity(&o, t) == 0.5 && (schedule_update_at(&o, t) != 0) == (t == 5);
        ok = ok && schedule_mask_target(&o, t) == (t < 5 ? 0 : 0.5);
    }
    T_OK(ok, "oneshot: one update, at the first update step, to S_f");

    // more updates than steps: several land on one step and act as one
    PruneSchedule d = {SCHED_CUBIC, 0.9, 4, 0.0, 1.0, 10};
    ok = schedule_update_step(&d, 1) == 1 && schedule_update_step(&d, 10) == 4 && schedule_update_at(&d, 4) == 10;
    ok = ok && schedule_mask_target(&d, 4) == 0.9;
    T_OK(ok, "10 updates over 4 steps: clamped to step >= 1, last update at the last step reaches S_f");
    PruneSchedule z = {SCHED_CUBIC, 0.0, 100, 0.0, 0.5, 50};
    T_OK(schedule_n_updates(&z) == 0 && schedule_update_at(&z, 2) == 0, "sparsity 0: no updates");
    PruneSchedule e = {SCHED_CUBIC, 0.8, 100, 0.3, 0.3, 5};
    T_OK(schedule_update_step(&e, 1) == 30 && schedule_update_step(&e, 5) == 30 && schedule_sparsity(&e, 30) == 0.8 &&
         schedule_sparsity(&e, 29) == 0, "start == end: every update at t0, straight to S_f");
}

static void test_lr(void) {
    // T 10, warmup 0.2 -> W 2: s = t-1 = 0,1 warm up; then (10 - s)/8
    double want[11] = {0, 0, 0.5, 1, 7 / 8.0, 6 / 8.0, 5 / 8.0, 4 / 8.0, 3 / 8.0, 2 / 8.0, 1 / 8.0};
    int ok = 1;
    for (int t = 1; t <= 10; t++) ok = ok && fabs(lr_at(1.0, 0.2, 10, t) - want[t]) < 1e-15;
    T_OK(ok, "lr: warmup 0.2 of 10 steps: 0, 0.5, 1, 7/8, ..., 1/8 (HF linear schedule)");
    ok = 1;
    for (int t = 1; t <= 4000; t++) {
        int s = t - 1;
        double w = s < 400 ? 1e-4 * s / 400.0 : 1e-4 * (4000 - s) / 3600.0;
        ok = ok && fabs(lr_at(1e-4, 0.1, 4000, t) - w) < 1e-18;
    }
    T_OK(ok, "lr: paper defaults at every step of 4000");
    ok = lr_at(2.0, 0, 4, 1) == 2.0 && lr_at(2.0, 0, 4, 4) == 0.5 && lr_at(2.0, 1.0, 4, 4) == 1.5;
    T_OK(ok, "lr: no warmup starts at the peak; all warmup never decays");
}

static void write_shard(const char *path, int n, uint64_t tokenizer_hash) {
    // shard.h's header via the library's writer: one document of n tokens
    ShardWriter w;
    int32_t *ids = xmalloc((size_t)n * sizeof *ids);
    for (int i = 0; i < n; i++) ids[i] = i % 50000;
    CHECK(shard_writer_open(&w, path, 50000, 0, tokenizer_hash) == 0, "shard_writer_open %s", path);
    CHECK(shard_writer_add_doc(&w, ids, (size_t)n) == 0, "add_doc");
    CHECK(shard_writer_close(&w) == 0, "close");
    free(ids);
}

static void test_loader(void) {
    uint64_t perm[1000], again[1000], other[1000];
    loader_permute(perm, 1000, 7);
    loader_permute(again, 1000, 7);
    loader_permute(other, 1000, 8);
    int seen[1000] = {0}, ok = 1;
    for (int i = 0; i < 1000; i++) ok = ok && perm[i] < 1000 && !seen[perm[i]]++;
    T_OK(ok, "loader_permute: a permutation of 0..999");
    T_OK(!memcmp(perm, again, sizeof perm) && memcmp(perm, other, sizeof perm), "same seed same order, other seed another");

    char dir[] = "/tmp/test_train.XXXXXX";
    CHECK(mkdtemp(dir), "mkdtemp");
    char a[64], b[64];
    snprintf(a, sizeof a, "%s/a.bin", dir);
    snprintf(b, sizeof b, "%s/b.bin", dir);
    write_shard(a, 101, 0x5eed);  // seq 10: (101-1)/10 = 10 windows
    write_shard(b, 75, 0x5eed);   // (75-1)/10 = 7 windows, a 4-token tail unused
    const char *paths[2] = {a, b};
    Loader l, r;
    T_OK(loader_open(&l, paths, 2, 10, 3, 50000) == 0 && l.n_windows == 17, "two shards, seq 10: 10 + 7 windows");
    int32_t tok[10], tgt[10], tok2[10], tgt2[10];
    int cover = 1;
    uint64_t first_epoch[17];
    for (int e = 0; e < 3; e++) {
        for (int i = 0; i < 17; i++) {
            if (e == 0) first_epoch[i] = l.perm[l.pos];
            loader_next(&l, tok, tgt);
            for (int k = 0; k < 10; k++) cover = cover && tgt[k] == tok[k] + 1;  // token i of a shard is i
        }
        cover = cover && l.epoch == (uint64_t)e + 1 && l.pos == 0;
    }
    T_OK(cover, "targets are the inputs shifted by one; the epoch turns after 17 windows");
    loader_close(&l);

    // every window once per epoch, checked on the window indices loader_next visits
    TRY_OR_DIE(loader_open(&l, paths, 2, 10, 3, 50000));
    int once = 1;
    for (int e = 0; e < 3; e++) {
        int count[17] = {0};
        for (int i = 0; i < 17; i++) {
            count[l.perm[l.pos]]++;
            loader_next(&l, tok, tgt);
        }
        for (int w = 0; w < 17; w++) once = once && count[w] == 1;
    }
    T_OK(once, "each of the 17 windows exactly once in each of 3 epochs");
    loader_close(&l);

    // reproducible, and a loader moved to a cursor continues the same sequence
    TRY_OR_DIE(loader_open(&l, paths, 2, 10, 3, 50000));
    TRY_OR_DIE(loader_open(&r, paths, 2, 10, 3, 50000));
    int same = !memcmp(l.perm, first_epoch, sizeof first_epoch);
    for (int i = 0; i < 23; i++) loader_next(&l, tok, tgt);  // into epoch 1, pos 6
    TRY_OR_DIE(loader_seek(&r, l.epoch, l.pos));
    for (int i = 0; i < 40; i++) {
        loader_next(&l, tok, tgt);
        loader_next(&r, tok2, tgt2);
        same = same && !memcmp(tok, tok2, sizeof tok) && !memcmp(tgt, tgt2, sizeof tgt);
    }
    T_OK(same, "the same seed gives the same windows; loader_seek(epoch 1, pos 6) continues identically");
    // window contents: window w of shard b starts at token (w - 10) * 10 of b
    TRY_OR_DIE(loader_seek(&r, 0, 0));
    int content = 1;
    for (int i = 0; i < 17; i++) {
        uint64_t w = r.perm[r.pos];
        loader_next(&r, tok, tgt);
        int32_t start = (int32_t)((w < 10 ? w : w - 10) * 10);
        content = content && tok[0] == start && tgt[9] == start + 10;
    }
    T_OK(content, "window w covers tokens [w*seq, w*seq + seq + 1) of its own shard");
    loader_close(&l);
    loader_close(&r);
    T_OK(loader_open(&l, paths, 2, 200, 3, 50000) < 0 && strstr(err_msg(), "no training window"),
         "shards shorter than seq + 1: an error (%s)", err_msg());
    T_OK(loader_open(&l, paths, 2, 10, 3, 97) < 0 && strstr(err_msg(), "larger than the model"),
         "a shard of a larger vocabulary than the model: an error");

    // shards of two tokenizers (their headers' tokenizer hashes differ) do not mix
    char c[64], want[256];
    snprintf(c, sizeof c, "%s/c.bin", dir);
    write_shard(c, 75, 0x0717);
    const char *mixed[3] = {a, b, c};
    TRY_OR_DIE(loader_open(&l, mixed, 2, 10, 3, 50000));
    T_OK(l.tokenizer_hash == 0x5eed, "the loader keeps its shards' tokenizer hash");
    loader_close(&l);
    snprintf(want, sizeof want, "%s: made by another tokenizer than %s (tokenizer hash 0000000000000717, not "
             "0000000000005eed)", c, a);
    T_OK(loader_open(&l, mixed, 3, 10, 3, 50000) < 0 && strstr(err_msg(), want),
         "a shard of another tokenizer: an error naming both shards (%s)", err_msg());
    unlink(a);
    unlink(b);
    unlink(c);
    rmdir(dir);
}

int main(void) {
    test_sparsity();
    test_lr();
    test_loader();
    T_DONE();
}
