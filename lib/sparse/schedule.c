// schedule.c: sparsity and learning-rate schedules (see schedule.h).
#include "sparse/schedule.h"

#include <math.h>
#include <string.h>

int schedule_parse(SchedKind *out, const char *name) {
    if (strcmp(name, "cubic") == 0) { *out = SCHED_CUBIC; return 0; }
    if (strcmp(name, "linear") == 0) { *out = SCHED_LINEAR; return 0; }
    if (strcmp(name, "oneshot") == 0) { *out = SCHED_ONESHOT; return 0; }
    return -1;
}

const char *schedule_name(SchedKind k) {
    return k == SCHED_CUBIC ? "cubic" : k == SCHED_LINEAR ? "linear" : k == SCHED_ONESHOT ? "oneshot" : "?";
}

double schedule_sparsity(const PruneSchedule *p, int t) {
    if (p->kind == SCHED_ONESHOT) return p->final;
    double t0 = p->start * p->steps, len = (p->end - p->start) * p->steps;
    double f = len > 0 ? (t - t0) / len : (t >= t0 ? 1.0 : 0.0);
    f = f < 0 ? 0 : f > 1 ? 1 : f;
    if (p->kind == SCHED_LINEAR) return p->final * f;
    double r = 1.0 - f;
    return p->final + (0.0 - p->final) * r * r * r;
}

int schedule_n_updates(const PruneSchedule *p) {
    if (p->final <= 0) return 0;
    return p->kind == SCHED_ONESHOT ? 1 : p->updates;
}

int schedule_update_step(const PruneSchedule *p, int j) {
    double t0 = p->start * p->steps, len = (p->end - p->start) * p->steps;
    double s = floor(t0 + j * len / p->updates + 0.5);
    if (s < 1) s = 1;
    if (s > p->steps) s = p->steps;
    return (int)s;
}

int schedule_update_at(const PruneSchedule *p, int t) {
    int n = schedule_n_updates(p), last = 0;
    for (int j = 1; j <= n; j++) {
        int s = schedule_update_step(p, j);
        if (s == t) last = j;
        if (s > t) break;  // s_j is nondecreasing in j
    }
    return last;
}

double schedule_mask_target(const PruneSchedule *p, int t) {
    int n = schedule_n_updates(p);
    double target = 0;
    for (int j = 1; j <= n; j++) {
        int s = schedule_update_step(p, j);
        if (s > t) break;
        target = schedule_sparsity(p, s);
    }
    return target;
}

double lr_at(double lr, double warmup, int steps, int t) {
    int w = (int)floor(warmup * steps + 0.5);
    int s = t - 1;
    if (s < w) return lr * (double)s / (double)w;
    if (steps <= w) return 0;
    double r = (double)(steps - s) / (double)(steps - w);
    return lr * (r < 0 ? 0 : r);
}
