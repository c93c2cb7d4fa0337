// fuzz_safetensors.c: libFuzzer target for the safetensors reader (st_open_mem).
// The first input byte picks how the rest is read: even = a whole file as is; odd =
// header text up to the first NUL byte, then the data region, with the u64 length
// filled in by us, so that mutations of the JSON reach the checks behind it. Every
// accepted file has each tensor's bytes read, looked up by name, and F32/BF16/F16
// tensors converted, so ASan sees any pointer the validation let through.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"

static volatile uint64_t sink;

static void touch(const SafeTensors *st) {
    uint64_t acc = 0;
    for (int i = 0; i < st->n_tensors; i++) {
        const StTensor *t = &st->tensors[i];
        const uint8_t *p = t->data;
        for (size_t j = 0; j < t->nbytes; j++) acc += p[j];
        if (st_find(st, t->name) != t) abort(); // names are unique and all indexed
        if (t->nbytes != t->nelem * st_dtype_size(t->dtype)) abort();
        if (t->dtype == ST_F32 || t->dtype == ST_BF16 || t->dtype == ST_F16) {
            float *f;
            if (st_to_f32_alloc(&f, st, t) == 0) {
                for (size_t j = 0; j < t->nelem; j++) acc += f[j] > 0;
                free(f);
            }
        }
    }
    for (int i = 0; i < st->n_meta; i++)
        if (st_meta(st, st->meta_keys[i]) == NULL) abort();
    sink = acc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int assemble = data[0] & 1;
    data++, size--;
    uint8_t *buf;
    size_t n;
    if (assemble) {
        const uint8_t *nul = memchr(data, 0, size);
        size_t hl = nul ? (size_t)(nul - data) : size;
        size_t rest = nul ? size - hl - 1 : 0;
        n = 8 + hl + rest;
        buf = malloc(n);
        for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)hl >> (8 * i));
        memcpy(buf + 8, data, hl);
        if (rest) memcpy(buf + 8 + hl, nul + 1, rest);
    } else {
        n = size;
        buf = malloc(n ? n : 1);
        memcpy(buf, data, n);
    }
    SafeTensors st;
    if (st_open_mem(&st, buf, n, "fuzz.safetensors") == 0) {
        touch(&st);
        st_close(&st);
    }
    free(buf);
    return 0;
}
