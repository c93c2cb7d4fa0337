// schedule.h: the two schedules of a training run, as pure functions of the step:
// the target sparsity of progressive pruning (with the steps at which the mask is
// recomputed) and the learning rate (linear warmup, then linear decay to 0).
//
// Steps are counted 1..T: step t is the t-th optimizer step. Nothing here touches
// weights or masks (train.h does), so tests can check every value against the formula.
//
// Prune updates. With t0 = start*T and P = (end - start)*T (start, end: fractions of
// T), update j (1..U) happens right after optimizer step
//     s_j = clamp(floor(t0 + j*P/U + 0.5), 1, T)
// and prunes to S(s_j), where, with f = clamp((t - t0)/P, 0, 1) (f = 1 when P = 0),
//     cubic   S(t) = S_f + (0 - S_f)(1 - f)^3
//     linear  S(t) = S_f * f
//     oneshot S(t) = S_f          (one update only: j = 1)
// Several updates that fall on the same step act as one (the last, same S). After
// the last update the mask is frozen. Paper defaults: T 4000, start 0, end 0.5,
// U 50: updates after steps 40, 80, ..., 2000.
//
// Learning rate (Hugging Face's get_linear_schedule_with_warmup, with s = t - 1 the
// number of steps already taken and W = floor(warmup*T + 0.5)):
//     lr(t) = lr * s/W                for s < W
//           = lr * (T - s)/(T - W)    otherwise
// so step 1 runs at 0 when W > 0, and the rate reaches 0 just after step T.
#ifndef BEST_SCHEDULE_H
#define BEST_SCHEDULE_H

typedef enum { SCHED_CUBIC, SCHED_LINEAR, SCHED_ONESHOT } SchedKind;

int schedule_parse(SchedKind *out, const char *name); // -1 (no ERR) if unknown
const char *schedule_name(SchedKind k);

typedef struct {
    SchedKind kind;
    double final;        // S_f in [0, 1)
    int steps;           // T
    double start, end;   // fractions of T, 0 <= start <= end <= 1
    int updates;         // U >= 1
} PruneSchedule;

// The scheduled sparsity S(t) (any t; 0 before t0 except for oneshot's S_f).
double schedule_sparsity(const PruneSchedule *p, int t);
// Number of updates: U, or 1 for oneshot, or 0 when S_f == 0.
int schedule_n_updates(const PruneSchedule *p);
// s_j for j in 1..schedule_n_updates.
int schedule_update_step(const PruneSchedule *p, int j);
// The last j whose s_j == t, or 0 when no update falls on step t.
int schedule_update_at(const PruneSchedule *p, int t);
// The sparsity the mask in force after step t aims at: S(s_j) of the last update
// with s_j <= t, 0 before the first.
double schedule_mask_target(const PruneSchedule *p, int t);

// lr(t) as above for steps T and warmup fraction warmup.
double lr_at(double lr, double warmup, int steps, int t);

#endif
