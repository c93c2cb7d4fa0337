// pyrandom.c: Python's random module's MT19937, seeding and sampling (pyrandom.h).
#include "base/pyrandom.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h" // defines: xmalloc, xcalloc

static void init_genrand(PyRandom *r, uint32_t s) {
    r->mt[0] = s;
    for (int i = 1; i < PYRANDOM_N; i++)
        r->mt[i] = 1812433253u * (r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) + (uint32_t)i;
    r->mti = PYRANDOM_N;
}

// MT19937's init_by_array (Matsumoto and Nishimura's reference, as CPython's _randommodule.c).
static void init_by_array(PyRandom *r, const uint32_t *key, int len) {
    uint32_t *mt = r->mt;
    init_genrand(r, 19650218u);
    int i = 1, j = 0;
    for (int k = PYRANDOM_N > len ? PYRANDOM_N : len; k; k--) {
        mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1664525u)) + key[j] + (uint32_t)j;
        i++, j++;
        if (i >= PYRANDOM_N) mt[0] = mt[PYRANDOM_N - 1], i = 1;
        if (j >= len) j = 0;
    }
    for (int k = PYRANDOM_N - 1; k; k--) {
        mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1566083941u)) - (uint32_t)i;
        i++;
        if (i >= PYRANDOM_N) mt[0] = mt[PYRANDOM_N - 1], i = 1;
    }
    mt[0] = 0x80000000u; // a non-zero initial state
}

void pyrandom_seed(PyRandom *r, uint64_t seed) {
    // the seed's 32-bit words, least significant first; 0 is one word of 0
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    init_by_array(r, key, seed >> 32 ? 2 : 1);
}

uint32_t pyrandom_u32(PyRandom *r) {
    static const uint32_t mag01[2] = {0x0u, 0x9908b0dfu};
    uint32_t *mt = r->mt, y;
    if (r->mti >= PYRANDOM_N) { // the next 624 words at once
        int kk;
        for (kk = 0; kk < PYRANDOM_N - 397; kk++) {
            y = (mt[kk] & 0x80000000u) | (mt[kk + 1] & 0x7fffffffu);
            mt[kk] = mt[kk + 397] ^ (y >> 1) ^ mag01[y & 1u];
        }
        for (; kk < PYRANDOM_N - 1; kk++) {
            y = (mt[kk] & 0x80000000u) | (mt[kk + 1] & 0x7fffffffu);
            mt[kk] = mt[kk + (397 - PYRANDOM_N)] ^ (y >> 1) ^ mag01[y & 1u];
        }
        y = (mt[PYRANDOM_N - 1] & 0x80000000u) | (mt[0] & 0x7fffffffu);
        mt[PYRANDOM_N - 1] = mt[396] ^ (y >> 1) ^ mag01[y & 1u];
        r->mti = 0;
    }
    y = mt[r->mti++];
    y ^= y >> 11; // tempering
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

uint64_t pyrandom_getrandbits(PyRandom *r, int k) {
    if (k <= 32) return pyrandom_u32(r) >> (32 - k);
    uint64_t lo = pyrandom_u32(r), hi = pyrandom_u32(r) >> (64 - k);
    return hi << 32 | lo;
}

uint64_t pyrandom_below(PyRandom *r, uint64_t n) {
    int k = 64 - __builtin_clzll(n); // n.bit_length()
    uint64_t x = pyrandom_getrandbits(r, k);
    while (x >= n) x = pyrandom_getrandbits(r, k);
    return x;
}

int pyrandom_sample(size_t *out, PyRandom *r, size_t n, size_t k) {
    if (k > n) return -1;
    // a list of the n when it is smaller than a set of the k (CPython's rule, in its doubles)
    double setsize = 21;
    if (k > 5) setsize += pow(4.0, ceil(log((double)(k * 3)) / log(4.0)));
    if ((double)n <= setsize) {
        size_t *pool = xmalloc((n ? n : 1) * sizeof *pool);
        for (size_t i = 0; i < n; i++) pool[i] = i;
        for (size_t i = 0; i < k; i++) {
            size_t j = (size_t)pyrandom_below(r, n - i);
            out[i] = pool[j];
            pool[j] = pool[n - i - 1]; // the vacancy takes the last one not selected
        }
        free(pool);
        return 0;
    }
    // a set of those selected: draw again on a repeat (k is small next to n here)
    size_t cap = 16;
    while (cap < 2 * k) cap *= 2;
    size_t *set = xmalloc(cap * sizeof *set);
    for (size_t i = 0; i < cap; i++) set[i] = SIZE_MAX;
    for (size_t i = 0; i < k; i++) {
        size_t j, h;
        for (;;) {
            j = (size_t)pyrandom_below(r, n);
            for (h = (j * 0x9E3779B97F4A7C15ull) & (cap - 1); set[h] != SIZE_MAX && set[h] != j; h = (h + 1) & (cap - 1)) {}
            if (set[h] == SIZE_MAX) break; // not selected before
        }
        set[h] = j;
        out[i] = j;
    }
    free(set);
    return 0;
}
