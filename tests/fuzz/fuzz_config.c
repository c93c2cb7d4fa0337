// fuzz_config.c: libFuzzer target for config.json parsing (config_parse) and the
// parameter layout the model builds from it (model_plan, no weights allocated). The
// input is the JSON text itself; whatever is accepted must satisfy the invariants the
// model code relies on (sizes in their ranges, heads divisible by kv heads) and give a
// table whose offsets and counts add up without overflow, in both layouts (all in the
// block, and the 2-D tensors stored outside it).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/config.h"
#include "nn/model.h"

static void check_layout(const uint8_t *data, size_t size, int stored) {
    Model m;
    if (model_plan(&m, (const char *)data, size, "fuzz/config.json", stored) < 0) return;
    size_t in_block = 0, all = 0;
    for (int i = 0; i < m.n_info; i++) {
        const ParamInfo *p = &m.info[i];
        size_t numel = (size_t)p->shape[0] * (p->ndim == 2 ? (size_t)p->shape[1] : 1);
        if (p->numel != numel || p->shape[0] < 1 || (p->ndim == 2 && p->shape[1] < 1)) abort();
        all += numel;
        if (p->offset == SIZE_MAX) {
            if (!stored || p->ndim != 2) abort();
            continue;
        }
        if (p->offset != in_block) abort(); // consecutive, in table order
        in_block += numel;
    }
    if (in_block != m.n_params || all > MODEL_MAX_PARAMS || m.n_prunable > m.n_params) abort();
    if (m.L != (size_t)m.cfg.num_hidden_layers || m.Q != m.NH * m.HD || m.HD % 2) abort();
    model_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ModelConfig c;
    if (config_parse(&c, (const char *)data, size, "fuzz/config.json") == 0) {
        if (c.vocab_size <= 0 || c.vocab_size > CONFIG_MAX_VOCAB || c.hidden_size <= 0 ||
            c.hidden_size > CONFIG_MAX_DIM || c.intermediate_size <= 0 ||
            c.intermediate_size > CONFIG_MAX_DIM || c.num_hidden_layers <= 0 ||
            c.num_hidden_layers > CONFIG_MAX_LAYERS || c.num_attention_heads <= 0 ||
            c.num_attention_heads > CONFIG_MAX_HEADS || c.num_key_value_heads <= 0 ||
            c.head_dim <= 0 || (long long)c.num_attention_heads * c.head_dim > CONFIG_MAX_DIM ||
            c.max_position_embeddings < 2 || c.max_position_embeddings > CONFIG_MAX_POSITIONS ||
            c.num_attention_heads % c.num_key_value_heads != 0 || !(c.rms_norm_eps > 0) ||
            !(c.rope_theta > 0) || c.n_eos < 0 || c.n_eos > CONFIG_MAX_EOS ||
            (c.arch != ARCH_LLAMA && c.arch != ARCH_QWEN3) || strlen(c.torch_dtype) == 0)
            abort();
        check_layout(data, size, 0);
        check_layout(data, size, 1);
    }
    return 0;
}
