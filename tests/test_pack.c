// test_pack.c: packed checkpoints (lib/pack/pack.h) on synthetic models.
//
//   * round trip, bit exact, in F32, BF16 and F16, through every encoding: empty and
//     full rows, gaps of 254, 255, 256 and more, cols not a multiple of 8, 1-D tensors,
//     an all-zero tensor, -0.0 kept; row-range decoding equals whole-tensor decoding
//   * int8 / int4: every stored weight within scale/2 of the original, scale = max/127
//     or max/7 per row, zeros stay zero, other tensors bit exact; --quant bf16 rounds
//   * encoding choice: bitmap at 70%, delta at 99%; at 95% a bf16 model's prunable
//     weights take at most 1/6 of their dense bf16 bytes (printed at 70/90/95/99%)
//   * every member's data at a multiple of 512; pack_unpack gives back the folder
//     (weights bit identical, config verbatim, tokenizer files, nothing else)
//   * bad input: every truncation, every single flipped byte (caught by pack_open or
//     pack_verify), an unknown version, index streams that run past their end,
//     member names with ".." or "/", members the manifest does not list
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"      // defines: err_msg
#include "base/fileio.h"     // defines: file_read_all, path_join
#include "nn/model.h"        // defines: Model, model_create, model_load
#include "pack/pack.h"       // defines: the API under test
#include "pack/pack_write.h" // defines: pack_write, pack_unpack
#include "test.h"            // defines: T_OK, T_DONE

static char TMP[64];

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static double unif(void) { return (double)(rng() >> 11) / 9007199254740992.0; }

static void write_text(const char *dir, const char *name, const char *text) {
    char *path = path_join(dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
    free(path);
}

// A random value exactly representable in dt, never zero bits.
static float value_in(StDtype dt) {
    float x = (float)(unif() * 4 - 2);
    if (x == 0) x = 0.5f;
    if (dt == ST_BF16) x = st_bf16_to_f32(st_f32_to_bf16(x));
    if (dt == ST_F16) x = st_f16_to_f32(st_f32_to_f16(x));
    return x;
}

static int is_zero_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u == 0;
}

// hidden 13 (not a multiple of 8), intermediate 300 (gaps past 255 in down_proj rows).
static const char *TINY =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 13,\n"
    " \"intermediate_size\": 300, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,\n"
    " \"num_key_value_heads\": 1, \"head_dim\": 4, \"vocab_size\": 11, \"tie_word_embeddings\": false,\n"
    " \"torch_dtype\": \"float32\"}\n";

static float *param(Model *m, const char *name, size_t *rows, size_t *cols) {
    const ParamInfo *p = model_param(m, name);
    CHECK(p, "no %s", name);
    *rows = p->ndim == 2 ? (size_t)p->shape[0] : 1;
    *cols = p->ndim == 2 ? (size_t)p->shape[1] : (size_t)p->shape[0];
    return m->params + p->offset;
}

// Fills a tiny model with the patterns the encodings must get right.
static void tiny_fill(Model *m, StDtype dt) {
    for (int i = 0; i < m->n_info; i++) { // dense everywhere first, then the patterns
        const ParamInfo *p = &m->info[i];
        for (size_t j = 0; j < p->numel; j++) m->params[p->offset + j] = value_in(dt);
    }
    size_t R, C;
    float *w = param(m, "model.layers.0.mlp.down_proj.weight", &R, &C); // (13, 300): delta
    memset(w, 0, R * C * sizeof *w);
    static const int cols[][3] = {
        {-1, -1, -1}, {254, -1, -1}, {255, -1, -1}, {0, 256, -1}, {0, 255, -1}, {299, -1, -1},
        {0, 1, 2}, {0, 299, -1}, {299, -1, -1}, {100, 200, -1}, {3, 258, -1}, {0, 1, 299}, {42, -1, -1},
    };
    for (size_t r = 0; r < R; r++)
        for (int k = 0; k < 3; k++)
            if (cols[r][k] >= 0) w[r * C + (size_t)cols[r][k]] = value_in(dt);
    w[6 * C + 1] = -0.0f;
    w[8 * C + 299] = -0.0f; // a row whose only stored element is -0.0
    w = param(m, "model.layers.0.mlp.gate_proj.weight", &R, &C); // (300, 13): bitmap
    for (size_t j = 0; j < R * C; j++)
        if (unif() < 0.7) w[j] = 0;
    memset(w, 0, C * sizeof *w);                      // row 0 empty
    for (size_t c = 0; c < C; c++) w[C + c] = value_in(dt); // row 1 full
    w[2 * C + 12] = -0.0f;                            // the last column of a row
    w = param(m, "model.layers.0.mlp.up_proj.weight", &R, &C);
    for (size_t j = 0; j < R * C; j++)
        if (unif() < 0.75) w[j] = 0;
    w = param(m, "model.layers.0.self_attn.k_proj.weight", &R, &C); // all zero
    memset(w, 0, R * C * sizeof *w);
    w = param(m, "model.layers.0.self_attn.o_proj.weight", &R, &C); // (13, 8): cols = 8
    for (size_t j = 0; j < R * C; j++)
        if (unif() < 0.8) w[j] = 0;
}

// A tiny model in dir (config.json, a tokenizer file and a file that must not travel).
static void tiny_model(Model *m, const char *dir, StDtype dt) {
    mkdir(dir, 0777);
    write_text(dir, "config.json", TINY);
    write_text(dir, "tokenizer.json", "{\"model\": {\"type\": \"BPE\"}}\n");
    write_text(dir, "notes.txt", "not a model file\n");
    CHECK(model_create(m, dir) == 0, "model_create: %s", err_msg());
    m->src_dir = xstrdup(dir);
    m->dtype = dt;
    tiny_fill(m, dt);
}

static float *decode_all(const PackTensor *t) {
    float *out = xmalloc(t->rows * t->cols * sizeof *out + 1);
    pack_decode_rows(out, t, 0, t->rows);
    return out;
}

static char *tmp_path(const char *name) { return path_join(TMP, name); }

// --- round trips ------------------------------------------------------------------------

// Every tensor of p decodes to m's bits, whole and row by row.
static void check_exact(const Pack *p, const Model *m, StDtype dt, const char *what) {
    int exact = 1, rows_ok = 1;
    for (int i = 0; i < m->n_info; i++) {
        const ParamInfo *pi = &m->info[i];
        const PackTensor *t = pack_find(p, pi->name);
        if (!t) { exact = 0; continue; }
        float *d = decode_all(t);
        exact &= memcmp(d, m->params + pi->offset, pi->numel * sizeof *d) == 0 && t->dtype == dt;
        float *row = xmalloc(t->cols * sizeof *row);
        for (size_t r = 0; r < t->rows; r++) {
            pack_decode_rows(row, t, r, r + 1);
            rows_ok &= memcmp(row, d + r * t->cols, t->cols * sizeof *row) == 0;
        }
        free(row);
        free(d);
    }
    T_OK(exact, "%s: every tensor decodes bit exact", what);
    T_OK(rows_ok, "%s: decoding row by row equals decoding the whole tensor", what);
}

// The tiny model packed with every prunable tensor in one encoding (forced by index).
static void test_forced(StDtype dt, PackIndex index, PackEnc want) {
    char name[64];
    snprintf(name, sizeof name, "tiny_%s_%s.pack", st_dtype_name(dt), pack_enc_name(want));
    char *dir = tmp_path("tiny_forced"), *path = tmp_path(name);
    Model m;
    tiny_model(&m, dir, dt);
    T_OK(pack_write(path, &m, QUANT_NONE, index) == 0, "%s: pack_write %s", name, err_msg());
    Pack p;
    if (pack_open(&p, path) == 0) {
        int all = 1;
        for (int i = 0; i < p.n; i++) all &= p.t[i].prunable ? p.t[i].enc == want : p.t[i].enc == PACK_DENSE;
        T_OK(all, "%s: every prunable tensor %s, the others dense", name, pack_enc_name(want));
        check_exact(&p, &m, dt, name);
        T_OK(pack_verify(&p) == 0, "%s: pack_verify", name);
        pack_close(&p);
    } else {
        T_OK(0, "%s: pack_open: %s", name, err_msg());
    }
    model_free(&m);
    free(dir);
    free(path);
}

// Tiles where they are hard: a panel of 8 rows after a full one, a row full within a
// block, a step of 262 blocks (a slot of step 255 and no element, then one of 7), a
// row whose last element is in the tensor's last column (8499 of 8500).
static void test_tiles(void) {
    static const char *cfg =
        "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 40,\n"
        " \"intermediate_size\": 8500, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,\n"
        " \"vocab_size\": 11, \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\"}\n";
    char *dir = tmp_path("tiles"), *path = tmp_path("tiles.pack");
    mkdir(dir, 0777);
    write_text(dir, "config.json", cfg);
    Model m;
    CHECK(model_create(&m, dir) == 0, "%s", err_msg());
    m.dtype = ST_BF16;
    for (int i = 0; i < m.n_info; i++) {
        const ParamInfo *pi = &m.info[i];
        for (size_t j = 0; j < pi->numel; j++)
            m.params[pi->offset + j] = pi->prunable && unif() < 0.97 ? 0 : value_in(ST_BF16);
    }
    size_t R, C;
    float *w = param(&m, "model.layers.0.mlp.down_proj.weight", &R, &C); // (40, 8500)
    memset(w, 0, 32 * C * sizeof *w); // panel 0: only these three rows
    w[0] = value_in(ST_BF16);
    w[8400] = value_in(ST_BF16);                                        // row 0: step 262
    w[C + 8499] = -0.0f;                                                // row 1: last column
    for (size_t c = 32; c < 64; c++) w[2 * C + c] = value_in(ST_BF16); // row 2: a full block
    T_OK(pack_write(path, &m, QUANT_NONE, INDEX_TILES) == 0, "tiles: pack_write %s", err_msg());
    Pack p;
    if (pack_open(&p, path) == 0) {
        const PackTensor *t = pack_find(&p, "model.layers.0.mlp.down_proj.weight");
        int escape = 0, full = 0;
        size_t blk = 0;
        for (size_t s = 0; t && s < t->ix_ptr[1]; s++) {
            blk += t->steps[s];
            escape += t->masks[s] == 0 && t->steps[s] == 255;
            full += blk == 1 && t->masks[s] == 4;
        }
        T_OK(t && t->enc == PACK_TILES && t->slots == t->ix_ptr[2] && t->ix_ptr[1] == 36 && escape == 1 && full == 32,
             "tiles: down_proj in 2 panels; panel 0 is 36 slots: block 0, 32 of block 1, an escape (step 255), "
             "blocks 262 and 265 (%zu slots in all)", t ? t->slots : 0);
        check_exact(&p, &m, ST_BF16, "tiles");
        pack_close(&p);
    } else {
        T_OK(0, "tiles: pack_open: %s", err_msg());
    }
    model_free(&m);
    free(dir);
    free(path);
}

static void test_roundtrip(StDtype dt) {
    char dirname[32], packname[32];
    snprintf(dirname, sizeof dirname, "tiny_%s", st_dtype_name(dt));
    snprintf(packname, sizeof packname, "tiny_%s.pack", st_dtype_name(dt));
    char *dir = tmp_path(dirname), *path = tmp_path(packname);
    Model m;
    tiny_model(&m, dir, dt);
    T_OK(pack_write(path, &m, QUANT_NONE, INDEX_SIZE) == 0, "%s: pack_write %s", st_dtype_name(dt), err_msg());
    Pack p;
    int ok = pack_open(&p, path) == 0;
    T_OK(ok, "%s: pack_open: %s", st_dtype_name(dt), err_msg());
    if (!ok) { model_free(&m); free(dir); free(path); return; }
    T_OK(pack_verify(&p) == 0, "%s: pack_verify", st_dtype_name(dt));
    char what[96];
    snprintf(what, sizeof what, "%s (-0.0 kept, empty/full rows, gaps 254/255/256/299)", st_dtype_name(dt));
    check_exact(&p, &m, dt, what);
    int encs[PACK_N_ENC] = {0};
    for (int i = 0; i < p.n; i++) encs[p.t[i].enc]++;
    const PackTensor *down = pack_find(&p, "model.layers.0.mlp.down_proj.weight");
    const PackTensor *gate = pack_find(&p, "model.layers.0.mlp.gate_proj.weight");
    const PackTensor *norm = pack_find(&p, "model.norm.weight");
    const PackTensor *k = pack_find(&p, "model.layers.0.self_attn.k_proj.weight");
    T_OK(down && down->enc != PACK_DENSE && gate && gate->enc != PACK_DENSE && norm && norm->enc == PACK_DENSE &&
             norm->ndim == 1 && k && k->nnz == 0,
         "%s: --index size: %d dense, %d bitmap, %d delta, %d tiles, %d nm; 1-D norm dense, empty k_proj",
         st_dtype_name(dt), encs[0], encs[1], encs[2], encs[3], encs[PACK_NM]);
    int aligned = p.map.size % 512 == 0;
    for (int i = 0; i < p.n_members; i++) aligned &= p.members[i].offset % 512 == 0;
    T_OK(aligned, "%s: every member's data starts at a multiple of 512 (%d members)", st_dtype_name(dt), p.n_members);
    T_OK(pack_member(&p, "tokenizer.json") && !pack_member(&p, "notes.txt"),
         "%s: tokenizer.json packed, notes.txt not", st_dtype_name(dt));

    // unpack: a folder that loads back to the same weights
    char *out = tmp_path(dt == ST_BF16 ? "unpacked_bf16" : dt == ST_F16 ? "unpacked_f16" : "unpacked_f32");
    T_OK(pack_unpack(out, &p) == 0, "%s: pack_unpack: %s", st_dtype_name(dt), err_msg());
    Model u;
    if (model_load(&u, out) == 0) {
        T_OK(u.dtype == dt && u.n_params == m.n_params &&
                 memcmp(u.params, m.params, m.n_params * sizeof *m.params) == 0,
             "%s: unpacked model loads with the same weights, bit for bit", st_dtype_name(dt));
        T_OK(u.config_len == strlen(TINY) && memcmp(u.config_json, TINY, u.config_len) == 0,
             "%s: config.json verbatim", st_dtype_name(dt));
        model_free(&u);
    } else {
        T_OK(0, "%s: model_load of the unpacked folder: %s", st_dtype_name(dt), err_msg());
    }
    char *tok = path_join(out, "tokenizer.json"), *notes = path_join(out, "notes.txt");
    T_OK(access(tok, R_OK) == 0 && access(notes, F_OK) != 0, "%s: unpack wrote tokenizer.json, not notes.txt",
         st_dtype_name(dt));
    free(tok);
    free(notes);
    free(out);
    pack_close(&p);
    model_free(&m);
    free(dir);
    free(path);
}

static void test_quant(PackQuant q) {
    const char *qn = q == QUANT_INT8 ? "int8" : q == QUANT_INT4 ? "int4" : "bf16";
    char *dir = tmp_path("tiny_q"), *path = tmp_path("tiny_q.pack");
    Model m;
    tiny_model(&m, dir, ST_F32);
    T_OK(pack_write(path, &m, q, INDEX_SPEED) == 0, "%s: pack_write %s", qn, err_msg());
    Pack p;
    if (pack_open(&p, path) < 0) { T_OK(0, "%s: pack_open: %s", qn, err_msg()); model_free(&m); free(dir); free(path); return; }
    float qmax = q == QUANT_INT8 ? 127 : 7;
    int within = 1, zeros = 1, scales = 1, others = 1, types = 1;
    double worst = 0;
    for (int i = 0; i < m.n_info; i++) {
        const ParamInfo *pi = &m.info[i];
        const PackTensor *t = pack_find(&p, pi->name);
        const float *w = m.params + pi->offset;
        float *d = decode_all(t);
        if (!pi->prunable) {
            others &= memcmp(d, w, pi->numel * sizeof *d) == 0 && t->val == PACK_F32 && t->enc == PACK_DENSE;
            free(d);
            continue;
        }
        types &= t->val == (q == QUANT_INT8 ? PACK_I8 : q == QUANT_INT4 ? PACK_I4 : PACK_BF16);
        for (size_t r = 0; r < t->rows; r++) {
            float mx = 0;
            for (size_t c = 0; c < t->cols; c++) mx = fmaxf(mx, fabsf(w[r * t->cols + c]));
            if (q == QUANT_BF16) {
                for (size_t c = 0; c < t->cols; c++)
                    within &= d[r * t->cols + c] == st_bf16_to_f32(st_f32_to_bf16(w[r * t->cols + c]));
                continue;
            }
            float s = t->scales[r];
            scales &= s == mx / qmax;
            for (size_t c = 0; c < t->cols; c++) {
                float x = w[r * t->cols + c], y = d[r * t->cols + c];
                if (is_zero_bits(x)) { zeros &= y == 0; continue; }
                double err = fabs((double)x - (double)y);
                within &= err <= 0.5 * s * (1 + 1e-5);
                if (s > 0 && err / s > worst) worst = err / s;
            }
        }
        free(d);
    }
    if (q == QUANT_BF16) {
        T_OK(within && types, "bf16: prunable values rounded to bf16, stored as BF16");
    } else {
        T_OK(scales, "%s: scale = max|w| / %g for every row", qn, qmax);
        T_OK(within, "%s: every stored weight within scale/2 (worst %.4f scale)", qn, worst);
        T_OK(zeros && types, "%s: zeros stay zero, prunable values are %s", qn, q == QUANT_INT8 ? "I8" : "I4");
    }
    T_OK(others, "%s: non-prunable tensors dense F32, bit exact", qn);
    T_OK(pack_verify(&p) == 0, "%s: pack_verify", qn);
    pack_close(&p);
    model_free(&m);
    free(dir);
    free(path);
}

// --- sizes ------------------------------------------------------------------------------

// A bf16 model with 2.6M prunable weights, each kept with probability 1 - s.
static void test_sizes(PackIndex index, SpmvIsa isa) {
    const char *rule = index == INDEX_SIZE ? "size" : "speed";
    static const char *cfg =
        "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 512,\n"
        " \"intermediate_size\": 1024, \"num_hidden_layers\": 1, \"num_attention_heads\": 8,\n"
        " \"vocab_size\": 64, \"torch_dtype\": \"bfloat16\"}\n";
    char *dir = tmp_path("sized");
    mkdir(dir, 0777);
    write_text(dir, "config.json", cfg);
    static const double S[] = {0.7, 0.9, 0.95, 0.99};
    for (int k = 0; k < 4; k++) {
        Model m;
        CHECK(model_create(&m, dir) == 0, "%s", err_msg());
        m.dtype = ST_BF16;
        for (int i = 0; i < m.n_info; i++) {
            const ParamInfo *pi = &m.info[i];
            for (size_t j = 0; j < pi->numel; j++)
                m.params[pi->offset + j] = pi->prunable && unif() < S[k] ? 0 : value_in(ST_BF16);
        }
        char *path = tmp_path("sized.pack");
        pack_plan_isa(isa); // (--index speed's costs: those of this kernel set, whatever the CPU)
        T_OK(pack_write(path, &m, QUANT_NONE, index) == 0, "S=%.2f: pack_write %s", S[k], err_msg());
        Pack p;
        if (pack_open(&p, path) < 0) { T_OK(0, "S=%.2f: %s", S[k], err_msg()); model_free(&m); free(path); continue; }
        size_t bytes = 0, numel = 0, nnz = 0;
        int all_bitmap = 1, all_delta = 1, all_tiles = 1, all_sell = 1, all_small = 1;
        size_t delta_nnz = 0, delta_index = 0; // of the tensors not tiles
        for (int i = 0; i < p.n; i++) {
            const PackTensor *t = &p.t[i];
            if (!t->prunable) continue;
            bytes += pack_tensor_bytes(t);
            numel += t->rows * t->cols;
            nnz += t->nnz;
            all_bitmap &= t->enc == PACK_BITMAP;
            all_delta &= t->enc == PACK_DELTA;
            all_tiles &= t->enc == PACK_TILES;
            all_sell &= t->enc == PACK_SELL;
            all_small &= t->enc == PACK_DELTA || t->enc == PACK_TILES;
            if (t->enc != PACK_TILES && t->enc != PACK_SELL) delta_nnz += t->nnz, delta_index += t->index_bytes;
        }
        double ratio = (double)bytes / (2.0 * (double)numel), bpn = 8.0 * (double)bytes / (double)nnz;
        printf("# --index %s (planned for %s), bf16, sparsity %.2f: %.2f bits per nonzero (index included), %.4f of "
               "dense bf16 (1/%.1f), %s\n", rule, spmv_isa_name(isa), S[k], bpn, ratio, 1 / ratio,
               all_bitmap ? "bitmap" : all_delta ? "delta" : all_tiles ? "tiles" : all_sell ? "sell" : "mixed");
        if (S[k] == 0.7 && index == INDEX_SIZE) T_OK(all_bitmap, "size, S=0.70: every prunable tensor is a bitmap");
        if (S[k] == 0.99 && index == INDEX_SIZE)
            T_OK(delta_nnz > 0 && all_small, "size, S=0.99: every prunable tensor delta or tiles (%s)",
                 all_delta ? "all delta" : "mixed");
        if (S[k] >= 0.9 && S[k] < 0.99 && index == INDEX_SPEED && isa == SPMV_AVX512)
            T_OK(all_tiles, "speed for avx512, S=%.2f: every prunable tensor is tiles", S[k]);
        if (S[k] >= 0.9 && index == INDEX_SPEED && isa == SPMV_AVX2)
            T_OK(all_sell, "speed for avx2, S=%.2f: every prunable tensor is sell", S[k]);
        if (S[k] == 0.7 && index == INDEX_SPEED && isa == SPMV_AVX2)
            T_OK(all_bitmap, "speed for avx2, S=0.70: every prunable tensor is a bitmap");
        if (S[k] == 0.95)
            T_OK(ratio <= 1.0 / 6, "%s, S=0.95: prunable weights %.4f of dense bf16 (target <= 1/6)", rule, ratio);
        if ((S[k] == 0.7 || S[k] == 0.99) && index == INDEX_SIZE) {
            // "near their best": the index stream itself (bitmap or delta bytes, without
            // the per-row counts) within 15% of the entropy of a random mask
            double h = -(S[k] * log2(S[k]) + (1 - S[k]) * log2(1 - S[k])) / (1 - S[k]);
            double ib = 8.0 * (double)delta_index / (double)delta_nnz;
            T_OK(ib <= 1.15 * h, "S=%.2f: index %.2f bits per nonzero, the mask's entropy is %.2f", S[k], ib, h);
        }
        pack_close(&p);
        model_free(&m);
        free(path);
    }
    free(dir);
}

// --- bad input --------------------------------------------------------------------------

static uint8_t *read_file(size_t *n, const char *path) {
    char *buf;
    CHECK(file_read_all(&buf, n, path) == 0, "%s", err_msg());
    uint8_t *out = aligned_alloc(64, (*n + 63) / 64 * 64 + 64);
    memcpy(out, buf, *n);
    free(buf);
    return out;
}

// Opening a buffer must fail with a message; returns 1 if it did.
static int open_fails(const uint8_t *buf, size_t n, const char *want) {
    Pack p;
    if (pack_open_mem(&p, buf, n, "bad.pack") == 0) { pack_close(&p); return 0; }
    return err_msg()[0] && (!want || strstr(err_msg(), want));
}

// A test-side ustar writer (independent of libarchive) to build hostile packs.
typedef struct { char name[128]; uint8_t *data; size_t size; } Entry;

static void octal(uint8_t *f, size_t width, uint64_t x) {
    for (size_t i = width; i-- > 0; x >>= 3) f[i] = (uint8_t)('0' + (x & 7));
}

static uint8_t *tar_build(size_t *n, const Entry *e, int ne) {
    size_t total = 1024;
    for (int i = 0; i < ne; i++) total += 512 + (e[i].size + 511) / 512 * 512;
    uint8_t *buf = aligned_alloc(64, total);
    memset(buf, 0, total);
    size_t off = 0;
    for (int i = 0; i < ne; i++) {
        uint8_t *h = buf + off;
        memcpy(h, e[i].name, strlen(e[i].name) < 100 ? strlen(e[i].name) : 100);
        // numeric fields as libarchive writes them: digits, then space and NUL
        static const size_t six[] = {100, 108, 116, 329, 337};
        for (int k = 0; k < 5; k++) {
            octal(h + six[k], 6, six[k] == 100 ? 0644 : 0);
            h[six[k] + 6] = ' ';
        }
        octal(h + 124, 11, e[i].size);
        h[135] = ' ';
        octal(h + 136, 11, 0);
        h[147] = ' ';
        h[156] = '0';
        memcpy(h + 257, "ustar\0" "00", 8);
        unsigned sum = 0;
        for (int j = 0; j < 512; j++) sum += j >= 148 && j < 156 ? ' ' : h[j];
        octal(h + 148, 6, sum);
        h[154] = 0;
        h[155] = ' ';
        memcpy(h + 512, e[i].data, e[i].size);
        off += 512 + (e[i].size + 511) / 512 * 512;
    }
    *n = total;
    return buf;
}

// The members of a pack, as editable copies.
static Entry *entries_of(int *ne, const uint8_t *buf, size_t n) {
    Pack p;
    CHECK(pack_open_mem(&p, buf, n, "good.pack") == 0, "%s", err_msg());
    Entry *e = xcalloc((size_t)p.n_members, sizeof *e);
    for (int i = 0; i < p.n_members; i++) {
        snprintf(e[i].name, sizeof e[i].name, "%s", p.members[i].name);
        e[i].size = p.members[i].size;
        e[i].data = xmalloc(e[i].size + 1);
        memcpy(e[i].data, buf + p.members[i].offset, e[i].size);
    }
    *ne = p.n_members;
    pack_close(&p);
    return e;
}

static void entries_free(Entry *e, int ne) {
    for (int i = 0; i < ne; i++) free(e[i].data);
    free(e);
}

static Entry *entry(Entry *e, int ne, const char *name) {
    for (int i = 0; i < ne; i++)
        if (strcmp(e[i].name, name) == 0) return &e[i];
    CHECK(0, "no member %s", name);
    return NULL;
}

// Replaces the first `from` in an entry's text by `to`.
static void edit(Entry *x, const char *from, const char *to) {
    char *s = xmalloc(x->size + 1);
    memcpy(s, x->data, x->size);
    s[x->size] = 0;
    char *at = strstr(s, from);
    CHECK(at, "%s not in %s", from, x->name);
    size_t head = (size_t)(at - s), fl = strlen(from), tl = strlen(to);
    uint8_t *d = xmalloc(x->size - fl + tl + 1);
    memcpy(d, s, head);
    memcpy(d + head, to, tl);
    memcpy(d + head + tl, s + head + fl, x->size - head - fl);
    free(x->data);
    free(s);
    x->data = d;
    x->size = x->size - fl + tl;
}

// Builds the tar of e after edit() and checks that opening it fails saying `want`.
static void expect_bad(Entry *e, int ne, const char *want, const char *what) {
    size_t n;
    uint8_t *buf = tar_build(&n, e, ne);
    int ok = open_fails(buf, n, want);
    T_OK(ok, "%s: refused (%s)", what, err_msg());
    free(buf);
}

// Every byte of the pack good (n) with one bit flipped, then every 5th byte inverted
// (the time is ASan's): pack_open or pack_verify refuses each.
static void test_flips(const uint8_t *good, size_t n, const char *what) {
    Pack p;
    uint8_t *bad = aligned_alloc(64, (n + 63) / 64 * 64);
    int caught_open = 0, caught_verify = 0, missed = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n; i += pass ? 5 : 1) {
            memcpy(bad, good, n);
            bad[i] ^= pass == 0 ? (uint8_t)(1u << (i % 8)) : 0xFF;
            if (pack_open_mem(&p, bad, n, "flipped.pack") < 0) {
                caught_open += err_msg()[0] != 0;
                continue;
            }
            if (pack_verify(&p) < 0) caught_verify++;
            else if (missed++ < 5) printf("#   flip at byte %zu (pass %d) not detected\n", i, pass);
            pack_close(&p);
        }
    T_OK(missed == 0, "%s pack: each single flipped byte is caught (%d by pack_open, %d by pack_verify, %d missed)",
         what, caught_open, caught_verify, missed);
    free(bad);
}

static void test_bad(void) {
    char *path = tmp_path("tiny_BF16_delta.pack");
    size_t n;
    uint8_t *good = read_file(&n, path);
    Pack p;
    T_OK(pack_open_mem(&p, good, n, "good.pack") == 0, "the test-side reader sees a good pack first");
    pack_close(&p);

    // the test-side tar writer reproduces libarchive's file byte for byte
    int ne;
    Entry *e = entries_of(&ne, good, n);
    size_t n2;
    uint8_t *same = tar_build(&n2, e, ne);
    T_OK(n2 == n && memcmp(same, good, n) == 0, "rebuilding the pack with the test's ustar writer gives the same bytes");
    free(same);

    int trunc = 1;
    size_t first_bad = 0;
    for (size_t len = 0; len < n; len++)
        if (!open_fails(good, len, NULL) && trunc) { trunc = 0; first_bad = len; }
    T_OK(trunc, "every truncation (%zu of them) is refused%s", n, trunc ? "" : " -- not at some length");
    if (!trunc) printf("#   first accepted truncation: %zu bytes\n", first_bad);

    test_flips(good, n, "delta");

    Entry *mf = entry(e, ne, "manifest.json");
    uint8_t *saved = xmalloc(mf->size);
    size_t saved_n = mf->size;
    memcpy(saved, mf->data, saved_n);
#define RESTORE() do { free(mf->data); mf->data = xmalloc(saved_n); memcpy(mf->data, saved, saved_n); mf->size = saved_n; } while (0)
    edit(mf, "\"version\":2,", "\"version\":5,");
    expect_bad(e, ne, "version 5", "an unknown format version");
    RESTORE();
    edit(mf, "\"version\":2,", "\"version\":1,");
    size_t n1;
    uint8_t *v1 = tar_build(&n1, e, ne);
    T_OK(pack_open_mem(&p, v1, n1, "v1.pack") == 0, "a version 1 pack (no tiles) still opens: %s", err_msg());
    pack_close(&p);
    free(v1);
    RESTORE();
    edit(mf, "\"format\":\"best-pack\"", "\"format\":\"other\"");
    expect_bad(e, ne, "format", "another format");
    RESTORE();

    // down_proj is delta coded: row 5 = {299} is the bytes 255, 44 somewhere in its stream
    Entry *ix = entry(e, ne, "model.layers.0.mlp.down_proj.weight.index");
    const uint8_t *hit = NULL;
    for (size_t i = 0; i + 1 < ix->size && !hit; i++)
        if (ix->data[i] == 255 && ix->data[i + 1] == 44) hit = ix->data + i;
    T_OK(hit != NULL, "found the escape of row 5 in down_proj's delta stream");
    if (hit) {
        size_t at = (size_t)(hit - ix->data);
        ix->data[at + 1] = 45; // column 300 of 300
        expect_bad(e, ne, "runs past its end", "a delta gap past the end of its row");
        ix->data[at + 1] = 255; // an escape that never ends inside the row
        expect_bad(e, ne, "down_proj", "a delta row that ends inside an escape");
        ix->data[at + 1] = 44;
    }
    Entry *ixp = entry(e, ne, "model.layers.0.mlp.down_proj.weight.ixptr");
    uint32_t last;
    memcpy(&last, ixp->data + ixp->size - 4, 4);
    uint32_t more = last + 1;
    memcpy(ixp->data + ixp->size - 4, &more, 4);
    expect_bad(e, ne, "ixptr", "an index stream longer than its member");
    memcpy(ixp->data + ixp->size - 4, &last, 4);
    Entry *nz = entry(e, ne, "model.layers.0.mlp.gate_proj.weight.nnz");
    nz->data[8] ^= 1;
    expect_bad(e, ne, "gate_proj", "row counts that disagree with nnz");
    nz->data[8] ^= 1;

    Entry *tok = entry(e, ne, "tokenizer.json");
    static const char *const evil[] = {"../x", "a/b", "/etc/passwd", "..", ".hidden", "tokenizer.json/"};
    for (int i = 0; i < 6; i++) {
        snprintf(tok->name, sizeof tok->name, "%s", evil[i]);
        char to[64];
        snprintf(to, sizeof to, "\"name\":\"%s\"", evil[i]);
        edit(mf, "\"name\":\"tokenizer.json\"", to);
        char what[64];
        snprintf(what, sizeof what, "a member named %s", evil[i]);
        expect_bad(e, ne, "not a plain file name", what);
        RESTORE();
    }
    snprintf(tok->name, sizeof tok->name, "run.sh");
    edit(mf, "\"name\":\"tokenizer.json\"", "\"name\":\"run.sh\"");
    expect_bad(e, ne, "allowed file", "a member that is neither a tensor stream nor an allowed file");
    RESTORE();
    snprintf(tok->name, sizeof tok->name, "tokenizer.json");
    expect_bad(e, ne - 1, "lists", "a member the manifest lists but the tar lacks");
    edit(mf, "\"name\":\"model.norm.weight\",\"shape\"", "\"name\":\"model/norm.weight\",\"shape\"");
    expect_bad(e, ne, "plain name", "a tensor named with a slash");
    RESTORE();
#undef RESTORE
    free(saved);
    entries_free(e, ne);
    free(good);
    free(path);
}

// Tiles streams that lie: refused at open, each with its own message.
static void test_bad_tiles(void) {
    char *path = tmp_path("tiny_BF16_tiles.pack");
    size_t n;
    uint8_t *good = read_file(&n, path);
    int ne;
    Entry *e = entries_of(&ne, good, n);
    Pack p;
    T_OK(pack_open_mem(&p, good, n, "tiles.pack") == 0, "the tiles pack opens");
    pack_close(&p);
    Entry *mf = entry(e, ne, "manifest.json");
    edit(mf, "\"version\":2,", "\"version\":1,");
    expect_bad(e, ne, "unknown encoding tiles (format version 1)", "tiles in a version 1 pack");
    edit(mf, "\"version\":1,", "\"version\":2,");
    const char *d = "model.layers.0.mlp.down_proj.weight"; // (13, 300): one panel, 10 blocks
    char name[128];
    snprintf(name, sizeof name, "%s.slots", d);
    Entry *sl = entry(e, ne, name);
    snprintf(name, sizeof name, "%s.index", d);
    Entry *ix = entry(e, ne, name);
    size_t S = sl->size / 5;
    uint32_t m0;
    memcpy(&m0, sl->data, 4);
    sl->data[4 * S] = 10; // the first slot's block: 10 of 10
    expect_bad(e, ne, "runs past its last block", "a tiles slot past the last block");
    sl->data[4 * S] = 0;
    uint32_t past = m0 | 1u << 20; // row 20 of a 13-row tensor
    memcpy(sl->data, &past, 4);
    expect_bad(e, ne, "past the tensor's end", "a tiles mask with a row past the tensor");
    uint32_t fewer = m0 & (m0 - 1);
    memcpy(sl->data, &fewer, 4);
    expect_bad(e, ne, "out of order or range", "a tiles mask that loses an element (the next ones shift)");
    memcpy(sl->data, &m0, 4);
    Entry *gn = entry(e, ne, "model.layers.0.mlp.gate_proj.weight.nnz"); // (300, 13): 10 panels
    uint32_t n1;
    memcpy(&n1, gn->data + 4, 4);
    n1++;
    memcpy(gn->data + 4, &n1, 4);
    expect_bad(e, ne, "nnz says", "a tiles panel with fewer elements than nnz says");
    n1--;
    memcpy(gn->data + 4, &n1, 4);
    uint8_t c0 = ix->data[0];
    ix->data[0] = 32;
    expect_bad(e, ne, "out of order or range", "a tiles column of 32 within a block");
    ix->data[0] = c0;
    char from[160], to[160];
    snprintf(from, sizeof from, "\"name\":\"%s.slots\",\"size\":%zu,", d, sl->size);
    snprintf(to, sizeof to, "\"name\":\"%s.slots\",\"size\":%zu,", d, sl->size - 1);
    edit(mf, from, to);
    sl->size--;
    expect_bad(e, ne, "multiple of 5", "a slots member of 5S-1 bytes");
    sl->size++;
    edit(mf, to, from);
    size_t n2;
    uint8_t *same = tar_build(&n2, e, ne);
    T_OK(pack_open_mem(&p, same, n2, "tiles.pack") == 0, "restored, the tiles pack opens again: %s", err_msg());
    pack_close(&p);
    free(same);
    test_flips(good, n, "tiles");
    entries_free(e, ne);
    free(good);
    free(path);
    path = tmp_path("tiny_BF16_bitmap.pack");
    good = read_file(&n, path);
    test_flips(good, n, "bitmap");
    free(good);
    free(path);
    path = tmp_path("tiny_BF16_sell.pack"); // (written by test_forced)
    good = read_file(&n, path);
    test_flips(good, n, "sell");
    free(good);
    free(path);
}

// --- nm ------------------------------------------------------------------------------------

// hidden 44: rows of 44 columns are 22 positions of 2 bits at 2:4, 44 bits in 6 bytes (4
// padding bits); intermediate 96: down_proj's rows fill 12 bytes exactly.
static const char *NM_CFG =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 44,\n"
    " \"intermediate_size\": 96, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,\n"
    " \"num_key_value_heads\": 1, \"vocab_size\": 11, \"tie_word_embeddings\": false, \"torch_dtype\": \"float32\"}\n";

// A 2:4 model in dt: most groups keep 2 at random columns, some 1 or 0 (nm's padding), a
// -0.0 kept in q_proj; packed as best-pack does by default (--index speed, AVX-512) every prunable
// tensor is nm 2:4 in exactly its documented bytes (BF16 96 columns: 0.5625 of dense) and
// decodes to the model's bits.
static void test_nm(StDtype dt) {
    char name[48];
    snprintf(name, sizeof name, "nm_%s.pack", st_dtype_name(dt));
    char *dir = tmp_path("nm"), *path = tmp_path(name);
    mkdir(dir, 0777);
    write_text(dir, "config.json", NM_CFG);
    Model m;
    CHECK(model_create(&m, dir) == 0, "%s", err_msg());
    m.dtype = dt;
    for (int i = 0; i < m.n_info; i++) {
        const ParamInfo *pi = &m.info[i];
        float *w = m.params + pi->offset;
        for (size_t j = 0; j < pi->numel; j++) w[j] = pi->prunable ? 0.0f : value_in(dt);
        for (size_t g = 0; pi->prunable && g < pi->numel; g += 4) {
            double u = unif();
            int keep = u < 0.1 ? 0 : u < 0.2 ? 1 : 2;
            for (int k = 0; k < keep;) {
                size_t j = g + (size_t)(unif() * 4) % 4;
                if (w[j] == 0) w[j] = value_in(dt), k++;
            }
        }
    }
    size_t R, C;
    float *q = param(&m, "model.layers.0.self_attn.q_proj.weight", &R, &C);
    q[0] = -0.0f, q[1] = 0.0f, q[2] = 0.0f, q[3] = value_in(dt); // group 0: -0.0 and one value
    pack_plan_isa(SPMV_AVX512); // (AVX2 plans take a bitmap or dense: pack_write.c)
    T_OK(pack_write(path, &m, QUANT_NONE, INDEX_SPEED) == 0, "%s: pack_write %s", name, err_msg());
    pack_plan_isa(spmv_isa());
    Pack p;
    if (pack_open(&p, path) == 0) {
        int all = 1, sizes = 1, v4 = p.version == 4;
        for (int i = 0; i < p.n; i++) {
            const PackTensor *t = &p.t[i];
            if (!t->prunable) { all &= t->enc == PACK_DENSE; continue; }
            all &= t->enc == PACK_NM && t->nm_n == 2 && t->nm_m == 4 && t->nnz == t->rows * t->cols / 2;
            // values: rows*cols/4*2 of 2 or 4 bytes; index: per row ceil(cols/4*2*2 / 8) bytes
            size_t vb = dt == ST_F32 ? 4 : 2, want = t->rows * t->cols / 2 * vb + t->rows * ((t->cols + 7) / 8);
            sizes &= pack_tensor_bytes(t) == want && t->index_bytes == t->rows * ((t->cols + 7) / 8);
        }
        const PackTensor *down = pack_find(&p, "model.layers.0.mlp.down_proj.weight");
        double ratio = down ? (double)pack_tensor_bytes(down) / (double)(down->rows * down->cols * (dt == ST_F32 ? 4 : 2)) : 0;
        T_OK(all && v4, "%s: every prunable tensor nm 2:4 (--index speed for AVX-512), the others dense, version %d", name, p.version);
        T_OK(sizes, "%s: nm bytes = rows*cols/2 values + rows*ceil(cols/8) index bytes", name);
        T_OK(ratio == (dt == ST_F32 ? 0.53125 : 0.5625), "%s: down_proj (44 x 96) is %.5f of its dense bytes (%s)", name,
             ratio, dt == ST_F32 ? "F32: (2*4 + 1/2) / 16 = 0.53125" : "(2*2 + 1/2) / 8 = 0.5625");
        check_exact(&p, &m, dt, name);
        T_OK(pack_verify(&p) == 0, "%s: pack_verify", name);
        pack_close(&p);
    } else {
        T_OK(0, "%s: pack_open: %s", name, err_msg());
    }
    // forced --index nm at a pattern it does not hold: 2:4 weights are not 1:4, no nm
    char *path14 = tmp_path("nm_1_4.pack");
    pack_plan_pattern(1, 4);
    T_OK(pack_write(path14, &m, QUANT_NONE, INDEX_NM) == 0, "%s: pack_write --pattern 1:4 %s", name, err_msg());
    pack_plan_pattern(0, 0);
    if (pack_open(&p, path14) == 0) {
        int none = 1;
        for (int i = 0; i < p.n; i++) none &= p.t[i].enc != PACK_NM;
        T_OK(none && p.version < 4, "%s: --index nm --pattern 1:4 of a 2:4 model: no tensor nm, version %d", name,
             p.version);
        pack_close(&p);
    }
    free(path14);
    model_free(&m);
    model_unlink_saved(dir);
    free(dir);
    free(path);
}

// The reader's checks of nm: each one-line error names the file and tensor.
static void test_bad_nm(void) {
    char *path = tmp_path("nm_BF16.pack");
    size_t n;
    uint8_t *good = read_file(&n, path);
    int ne;
    Entry *e = entries_of(&ne, good, n);
    Entry *mf = entry(e, ne, "manifest.json");
    const char *q = "model.layers.0.self_attn.q_proj.weight";
    char ixname[128], from[256];
    snprintf(ixname, sizeof ixname, "%s.index", q);
    Entry *ix = entry(e, ne, ixname);
    // q_proj (44 x 44): 968 kept, rows of 6 index bytes; its entry's tail in the manifest
    snprintf(from, sizeof from, "\"encoding\":\"nm\",\"values\":\"BF16\",\"nnz\":968,\"pattern\":[2,4]}");
    static const struct { const char *to, *want, *what; } edits[] = {
        {"\"encoding\":\"nm\",\"values\":\"BF16\",\"nnz\":968,\"pattern\":[4,4]}", "pattern is not [N, M] with 0 < N < M <= 32",
         "pattern 4:4"},
        {"\"encoding\":\"nm\",\"values\":\"BF16\",\"nnz\":968,\"pattern\":[2,33]}", "pattern is not [N, M]", "M = 33"},
        {"\"encoding\":\"nm\",\"values\":\"BF16\",\"nnz\":968,\"pattern\":[0,4]}", "pattern is not [N, M]", "N = 0"},
        {"\"encoding\":\"nm\",\"values\":\"BF16\",\"nnz\":968,\"pattern\":[2]}", "pattern is not [N, M]", "a pattern [2]"},
        {"\"encoding\":\"nm\",\"values\":\"BF16\",\"nnz\":968,\"pattern\":[\"2\",4]}", "pattern is not [N, M]", "N a string"},
        {"\"encoding\":\"nm\",\"values\":\"BF16\",\"nnz\":968,\"pattern\":[2,8]}", "columns M divides", "M = 8 of 44 columns"},
        {"\"encoding\":\"nm\",\"values\":\"BF16\",\"nnz\":967,\"pattern\":[2,4]}", "nnz 967, but nm 2:4 of 44 x 44 stores 968",
         "nnz one short"},
        {"\"encoding\":\"nm\",\"values\":\"BF16\",\"nnz\":968}", "a pattern goes with encoding nm", "nm without a pattern"},
        {"\"encoding\":\"nm\",\"values\":\"BF16\",\"nnz\":484,\"pattern\":[1,4]}", "index has 264 bytes, want 132",
         "1:4 with 2:4's index"},
        {"\"encoding\":\"nm\",\"values\":\"BF16\",\"nnz\":968,\"pattern\":[2,4],\"extra\":1}", "unknown keys", "an extra key"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof *edits; i++) {
        edit(mf, from, edits[i].to);
        char what[96];
        snprintf(what, sizeof what, "nm: %s", edits[i].what);
        expect_bad(e, ne, edits[i].want, what);
        edit(mf, edits[i].to, from);
    }
    edit(mf, "\"version\":4,", "\"version\":3,");
    expect_bad(e, ne, "unknown encoding nm (format version 3)", "nm in a version 3 pack");
    edit(mf, "\"version\":3,", "\"version\":4,");
    const char *norm = "\"encoding\":\"dense\",\"values\":\"BF16\",\"nnz\":44}"; // the first: a layernorm's
    const char *norm_pat = "\"encoding\":\"dense\",\"values\":\"BF16\",\"nnz\":44,\"pattern\":[2,4]}";
    edit(mf, norm, norm_pat);
    expect_bad(e, ne, "a pattern goes with encoding nm and only with it (dense)", "a pattern on a dense tensor");
    edit(mf, norm_pat, norm);
    uint8_t b0 = ix->data[0], b5 = ix->data[5];
    ix->data[0] = (uint8_t)((b0 & 0xF0) | 0x5); // group 0: positions 1 and 1
    expect_bad(e, ne, "nm row 0 group 0: position 1 out of order or range (2:4)", "nm: a position twice");
    ix->data[0] = (uint8_t)((b0 & 0xF0) | 0x1); // positions 1 then 0
    expect_bad(e, ne, "nm row 0 group 0: position 0 out of order", "nm: positions decreasing");
    ix->data[0] = b0;
    ix->data[5] = (uint8_t)(b5 | 0x80); // row 0's bits 44..47 are padding
    expect_bad(e, ne, "nm row 0: padding bits after its positions are not zero", "nm: a padding bit set");
    ix->data[5] = b5;
    size_t n2;
    uint8_t *same = tar_build(&n2, e, ne);
    Pack p;
    T_OK(pack_open_mem(&p, same, n2, "nm.pack") == 0, "restored, the nm pack opens again: %s", err_msg());
    pack_close(&p);
    free(same);
    test_flips(good, n, "nm");
    entries_free(e, ne);
    free(good);
    free(path);
}

// pack_tensor_encodings: every prunable tensor of the tiny model, packed in each encoding,
// re-encoded in memory in every other: the same weights bit for bit, the same product to
// rounding (against the dense product in double); quantized values are refused (1).
static void test_reencode(StDtype dt) {
    char *dir = tmp_path("tiny_reenc"), *path = tmp_path("tiny_reenc.pack");
    Model m;
    tiny_model(&m, dir, dt);
    static const PackIndex FROM[] = {INDEX_BITMAP, INDEX_DELTA, INDEX_TILES, INDEX_SELL, INDEX_SIZE};
    int tried = 0, made = 0, exact = 1, close = 1, encs[PACK_N_ENC] = {0};
    for (size_t f = 0; f < sizeof FROM / sizeof *FROM; f++) {
        CHECK(pack_write(path, &m, QUANT_NONE, FROM[f]) == 0, "pack_write: %s", err_msg());
        Pack p;
        CHECK(pack_open(&p, path) == 0, "pack_open: %s", err_msg());
        for (int i = 0; i < p.n; i++) {
            const PackTensor *t = &p.t[i];
            if (!t->prunable) continue;
            float *want = decode_all(t), *x = xmalloc(t->cols * sizeof *x), *y = xmalloc(t->rows * sizeof *y);
            for (size_t c = 0; c < t->cols; c++) x[c] = (float)unif() - 0.5f;
            PackTensor cs[PACK_N_ENC];
            void *ms[PACK_N_ENC];
            int n_made = pack_tensor_encodings(cs, ms, t, 0, ~0u), counted = 0;
            for (int e = 0; e < PACK_N_ENC; e++) {
                tried++;
                if (!ms[e]) continue;
                made++, counted++;
                const PackTensor c = cs[e];
                encs[c.enc]++;
                float *got = decode_all(&c);
                exact &= c.enc == (PackEnc)e && memcmp(got, want, t->rows * t->cols * sizeof *got) == 0;
                spmv_forward(y, x, &c, NULL, 0);
                for (size_t r = 0; r < t->rows; r++) {
                    double ref = 0, mag = 0;
                    for (size_t k = 0; k < t->cols; k++) {
                        ref += (double)want[r * t->cols + k] * x[k];
                        mag += fabs((double)want[r * t->cols + k] * x[k]);
                    }
                    close &= fabs(y[r] - ref) <= 1e-5 * mag + 1e-30;
                }
                free(got);
                free(ms[e]);
            }
            exact &= n_made == counted && ms[t->enc] != NULL; // (t's own encoding among them)
            free(want), free(x), free(y);
        }
        pack_close(&p);
    }
    T_OK(exact && close && made > 0 && encs[PACK_DENSE] && encs[PACK_BITMAP] && encs[PACK_DELTA] && encs[PACK_TILES] &&
             encs[PACK_SELL],
         "%s: %d of %d re-encodings made (every encoding among them), each decoding to the pack's weights bit for "
         "bit, its product within 1e-5 of the dense one", st_dtype_name(dt), made, tried);
    CHECK(pack_write(path, &m, QUANT_INT8, INDEX_BITMAP) == 0, "pack_write: %s", err_msg());
    Pack p;
    CHECK(pack_open(&p, path) == 0, "pack_open: %s", err_msg());
    int refused = 1;
    for (int i = 0; i < p.n; i++) {
        PackTensor c[PACK_N_ENC];
        void *mem[PACK_N_ENC];
        if (p.t[i].prunable) refused &= pack_tensor_encodings(c, mem, &p.t[i], 0, ~0u) == 0 && mem[PACK_TILES] == NULL;
    }
    T_OK(refused, "%s: int8 values are not re-encoded (none made: their scales would change)", st_dtype_name(dt));
    pack_close(&p);
    model_free(&m);
    free(dir);
    free(path);
}

int main(void) {
    snprintf(TMP, sizeof TMP, "/tmp/test_pack.XXXXXX");
    CHECK(mkdtemp(TMP), "mkdtemp");
    test_roundtrip(ST_F32);
    test_roundtrip(ST_F16);
    test_roundtrip(ST_BF16);
    test_quant(QUANT_INT8);
    test_quant(QUANT_INT4);
    test_quant(QUANT_BF16);
    for (int d = 0; d < 3; d++) {
        static const StDtype dts[] = {ST_F32, ST_F16, ST_BF16};
        test_forced(dts[d], INDEX_BITMAP, PACK_BITMAP);
        test_forced(dts[d], INDEX_DELTA, PACK_DELTA);
        test_forced(dts[d], INDEX_TILES, PACK_TILES);
        test_forced(dts[d], INDEX_SELL, PACK_SELL);
    }
    test_tiles();
    test_sizes(INDEX_SIZE, SPMV_AVX512);
    test_sizes(INDEX_SPEED, SPMV_AVX512);
    test_sizes(INDEX_SPEED, SPMV_AVX2);
    pack_plan_isa(spmv_isa());
    test_bad();
    test_bad_tiles();
    test_nm(ST_F32);
    test_nm(ST_F16);
    test_nm(ST_BF16);
    test_bad_nm();
    test_reencode(ST_F32);
    test_reencode(ST_BF16);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", TMP);
    if (getenv("TEST_PACK_KEEP")) printf("# kept %s\n", TMP);
    else if (system(cmd) != 0) printf("# could not remove %s\n", TMP);
    T_DONE();
}
