// best-tokenize: documents -> token shards (or ids as text), and ids -> text.
//
// The command line only: options, the effective configuration on stderr, then
// lib/docs (reading), lib/docbatch (parallel encoding), lib/shard (writing).
// Usage and formats: docs/best-tokenize.md, docs/formats.md.
#include <jansson.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/blas.h"     // defines: blas_init
#include "base/args.h"     // defines: ArgSpec, args_parse
#include "tok/docbatch.h"  // defines: DocBatch, ids_parse_line, ids_format_line
#include "io/docs.h"       // defines: docs_open, docs_next
#include "base/error.h"    // defines: TRY_OR_DIE, DIE
#include "base/fileio.h"   // defines: AFile
#include "base/progress.h" // defines: Progress
#include "io/shard.h"      // defines: ShardWriter, Shard
#include "tok/tokenizer.h" // defines: Tokenizer, TokEncoder

typedef struct {
    const char *tokenizer, *out, *field, *format;
    int ids, decode, jsonl, threads, bos, eos, quiet, batch_docs;
} Opts;

#define BATCH_BYTES (16u << 20)

static uint64_t total_input_bytes(char **inputs, int n) {
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (strcmp(inputs[i], "-") == 0 || stat(inputs[i], &st) != 0 || !S_ISREG(st.st_mode)) return 0;
        total += (uint64_t)st.st_size;
    }
    return total;
}

// Encoding: every document of every input, in order, into a shard or id lines.
static void run_encode(const Opts *o, const Tokenizer *tok, char **inputs, int ninputs) {
    int bos = o->bos < 0 ? (tok->add_bos ? tok->bos_id : -1) : (o->bos ? tok->bos_id : -1);
    int eos = o->eos < 0 ? (tok->add_eos ? tok->eos_id : -1) : (o->eos ? tok->eos_id : -1);
    if (o->bos == 1 && tok->bos_id < 0) DIE("%s: this tokenizer has no BOS token", tok->path);
    if (o->eos == 1 && tok->eos_id < 0) DIE("%s: this tokenizer has no EOS token", tok->path);
    DocFormat fmt = strcmp(o->format, "text") == 0    ? DOC_TEXT
                    : strcmp(o->format, "jsonl") == 0 ? DOC_JSONL
                    : strcmp(o->format, "tar") == 0   ? DOC_TAR
                                                      : DOC_AUTO;

    ShardWriter sw;
    AFile idsf;
    ByteVec line = {0};
    if (o->ids) TRY_OR_DIE(afile_open(&idsf, o->out ? o->out : "-"));
    else TRY_OR_DIE(shard_writer_open(&sw, o->out, (uint32_t)tok->vocab_size,
                                      (bos >= 0 ? SHARD_FLAG_BOS : 0) | (eos >= 0 ? SHARD_FLAG_EOS : 0), tok->hash));

    TokEncoder *enc = xcalloc((size_t)o->threads, sizeof *enc);
    for (int t = 0; t < o->threads; t++) tok_encoder_init(&enc[t], tok);
    DocBatch batch = {0};
    Progress pr;
    progress_init(&pr, "tokenize", total_input_bytes(inputs, ninputs), "B", o->quiet);
    uint64_t bytes_before = 0, ntokens = 0, ndocs = 0;
    for (int f = 0; f < ninputs; f++) {
        DocReader *dr;
        TRY_OR_DIE(docs_open(&dr, inputs[f], o->field, fmt));
        docs_set_threads(dr, o->threads); // Parquet: row groups decoded in parallel
        for (int more = 1; more;) {
            const char *text;
            size_t len;
            docbatch_clear(&batch);
            while (batch.n < (size_t)o->batch_docs && batch.text.n < BATCH_BYTES) {
                int rc = docs_next(dr, &text, &len);
                TRY_OR_DIE(rc);
                if (rc == 0) { more = 0; break; }
                docbatch_add(&batch, text, len);
            }
            TRY_OR_DIE(docbatch_encode(&batch, enc, o->threads, bos, eos));
            for (size_t i = 0; i < batch.n; i++) {
                const IdVec *v = &batch.ids[i];
                if (o->ids) {
                    line.n = 0;
                    ids_format_line(&line, v->v, v->n);
                    if (fwrite(line.v, 1, line.n, idsf.fp) != line.n) DIE("%s: write failed", idsf.path);
                } else {
                    TRY_OR_DIE(shard_writer_add_doc(&sw, v->v, v->n));
                }
                ntokens += v->n;
            }
            ndocs += batch.n;
            snprintf(pr.extra, sizeof pr.extra, "%llu docs, %llu tokens", (unsigned long long)ndocs,
                     (unsigned long long)ntokens);
            progress_update(&pr, bytes_before + docs_bytes_read(dr));
        }
        bytes_before += docs_bytes_read(dr);
        if (docs_nulls(dr) && !o->quiet)
            fprintf(stderr, "best-tokenize: %s: %llu null rows of column %s skipped\n", inputs[f],
                    (unsigned long long)docs_nulls(dr), o->field);
        docs_close(dr);
    }
    progress_finish(&pr);
    if (o->ids) TRY_OR_DIE(afile_commit(&idsf));
    else TRY_OR_DIE(shard_writer_close(&sw));
    if (!o->quiet && !o->ids)
        fprintf(stderr, "best-tokenize: wrote %s: %llu documents, %llu tokens\n", o->out,
                (unsigned long long)ndocs, (unsigned long long)ntokens);
    for (int t = 0; t < o->threads; t++) tok_encoder_free(&enc[t]);
    free(enc);
    docbatch_free(&batch);
    bytevec_free(&line);
}

// Decodes one document and writes it as one line; errors name where the ids came from.
// With jsonl each document is written as {"text": "..."}, which keeps newlines inside
// documents unambiguous.
static void write_text(AFile *out, const Tokenizer *tok, ByteVec *text, const int32_t *ids, size_t n,
                       const char *name, unsigned long long line, int jsonl) {
    text->n = 0;
    if (tok_decode(tok, text, ids, n) < 0) {
        err_prefix("%s:%llu", name, line);
        die_err();
    }
    if (jsonl) {
        json_t *obj = json_pack("{s:s%}", "text", text->v ? text->v : "", text->n);
        char *js = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
        if (!js) DIE("%s:%llu: decoded text is not valid UTF-8, cannot write it as JSON", name, line);
        text->n = 0;
        bytevec_append(text, js, strlen(js));
        free(js);
        json_decref(obj);
    }
    bytevec_push(text, '\n');
    if (fwrite(text->v, 1, text->n, out->fp) != text->n) DIE("%s: write failed", out->path);
}

// Decoding: id lines (one document per line) or shards back to text, one document per line.
static void run_decode(const Opts *o, const Tokenizer *tok, char **inputs, int ninputs) {
    AFile out;
    TRY_OR_DIE(afile_open(&out, o->out ? o->out : "-"));
    IdVec ids = {0};
    ByteVec text = {0};
    for (int f = 0; f < ninputs; f++) {
        FILE *in; // read once: a pipe or a FIFO cannot be opened again after the sniff
        int is_shard = shard_sniff(inputs[f], &in);
        TRY_OR_DIE(is_shard);
        if (is_shard) {
            Shard s;
            TRY_OR_DIE(shard_open(&s, inputs[f]));
            if (s.h.tokenizer_hash != tok->hash)
                DIE("%s: this shard was made by another tokenizer than %s (hash %016llx, not %016llx)",
                    inputs[f], tok->path, (unsigned long long)s.h.tokenizer_hash, (unsigned long long)tok->hash);
            // Documents are delimited by the tokens the shard's flags name; those
            // delimiters are not part of the text.
            int32_t *all = xmalloc(s.h.ntokens * sizeof *all + 1);
            shard_read(&s, all, 0, s.h.ntokens);
            int by_eos = s.h.flags & SHARD_FLAG_EOS, by_bos = s.h.flags & SHARD_FLAG_BOS;
            size_t a = 0, N = s.h.ntokens;
            unsigned long long doc = 0;
            for (size_t i = 0; i <= N; i++) {
                int end = i == N ? a < N
                        : by_eos ? all[i] == tok->eos_id
                        : by_bos && all[i] == tok->bos_id && i > a;
                if (!end) continue;
                size_t d = a + (by_bos && a < i && all[a] == tok->bos_id);
                write_text(&out, tok, &text, all + d, i - d, inputs[f], ++doc, o->jsonl);
                a = by_eos ? i + 1 : i;
            }
            free(all);
            shard_close(&s);
            continue;
        }
        char *buf = NULL;
        size_t cap = 0;
        ssize_t n;
        unsigned long long lineno = 0;
        while ((n = getline(&buf, &cap, in)) >= 0) {
            lineno++;
            if (n > 0 && buf[n - 1] == '\n') n--;
            ids.n = 0;
            TRY_OR_DIE(ids_parse_line(&ids, buf, (size_t)n, inputs[f], lineno));
            write_text(&out, tok, &text, ids.v, ids.n, inputs[f], lineno, o->jsonl);
        }
        free(buf);
        if (in != stdin) fclose(in);
    }
    TRY_OR_DIE(afile_commit(&out));
    idvec_free(&ids);
    bytevec_free(&text);
}

int main(int argc, char **argv) {
    blas_init(argv);
    Opts o = {.field = "text", .format = "auto", .threads = 0, .bos = -1, .eos = -1, .batch_docs = 4096};
    const Option opts[] = {
        {"tokenizer", OPT_STRING, &o.tokenizer, "PATH", "tokenizer.model, tokenizer.json, vocab.json, or a folder holding one (required)"},
        {"out", OPT_STRING, &o.out, "FILE", "output: a token shard, or with --ids/--decode a text file (default stdout)"},
        {"ids", OPT_FLAG, &o.ids, NULL, "print ids as text, one document per line, instead of writing a shard"},
        {"decode", OPT_FLAG, &o.decode, NULL, "turn ids (lines of ids, or shards) back into text, one document per line"},
        {"jsonl", OPT_FLAG, &o.jsonl, NULL, "with --decode: write each document as a JSON line {\"text\": ...}"},
        {"field", OPT_STRING, &o.field, "NAME", "JSON field that holds a document's text"},
        {"format", OPT_STRING, &o.format, "auto|text|jsonl|tar", "how to read inputs: by file name (auto), whole file, JSON lines, "
                                                                  "or as a tar whatever the name (stdin), members by name"},
        {"threads", OPT_INT, &o.threads, "N", "threads for encoding; 0 = all cores, at most 4 per core (output is the same for any N)"},
        {"bos", OPT_FLAG, &o.bos, NULL, "put BOS before each document (LLaMA's default)"},
        {"no-bos", OPT_FLAG_OFF, &o.bos, NULL, "no BOS before documents"},
        {"eos", OPT_FLAG, &o.eos, NULL, "put EOS (<|endoftext|>) after each document (Qwen's default)"},
        {"no-eos", OPT_FLAG_OFF, &o.eos, NULL, "no EOS after documents"},
        {"batch-docs", OPT_INT, &o.batch_docs, "N", "documents encoded together per batch (memory bound)"},
        {"quiet", OPT_FLAG, &o.quiet, NULL, "nothing on stderr but warnings and errors"},
        {0},
    };
    const ArgSpec spec = {
        "best-tokenize", "--tokenizer PATH [--out SHARD] [--ids | --decode] [options] [INPUT... | -]",
        "Tokenizes documents (.txt, .jsonl/.json, .gz, .zst, .tar of those; - or nothing for stdin)\n"
        "into a token shard, or prints their ids with --ids; --decode does the reverse.\n"
        "Ids equal those of sentencepiece (LLaMA) or Hugging Face tokenizers (Qwen, GPT-2).",
        opts,
    };
    char **inputs;
    int ninputs = args_parse(&inputs, &spec, argc, argv);
    if (!o.tokenizer) args_usage_error(&spec, "--tokenizer is required");
    if (o.ids && o.decode) args_usage_error(&spec, "--ids and --decode exclude each other");
    if (!o.ids && !o.decode && !o.out) args_usage_error(&spec, "say where the shard goes with --out FILE, or print ids with --ids");
    if (strcmp(o.format, "auto") && strcmp(o.format, "text") && strcmp(o.format, "jsonl") && strcmp(o.format, "tar"))
        args_usage_error(&spec, "--format must be auto, text, jsonl or tar");
    if (o.batch_docs < 1) args_usage_error(&spec, "--batch-docs must be positive");
    o.threads = args_threads(&spec, o.threads);
    static char *stdin_only[] = {"-", NULL};
    if (ninputs == 0) {
        if (isatty(0)) args_usage_error(&spec, "no input files (give files, or - for stdin)");
        inputs = stdin_only;
        ninputs = 1;
    }

    // the output is none of the inputs (each output's writer checks: before it writes)
    path_note_input(o.tokenizer);
    for (int i = 0; i < ninputs; i++) path_note_input(inputs[i]);
    Tokenizer tok;
    TRY_OR_DIE(tokenizer_load(&tok, o.tokenizer));
    if (!o.quiet)
        fprintf(stderr, "best-tokenize: %s (%s, vocab %d, bos %d, eos %d), %d input%s, %d thread%s\n",
                o.tokenizer, tok.kind == TOK_SPM ? "sentencepiece BPE" : "byte-level BPE", tok.vocab_size,
                tok.bos_id, tok.eos_id, ninputs, ninputs == 1 ? "" : "s", o.threads, o.threads == 1 ? "" : "s");
    if (o.decode) run_decode(&o, &tok, inputs, ninputs);
    else run_encode(&o, &tok, inputs, ninputs);
    tokenizer_free(&tok);
    if (inputs != stdin_only) free(inputs);
    TRY_OR_DIE(stdout_close()); // a lost result (a full disk) is an error
    return 0;
}
