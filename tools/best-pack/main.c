// best-pack: a sparse Hugging Face model to one packed checkpoint (an uncompressed,
// mmappable tar), and back; per-tensor information and checksum verification.
//
// The command line only: options, the effective configuration on stderr, then
// lib/model (loading) and lib/pack (writing, reading, verifying, unpacking). The pack
// is written through temp + rename; an unpacked folder file by file the same way.
// Usage: docs/best-pack.md; the format: docs/formats.md, "Packed checkpoints".
#include <dirent.h>
#include <jansson.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/blas.h"       // defines: blas_init
#include "base/args.h"       // defines: ArgSpec, args_parse
#include "base/error.h"      // defines: TRY_OR_DIE
#include "base/fileio.h"     // defines: path_check_out_file, path_check_out_dir
#include "nn/model.h"        // defines: Model
#include "pack/pack.h"       // defines: Pack, pack_open, pack_verify
#include "pack/pack_model.h" // defines: model_open, pack_check_model
#include "pack/pack_write.h" // defines: pack_write, pack_unpack
#include "base/progress.h"   // defines: now_seconds, human_units, human_count
#include "sparse/nm.h"       // defines: nm_parse, NM_MAX

typedef struct {
    const char *model, *out, *unpack, *info, *verify, *quant, *index, *isa, *pattern;
    int json, quiet;
} Opts;

// Bytes of the weights files (*.safetensors) of a model folder: what the pack replaces.
static size_t folder_weight_bytes(const char *dir) {
    size_t total = 0;
    DIR *d = dir ? opendir(dir) : NULL;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n < 12 || strcmp(e->d_name + n - 12, ".safetensors") != 0) continue;
        char *p = path_join(dir, e->d_name);
        struct stat st;
        if (stat(p, &st) == 0) total += (size_t)st.st_size;
        free(p);
    }
    if (d) closedir(d);
    return total;
}

static const char *quant_name(PackQuant q) { return (const char *[]){"none", "bf16", "int8", "int4"}[q]; }

static void print_info(const Pack *p, const char *path, int json) {
    PackTotals pr;
    pack_prunable_totals(&pr, p);
    size_t all_bytes = 0;
    json_t *root = json_object(), *ts = json_array();
    if (!json)
        printf("%-48s %-11s %8s %-6s %-4s %12s %8s\n", "tensor", "shape", "sparsity", "enc", "val", "bytes", "bits/nz");
    for (int i = 0; i < p->n; i++) {
        const PackTensor *t = &p->t[i];
        size_t numel = t->rows * t->cols, nz = pack_tensor_nonzeros(t), bytes = pack_tensor_bytes(t);
        double sp = numel ? 1.0 - (double)nz / (double)numel : 0;
        if (json) {
            json_t *o = json_object(), *shape = json_array();
            for (int d = 0; d < t->ndim; d++) json_array_append_new(shape, json_integer(t->shape[d]));
            json_object_set_new(o, "name", json_string(t->name));
            json_object_set_new(o, "shape", shape);
            json_object_set_new(o, "prunable", json_boolean(t->prunable));
            json_object_set_new(o, "encoding", json_string(pack_enc_name(t->enc)));
            json_object_set_new(o, "values", json_string(pack_val_name(t->val)));
            json_object_set_new(o, "stored", json_integer((json_int_t)t->nnz));
            json_object_set_new(o, "nonzeros", json_integer((json_int_t)nz));
            json_object_set_new(o, "sparsity", json_real(sp));
            json_object_set_new(o, "bytes", json_integer((json_int_t)bytes));
            json_object_set_new(o, "bits_per_nonzero", json_real(pack_bits_per_nonzero(bytes, nz)));
            json_array_append_new(ts, o);
        } else {
            char shape[48];
            if (t->ndim == 2) snprintf(shape, sizeof shape, "%lldx%lld", (long long)t->shape[0], (long long)t->shape[1]);
            else snprintf(shape, sizeof shape, "%lld", (long long)t->shape[0]);
            printf("%-48s %-11s %7.2f%% %-6s %-4s %12zu %8.2f\n", t->name, shape, 100 * sp, pack_enc_name(t->enc),
                   pack_val_name(t->val), bytes, pack_bits_per_nonzero(bytes, nz));
        }
        all_bytes += bytes;
    }
    // The yardstick: the prunable weights stored dense in bf16.
    double ratio = pr.numel ? (double)pr.bytes / (2.0 * (double)pr.numel) : 0;
    double sp = pr.numel ? 1.0 - (double)pr.nonzeros / (double)pr.numel : 0;
    if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "numel", json_integer((json_int_t)pr.numel));
        json_object_set_new(o, "nonzeros", json_integer((json_int_t)pr.nonzeros));
        json_object_set_new(o, "sparsity", json_real(sp));
        json_object_set_new(o, "bytes", json_integer((json_int_t)pr.bytes));
        json_object_set_new(o, "bits_per_nonzero", json_real(pack_bits_per_nonzero(pr.bytes, pr.nonzeros)));
        json_object_set_new(o, "ratio_to_dense_bf16", json_real(ratio));
        json_object_set_new(root, "file", json_string(path));
        json_object_set_new(root, "version", json_integer(p->version));
        json_object_set_new(root, "quant", json_string(quant_name(p->quant)));
        json_object_set_new(root, "bytes", json_integer((json_int_t)p->map.size));
        json_object_set_new(root, "members", json_integer(p->n_members));
        json_object_set_new(root, "tensor_bytes", json_integer((json_int_t)all_bytes));
        json_object_set_new(root, "prunable", o);
        json_object_set_new(root, "tensors", ts);
        ts = NULL;
        char *text = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(6));
        CHECK(text, "best-pack: cannot serialise the report");
        printf("%s\n", text);
        free(text);
    } else {
        printf("prunable: %zu weights, sparsity %.2f%%, %zu bytes, %.2f bits per nonzero, %.4f of dense bf16\n",
               pr.numel, 100 * sp, pr.bytes, pack_bits_per_nonzero(pr.bytes, pr.nonzeros), ratio);
        printf("file: %zu bytes, %d members, %d tensors (%zu bytes of tensor data), quant %s\n", p->map.size,
               p->n_members, p->n, all_bytes, quant_name(p->quant));
    }
    json_decref(ts);
    json_decref(root);
}

int main(int argc, char **argv) {
    blas_init(argv);
    Opts o = {.quant = "none", .index = "speed"};
    const Option opts[] = {
        {"model", OPT_STRING, &o.model, "DIR", "Hugging Face model folder to pack (with --out)"},
        {"out", OPT_STRING, &o.out, "PATH", "the pack to write, or the folder --unpack writes"},
        {"quant", OPT_STRING, &o.quant, "NAME", "values of prunable tensors: none (the model's dtype), bf16, int8, int4"},
        {"isa", OPT_STRING, &o.isa, "SET", "--index speed plans for the kernels of this set: avx512, avx2 or "
                                           "portable (default: this machine's)"},
        {"index", OPT_STRING, &o.index, "RULE", "encoding of prunable tensors: speed (default), size, or always bitmap, delta, tiles, sell "
                                                "(not for int8/int4), nm (N:M tensors), dense (zeros stored: a dense model for the same kernels)"},
        {"pattern", OPT_STRING, &o.pattern, "N:M", "nm holds exactly this pattern (best-mask --pattern's); default: each "
                                                   "tensor's own, N the most any group of M holds, M from 2 to 32"},
        {"unpack", OPT_STRING, &o.unpack, "PACK", "restore a Hugging Face folder (--out DIR) from a pack"},
        {"info", OPT_STRING, &o.info, "PACK", "per-tensor sparsity, encoding, bytes and bits per nonzero"},
        {"verify", OPT_STRING, &o.verify, "PACK", "check every member's xxh64 against the manifest"},
        {"json", OPT_FLAG, &o.json, NULL, "--info as one JSON object"},
        {"quiet", OPT_FLAG, &o.quiet, NULL, "nothing on stderr but warnings and errors"},
        {0},
    };
    const ArgSpec spec = {
        "best-pack",
        "--model DIR --out PACK [--quant none|bf16|int8|int4] [--index speed|size|bitmap|delta|tiles|sell|nm|dense]\n"
        "       [--pattern N:M]\n"
        "       | --unpack PACK --out DIR | --info PACK [--json] | --verify PACK",
        "Packs a sparse model into one uncompressed tar: per tensor its nonzeros (a bitmap,\n"
        "delta, tiles or sell index, or for N:M tensors N values and positions per group of M,\n"
        "the one that decodes fastest, or with --index size the smallest) and their values in the model's dtype, or bf16, or int8/int4 with one\n"
        "scale per row. Unpacking gives back the Hugging Face folder (bit-identical without\n"
        "quantization).",
        opts,
    };
    char **pos;
    int npos = args_parse(&pos, &spec, argc, argv);
    free(pos);
    if (npos) args_usage_error(&spec, "unexpected argument");
    int modes = !!o.model + !!o.unpack + !!o.info + !!o.verify;
    if (modes != 1) args_usage_error(&spec, "give exactly one of --model, --unpack, --info, --verify");
    if ((o.model || o.unpack) && !o.out) args_usage_error(&spec, "--%s needs --out", o.model ? "model" : "unpack");
    if ((o.info || o.verify) && o.out) args_usage_error(&spec, "--out goes with --model or --unpack");
    PackQuant quant;
    if (pack_quant_parse(&quant, o.quant) < 0)
        args_usage_error(&spec, "unknown --quant %s (none, bf16, int8, int4)", o.quant);
    if (quant != QUANT_NONE && !o.model) args_usage_error(&spec, "--quant goes with --model");
    PackIndex index;
    if (pack_index_parse(&index, o.index) < 0)
        args_usage_error(&spec, "unknown --index %s (speed, size, bitmap, delta, tiles, sell, nm, dense)", o.index);
    if (index != INDEX_SPEED && !o.model) args_usage_error(&spec, "--index goes with --model");
    if (o.isa) {
        SpmvIsa isa;
        if (spmv_isa_parse(&isa, o.isa) < 0) args_usage_error(&spec, "unknown --isa %s (avx512, avx2, portable)", o.isa);
        if (index != INDEX_SPEED || !o.model) args_usage_error(&spec, "--isa goes with --model and --index speed");
        pack_plan_isa(isa);
    }
    if (o.json && !o.info) args_usage_error(&spec, "--json goes with --info");
    if (o.pattern) {
        NMPattern pat;
        if (nm_parse(&pat, o.pattern) < 0 || pat.m == 0)
            args_usage_error(&spec, "--pattern %s: N:M with 0 < N < M <= %d (2:4, 4:8)", o.pattern, NM_MAX);
        if (!o.model) args_usage_error(&spec, "--pattern goes with --model");
        pack_plan_pattern((unsigned)pat.n, (unsigned)pat.m);
    }

    // the output can be written, and is none of the inputs, before the work
    path_note_input(o.model ? o.model : o.unpack ? o.unpack : o.info ? o.info : o.verify);
    if (o.model) TRY_OR_DIE(path_check_out_file(o.out, NULL));
    if (o.unpack) TRY_OR_DIE(path_check_out_dir(o.out));
    if (o.unpack) TRY_OR_DIE(model_check_save_dir(o.out)); // a model folder: never mixed with foreign files

    double t0 = now_seconds();
    if (o.model) {
        Model m;
        TRY_OR_DIE(model_open(&m, o.model));
        TRY_OR_DIE(model_need_folder(&m, "best-pack"));
        if (!o.quiet) {
            char np[32], npr[32];
            human_count(npr, sizeof npr, (double)m.n_prunable);
            human_count(np, sizeof np, (double)m.n_params);
            fprintf(stderr, "best-pack: %s (%s, %s prunable of %s parameters) -> %s, quant %s\n", o.model,
                    st_dtype_name(m.dtype), npr, np, o.out, o.quant);
        }
        PackWriteStats ws;
        TRY_OR_DIE(pack_write_stats(&ws, o.out, &m, quant, index));
        size_t in_bytes = folder_weight_bytes(m.src_dir);
        model_free(&m);
        if (!o.quiet && strcmp(o.out, "-") != 0) {
            Pack p;
            TRY_OR_DIE(pack_open(&p, o.out));
            PackTotals pr;
            pack_prunable_totals(&pr, &p);
            char packed[32], folder[32], prunable[32];
            human_units(packed, sizeof packed, (double)p.map.size, "B");
            human_units(folder, sizeof folder, (double)in_bytes, "B");
            human_units(prunable, sizeof prunable, (double)pr.bytes, "B");
            // against the input folder first (what the user holds), then the prunable weights
            // against dense bf16, and their bits per nonzero (--info's figure)
            fprintf(stderr, "best-pack: wrote %s: %s, %.3f of the folder's weights (%s); prunable weights %s, %.4f of "
                    "dense bf16, %.2f bits per nonzero; %.2fs\n", o.out, packed,
                    in_bytes ? (double)p.map.size / (double)in_bytes : 0, folder, prunable,
                    pr.numel ? (double)pr.bytes / (2.0 * (double)pr.numel) : 0,
                    pack_bits_per_nonzero(pr.bytes, pr.nonzeros), now_seconds() - t0);
            // a plan for speed that costs bytes says how many (more than 0.1%)
            if (ws.prunable_bytes > 1.001 * ws.prunable_bytes_size) {
                char size[32];
                human_units(size, sizeof size, ws.prunable_bytes_size, "B");
                fprintf(stderr, "best-pack: note: --index %s stores the prunable weights %.1f%% larger than --index "
                        "size would (%s): encodings that decode faster on this CPU (docs/best-pack.md)\n", o.index,
                        100.0 * (ws.prunable_bytes / ws.prunable_bytes_size - 1.0), size);
            }
            if (pr.numel && pr.nonzeros == pr.numel)
                fprintf(stderr, "best-pack: note: %s: no prunable weight is zero (a dense model): the pack saves "
                        "nothing over the folder; prune it first (best-mask --apply, best-train --sparsity)\n", o.out);
            pack_close(&p);
        }
        TRY_OR_DIE(stdout_close()); // a lost result (a full disk) is an error
        return 0;
    }
    Pack p;
    const char *path = o.unpack ? o.unpack : o.info ? o.info : o.verify;
    if (strcmp(path, "-") == 0) // (--model --out - writes a pack to stdout; reading one needs its map)
        DIE("-: a pack is read from its file (it is memory-mapped, its manifest at the start points into it): "
            "give the path, not stdin");
    TRY_OR_DIE(pack_open(&p, path));
    if (o.verify) {
        TRY_OR_DIE(pack_check_model(&p)); // all that model_open checks, then the hashes
        TRY_OR_DIE(pack_verify(&p));
        printf("%s: ok, %d members, %zu bytes checked\n", path, p.n_members, p.map.size);
    } else if (o.info) {
        print_info(&p, path, o.json);
    } else {
        TRY_OR_DIE(pack_verify(&p)); // never unpack bytes that do not match their checksum
        TRY_OR_DIE(pack_unpack(o.out, &p));
        if (!o.quiet)
            fprintf(stderr, "best-pack: %s -> %s (%d tensors) in %.2fs\n", path, o.out, p.n, now_seconds() - t0);
    }
    pack_close(&p);
    TRY_OR_DIE(stdout_close()); // a lost result (a full disk) is an error
    return 0;
}
