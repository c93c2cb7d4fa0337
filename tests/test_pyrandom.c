// test_pyrandom.c: base/pyrandom.h against Python's random module itself (tests/pyrandom_ref.py
// run by the python3 at hand): for 200 seeds (0, 1, 1234, 2^32 - 1, 2^32, 2^63, 2^64 - 1 and
// random ones of every width) the same getrandbits, randrange and sample draws, in the same
// order, must print the same line. sample is taken at sizes on both sides of CPython's
// switch between its pool and its set (n <= 21 + 4^ceil(log4(3k))).
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"    // defines: xmalloc
#include "base/pyrandom.h" // defines: the API under test
#include "test.h"          // defines: T_OK, T_SKIP, T_DONE

static const size_t SAMPLES[][2] = {{1, 1},     {10, 5},   {21, 5},    {22, 5},    {30, 0},     {80, 10},
                                    {85, 10},   {86, 10},  {100, 10},  {500, 500}, {5000, 40}, {100000, 1234}};
#define NS (sizeof SAMPLES / sizeof *SAMPLES)

// Our line for seed (pyrandom_ref.py's order), appended to buf.
static void line_of(char *buf, size_t cap, uint64_t seed) {
    PyRandom r;
    pyrandom_seed(&r, seed);
    size_t n = 0;
#define PUT(FMT, V) n += (size_t)snprintf(buf + n, cap - n, n ? " " FMT : FMT, V)
    for (int i = 0; i < 3; i++) PUT("%" PRIu32, pyrandom_u32(&r));
    const int ks[] = {1, 7, 31, 33, 53, 64};
    for (int i = 0; i < 6; i++) PUT("%" PRIu64, pyrandom_getrandbits(&r, ks[i]));
    const uint64_t ns[] = {1, 2, 3, 1000, (1ull << 33) + 1, (1ull << 63) + 5};
    for (int i = 0; i < 6; i++) PUT("%" PRIu64, pyrandom_below(&r, ns[i]));
    size_t *out = xmalloc(100000 * sizeof *out);
    for (size_t s = 0; s < NS; s++) {
        CHECK(pyrandom_sample(out, &r, SAMPLES[s][0], SAMPLES[s][1]) == 0, "sample");
        for (size_t i = 0; i < SAMPLES[s][1]; i++) PUT("%zu", out[i]);
    }
#undef PUT
    free(out);
}

int main(void) {
    if (system("python3 -c 'import random' >/dev/null 2>&1") != 0) {
        T_SKIP("Python's random: no python3 here (make deps installs it)");
        T_DONE();
    }
    enum { SEEDS = 200 };
    uint64_t seeds[SEEDS] = {0, 1, 1234, 4294967295ull, 4294967296ull, 1ull << 63, UINT64_MAX};
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int i = 7; i < SEEDS; i++) { // random seeds of every width, 1 to 64 bits
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        seeds[i] = x >> (i % 64);
    }
    char in[] = "/tmp/test_pyrandom.XXXXXX";
    int fd = mkstemp(in);
    CHECK(fd >= 0, "mkstemp");
    FILE *f = fdopen(fd, "w");
    for (int i = 0; i < SEEDS; i++) fprintf(f, "%" PRIu64 "\n", seeds[i]);
    fclose(f);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "python3 tests/pyrandom_ref.py < %s", in);
    FILE *p = popen(cmd, "r");
    CHECK(p, "popen");
    size_t cap = 1 << 20;
    char *want = xmalloc(cap), *got = xmalloc(cap);
    int same = 0, lines = 0, first_bad = -1;
    for (int i = 0; i < SEEDS && fgets(want, (int)cap, p); i++, lines++) {
        want[strcspn(want, "\n")] = 0;
        line_of(got, cap, seeds[i]);
        if (strcmp(want, got) == 0) same++;
        else if (first_bad < 0) first_bad = i;
    }
    int rc = pclose(p);
    unlink(in);
    T_OK(rc == 0 && lines == SEEDS && same == SEEDS,
         "MT19937 seeded as CPython, getrandbits (1..64 bits), randrange and sample (pool and set) equal Python's "
         "random.Random(seed) for %d of %d seeds (python exit %d%s)", same, SEEDS, rc,
         first_bad >= 0 ? ", a seed that differs: see pyrandom_ref.py" : "");
    if (first_bad >= 0) printf("# first differing seed: %" PRIu64 "\n", seeds[first_bad]);
    free(want);
    free(got);
    T_DONE();
}
