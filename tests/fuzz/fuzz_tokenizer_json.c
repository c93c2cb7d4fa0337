// fuzz_tokenizer_json.c: libFuzzer target for loading a HF tokenizer.json as a
// byte-level BPE (bbpe_load_json). The input is the JSON text; whatever loads must
// encode and decode a fixed string with every id inside the vocab.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tok/bbpe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_t *root = json_loadb((const char *)data, size, 0, NULL);
    if (!root) return 0;
    Bbpe *b = NULL;
    if (bbpe_load_json(&b, root, "fuzz/tokenizer.json") == 0) {
        if (!b) abort();
        static const char text[] = "Hello  world's 12\r\n<|endoftext|>caf\xc3\xa9 e\xcc\x81 \xe4\xb8\xad\xf0\x9f\x98\x80\t";
        BbpeEncoder *e = bbpe_encoder_new(b);
        IdVec ids = {0};
        ByteVec back = {0};
        // a PCRE2 resource limit is the only way a valid string may fail
        if (bbpe_encode(e, &ids, text, sizeof text - 1) == 0) {
            for (size_t i = 0; i < ids.n; i++)
                if (ids.v[i] < 0 || ids.v[i] >= bbpe_vocab_size(b)) abort();
            if (bbpe_decode(b, &back, ids.v, ids.n) != 0) abort();
        }
        bbpe_token_id(b, "<|endoftext|>");
        idvec_free(&ids);
        bytevec_free(&back);
        bbpe_encoder_free(e);
        bbpe_free(b);
    } else if (b) {
        abort();
    }
    json_decref(root);
    return 0;
}
