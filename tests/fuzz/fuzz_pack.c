// fuzz_pack.c: libFuzzer target for the packed checkpoint reader (pack_open_mem).
// Whatever the bytes, pack_open_mem either fails with a message or yields tensors
// that pack_decode_rows and spmv_forward (the decode kernels, which trust a PackTensor
// the same way) read in full without reading or writing out of bounds; pack_verify
// must then run cleanly.
// Random bytes rarely keep a tar header's checksum right, so when the first input
// byte is odd the target first repairs the checksum of every header it can walk to:
// the fuzzer then reaches the manifest and the index streams behind them.
// Seeds (tests/fuzz/corpus/pack): one byte (1 = repair) + a small pack: bf16 with
// bitmap and delta tensors (format version 1), int8, int4, tiles (version 2), sell
// (version 3, BF16) and nm (version 4: nm, 2:4 BF16; nm_int4, 2:4 I4; nm_mixed, BF16 at
// the patterns a 90% unstructured model follows, 4:12 to 7:32, 4- and 5-bit positions).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "pack/pack.h"
#include "pack/spmv.h"

static void repair_headers(uint8_t *b, size_t n) {
    for (size_t off = 0; off + 512 <= n;) {
        uint8_t *h = b + off;
        unsigned sum = 0;
        for (int i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? ' ' : h[i];
        if (sum == 8 * ' ') break; // an all-zero block: the end
        for (int i = 5; i >= 0; i--, sum >>= 3) h[148 + i] = (uint8_t)('0' + (sum & 7));
        h[154] = 0;
        h[155] = ' ';
        size_t size = 0;
        for (int i = 124; i < 136 && h[i] >= '0' && h[i] <= '7'; i++) size = size * 8 + (size_t)(h[i] - '0');
        if (size > n) break;
        off += 512 + (size + 511) / 512 * 512;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int repair = data[0] & 1;
    data++, size--;
    uint8_t *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    if (repair) repair_headers(buf, size);
    Pack p;
    if (pack_open_mem(&p, buf, size, "fuzz.pack") == 0) {
        for (int i = 0; i < p.n; i++) {
            const PackTensor *t = &p.t[i];
            if (t->rows * t->cols > ((size_t)1 << 22)) continue; // decoding is bounded by the caller's buffer
            float *out = malloc(t->rows * t->cols * sizeof *out), *x = calloc(t->cols, sizeof *x);
            pack_decode_rows(out, t, 0, t->rows);
            spmv_forward(out, x, t, NULL, 0); // the decode kernels (AVX-512 where the CPU has it)
            free(out);
            free(x);
            if (pack_tensor_bytes(t) > size) abort();
        }
        (void)pack_verify(&p);
        pack_close(&p);
    } else if (!err_msg()[0]) {
        abort(); // a failure must say why
    }
    free(buf);
    return 0;
}
