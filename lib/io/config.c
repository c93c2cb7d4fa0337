// config.c: config.json -> ModelConfig for LLaMA and Qwen3 (see config.h).
//
// Defaults are those of transformers 4.57.1 when a key is absent:
//   LlamaConfig.__init__ (models/llama/configuration_llama.py): vocab_size 32000,
//     hidden_size 4096, intermediate_size 11008, num_hidden_layers 32,
//     num_attention_heads 32, num_key_value_heads None -> num_attention_heads,
//     head_dim None -> hidden_size // num_attention_heads, hidden_act "silu",
//     max_position_embeddings 2048, rms_norm_eps 1e-6, rope_theta 10000.0,
//     rope_scaling None, attention_bias False, mlp_bias False,
//     tie_word_embeddings False, bos_token_id 1, eos_token_id 2, pad_token_id None.
//   Qwen3Config.__init__ (models/qwen3/configuration_qwen3.py): vocab_size 151936,
//     hidden_size 4096, intermediate_size 22016, num_hidden_layers 32,
//     num_attention_heads 32, num_key_value_heads 32 (None -> num_attention_heads),
//     head_dim 128 (not derived), hidden_act "silu", max_position_embeddings 32768,
//     rms_norm_eps 1e-6, rope_theta 10000.0, rope_scaling None, attention_bias False,
//     use_sliding_window False, tie_word_embeddings False; bos/eos/pad None (the
//     PretrainedConfig defaults). Qwen3's MLP has no bias whatever the file says.
// A key present with null means what None means there: for num_key_value_heads,
// LLaMA's head_dim and the token ids that is the default above or "no token"; for
// the other sizes transformers would fail later, so we fail now.
// transformers 5 keeps the same defaults but writes "dtype" and "rope_parameters"
// ({"rope_type": "default", "rope_theta": ...}); both spellings are read.
#include "io/config.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"  // defines: ERR, TRY
#include "base/fileio.h" // defines: file_read_all, path_is_dir, path_join

const char *config_arch_name(ModelArch a) {
    return a == ARCH_QWEN3 ? "Qwen3ForCausalLM" : "LlamaForCausalLM";
}

// --- typed getters: absent -> default; wrong type -> error naming file and key ------

static int out_of_range(const char *file, const char *key, long long x, int lo, int hi) {
    return ERR("%s: %s %lld is out of range [%d, %d]", file, key, x, lo, hi);
}

// An integer in [lo, hi]. null is an error unless null_ok (then def).
static int get_int(int *out, const char *file, json_t *root, const char *key, int def,
                   int lo, int hi, int null_ok) {
    json_t *v = json_object_get(root, key);
    if (!v || (null_ok && json_is_null(v))) { *out = def; return 0; }
    if (!json_is_integer(v)) return ERR("%s: %s must be an integer", file, key);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) return out_of_range(file, key, (long long)x, lo, hi);
    *out = (int)x;
    return 0;
}

static int get_bool(int *out, const char *file, json_t *root, const char *key, int def) {
    json_t *v = json_object_get(root, key);
    if (!v) { *out = def; return 0; }
    if (!json_is_boolean(v)) return ERR("%s: %s must be true or false", file, key);
    *out = json_is_true(v);
    return 0;
}

// A positive finite number (integer or real).
static int get_pos(double *out, const char *file, json_t *root, const char *key, double def) {
    json_t *v = json_object_get(root, key);
    if (!v) { *out = def; return 0; }
    if (!json_is_number(v)) return ERR("%s: %s must be a number", file, key);
    double x = json_number_value(v);
    if (!(x > 0) || !isfinite(x)) return ERR("%s: %s = %g must be positive", file, key, x);
    *out = x;
    return 0;
}

// A string; absent or null -> def.
static int get_str(const char **out, const char *file, json_t *root, const char *key,
                   const char *def) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) { *out = def; return 0; }
    if (!json_is_string(v)) return ERR("%s: %s must be a string", file, key);
    *out = json_string_value(v);
    return 0;
}

// A token id, a list of them, or null (no token). Absent -> def (-1: none).
static int get_ids(int *ids, int *n, const char *file, json_t *root, const char *key, int def) {
    json_t *v = json_object_get(root, key);
    *n = 0;
    if (!v) {
        if (def >= 0) ids[(*n)++] = def;
        return 0;
    }
    if (json_is_null(v)) return 0;
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0 || json_integer_value(v) > 2147483647)
            return ERR("%s: %s = %lld is not a token id", file, key,
                       (long long)json_integer_value(v));
        ids[(*n)++] = (int)json_integer_value(v);
        return 0;
    }
    if (!json_is_array(v)) return ERR("%s: %s must be a token id or a list of them", file, key);
    if (json_array_size(v) > CONFIG_MAX_EOS)
        return ERR("%s: %s lists %zu ids, at most %d supported", file, key, json_array_size(v),
                   CONFIG_MAX_EOS);
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *e = json_array_get(v, i);
        if (!json_is_integer(e) || json_integer_value(e) < 0 ||
            json_integer_value(e) > 2147483647)
            return ERR("%s: %s[%zu] is not a token id", file, key, i);
        ids[(*n)++] = (int)json_integer_value(e);
    }
    return 0;
}

// --- the parts of the config -------------------------------------------------------

// Architecture from architectures[0], else model_type; the two must agree.
static int parse_arch(ModelArch *arch, const char *file, json_t *root) {
    json_t *archs = json_object_get(root, "architectures");
    const char *mt;
    TRY(get_str(&mt, file, root, "model_type", NULL));
    int from_mt = -1;
    if (mt) {
        if (strcmp(mt, "llama") == 0) from_mt = ARCH_LLAMA;
        else if (strcmp(mt, "qwen3") == 0) from_mt = ARCH_QWEN3;
        else if (!archs || json_is_null(archs))
            return ERR("%s: unsupported model_type '%.60s' (supported: llama, qwen3)", file, mt);
    }
    if (!archs || json_is_null(archs)) {
        if (from_mt < 0) return ERR("%s: neither architectures nor model_type is given", file);
        *arch = (ModelArch)from_mt;
        return 0;
    }
    if (!json_is_array(archs) || json_array_size(archs) == 0 ||
        !json_is_string(json_array_get(archs, 0)))
        return ERR("%s: architectures must be a non-empty list of strings", file);
    const char *a = json_string_value(json_array_get(archs, 0));
    if (strcmp(a, "LlamaForCausalLM") == 0) *arch = ARCH_LLAMA;
    else if (strcmp(a, "Qwen3ForCausalLM") == 0) *arch = ARCH_QWEN3;
    else
        return ERR("%s: unsupported architecture '%.60s' (supported: LlamaForCausalLM, "
                   "Qwen3ForCausalLM)", file, a);
    if (mt && from_mt != (int)*arch)
        return ERR("%s: architectures says %s but model_type is '%.60s'", file, a, mt);
    return 0;
}

// A rope_scaling / rope_parameters object is fine only when it asks for plain RoPE.
static int check_rope_type(const char *file, const char *key, json_t *v) {
    if (!json_is_object(v)) return ERR("%s: %s must be an object or null", file, key);
    json_t *t = json_object_get(v, "rope_type");
    if (!t) t = json_object_get(v, "type"); // the older spelling
    if (!t) {
        if (strcmp(key, "rope_parameters") == 0 && json_object_get(v, "rope_theta")) return 0;
        return ERR("%s: %s without a rope_type is not supported", file, key);
    }
    if (!json_is_string(t)) return ERR("%s: %s.rope_type must be a string", file, key);
    if (strcmp(json_string_value(t), "default") != 0)
        return ERR("%s: rope_scaling type %.40s not supported", file, json_string_value(t));
    return 0;
}

static int parse_rope(ModelConfig *c, const char *file, json_t *root) {
    TRY(get_pos(&c->rope_theta, file, root, "rope_theta", 10000.0));
    json_t *rs = json_object_get(root, "rope_scaling");
    if (rs && !json_is_null(rs)) TRY(check_rope_type(file, "rope_scaling", rs));
    json_t *rp = json_object_get(root, "rope_parameters");
    if (rp && !json_is_null(rp)) {
        TRY(check_rope_type(file, "rope_parameters", rp));
        TRY(get_pos(&c->rope_theta, file, rp, "rope_theta", c->rope_theta));
    }
    return 0;
}

// Features we do not implement: refused rather than silently computed wrong.
static int check_unsupported(const ModelConfig *c, const char *file, json_t *root) {
    const char *act;
    TRY(get_str(&act, file, root, "hidden_act", "silu"));
    if (strcmp(act, "silu") != 0 && strcmp(act, "swish") != 0) // the same function in ACT2FN
        return ERR("%s: hidden_act '%.40s' not supported (only silu)", file, act);
    json_t *q = json_object_get(root, "quantization_config");
    if (q && !json_is_null(q)) return ERR("%s: quantized checkpoints are not supported", file);
    if (c->arch == ARCH_QWEN3) {
        int sw;
        TRY(get_bool(&sw, file, root, "use_sliding_window", 0));
        if (sw) return ERR("%s: use_sliding_window true is not supported", file);
        json_t *lt = json_object_get(root, "layer_types");
        if (lt && !json_is_null(lt)) {
            if (!json_is_array(lt)) return ERR("%s: layer_types must be a list", file);
            for (size_t i = 0; i < json_array_size(lt); i++) {
                json_t *e = json_array_get(lt, i);
                if (!json_is_string(e) || strcmp(json_string_value(e), "full_attention") != 0)
                    return ERR("%s: layer_types[%zu] is not \"full_attention\" (sliding "
                               "window attention is not supported)", file, i);
            }
        }
    }
    return 0;
}

static int parse_dtype(ModelConfig *c, const char *file, json_t *root) {
    const char *key = json_object_get(root, "dtype") ? "dtype" : "torch_dtype";
    const char *dt;
    TRY(get_str(&dt, file, root, key, "float32")); // absent: transformers loads float32
    if (strcmp(dt, "float32") != 0 && strcmp(dt, "bfloat16") != 0 && strcmp(dt, "float16") != 0)
        return ERR("%s: %s '%.40s' not supported (float32, bfloat16 or float16)", file, key, dt);
    snprintf(c->torch_dtype, sizeof c->torch_dtype, "%s", dt);
    return 0;
}

static int parse_root(ModelConfig *c, const char *file, json_t *root) {
    memset(c, 0, sizeof *c);
    TRY(parse_arch(&c->arch, file, root));
    int q = c->arch == ARCH_QWEN3;
    // Every size is range-checked here (config.h: CONFIG_MAX_*), so that the products
    // the model code forms from them stay far from overflowing and a wild file fails
    // with its key named, not with a wrapped counter or a terabyte allocation.
    TRY(get_int(&c->vocab_size, file, root, "vocab_size", q ? 151936 : 32000, 1, CONFIG_MAX_VOCAB, 0));
    TRY(get_int(&c->hidden_size, file, root, "hidden_size", 4096, 1, CONFIG_MAX_DIM, 0));
    TRY(get_int(&c->intermediate_size, file, root, "intermediate_size", q ? 22016 : 11008, 1,
                CONFIG_MAX_DIM, 0));
    TRY(get_int(&c->num_hidden_layers, file, root, "num_hidden_layers", 32, 1, CONFIG_MAX_LAYERS, 0));
    TRY(get_int(&c->num_attention_heads, file, root, "num_attention_heads", 32, 1, CONFIG_MAX_HEADS, 0));
    int nh = c->num_attention_heads;
    // Qwen3's default is 32 when absent, num_attention_heads when null; LLaMA's is
    // num_attention_heads either way.
    json_t *kv = json_object_get(root, "num_key_value_heads");
    TRY(get_int(&c->num_key_value_heads, file, root, "num_key_value_heads",
                q && !kv ? 32 : nh, 1, CONFIG_MAX_HEADS, 1));
    TRY(get_int(&c->max_position_embeddings, file, root, "max_position_embeddings",
                q ? 32768 : 2048, 1, CONFIG_MAX_POSITIONS, 0));
    // One position predicts nothing: a window, a training sequence, a calibration sample
    // needs a token and the next. Said here, naming the file: the tools cap --seq at this
    // value, and their "--seq must be at least 2 (got 1)" blamed an option never given.
    if (c->max_position_embeddings < 2)
        return ERR("%s: max_position_embeddings %d: a model needs at least 2 positions (one token to predict "
                   "the next from)", file, c->max_position_embeddings);
    json_t *hd = json_object_get(root, "head_dim");
    if (!q && (!hd || json_is_null(hd))) {
        if (c->hidden_size % nh != 0)
            return ERR("%s: hidden_size %d is not a multiple of num_attention_heads %d", file,
                       c->hidden_size, nh);
        c->head_dim = c->hidden_size / nh;
    } else TRY(get_int(&c->head_dim, file, root, "head_dim", 128, 1, CONFIG_MAX_DIM, 0));
    if (c->num_key_value_heads > nh || nh % c->num_key_value_heads != 0)
        return ERR("%s: num_attention_heads %d is not a multiple of num_key_value_heads %d",
                   file, nh, c->num_key_value_heads);
    if ((long long)nh * c->head_dim > CONFIG_MAX_DIM)
        return ERR("%s: num_attention_heads %d x head_dim %d is more than %d", file, nh,
                   c->head_dim, CONFIG_MAX_DIM);
    TRY(get_pos(&c->rms_norm_eps, file, root, "rms_norm_eps", 1e-6));
    TRY(parse_rope(c, file, root));
    TRY(get_bool(&c->tie_word_embeddings, file, root, "tie_word_embeddings", 0));
    TRY(get_bool(&c->attention_bias, file, root, "attention_bias", 0));
    if (!q) TRY(get_bool(&c->mlp_bias, file, root, "mlp_bias", 0));
    int ids[CONFIG_MAX_EOS], n;
    TRY(get_ids(ids, &n, file, root, "bos_token_id", q ? -1 : 1));
    if (n > 1) return ERR("%s: bos_token_id must be a single id", file);
    c->bos_token_id = n ? ids[0] : -1;
    TRY(get_ids(ids, &n, file, root, "pad_token_id", -1));
    if (n > 1) return ERR("%s: pad_token_id must be a single id", file);
    c->pad_token_id = n ? ids[0] : -1;
    TRY(get_ids(c->eos_token_ids, &c->n_eos, file, root, "eos_token_id", q ? -1 : 2));
    c->eos_token_id = c->n_eos ? c->eos_token_ids[0] : -1;
    TRY(parse_dtype(c, file, root));
    TRY(check_unsupported(c, file, root));
    return 0;
}

int config_parse(ModelConfig *c, const char *json, size_t n, const char *name) {
    memset(c, 0, sizeof *c);
    json_error_t je;
    json_t *root = json_loadb(json, n, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return ERR("%s: not valid JSON: %s (line %d, column %d)", name, je.text, je.line,
                   je.column);
    int rc = json_is_object(root) ? parse_root(c, name, root)
                                  : ERR("%s: not a JSON object", name);
    json_decref(root);
    if (rc < 0) memset(c, 0, sizeof *c);
    return rc;
}

int config_load(ModelConfig *c, const char *path) {
    char *file = path_is_dir(path) ? path_join(path, "config.json") : xstrdup(path);
    char *buf;
    size_t n;
    int rc = file_read_all(&buf, &n, file);
    if (rc == 0) {
        rc = config_parse(c, buf, n, file);
        free(buf);
    }
    free(file);
    return rc;
}

int config_cap_seq(const ModelConfig *c, int seq, const char *tool, const char *unit, int quiet) {
    int ctx = c->max_position_embeddings;
    if (ctx <= 0 || seq <= ctx) return seq;
    if (!quiet)
        fprintf(stderr, "%s: note: --seq %d is longer than the model's %d positions: %s of %d\n", tool, seq, ctx, unit,
                ctx);
    return ctx;
}
