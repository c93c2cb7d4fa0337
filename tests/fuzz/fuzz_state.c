// fuzz_state.c: libFuzzer target for best-train's state reader: train_open of a --resume
// whose OUT/state/state.safetensors is the input, beside a fixed tiny model folder and
// token shard (made once, in a temp folder). Random bytes rarely carry their own content
// hash (train.h), so when the first input byte is odd the target seals the input first:
// any file the safetensors reader accepts is written again with its content_hash set, and
// the fuzzer reaches the metadata, cursor, tensor and moment checks behind the hash. A
// resume either fails with a message or opens a run whose mask is 0/1, whose moments
// are finite with exp_avg_sq >= 0, whose weights are finite, and whose step is in
// [0, steps]. Seed (tests/fuzz/corpus/state/seed): the byte 0x01 then a state of this
// model made by best-train: CONFIG below as cfg.json, a shard of the 400 tokens i % 16
// (vocab 16, tests/shardio.py), `best-train --init random --config cfg.json --data
// data.bin --out o --seq 8 --batch 2 --steps 4 --sparsity 0.5 --stop-at 2 --threads 1`.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "base/fileio.h"
#include "io/safetensors.h"
#include "io/shard.h"
#include "run/train.h"

// The model of the seed (make_state_seed.sh writes the same text): 1 layer, dim 8.
static const char CONFIG[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 8, "
    "\"intermediate_size\": 16, \"num_hidden_layers\": 1, \"num_attention_heads\": 2, "
    "\"num_key_value_heads\": 2, \"vocab_size\": 16, \"max_position_embeddings\": 32, "
    "\"rms_norm_eps\": 1e-06, \"rope_theta\": 10000.0, \"tie_word_embeddings\": false, "
    "\"torch_dtype\": \"float32\"}\n";

static char dir[64];

static void write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) abort();
}

static void cleanup(void) {
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "fuzz_state: could not remove %s\n", dir);
}

// dir/cfg.json, dir/data.bin (400 tokens i % 16, tokenizer hash 0: as the seed's shard),
// dir/out/model (a random init of the config, saved), dir/out/state/.
static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/fuzz_state_%d", (int)getpid());
    char p[128];
    mkdir(dir, 0755);
    atexit(cleanup);
    snprintf(p, sizeof p, "%s/cfg.json", dir);
    write_file(p, CONFIG, strlen(CONFIG));
    Model m;
    if (model_create(&m, p) < 0) abort();
    train_init_random(&m, 1, 0.02);
    snprintf(p, sizeof p, "%s/out/model", dir);
    if (path_mkdir_p(p) < 0 || model_save(&m, p, -1) < 0) abort();
    model_free(&m);
    snprintf(p, sizeof p, "%s/out/state", dir);
    mkdir(p, 0755);
    int32_t ids[400];
    for (int i = 0; i < 400; i++) ids[i] = i % 16;
    ShardWriter w;
    snprintf(p, sizeof p, "%s/data.bin", dir);
    if (shard_writer_open(&w, p, 16, 0, 0) < 0 || shard_writer_add_doc(&w, ids, 400) < 0 || shard_writer_close(&w) < 0)
        abort();
}

// The input as a state file: as it is, or (seal) rewritten with its content hash.
static void write_state(const char *path, const uint8_t *data, size_t size, int seal) {
    SafeTensors st;
    if (!seal || st_open_mem(&st, data, size, "fuzz.state") < 0) {
        write_file(path, data, size);
        return;
    }
    StWriter w;
    st_writer_init(&w);
    int rc = 0;
    for (int i = 0; rc == 0 && i < st.n_tensors; i++) {
        const StTensor *t = &st.tensors[i];
        rc = st_writer_add(&w, t->name, t->dtype, t->ndim, t->shape, t->data);
    }
    for (int i = 0; rc == 0 && i < st.n_meta; i++) rc = st_writer_meta(&w, st.meta_keys[i], st.meta_vals[i]);
    uint64_t h;
    char hex[17];
    if (rc == 0 && st_writer_content_hash(&h, &w, "content_hash") == 0) {
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
        st_writer_meta(&w, "content_hash", hex);
    }
    if (rc < 0 || st_writer_write(&w, path) < 0) write_file(path, data, size);
    st_writer_free(&w);
    st_close(&st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!dir[0]) setup();
    if (size < 1) return 0;
    int seal = data[0] & 1;
    char state[128], out[128], shard[128];
    snprintf(state, sizeof state, "%s/out/state/state.safetensors", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(shard, sizeof shard, "%s/data.bin", dir);
    write_state(state, data + 1, size - 1, seal);
    const char *shards[1] = {shard};
    TrainConfig c = {0};
    c.data = shards, c.n_data = 1, c.out = out, c.resume = out, c.quiet = 1, c.threads = 1;
    Trainer tr;
    if (train_open(&tr, &c) == 0) {
        if (tr.step < 0 || tr.step > tr.cfg.steps) abort();
        for (size_t i = 0; i < tr.hi - tr.lo; i++)
            if (tr.mask[i] > 1 || !isfinite(tr.opt.m[i]) || !isfinite(tr.opt.v[i]) || tr.opt.v[i] < 0) abort();
        for (size_t i = 0; i < tr.m.n_params; i++)
            if (!isfinite(tr.m.params[i])) abort();
        train_close(&tr);
    } else if (!err_msg()[0]) {
        abort(); // a failure must say why
    }
    return 0;
}
