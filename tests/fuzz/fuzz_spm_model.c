// fuzz_spm_model.c: libFuzzer target for the tokenizer.model reader (lib/tok/spm_model.c).
// The input is the ModelProto. When it loads, the model encodes a fixed string and
// the input's own last bytes (so the fuzzer steers the text too), and the ids are
// decoded back, along with ids taken from the input's first bytes.
// Seeds: tests/fuzz/corpus/spm_model (tiny models written by `test_spm --write-corpus`).
#include <stdint.h>
#include <string.h>

#include "tok/spm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Spm *s = NULL;
    if (spm_load_model(&s, data, size, "fuzz.model") < 0) return 0;
    SpmEncoder *e = spm_encoder_new(s);
    IdVec ids = {0};
    ByteVec text = {0};
    const char *fixed = "Hello  w\xc3\xb6rld \xe2\x96\x81x\t<s> \xf0\x9f\x98\x80\xff ";
    size_t tail = size < 64 ? size : 64;
    for (int k = 0; k < 2; k++) {  // twice: the second pass goes through the word cache
        ids.n = 0;
        if (spm_encode(e, &ids, fixed, strlen(fixed)) == 0
            && spm_encode(e, &ids, (const char *)data + size - tail, tail) == 0) {
            text.n = 0;
            spm_decode(s, &text, ids.v, ids.n);
        }
    }
    int32_t raw[16];
    size_t n = size / 4 < 16 ? size / 4 : 16;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, data + 4 * i, 4);
        raw[i] = (int32_t)(u % (uint32_t)spm_vocab_size(s));
    }
    text.n = 0;
    spm_decode(s, &text, raw, n);
    idvec_free(&ids);
    bytevec_free(&text);
    spm_encoder_free(e);
    spm_free(s);
    return 0;
}
