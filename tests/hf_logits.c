// hf_logits.c: the logits libbest computes for one sequence of token ids, for
// tests/hf_check.py to set against Hugging Face transformers' on the same folder.
// Not a test itself (tests/run.sh runs only test_*): a helper of tests/t_hf_load.sh.
//
//   hf_logits MODEL OUT ID...
//
// MODEL is a Hugging Face folder. OUT gets 2*T*V fp32 (little-endian, as the machine):
//   (T, V) model_eval over the whole sequence (what best-eval's perplexity runs)
//   (T, V) model_forward_token, one token at a time with the KV cache (what
//          best-eval --generate runs)
// Row t holds the logits of the token after ids[0..t].
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h" // defines: TRY_OR_DIE, DIE, CHECK, xmalloc
#include "nn/model.h"   // defines: Model, ModelActs, model_eval, KVCache, model_forward_token

int main(int argc, char **argv) {
    err_set_prog("hf_logits");
    if (argc < 4) {
        fprintf(stderr, "usage: hf_logits MODEL OUT ID...\n");
        return 2;
    }
    Model m;
    TRY_OR_DIE(model_load(&m, argv[1]));
    int T = argc - 3;
    size_t V = m.V;
    int32_t *ids = xmalloc((size_t)T * sizeof *ids);
    for (int t = 0; t < T; t++) {
        char *end;
        long id = strtol(argv[3 + t], &end, 10);
        if (*end || end == argv[3 + t] || id < 0 || (size_t)id >= V) DIE("bad token id '%s'", argv[3 + t]);
        ids[t] = (int32_t)id;
    }
    float *out = xmalloc(2 * (size_t)T * V * sizeof *out); // (2, T, V)

    ModelActs a;
    TRY_OR_DIE(model_acts_init(&a, &m, 1, T, 0));
    TRY_OR_DIE(model_eval(out, NULL, &m, &a, ids, NULL));
    model_acts_free(&a);

    KVCache c;
    TRY_OR_DIE(kvcache_init(&c, &m, T));
    for (int t = 0; t < T; t++) {
        const float *l = model_forward_token(&m, &c, ids[t], t);
        if (!l) die_err();
        memcpy(out + ((size_t)T + t) * V, l, V * sizeof *l);
    }
    kvcache_free(&c);

    FILE *f = fopen(argv[2], "wb");
    if (!f) DIE("%s: cannot create", argv[2]);
    CHECK(fwrite(out, sizeof *out, 2 * (size_t)T * V, f) == 2 * (size_t)T * V && fclose(f) == 0,
          "%s: write failed", argv[2]);
    free(out);
    free(ids);
    model_free(&m);
    return 0;
}
