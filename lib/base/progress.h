// progress.h: human progress on stderr.
//
// On a terminal: one line redrawn at most 10 times a second, a bar with
// percentage, rate and time left. Otherwise (a log file, CI): a plain line every
// `interval` seconds (10 by default). Silent when quiet. Results never go here:
// they go to stdout.
#ifndef BEST_PROGRESS_H
#define BEST_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *label;   // "tokenize"
    const char *unit;    // "B" (shown with K/M/G prefixes), "windows", "steps"
    uint64_t total;      // 0 when unknown: no bar, no ETA
    uint64_t done;
    int tty, quiet;
    double t0, last_draw, interval;
    char extra[96];      // a caller's note shown after the rate ("1.2M tokens")
} Progress;

void progress_init(Progress *p, const char *label, uint64_t total, const char *unit, int quiet);
void progress_update(Progress *p, uint64_t done);  // cheap when nothing is drawn
void progress_finish(Progress *p);                 // final line with the total time
double now_seconds(void);                          // monotonic clock
// x with its unit for people: "12.3 MiB" (bytes: binary prefixes, joined to the unit),
// "1.2 K steps" (others: decimal).
void human_units(char *buf, size_t n, double x, const char *unit);
// A count (parameters) in 3 significant digits: "512", "7.34K", "260K", "6.74B" (K, M,
// B, T: thousands, millions, billions, trillions), the same way in every tool.
void human_count(char *buf, size_t n, double x);
// seconds as "1h02m03s", "2m05s", "45s".
void human_hms(char *buf, size_t n, double s);

#endif
