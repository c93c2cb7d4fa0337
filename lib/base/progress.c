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

// x with its unit for people: "12.3 MB" (bytes: the prefix joins the unit), "1.2 K steps",
// "40 steps".
void human_units(char *buf, size_t n, double x, const char *unit) {
    const char *suf = " KMGTP";
    int k = 0, bytes = strcmp(unit, "B") == 0;
    double base = bytes ? 1024.0 : 1000.0; // bytes in binary units (KiB), as every tool prints them
    while (x >= base && k < 5) { x /= base; k++; }
    if (k == 0) snprintf(buf, n, "%.0f %s", x, unit);
    else if (bytes) snprintf(buf, n, "%.1f %ciB", x, suf[k]);
    else snprintf(buf, n, "%.1f %c %s", x, suf[k], unit);
}

void human_count(char *buf, size_t n, double x) {
    static const char suf[] = " KMBT";
    int k = 0;
    while (x >= 999.5 && k < 4) { x /= 1000.0; k++; }
    if (k == 0) snprintf(buf, n, "%.0f", x);
    else snprintf(buf, n, "%.*f%c", x >= 99.95 ? 0 : x >= 9.995 ? 1 : 2, x, suf[k]);
}

// "1h02m03s", "2m05s", "45s".
void human_hms(char *buf, size_t n, double s) {
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ldh%02ldm%02lds", t / 3600, t / 60 % 60, t % 60);
    else if (t >= 60) snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, n, "%lds", t);
}

// "12.3 M steps/s", or "4.2 s/step" when one takes more than a second.
static void rate_text(char *buf, size_t n, double rate, const char *unit) {
    if (rate > 0 && rate < 1) {
        size_t u = strlen(unit);
        int plural = u > 1 && unit[u - 1] == 's';
        snprintf(buf, n, "%.1f s/%.*s", 1.0 / rate, (int)(plural ? u - 1 : u), unit);
    } else {
        char r[40];
        human_units(r, sizeof r, rate, unit);
        snprintf(buf, n, "%s/s", r);
    }
}

static void draw(Progress *p, int final) {
    double el = now_seconds() - p->t0;
    double rate = el > 0 ? (double)p->done / el : 0;
    const char *unit = p->unit;
    char done[40], total[40], r[48], eta[40] = "", t[24];
    int bytes = strcmp(unit, "B") == 0;
    human_units(done, sizeof done, (double)p->done, bytes ? "B" : ""); // "161.0 KB", "40 "
    human_units(total, sizeof total, (double)p->total, unit);            // "161.0 KB", "40 steps"
    size_t dl = strlen(done);
    if (dl && done[dl - 1] == ' ') done[dl - 1] = 0;                // "40", "1.2 K"
    rate_text(r, sizeof r, rate, unit);
    if (p->total && !final && rate > 0 && p->done < p->total) {
        human_hms(t, sizeof t, (double)(p->total - p->done) / rate);
        snprintf(eta, sizeof eta, ", ETA %s", t);
    }
    if (final && el < 60) snprintf(eta, sizeof eta, " in %.1fs", el);
    if (final && el >= 60) {
        human_hms(t, sizeof t, el);
        snprintf(eta, sizeof eta, " in %s", t);
    }
    // counts and units: "40/40 steps", "810.9 K/810.9 KB" (the prefix belongs to the unit)
    char count[96];
    if (p->total) snprintf(count, sizeof count, "%s/%s", done, total);
    else if (bytes) snprintf(count, sizeof count, "%s", done);
    else snprintf(count, sizeof count, "%s %s", done, unit);
    const char *ex = p->extra[0] ? ", " : "";
    if (p->tty) {
        char bar[31] = "";
        if (p->total) {
            int fill = (int)(30.0 * (double)p->done / (double)p->total);
            if (fill > 30) fill = 30;
            for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
            bar[30] = 0;
            fprintf(stderr, "\r%s [%s] %3.0f%% %s, %s%s%s%s\033[K%s", p->label, bar,
                    100.0 * (double)p->done / (double)p->total, count, r, ex, p->extra, eta, final ? "\n" : "");
        } else {
            fprintf(stderr, "\r%s %s, %s%s%s%s\033[K%s", p->label, count, r, ex, p->extra, eta, final ? "\n" : "");
        }
    } else {
        if (p->total)
            fprintf(stderr, "%s: %.0f%% %s, %s%s%s%s\n", p->label, 100.0 * (double)p->done / (double)p->total, count,
                    r, ex, p->extra, eta);
        else
            fprintf(stderr, "%s: %s, %s%s%s%s\n", p->label, count, r, ex, p->extra, eta);
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
