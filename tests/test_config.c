// test_config.c: config.json parsing (lib/io/config.c): the real stories260K config from
// ../shared, transformers' defaults for LLaMA and Qwen3 when keys are missing, the
// newer transformers 5 spellings, and every refusal naming the file.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/config.h"   // defines: ModelConfig, config_load
#include "base/error.h"  // defines: err_msg
#include "base/fileio.h" // defines: path_join
#include "test.h"        // defines: T_OK, T_SKIP, T_DONE

static char tmpdir[] = "/tmp/test_config.XXXXXX";

// Writes json to TMP/name.json, with ' turned into " so that the tables below stay
// readable, and loads it.
static int load_text(ModelConfig *c, const char *name, const char *json) {
    char file[64];
    snprintf(file, sizeof file, "%s.json", name);
    char *path = path_join(tmpdir, file);
    FILE *f = fopen(path, "w");
    CHECK(f, "cannot create %s", path);
    for (const char *p = json; *p; p++) fputc(*p == '\'' ? '"' : *p, f);
    fclose(f);
    int rc = config_load(c, path);
    free(path);
    return rc;
}

// The config must be refused with a message naming its file and containing want.
static void expect_bad(const char *what, const char *json, const char *want) {
    ModelConfig c;
    int rc = load_text(&c, "bad", json);
    const char *m = err_msg();
    T_OK(rc < 0 && strstr(m, "bad.json: ") && strstr(m, want), "refuses %s: %s", what,
         rc < 0 ? m : "(accepted)");
}

static int near(double a, double b) { return fabs(a - b) <= 1e-12 * fabs(b); }

static void test_stories(void) {
    const char *sh = test_shared();
    if (!sh) { T_SKIP("stories260K config: ../shared not found"); return; }
    char *dir = path_join(sh, "models/stories260K");
    char *file = path_join(dir, "config.json");
    if (access(file, R_OK) != 0) {
        T_SKIP("stories260K config: %s absent", file);
        free(dir); free(file);
        return;
    }
    ModelConfig c, d;
    int rc = config_load(&c, dir);
    T_OK(rc == 0, "loads the stories260K folder%s%s", rc ? ": " : "", rc ? err_msg() : "");
    T_OK(c.arch == ARCH_LLAMA && c.vocab_size == 512 && c.hidden_size == 64 &&
         c.intermediate_size == 172 && c.num_hidden_layers == 5 && c.num_attention_heads == 8 &&
         c.num_key_value_heads == 4 && c.head_dim == 8 && c.max_position_embeddings == 512,
         "stories260K sizes: V 512, C 64, hidden 172, L 5, NH 8, KV 4, HD 8, ctx 512");
    T_OK(near(c.rms_norm_eps, 1e-5) && near(c.rope_theta, 10000) && c.tie_word_embeddings &&
         !c.attention_bias && !c.mlp_bias && c.bos_token_id == 1 && c.eos_token_id == 2 &&
         c.n_eos == 1 && c.pad_token_id == -1 && strcmp(c.torch_dtype, "float32") == 0,
         "stories260K: eps 1e-5, theta 1e4, tied, no biases, bos 1, eos 2, float32");
    T_OK(config_load(&d, file) == 0 && memcmp(&c, &d, sizeof c) == 0,
         "folder and config.json path give the same config");
    free(dir);
    free(file);
}

static void test_defaults(void) {
    ModelConfig c;
    int rc = load_text(&c, "llama_min", "{'architectures': ['LlamaForCausalLM']}");
    T_OK(rc == 0 && c.arch == ARCH_LLAMA && c.vocab_size == 32000 && c.hidden_size == 4096 &&
         c.intermediate_size == 11008 && c.num_hidden_layers == 32 &&
         c.num_attention_heads == 32 && c.num_key_value_heads == 32 && c.head_dim == 128 &&
         c.max_position_embeddings == 2048 && near(c.rms_norm_eps, 1e-6) &&
         near(c.rope_theta, 10000) && !c.tie_word_embeddings && !c.attention_bias &&
         !c.mlp_bias && c.bos_token_id == 1 && c.eos_token_id == 2 && c.pad_token_id == -1 &&
         strcmp(c.torch_dtype, "float32") == 0,
         "LlamaConfig defaults (transformers 4.57.1)%s%s", rc ? ": " : "", rc ? err_msg() : "");
    rc = load_text(&c, "qwen_min", "{'model_type': 'qwen3'}");
    T_OK(rc == 0 && c.arch == ARCH_QWEN3 && c.vocab_size == 151936 && c.hidden_size == 4096 &&
         c.intermediate_size == 22016 && c.num_hidden_layers == 32 &&
         c.num_attention_heads == 32 && c.num_key_value_heads == 32 && c.head_dim == 128 &&
         c.max_position_embeddings == 32768 && near(c.rms_norm_eps, 1e-6) &&
         near(c.rope_theta, 10000) && !c.tie_word_embeddings && !c.attention_bias &&
         c.bos_token_id == -1 && c.eos_token_id == -1 && c.n_eos == 0,
         "Qwen3Config defaults (transformers 4.57.1)%s%s", rc ? ": " : "", rc ? err_msg() : "");
    rc = load_text(&c, "llama_kv", "{'model_type': 'llama', 'hidden_size': 96, "
                                   "'num_attention_heads': 6}");
    T_OK(rc == 0 && c.num_key_value_heads == 6 && c.head_dim == 16,
         "LLaMA: kv heads default to heads, head_dim to hidden/heads");
    rc = load_text(&c, "llama_kvnull", "{'model_type': 'llama', 'num_attention_heads': 8, "
                                       "'num_key_value_heads': null, 'head_dim': null}");
    T_OK(rc == 0 && c.num_key_value_heads == 8 && c.head_dim == 512, "LLaMA: null kv heads and head_dim derive");
    rc = load_text(&c, "llama_hd", "{'model_type': 'llama', 'hidden_size': 64, "
                                   "'num_attention_heads': 8, 'head_dim': 16}");
    T_OK(rc == 0 && c.head_dim == 16, "LLaMA: explicit head_dim kept (16, not 64/8)");
    rc = load_text(&c, "qwen_kv", "{'model_type': 'qwen3', 'num_attention_heads': 64}");
    T_OK(rc == 0 && c.num_key_value_heads == 32 && c.head_dim == 128,
         "Qwen3: absent kv heads are 32 whatever the heads (transformers' default)");
    rc = load_text(&c, "qwen_kvnull", "{'model_type': 'qwen3', 'num_attention_heads': 16, "
                                      "'num_key_value_heads': null}");
    T_OK(rc == 0 && c.num_key_value_heads == 16, "Qwen3: null kv heads -> heads");
    rc = load_text(&c, "qwen_16", "{'model_type': 'qwen3', 'num_attention_heads': 16}");
    T_OK(rc < 0 && strstr(err_msg(), "num_key_value_heads 32"),
         "Qwen3: 16 heads with the default 32 kv heads is refused: %s", err_msg());
}

static void test_real_configs(void) {
    // Qwen/Qwen3-0.6B's config.json (transformers 4.51 era), abridged of nothing we read.
    const char *qwen =
        "{'architectures': ['Qwen3ForCausalLM'], 'attention_bias': false,"
        " 'attention_dropout': 0.0, 'bos_token_id': 151643, 'eos_token_id': 151645,"
        " 'head_dim': 128, 'hidden_act': 'silu', 'hidden_size': 1024,"
        " 'initializer_range': 0.02, 'intermediate_size': 3072,"
        " 'max_position_embeddings': 40960, 'max_window_layers': 28, 'model_type': 'qwen3',"
        " 'num_attention_heads': 16, 'num_hidden_layers': 28, 'num_key_value_heads': 8,"
        " 'rms_norm_eps': 1e-06, 'rope_scaling': null, 'rope_theta': 1000000,"
        " 'sliding_window': null, 'tie_word_embeddings': true, 'torch_dtype': 'bfloat16',"
        " 'transformers_version': '4.51.0', 'use_cache': true, 'use_sliding_window': false,"
        " 'vocab_size': 151936}";
    ModelConfig c;
    int rc = load_text(&c, "qwen06", qwen);
    T_OK(rc == 0 && c.arch == ARCH_QWEN3 && c.hidden_size == 1024 && c.num_attention_heads == 16 &&
         c.num_key_value_heads == 8 && c.head_dim == 128 && c.intermediate_size == 3072 &&
         c.num_hidden_layers == 28 && c.max_position_embeddings == 40960 &&
         near(c.rope_theta, 1e6) && c.tie_word_embeddings && c.bos_token_id == 151643 &&
         c.eos_token_id == 151645 && strcmp(c.torch_dtype, "bfloat16") == 0 && !c.mlp_bias,
         "Qwen3-0.6B config: HD 128 != C/NH, integer rope_theta, bf16%s%s", rc ? ": " : "",
         rc ? err_msg() : "");
    // Llama-2-7b-hf's config.json
    const char *llama =
        "{'_name_or_path': 'meta-llama/Llama-2-7b-hf', 'architectures': ['LlamaForCausalLM'],"
        " 'bos_token_id': 1, 'eos_token_id': 2, 'hidden_act': 'silu', 'hidden_size': 4096,"
        " 'initializer_range': 0.02, 'intermediate_size': 11008, 'max_position_embeddings': 4096,"
        " 'model_type': 'llama', 'num_attention_heads': 32, 'num_hidden_layers': 32,"
        " 'num_key_value_heads': 32, 'pretraining_tp': 1, 'rms_norm_eps': 1e-05,"
        " 'rope_scaling': null, 'tie_word_embeddings': false, 'torch_dtype': 'float16',"
        " 'transformers_version': '4.31.0.dev0', 'use_cache': true, 'vocab_size': 32000}";
    rc = load_text(&c, "llama7b", llama);
    T_OK(rc == 0 && c.hidden_size == 4096 && c.head_dim == 128 && c.max_position_embeddings == 4096 &&
         near(c.rms_norm_eps, 1e-5) && near(c.rope_theta, 10000) &&
         strcmp(c.torch_dtype, "float16") == 0, "Llama-2-7b-hf config");
    rc = load_text(&c, "eoslist", "{'model_type': 'llama', 'eos_token_id': [128001, 128008, 128009],"
                                  " 'bos_token_id': null}");
    T_OK(rc == 0 && c.eos_token_id == 128001 && c.n_eos == 3 && c.eos_token_ids[2] == 128009 &&
         c.bos_token_id == -1, "eos_token_id list: first kept, all listed; null bos");
    rc = load_text(&c, "v5", "{'architectures': ['LlamaForCausalLM'], 'dtype': 'bfloat16',"
                             " 'rope_parameters': {'rope_type': 'default', 'rope_theta': 500000.0}}");
    T_OK(rc == 0 && strcmp(c.torch_dtype, "bfloat16") == 0 && near(c.rope_theta, 500000),
         "transformers 5 spellings: dtype, rope_parameters");
    rc = load_text(&c, "ropedef", "{'model_type': 'llama', 'rope_scaling': {'rope_type': 'default'}}");
    T_OK(rc == 0, "rope_scaling of type default is plain RoPE");
}

static void test_errors(void) {
    ModelConfig c;
    T_OK(config_load(&c, "/nonexistent/config.json") < 0 && strstr(err_msg(), "/nonexistent/config.json"),
         "missing file: %s", err_msg());
    T_OK(config_load(&c, tmpdir) < 0 && strstr(err_msg(), "config.json"),
         "folder without config.json: %s", err_msg());
    expect_bad("bad JSON", "{'model_type': 'llama',}", "not valid JSON");
    expect_bad("an empty file", "", "not valid JSON");
    expect_bad("a JSON list", "[1, 2]", "not a JSON object");
    expect_bad("duplicate keys",
               "{'model_type': 'llama', 'hidden_size': 8, 'hidden_size': 16}", "duplicate");
    expect_bad("no architecture", "{'hidden_size': 64}", "neither architectures nor model_type");
    expect_bad("unsupported architecture",
               "{'architectures': ['MistralForCausalLM'], 'model_type': 'mistral'}",
               "unsupported architecture 'MistralForCausalLM'");
    expect_bad("unsupported model_type", "{'model_type': 'gpt2'}", "unsupported model_type 'gpt2'");
    expect_bad("architecture vs model_type",
               "{'architectures': ['LlamaForCausalLM'], 'model_type': 'qwen3'}",
               "model_type");
    expect_bad("architectures not a list",
               "{'architectures': 'LlamaForCausalLM'}", "architectures");
    expect_bad("hidden_size a string",
               "{'model_type': 'llama', 'hidden_size': '64'}", "hidden_size must be an integer");
    expect_bad("hidden_size a float",
               "{'model_type': 'llama', 'hidden_size': 64.0}", "hidden_size must be an integer");
    expect_bad("hidden_size null",
               "{'model_type': 'llama', 'hidden_size': null}", "hidden_size must be an integer");
    expect_bad("vocab_size 0", "{'model_type': 'llama', 'vocab_size': 0}", "vocab_size");
    expect_bad("negative layers",
               "{'model_type': 'llama', 'num_hidden_layers': -1}", "num_hidden_layers");
    expect_bad("huge size",
               "{'model_type': 'llama', 'intermediate_size': 4294967296}", "intermediate_size");
    expect_bad("tie_word_embeddings a string",
               "{'model_type': 'llama', 'tie_word_embeddings': 'yes'}",
               "tie_word_embeddings must be true or false");
    expect_bad("rms_norm_eps a string",
               "{'model_type': 'llama', 'rms_norm_eps': '1e-5'}", "rms_norm_eps must be a number");
    expect_bad("rms_norm_eps zero", "{'model_type': 'llama', 'rms_norm_eps': 0}", "rms_norm_eps");
    expect_bad("eos a string", "{'model_type': 'llama', 'eos_token_id': '</s>'}", "eos_token_id");
    expect_bad("bos a list", "{'model_type': 'llama', 'bos_token_id': [1, 2]}", "bos_token_id");
    expect_bad("heads not a multiple of kv heads",
               "{'model_type': 'llama', 'num_attention_heads': 8, "
               "'num_key_value_heads': 3}", "not a multiple of num_key_value_heads 3");
    expect_bad("kv heads above heads", "{'model_type': 'llama', 'num_attention_heads': 8, "
               "'num_key_value_heads': 16}", "num_key_value_heads 16");
    expect_bad("hidden not a multiple of heads", "{'model_type': 'llama', 'hidden_size': 65, "
               "'num_attention_heads': 8}", "hidden_size 65 is not a multiple");
    expect_bad("Qwen3 head_dim null", "{'model_type': 'qwen3', 'head_dim': null}", "head_dim");
    expect_bad("rope_scaling linear",
               "{'model_type': 'llama', 'rope_scaling': {'type': 'linear', 'factor': 2.0}}",
               "rope_scaling type linear not supported");
    expect_bad("rope_scaling llama3",
               "{'model_type': 'llama', 'rope_scaling': {'rope_type': 'llama3', "
               "'factor': 8.0}}", "rope_scaling type llama3 not supported");
    expect_bad("rope_parameters yarn",
               "{'model_type': 'qwen3', 'rope_parameters': {'rope_type': 'yarn', "
               "'rope_theta': 1e6}}", "rope_scaling type yarn not supported");
    expect_bad("rope_scaling a number",
               "{'model_type': 'llama', 'rope_scaling': 2}", "rope_scaling");
    expect_bad("hidden_act gelu",
               "{'model_type': 'llama', 'hidden_act': 'gelu'}", "hidden_act 'gelu' not supported");
    expect_bad("sliding window",
               "{'model_type': 'qwen3', 'use_sliding_window': true}", "use_sliding_window");
    expect_bad("sliding layer types",
               "{'model_type': 'qwen3', 'num_hidden_layers': 2, 'layer_types': "
               "['full_attention', 'sliding_attention']}", "layer_types[1]");
    expect_bad("torch_dtype int8",
               "{'model_type': 'llama', 'torch_dtype': 'int8'}", "torch_dtype 'int8' not supported");
    expect_bad("quantized",
               "{'model_type': 'qwen3', 'quantization_config': {'quant_method': 'awq'}}", "quantized");
}

// Every size has a documented range (config.h) and a value past it is refused with the
// key, the value and the range: the wild values of issue 12 (954437177 layers wrapped an
// int counter; vocab 2^31-1 asked for a 550 GB block) and one past each limit.
static void test_ranges(void) {
    char json[256], want[128];
    static const struct { const char *key; long long bad; int hi; } cases[] = {
        {"num_hidden_layers", 954437177, CONFIG_MAX_LAYERS},
        {"num_hidden_layers", CONFIG_MAX_LAYERS + 1, CONFIG_MAX_LAYERS},
        {"vocab_size", 2147483647, CONFIG_MAX_VOCAB},
        {"vocab_size", CONFIG_MAX_VOCAB + 1, CONFIG_MAX_VOCAB},
        {"hidden_size", CONFIG_MAX_DIM + 1, CONFIG_MAX_DIM},
        {"intermediate_size", 4294967296, CONFIG_MAX_DIM},
        {"num_attention_heads", CONFIG_MAX_HEADS + 1, CONFIG_MAX_HEADS},
        {"max_position_embeddings", CONFIG_MAX_POSITIONS + 1, CONFIG_MAX_POSITIONS},
        {"num_hidden_layers", 0, CONFIG_MAX_LAYERS},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(json, sizeof json, "{'model_type': 'llama', '%s': %lld}", cases[i].key, cases[i].bad);
        snprintf(want, sizeof want, "%s %lld is out of range [1, %d]", cases[i].key, cases[i].bad, cases[i].hi);
        expect_bad(want, json, want);
    }
    // the tools cap --seq at it: 1 was reported as "--seq must be at least 2 (got 1)"
    expect_bad("max_position_embeddings 1", "{'model_type': 'llama', 'max_position_embeddings': 1}",
               "max_position_embeddings 1: a model needs at least 2 positions");
    expect_bad("head_dim past the limit",
               "{'model_type': 'qwen3', 'num_attention_heads': 8, 'num_key_value_heads': 8, "
               "'head_dim': 300000}", "head_dim 300000 is out of range");
    expect_bad("heads x head_dim past the limit",
               "{'model_type': 'qwen3', 'num_attention_heads': 1024, 'num_key_value_heads': 8, "
               "'head_dim': 1024}", "num_attention_heads 1024 x head_dim 1024 is more than");
    ModelConfig c;
    snprintf(json, sizeof json, "{'model_type': 'llama', 'num_hidden_layers': %d, 'vocab_size': %d, "
             "'hidden_size': %d}", CONFIG_MAX_LAYERS, CONFIG_MAX_VOCAB, CONFIG_MAX_DIM);
    T_OK(load_text(&c, "max", json) == 0 && c.num_hidden_layers == CONFIG_MAX_LAYERS &&
         c.vocab_size == CONFIG_MAX_VOCAB, "the limits themselves are accepted");
}

int main(void) {
    CHECK(mkdtemp(tmpdir), "mkdtemp");
    test_ranges();
    test_stories();
    test_defaults();
    test_real_configs();
    test_errors();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    T_DONE();
}
