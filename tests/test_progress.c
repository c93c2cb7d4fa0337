// test_progress.c: base/progress.c's lines as a person reads them: spaces between numbers
// and units ("40/40 steps", "157.2 KiB/157.2 KiB"), seconds per step when a step takes more
// than a second, an ETA in h/m/s. stderr goes to a file here; the clock is moved by
// setting t0 back.
#include <stdio.h>
#include <string.h>

#include "base/progress.h" // defines: Progress, progress_init, progress_update
#include "test.h"          // defines: T_OK, T_DONE

static char line[512];

// The last line p printed after done units in `secs` seconds (p not a terminal).
static const char *draw_at(Progress *p, uint64_t done, double secs, int final) {
    FILE *f = tmpfile();
    fflush(stderr);
    int saved = dup(2);
    dup2(fileno(f), 2);
    p->t0 = now_seconds() - secs;
    p->last_draw = 0, p->interval = 0;
    if (final) {
        p->done = done;
        progress_finish(p);
    } else {
        progress_update(p, done);
    }
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(f);
    line[0] = 0;
    if (!fgets(line, sizeof line, f)) line[0] = 0;
    fclose(f);
    line[strcspn(line, "\n")] = 0;
    return line;
}

int main(void) {
    Progress p;
    progress_init(&p, "train", 100, "steps", 0);
    p.tty = 0;
    const char *l = draw_at(&p, 5, 100.0, 0);
    T_OK(strstr(l, "train: 5% 5/100 steps, 20.0 s/step, ETA 31m40s") != NULL, "slow steps: s/step and ETA in m/s (%s)", l);
    progress_init(&p, "train", 10000, "steps", 0);
    p.tty = 0;
    l = draw_at(&p, 10, 100.0, 0);
    T_OK(strstr(l, "10/10.0 K steps, 10.0 s/step, ETA 27h45m00s") != NULL, "hours in the ETA (%s)", l);
    progress_init(&p, "tokenize", 161000, "B", 0);
    p.tty = 0;
    l = draw_at(&p, 161000, 50.0, 1);
    T_OK(strstr(l, "tokenize: 100% 157.2 KiB/157.2 KiB, 3.1 KiB/s in 50.0s") != NULL, "bytes: binary units, the prefix "
         "joins the unit (%s)", l);
    progress_init(&p, "eval", 40, "windows", 0);
    p.tty = 0;
    l = draw_at(&p, 40, 2.0, 1);
    T_OK(strstr(l, "eval: 100% 40/40 windows, 20 windows/s in 2.0s") != NULL, "counts: a space before the unit (%s)", l);
    // parameter counts: 3 significant digits, one way in every tool (issue 36: 0.26M in
    // best-train, 0.3M in best-eval, "0.0M" for the Qwen3 fixture)
    static const struct { double x; const char *want; } counts[] = {
        {0, "0"}, {512, "512"}, {999, "999"}, {999.6, "1.00K"}, {7344, "7.34K"}, {12345, "12.3K"},
        {260000, "260K"}, {263296, "263K"}, {1.1e6, "1.10M"}, {6.738e9, "6.74B"}, {3.2e13, "32.0T"}};
    int bad = 0;
    char buf[32];
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
        human_count(buf, sizeof buf, counts[i].x);
        if (strcmp(buf, counts[i].want) != 0) {
            fprintf(stderr, "human_count(%g) = %s, want %s\n", counts[i].x, buf, counts[i].want);
            bad++;
        }
    }
    T_OK(bad == 0, "human_count: 11 counts from 0 to 3.2e13 in 3 significant digits (%d wrong)", bad);
    T_DONE();
}
