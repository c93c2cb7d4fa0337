// progress.c: a terminal bar or periodic plain lines on stderr. See progress.h.
#include "base/progress.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void progress_init(Progress *p, const char *label, uint64_t total, const char *unit, int quiet) {
    memset(p, 0, sizeof *p);
    p->label = label;
    p->unit = unit;
    p->total = total;
    p->quiet = quiet;
    p->tty = isatty(2);
    p->t0 = p->last_draw = now_seconds();
    p->interval = p->tty ? 0.1 : 10.0;
}

// "12.3M" style, for byte and token counts.
static void human(char *buf, size_t n, double x) {
    const char *suf = " KMGTP";
    int k = 0;
    while (x >= 1000.0 && k < 5) { x /= 1000.0; k++; }
    if (k == 0) snprintf(buf, n, "%.0f", x);
    else snprintf(buf, n, "%.1f%c", x, suf[k]);
}

static void draw(Progress *p, int final) {
    double el = now_seconds() - p->t0;
    double rate = el > 0 ? (double)p->done / el : 0;
    char done[16], total[16], r[16], eta[32] = "";
    human(done, sizeof done, (double)p->done);
    human(total, sizeof total, (double)p->total);
    human(r, sizeof r, rate);
    if (p->total && !final && rate > 0 && p->done < p->total) {
        double left = (double)(p->total - p->done) / rate;
        snprintf(eta, sizeof eta, " ETA %dm%02ds", (int)(left / 60), (int)left % 60);
    }
    if (final) snprintf(eta, sizeof eta, " in %.1fs", el);
    const char *ex = p->extra[0] ? ", " : "";
    if (p->tty) {
        char bar[31] = "";
        if (p->total) {
            int fill = (int)(30.0 * (double)p->done / (double)p->total);
            if (fill > 30) fill = 30;
            for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
            bar[30] = 0;
            fprintf(stderr, "\r%s [%s] %3.0f%% %s/%s%s %s%s/s%s%s%s\033[K%s", p->label, bar,
                    100.0 * (double)p->done / (double)p->total, done, total, p->unit, r, p->unit,
                    ex, p->extra, eta, final ? "\n" : "");
        } else {
            fprintf(stderr, "\r%s %s%s %s%s/s%s%s%s\033[K%s", p->label, done, p->unit, r, p->unit,
                    ex, p->extra, eta, final ? "\n" : "");
        }
    } else {
        if (p->total)
            fprintf(stderr, "%s: %.0f%% %s/%s%s, %s%s/s%s%s%s\n", p->label,
                    100.0 * (double)p->done / (double)p->total, done, total, p->unit, r, p->unit,
                    ex, p->extra, eta);
        else
            fprintf(stderr, "%s: %s%s, %s%s/s%s%s%s\n", p->label, done, p->unit, r, p->unit, ex,
                    p->extra, eta);
    }
    fflush(stderr);
}

void progress_update(Progress *p, uint64_t done) {
    p->done = done;
    if (p->quiet) return;
    double t = now_seconds();
    if (t - p->last_draw < p->interval) return;
    p->last_draw = t;
    draw(p, 0);
}

void progress_finish(Progress *p) {
    if (p->quiet) return;
    draw(p, 1);
}
