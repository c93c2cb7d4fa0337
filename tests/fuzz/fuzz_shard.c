// fuzz_shard.c: libFuzzer target for the token shard reader.
// Random bytes rarely pass two xxh64 checks, so when the first input byte is odd
// the target repairs both checksums first: the fuzzer then reaches the size,
// width and vocab checks behind them too.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "io/shard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int repair = data[0] & 1;
    data++, size--;
    uint8_t *buf = malloc(size + 1);
    memcpy(buf, data, size);
    if (repair && size >= SHARD_HEADER_BYTES) {
        uint64_t h = XXH64(buf + SHARD_HEADER_BYTES, size - SHARD_HEADER_BYTES, 0);
        for (int i = 0; i < 8; i++) buf[40 + i] = (uint8_t)(h >> (8 * i));
        h = XXH64(buf, 56, 0);
        for (int i = 0; i < 8; i++) buf[56 + i] = (uint8_t)(h >> (8 * i));
    }
    char path[64];
    snprintf(path, sizeof path, "/tmp/fuzz_shard_%d.bin", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(buf, 1, size, f);
        fclose(f);
        Shard s;
        if (shard_open(&s, path) == 0) {
            int32_t tok[16];
            size_t n = s.h.ntokens < 16 ? (size_t)s.h.ntokens : 16;
            shard_read(&s, tok, s.h.ntokens - n, n);
            shard_close(&s);
        }
        unlink(path);
    }
    free(buf);
    return 0;
}
