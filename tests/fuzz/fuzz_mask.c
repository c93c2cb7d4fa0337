// fuzz_mask.c: libFuzzer target for the mask reader (mask_read over st_open_mem)
// against a small fixed parameter table: any file the safetensors reader accepts must
// be either rejected with a message or yield a mask of 0/1 bytes with every
// non-prunable entry 1. Seeds (tests/fuzz/corpus/mask): a BOOL and a bit-packed mask
// of this table.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "sparse/mask.h"

// embed (5, 4) | q of layer 0 (3, 5) | norm (4) | down of layer 1 (2, 7)
static const ParamInfo INFO[4] = {
    {"model.embed_tokens.weight", 0, 20, 2, {5, 4}, 0},
    {"model.layers.0.self_attn.q_proj.weight", 20, 15, 2, {3, 5}, 1},
    {"model.norm.weight", 35, 4, 1, {4, 0}, 0},
    {"model.layers.1.mlp.down_proj.weight", 39, 14, 2, {2, 7}, 1},
};
#define NP 53

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    SafeTensors st;
    if (st_open_mem(&st, buf, size, "fuzz.mask") == 0) {
        uint8_t mask[NP];
        memset(mask, 7, sizeof mask);
        if (mask_read(mask, &st, INFO, 4, NP) == 0) {
            for (int i = 0; i < NP; i++)
                if (mask[i] > 1) abort();
            for (int i = 0; i < 20; i++)
                if (!mask[i]) abort();
        } else if (!err_msg()[0]) {
            abort();  // a failure must say why
        }
        st_close(&st);
    }
    free(buf);
    return 0;
}
