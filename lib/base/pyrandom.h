// pyrandom.h: Python's random module, bit for bit, for what lm-evaluation-harness draws with
// it (its few-shot sampler is random.Random(1234).sample(docs, k)): the Mersenne Twister
// MT19937 seeded from an integer as CPython seeds it (init_by_array over the seed's 32-bit
// words, least significant first), getrandbits, _randbelow and sample's choice of indices
// (CPython 3.11's Lib/random.py; tests/test_pyrandom.c checks every function against the
// python3 at hand over many seeds).
//
// Not here: which documents a task samples (the task code that calls it).
#ifndef BEST_PYRANDOM_H
#define BEST_PYRANDOM_H

#include <stddef.h>
#include <stdint.h>

#define PYRANDOM_N 624

typedef struct {
    uint32_t mt[PYRANDOM_N];
    int mti;
} PyRandom;

// random.Random(seed) for an integer seed 0 <= seed < 2^64 (Python seeds from |seed|).
void pyrandom_seed(PyRandom *r, uint64_t seed);
// The next 32 bits (getrandbits(32)).
uint32_t pyrandom_u32(PyRandom *r);
// getrandbits(k), 1 <= k <= 64: the first 32-bit draw gives the low bits; a last word of
// fewer than 32 bits is the draw's top bits.
uint64_t pyrandom_getrandbits(PyRandom *r, int k);
// _randbelow(n) for 1 <= n < 2^64 (randrange(n)): getrandbits(bit_length(n)) until below n.
uint64_t pyrandom_below(PyRandom *r, uint64_t n);
// out (k) = random.Random.sample(range(n), k), 0 <= k <= n: the positions sample(population,
// k) picks from any population of n, in its order. -1 (nothing drawn) when k > n.
int pyrandom_sample(size_t *out, PyRandom *r, size_t n, size_t k);

#endif
