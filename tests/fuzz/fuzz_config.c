// fuzz_config.c: libFuzzer target for config.json parsing (config_parse). The
// input is the JSON text itself; whatever is accepted must satisfy the invariants
// the model code relies on (positive sizes, heads divisible by kv heads).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ModelConfig c;
    if (config_parse(&c, (const char *)data, size, "fuzz/config.json") == 0) {
        if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.intermediate_size <= 0 ||
            c.num_hidden_layers <= 0 || c.num_attention_heads <= 0 ||
            c.num_key_value_heads <= 0 || c.head_dim <= 0 ||
            c.num_attention_heads % c.num_key_value_heads != 0 || !(c.rms_norm_eps > 0) ||
            !(c.rope_theta > 0) || c.n_eos < 0 || c.n_eos > CONFIG_MAX_EOS ||
            (c.arch != ARCH_LLAMA && c.arch != ARCH_QWEN3) || strlen(c.torch_dtype) == 0)
            abort();
    }
    return 0;
}
