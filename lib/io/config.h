// config.h: the config.json of a Hugging Face LlamaForCausalLM or Qwen3ForCausalLM.
//
// Reads the keys our model code needs, applies the defaults that transformers
// applies when a key is missing (LlamaConfig / Qwen3Config of transformers 4.57.1;
// see config.c for each), and refuses what we do not implement with a message
// naming the file: other architectures, activations other than SiLU, RoPE scaling,
// sliding-window attention, quantized checkpoints. It also understands the newer
// spellings transformers 5 writes ("dtype" for "torch_dtype", "rope_parameters"
// for "rope_theta" + "rope_scaling").
//
// Not here: the tensors (safetensors.h, the model loader), tokenizer settings
// (tokenizer.h), generation_config.json.
#ifndef BEST_CONFIG_H
#define BEST_CONFIG_H

#include <stddef.h>

typedef enum { ARCH_LLAMA, ARCH_QWEN3 } ModelArch;

#define CONFIG_MAX_EOS 8

// The ranges config_parse accepts (docs/formats.md, "config.json"), far above any
// LLaMA or Qwen3 (LLaMA-3.1-405B: hidden 16384, intermediate 53248, 126 layers, 128
// heads; Qwen3: vocab 151936, 40960 positions) and low enough that every product of
// them fits size_t with room to spare. A value outside is an error naming the key.
#define CONFIG_MAX_VOCAB (1 << 24)     // vocab_size
#define CONFIG_MAX_DIM (1 << 18)       // hidden_size, intermediate_size, head_dim, and
                                       // num_attention_heads x head_dim
#define CONFIG_MAX_LAYERS 1024         // num_hidden_layers
#define CONFIG_MAX_HEADS 1024          // num_attention_heads, num_key_value_heads
#define CONFIG_MAX_POSITIONS (1 << 24) // max_position_embeddings (and at least 2)

typedef struct {
    ModelArch arch;
    int vocab_size;              // V
    int hidden_size;             // C, the model dimension
    int intermediate_size;       // MLP hidden size (gate/up rows, down columns)
    int num_hidden_layers;       // L
    int num_attention_heads;     // NH
    int num_key_value_heads;     // KV; NH % KV == 0 (grouped-query attention)
    int head_dim;                // HD; q_proj is (NH*HD, C), k/v_proj (KV*HD, C)
    int max_position_embeddings;
    double rms_norm_eps;
    double rope_theta;
    int tie_word_embeddings;     // 1: lm_head shares embed_tokens
    int attention_bias;          // q/k/v/o_proj have biases
    int mlp_bias;                // gate/up/down_proj have biases (LLaMA only; 0 for Qwen3)
    int bos_token_id;            // -1 when null
    int eos_token_id;            // the first of eos_token_ids; -1 when null
    int eos_token_ids[CONFIG_MAX_EOS]; // (n_eos,) config.json may give a list
    int n_eos;
    int pad_token_id;            // -1 when null
    char torch_dtype[16];        // "float32", "bfloat16" or "float16"
} ModelConfig;

// path: a config.json or a model folder holding one.
int config_load(ModelConfig *c, const char *path);
// Parses n bytes of JSON (need not be NUL-terminated); name is used in messages.
int config_parse(ModelConfig *c, const char *json, size_t n, const char *name);

const char *config_arch_name(ModelArch a); // "LlamaForCausalLM", "Qwen3ForCausalLM"

// seq, capped by the model's positions (max_position_embeddings, when > 0); a cap is said
// on stderr (unless quiet): "TOOL: note: --seq 600 is longer than the model's 512
// positions: UNIT of 512". The one behaviour of best-train, best-eval and best-mask.
int config_cap_seq(const ModelConfig *c, int seq, const char *tool, const char *unit, int quiet);

#endif
