// sha256.h: SHA-256 (FIPS 180-4), for the hashes lm-evaluation-harness writes in its
// samples (hash_string: the hex digest of a string's UTF-8 bytes), so that best-eval's
// --log-samples lines can be matched with the harness's.
#ifndef BEST_SHA256_H
#define BEST_SHA256_H

#include <stddef.h>
#include <stdint.h>

// out (32) = SHA-256 of data[0..n).
void sha256(uint8_t out[32], const void *data, size_t n);
// out (65) = the same as lower-case hex, NUL-terminated (Python's hexdigest()).
void sha256_hex(char out[65], const void *data, size_t n);

#endif
