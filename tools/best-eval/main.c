// best-eval: perplexity of a model on token shards or text, and text generation.
//
// The command line only: options, the effective configuration on stderr, then
// lib/model (loading a folder or a packed checkpoint), lib/tokenizer + lib/docs (text
// input), lib/eval (windows, sampling). Usage: docs/best-eval.md.
#include <jansson.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/blas.h"       // defines: blas_init
#include "base/args.h"       // defines: ArgSpec, args_parse, args_threads
#include "io/docs.h"         // defines: docs_open_file, docs_next
#include "base/cuda.h"         // defines: cuda_info
#include "engine/engine.h"       // defines: Engine, engine_open
#include "base/error.h"      // defines: TRY_OR_DIE, DIE
#include "run/eval.h"        // defines: eval_perplexity, eval_generate
#include "pack/pack_model.h" // defines: model_open, pack_model_file, model_dense_store
#include "pack/pack_tune.h"  // defines: pack_model_tune, pack_tune_enabled
#include "pack/spmv.h"       // defines: spmv_isa, spmv_isa_name
#include "base/fileio.h"     // defines: path_is_dir, path_join
#include "base/progress.h"   // defines: Progress, now_seconds, human_count
#include "io/shard.h"        // defines: Shard, shard_sniff
#include "tok/tokenizer.h"   // defines: Tokenizer
#include "base/utf8.h"       // defines: utf8_repair, utf8_valid
#include "base/sha256.h"   // defines: sha256_hex
#include "run/gsm8k.h"    // defines: Gsm8kTask, gsm8k_load, gsm8k_generate
#include "run/tasks.h"       // defines: Task, task_load, task_known
#include "run/zeroshot.h"    // defines: zeroshot_score, zeroshot_metrics

typedef struct {
    const char *model, *data, *tokenizer, *generate, *tasks, *task_dir, *join, *device, *log_samples;
    int seq, max_tokens, batch, json, quiet, threads, max_new_tokens, seed, limit, num_fewshot, any_tokenizer;
    double temperature, top_p;
    StrList datas;   // every --data (data is the first): several must be token shards, read in order
} Opts;

// How the evaluated tokens were made (printed with the perplexity: the same documents give
// other numbers under another protocol).
typedef struct {
    int shard;               // a token shard as it is (else text tokenized here)
    uint64_t docs;           // documents (of the shard's header, or read from the text)
    int bos_each, eos_each;  // shard: BOS before / EOS after every document (its flags)
    int bos_once;            // text: one BOS at the start (LLaMA's tokenizer adds it)
    const char *join;        // text: the string between documents
    uint64_t tokenizer_hash; // of the shard's header, or of the tokenizer used
} Protocol;

// The tokenizer: --tokenizer, else the model folder's, else the one inside a packed
// checkpoint; its ids must all be ids of the model: errors name where it came from.
static void load_tokenizer(Tokenizer *tok, const Opts *o, const Model *m) {
    if (o->tokenizer) TRY_OR_DIE(tokenizer_load(tok, o->tokenizer));
    else TRY_OR_DIE(tokenizer_of_model(tok, m, o->model)); // the folder's, or the pack's (read from its map)
    const char *from = o->tokenizer ? o->tokenizer : m->src_dir ? m->src_dir : o->model;
    if (tok->vocab_size > (int32_t)m->V)
        DIE("%s: tokenizer vocab %d is larger than the model's %zu (another model's tokenizer?)", from,
            tok->vocab_size, m->V);
}

// A shard made by another tokenizer than the model's has ids that mean other tokens: its
// perplexity is a number about nothing. Refused (exit 1) unless --any-tokenizer.
static void check_shard_tokenizer(const Opts *o, const Model *m, uint64_t shard_hash) {
    if (o->any_tokenizer || shard_hash == 0) return; // 0: a shard of an older build
    if (!o->tokenizer && !model_has_tokenizer(m)) {
        if (!o->quiet)
            fprintf(stderr, "best-eval: note: %s has no tokenizer files: the shard's tokenizer (%016llx) is not "
                    "checked against the model's\n", o->model, (unsigned long long)shard_hash);
        return;
    }
    Tokenizer tok;
    load_tokenizer(&tok, o, m);
    uint64_t h = tok.hash;
    tokenizer_free(&tok);
    if (h != shard_hash)
        DIE("%s: made by tokenizer %016llx, but the model's tokenizer (%s) is %016llx: its ids would mean other "
            "tokens (re-tokenize the text with best-tokenize --tokenizer %s, or pass --any-tokenizer)", o->data,
            (unsigned long long)shard_hash, o->tokenizer ? o->tokenizer : o->model, (unsigned long long)h,
            o->tokenizer ? o->tokenizer : o->model);
}

// The evaluation tokens: a shard as it is, or text tokenized once. Documents of a
// text input are joined with o->join (" ", as SparseGPT/Wanda join C4 documents)
// and get one BOS at the start for LLaMA, none for Qwen.
static void load_tokens(IdVec *ids, Protocol *pr, const Opts *o, const Model *m) {
    memset(pr, 0, sizeof *pr);
    FILE *in; // read once: a pipe or a FIFO cannot be opened again after the sniff
    int is_shard = shard_sniff(o->data, &in);
    TRY_OR_DIE(is_shard);
    if (!is_shard && o->datas.n > 1) // (in: the exit closes it)
        DIE("%s: several --data are token shards, read one after the other; this one is text (best-tokenize makes a "
            "shard of it)", o->data);
    if (is_shard) { // each shard's tokens in order, as best-train reads several: one tokenizer, one protocol
        uint32_t flags = 0;
        for (int i = 0; i < o->datas.n; i++) {
            const char *path = o->datas.v[i];
            Shard s;
            TRY_OR_DIE(shard_open(&s, path));
            if (s.h.vocab_size > m->V)
                DIE("%s: shard vocab %u is larger than the model's %zu (another tokenizer?)", path, s.h.vocab_size, m->V);
            check_shard_tokenizer(o, m, s.h.tokenizer_hash);
            uint32_t f = s.h.flags & (SHARD_FLAG_BOS | SHARD_FLAG_EOS);
            if (i == 0) {
                flags = f;
                *pr = (Protocol){1, 0, !!(f & SHARD_FLAG_BOS), !!(f & SHARD_FLAG_EOS), 0, NULL, s.h.tokenizer_hash};
            } else if (s.h.tokenizer_hash != pr->tokenizer_hash || f != flags) {
                DIE("%s: made with another tokenizer or BOS/EOS setting than %s (tokenizer %016llx, not %016llx): one "
                    "perplexity needs one protocol", path, o->data, (unsigned long long)s.h.tokenizer_hash,
                    (unsigned long long)pr->tokenizer_hash);
            }
            pr->docs += s.h.ndocs;
            size_t n = s.h.ntokens;
            if (o->max_tokens > 0 && ids->n + n > (size_t)o->max_tokens) n = (size_t)o->max_tokens - ids->n;
            idvec_reserve(ids, n);
            shard_read(&s, ids->v + ids->n, 0, n);
            ids->n += n;
            shard_close(&s);
            if (o->max_tokens > 0 && ids->n >= (size_t)o->max_tokens) break;
        }
        return;
    }
    Tokenizer tok;
    load_tokenizer(&tok, o, m);
    DocReader *dr;
    TRY_OR_DIE(docs_open_file(&dr, o->data, in, "text", DOC_AUTO));
    ByteVec text = {0};
    const char *d;
    size_t len;
    int rc = 0, ndocs = 0;
    // With --max-tokens only a prefix is needed: stop reading once the text is
    // surely long enough (no tokenizer here makes a token of more than 64 bytes
    // on average), so that a large C4 validation file is not read whole.
    size_t enough = o->max_tokens > 0 ? (size_t)o->max_tokens * 64 : (size_t)-1;
    while (text.n < enough && (rc = docs_next(dr, &d, &len)) == 1) {
        if (ndocs++) bytevec_append(&text, o->join, strlen(o->join));
        bytevec_append(&text, d, len);
    }
    TRY_OR_DIE(rc < 0 ? -1 : 0);
    docs_close(dr);
    if (in != stdin) fclose(in);
    if (tok.add_bos) idvec_push(ids, tok.bos_id);
    *pr = (Protocol){0, (uint64_t)ndocs, 0, 0, tok.add_bos, o->join, tok.hash};
    TokEncoder enc;
    tok_encoder_init(&enc, &tok);
    TRY_OR_DIE(tok_encode(&enc, ids, text.v ? text.v : "", text.n));
    tok_encoder_free(&enc);
    if (o->max_tokens > 0 && ids->n > (size_t)o->max_tokens) ids->n = (size_t)o->max_tokens;
    bytevec_free(&text);
    tokenizer_free(&tok);
}

// The protocol as words: "a token shard of 3 documents, BOS before each" or "text of 3
// documents joined with \"\\n\\n\", one BOS at the start".
static void protocol_text(char *out, size_t cap, const Protocol *p) {
    if (p->shard)
        snprintf(out, cap, "a token shard of %llu documents, %s, %s (tokenizer %016llx)", (unsigned long long)p->docs,
                 p->bos_each ? "BOS before each" : "no BOS", p->eos_each ? "EOS after each" : "no EOS",
                 (unsigned long long)p->tokenizer_hash);
    else {
        json_t *js = json_string(p->join ? p->join : "");
        char *q = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
        snprintf(out, cap, "text of %llu documents joined with %s, %s (tokenizer %016llx)", (unsigned long long)p->docs,
                 q ? q : "?", p->bos_once ? "one BOS at the start" : "no BOS", (unsigned long long)p->tokenizer_hash);
        free(q);
        json_decref(js);
    }
}

static json_t *protocol_json(const Protocol *p) {
    char hash[17];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)p->tokenizer_hash);
    json_t *j = json_pack("{s:s, s:I, s:s, s:s, s:s}", "input", p->shard ? "shard" : "text", "documents",
                          (json_int_t)p->docs, "bos",
                          p->shard ? (p->bos_each ? "before each document" : "none")
                                   : (p->bos_once ? "once at the start" : "none"),
                          "eos", p->shard && p->eos_each ? "after each document" : "none", "tokenizer", hash);
    if (j && !p->shard) json_object_set_new(j, "join", json_string(p->join ? p->join : ""));
    return j;
}

// A JSON number, or null for NaN and inf (which JSON has no spelling for).
static json_t *json_number(double x) { return isfinite(x) ? json_real(x) : json_null(); }

// Perplexity on o->data; returns 0 when it is not a finite number (printed all the same).
static int run_ppl(const Opts *o, Engine *e, const Model *m) {
    int on_cuda = engine_kind(e) == ENGINE_CUDA; // (what is reported)
    double t0 = now_seconds();
    IdVec ids = {0};
    Protocol pc;
    load_tokens(&ids, &pc, o, m);
    if (ids.n < 2) // not --seq's fault: the data has no token to predict
        DIE("%s: %zu token%s, too few to measure perplexity (at least 2)", o->data, ids.n, ids.n == 1 ? "" : "s");
    int seq = config_cap_seq(&m->cfg, o->seq, "best-eval", "windows", o->quiet);
    if ((size_t)seq > ids.n) seq = (int)ids.n;
    Progress pr;
    progress_init(&pr, "eval", seq > 0 ? ids.n / (size_t)seq : 0, "windows", o->quiet);
    PplResult r;
    TRY_OR_DIE(eval_perplexity(&r, e, m, ids.v, ids.n, seq, o->batch, &pr));
    progress_finish(&pr);
    double secs = now_seconds() - t0;
    if (o->json) {
        json_t *j = json_pack("{s:o, s:o, s:I, s:i, s:i, s:s, s:s, s:f, s:s}", "ppl", json_number(r.ppl), "nll",
                              json_number(r.nll), "tokens", (json_int_t)r.tokens, "windows", r.windows, "seq",
                              r.seq, "model", o->model, "data", o->data, "seconds", secs, "device",
                              engine_name(e));
        if (j && on_cuda) json_object_set_new(j, "device_bytes", json_integer((json_int_t)r.device_bytes));
        if (j) json_object_set_new(j, "batch", json_integer(r.batch));
        if (j && o->datas.n > 1) { // several shards: "data" lists them, in the order read
            json_t *a = json_array();
            for (int i = 0; i < o->datas.n; i++) json_array_append_new(a, json_string(o->datas.v[i]));
            json_object_set_new(j, "data", a);
        }
        if (j) json_object_set_new(j, "protocol", protocol_json(&pc));
        char *s = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(10)) : NULL;
        if (!s) DIE("--json: cannot encode the result (a file name that is not UTF-8?)");
        printf("%s\n", s);
        free(s);
        json_decref(j);
    } else {
        printf("perplexity %.4f  (nll %.6f per token, %llu tokens in %d windows of %d, %.1fs)\n", r.ppl,
               r.nll / (double)r.tokens, (unsigned long long)r.tokens, r.windows, r.seq, secs);
        char how[256];
        protocol_text(how, sizeof how, &pc);
        printf("protocol: %s\n", how);
        if (on_cuda && !o->quiet)
            fprintf(stderr, "best-eval: GPU memory %.2f GiB (the model and the activations)\n",
                    (double)r.device_bytes / (1 << 30));
    }
    if (!o->quiet && o->batch == 0)
        fprintf(stderr, "best-eval: %d windows a forward pass, chosen from the memory available (--batch N sets it)\n",
                r.batch);
    idvec_free(&ids);
    return isfinite(r.ppl);
}

typedef struct {
    const Tokenizer *tok;
    IdVec ids;      // the prompt's tokens (no BOS), then the continuation's
    size_t n_pre;   // of them the prompt's
    ByteVec text;   // ids decoded: the prompt's text (base bytes), then the continuation's
    size_t base, printed;
    int quiet_stream;
} Stream;

// Prints the newly completed part of the decoded continuation. The prompt and the whole
// continuation are decoded each time and the prompt's own text cut off: decoding the
// continuation alone would drop the space its first piece starts with (SentencePiece
// strips the text's leading space: "Once" + "upon" printed "Onceupon"), and decoding it
// whole keeps byte pieces right.
static int stream_token(const IdVec *so_far, void *ctx) {
    Stream *s = ctx;
    s->ids.n = s->n_pre;
    for (size_t i = 0; i < so_far->n; i++) idvec_push(&s->ids, so_far->v[i]);
    s->text.n = 0;
    TRY_OR_DIE(tok_decode(s->tok, &s->text, s->ids.v, s->ids.n));
    if (s->quiet_stream) return 0;
    if (s->text.n <= s->printed) return 0;
    fwrite(s->text.v + s->printed, 1, s->text.n - s->printed, stdout);
    s->printed = s->text.n;
    fflush(stdout);
    return 0;
}

static void run_generate(const Opts *o, Engine *e, const Model *m) {
    int on_cuda = engine_kind(e) == ENGINE_CUDA; // (what is reported)
    Tokenizer tok;
    load_tokenizer(&tok, o, m);
    IdVec prompt = {0}, out = {0};
    if (tok.add_bos) idvec_push(&prompt, tok.bos_id);
    TokEncoder enc;
    tok_encoder_init(&enc, &tok);
    TRY_OR_DIE(tok_encode(&enc, &prompt, o->generate, strlen(o->generate)));
    tok_encoder_free(&enc);
    if (prompt.n == 0) DIE("--generate: an empty prompt needs a tokenizer with a BOS token");
    int32_t stop[10];
    int n_stop = 0;
    for (int i = 0; i < m->cfg.n_eos && n_stop < 8; i++) stop[n_stop++] = m->cfg.eos_token_ids[i];
    if (tok.eos_id >= 0) stop[n_stop++] = tok.eos_id;
    GenOptions g = {(float)o->temperature, (float)o->top_p, (uint64_t)o->seed, o->max_new_tokens, stop, n_stop};
    Stream s = {&tok, {0}, 0, {0}, 0, 0, o->json};
    for (size_t i = tok.add_bos ? 1 : 0; i < prompt.n; i++) idvec_push(&s.ids, prompt.v[i]);
    s.n_pre = s.ids.n;
    TRY_OR_DIE(tok_decode(&tok, &s.text, s.ids.v, s.ids.n));
    s.base = s.printed = s.text.n;
    if (!o->json) { fputs(o->generate, stdout); fflush(stdout); }
    double t0 = now_seconds();
    GenStats gs;
    TRY_OR_DIE(eval_generate(&out, &gs, e, m, prompt.v, prompt.n, &g, stream_token, &s));
    double secs = now_seconds() - t0;
    // decoding alone (no prompt, no streaming): what dense and packed decoding compare on
    double tps = gs.decode_seconds > 0 ? gs.decode_tokens / gs.decode_seconds : 0;
    if (o->json) {
        json_t *ids = json_array();
        for (size_t i = 0; i < out.n; i++) json_array_append_new(ids, json_integer(out.v[i]));
        // sampled tokens can end inside a character or make invalid bytes: JSON needs UTF-8
        size_t tn;
        size_t cont = s.text.n > s.base ? s.text.n - s.base : 0;
        char *text = utf8_repair(cont ? (const char *)s.text.v + s.base : "", cont, &tn);
        json_t *j = json_pack("{s:s, s:s%, s:o, s:i, s:f, s:f, s:f, s:f, s:f}", "prompt", o->generate, "text",
                              text, tn, "ids", ids, "new_tokens", (int)out.n,
                              "seconds", secs, "overall_tokens_per_s", out.n / (secs > 0 ? secs : 1e-9),
                              "prompt_seconds", gs.prompt_seconds, "tokens_per_s", tps,
                              "temperature", o->temperature);
        if (j) json_object_set_new(j, "device", json_string(engine_name(e)));
        if (j && on_cuda) {
            json_object_set_new(j, "device_weight_bytes", json_integer((json_int_t)gs.device_weight_bytes));
            json_object_set_new(j, "device_bytes", json_integer((json_int_t)gs.device_bytes));
            json_object_set_new(j, "device_mem_measured",
                                json_pack("{s:I, s:I, s:I}", "before_load", (json_int_t)gs.device_mem_before, "loaded",
                                          (json_int_t)gs.device_mem_loaded, "after_decode",
                                          (json_int_t)gs.device_mem_after));
            json_object_set_new(j, "cuda_graph", json_boolean(gs.cuda_graph));
            json_object_set_new(j, "decode_fused", json_integer(gs.decode_fused));
        }
        if (!j) DIE("--json: cannot encode the result");
        char *str = json_dumps(j, JSON_COMPACT);
        printf("%s\n", str);
        free(str);
        free(text);
        json_decref(j);
    } else {
        printf("\n");
        if (!o->quiet)
            fprintf(stderr, "best-eval: %zu tokens in %.2fs (%.1f tokens/s; decoding alone %.1f tokens/s)\n", out.n,
                    secs, out.n / (secs > 0 ? secs : 1e-9), tps);
        if (on_cuda && !o->quiet)
            fprintf(stderr, "best-eval: GPU memory %.3f GiB: weights %.3f GiB%s, cache and activations %.3f GiB; "
                    "measured in use: %.3f GiB loaded, %.3f GiB after decoding, %.3f GiB before loading%s\n",
                    (double)gs.device_bytes / (1 << 30), (double)gs.device_weight_bytes / (1 << 30),
                    m->ext ? " (packed)" : "", (double)(gs.device_bytes - gs.device_weight_bytes) / (1 << 30),
                    (double)gs.device_mem_loaded / (1 << 30), (double)gs.device_mem_after / (1 << 30),
                    (double)gs.device_mem_before / (1 << 30), gs.cuda_graph ? "; CUDA graph" : "; no CUDA graph");
    }
    bytevec_free(&s.text);
    idvec_free(&s.ids);
    idvec_free(&prompt);
    idvec_free(&out);
    tokenizer_free(&tok);
}

// One line of --log-samples per document: what anyone needs to recompute the numbers.
static void log_samples(FILE *f, const Task *t, double *const *lls, const int *pred, const int *pred_norm) {
    int part = 0;
    for (size_t d = 0; d < t->n; d++) {
        const TaskDoc *doc = &t->docs[d];
        // a task of parts (MMLU): each document under its subject's name, numbered within it
        while (t->n_parts && d >= t->parts[part].first + t->parts[part].n) part++;
        const char *name = t->n_parts ? t->parts[part].name : t->name;
        size_t at = t->n_parts ? d - t->parts[part].first : d;
        json_t *ll = json_array(), *len = json_array();
        for (int i = 0; i < doc->n; i++) {
            json_array_append_new(ll, json_real(lls[d][i]));
            json_array_append_new(len, json_real(doc->len[i]));
        }
        char hash[65]; // the harness's prompt_hash: its first request's context
        sha256_hex(hash, doc->ctx[0], strlen(doc->ctx[0]));
        json_t *j = json_pack("{s:s, s:I, s:s, s:o, s:i, s:i, s:b}", "task", name, "doc", (json_int_t)at, "prompt_hash",
                              hash, "lls", ll, "gold",
                              doc->gold, "pred", pred[d], "acc", pred[d] == doc->gold);
        if (j && t->acc_norm) {
            json_object_set_new(j, "choice_len", len);
            json_object_set_new(j, "pred_norm", json_integer(pred_norm[d]));
            json_object_set_new(j, "acc_norm", json_boolean(pred_norm[d] == doc->gold));
        } else json_decref(len);
        char *str = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
        if (!str) DIE("--log-samples: cannot encode document %zu of %s", d, t->name);
        fprintf(f, "%s\n", str);
        free(str);
        json_decref(j);
    }
}

// One result: a row of the table, or jt[name] for --json (file, w and secs where the
// task itself was run: NULL, NULL, -1 for MMLU's groups and subjects within it).
static void report_result(const Opts *o, json_t *jt, const char *name, const char *version, const char *split,
                          int nshot, const ZsResult *r, int acc_norm, const char *file, const ZsWork *w, double secs) {
    if (o->json) {
        json_t *j = json_pack("{s:o, s:o, s:I, s:I, s:s, s:s, s:i}", "acc", json_number(r->acc), "acc_stderr",
                              json_number(r->acc_stderr), "n", (json_int_t)r->n, "requests", (json_int_t)r->requests,
                              "split", split, "version", version, "num_fewshot", nshot);
        if (j && w) {
            json_object_set_new(j, "rows", json_integer((json_int_t)w->rows));
            json_object_set_new(j, "inputs", json_integer((json_int_t)w->inputs));
        }
        if (j && file) json_object_set_new(j, "file", json_string(file));
        if (j && secs >= 0) json_object_set_new(j, "seconds", json_real(secs));
        if (j && acc_norm) {
            json_object_set_new(j, "acc_norm", json_number(r->acc_norm));
            json_object_set_new(j, "acc_norm_stderr", json_number(r->acc_norm_stderr));
        }
        if (!j) DIE("--json: cannot encode the result of %s (a file name that is not UTF-8?)", name);
        json_object_set_new(jt, name, j);
        return;
    }
    printf("| %s | %s | %s | %d | %zu | acc | %.4f | %.4f |\n", name, version, split, nshot, r->n, r->acc, r->acc_stderr);
    if (acc_norm) printf("| | | | | | acc_norm | %.4f | %.4f |\n", r->acc_norm, r->acc_norm_stderr);
    fflush(stdout);
}

// GSM8K (gsm8k.h): each document's generation, its two filters' answers and exact_match;
// a table row (or jt["gsm8k"]) per filter; a --log-samples line per document (f).
static void run_gsm8k(const Opts *o, Engine *e, const Model *m, const Tokenizer *tok, Gsm8kTask *t, json_t *jt,
                      FILE *f) {
    static const char *const filters[2] = {"strict-match", "flexible-extract"};
    double t0 = now_seconds(), *score[2];
    size_t tokens = 0;
    for (int k = 0; k < 2; k++) score[k] = xcalloc(t->n ? t->n : 1, sizeof *score[k]);
    Progress pr;
    progress_init(&pr, "gsm8k", t->n, "documents", o->quiet);
    for (size_t d = 0; d < t->n; d++) {
        char *text;
        size_t nt = 0, tl = 0;
        TRY_OR_DIE(gsm8k_generate(&text, &tl, &nt, e, m, tok, t->docs[d].context));
        tokens += nt;
        char *want = gsm8k_normalize(t->docs[d].target), *got[2], *norm[2];
        for (int k = 0; k < 2; k++) {
            got[k] = gsm8k_extract(text, tl, k);
            norm[k] = gsm8k_normalize(got[k]);
            score[k][d] = strcmp(norm[k], want) == 0;
        }
        if (f) {
            char hash[65]; // the harness's prompt_hash
            sha256_hex(hash, t->docs[d].context, strlen(t->docs[d].context));
            json_t *j = json_pack("{s:s, s:I, s:s, s:s, s:s%, s:s, s:{s:s, s:s}, s:{s:b, s:b}, s:I}", "task", "gsm8k",
                                  "doc", (json_int_t)d, "prompt_hash", hash, "prompt", t->docs[d].context, "generated",
                                  text, tl, "target",
                                  t->docs[d].target, "answers", filters[0], got[0], filters[1], got[1],
                                  "exact_match", filters[0], (int)score[0][d], filters[1], (int)score[1][d],
                                  "tokens", (json_int_t)nt);
            char *str = j ? json_dumps(j, JSON_COMPACT) : NULL;
            if (!str) DIE("--log-samples: cannot encode document %zu of gsm8k (text that is not UTF-8?)", d);
            fprintf(f, "%s\n", str);
            free(str);
            json_decref(j);
        }
        for (int k = 0; k < 2; k++) free(got[k]), free(norm[k]);
        free(want);
        free(text);
        progress_update(&pr, d + 1);
    }
    progress_finish(&pr);
    double secs = now_seconds() - t0;
    json_t *j = json_object();
    for (int k = 0; k < 2; k++) {
        double mean, se;
        zeroshot_mean_stderr(&mean, &se, score[k], t->n);
        char key[64];
        if (o->json) {
            snprintf(key, sizeof key, "exact_match,%s", filters[k]);
            json_object_set_new(j, key, json_number(mean));
            snprintf(key, sizeof key, "exact_match_stderr,%s", filters[k]);
            json_object_set_new(j, key, json_number(se));
        } else {
            printf("| %s | %s | test | %d | %zu | exact_match,%s | %.4f | %.4f |\n", k ? "" : "gsm8k",
                   k ? "" : GSM8K_VERSION, t->num_fewshot, t->n, filters[k], mean, se);
        }
        free(score[k]);
    }
    if (o->json) {
        json_object_set_new(j, "n", json_integer((json_int_t)t->n));
        json_object_set_new(j, "num_fewshot", json_integer(t->num_fewshot));
        json_object_set_new(j, "version", json_string(GSM8K_VERSION));
        json_object_set_new(j, "split", json_string("test"));
        json_object_set_new(j, "file", json_string(t->path));
        json_object_set_new(j, "generated_tokens", json_integer((json_int_t)tokens));
        json_object_set_new(j, "seconds", json_real(secs));
        json_object_set_new(jt, "gsm8k", j);
    } else {
        json_decref(j);
        fflush(stdout);
    }
    if (!o->quiet)
        fprintf(stderr, "best-eval: gsm8k: %zu documents, %zu tokens generated in %.1fs\n", t->n, tokens, secs);
    gsm8k_free(t);
}

// Zero-shot accuracy on each task of o->tasks; 0 when some result is not finite.
static int run_tasks(const Opts *o, Engine *e, const Model *m) {
    Tokenizer tok;
    load_tokenizer(&tok, o, m);
    char *list = xstrdup(o->tasks);
    AFile samples = {0};
    if (o->log_samples) TRY_OR_DIE(afile_open(&samples, o->log_samples));
    EngineRows rows; // the model on the device once for every task
    TRY_OR_DIE(engine_rows_open(&rows, e, m));
    json_t *jt = json_object();
    double sum_acc = 0, sum_best = 0;
    int ntasks = 0, finite = 1, nt = 0;
    // every task read and checked before the table starts: a missing or bad file is the
    // one line of output, not a table header and then an error
    Task *tasks = xcalloc(64, sizeof *tasks);
    Gsm8kTask gsm;
    int with_gsm = 0;
    for (char *save = NULL, *name = strtok_r(list, ",", &save); name && nt < 64; name = strtok_r(NULL, ",", &save)) {
        if (strcmp(name, "gsm8k") == 0) {
            TRY_OR_DIE(gsm8k_load(&gsm, o->task_dir, o->limit > 0 ? (size_t)o->limit : 0, o->num_fewshot));
            with_gsm = 1;
            continue;
        }
        TRY_OR_DIE(task_load_fewshot(&tasks[nt++], o->task_dir, name, o->limit > 0 ? (size_t)o->limit : 0,
                                     o->num_fewshot));
    }
    if (!o->json) {
        printf("| task | version | split | n-shot | n | metric | value | stderr |\n");
        printf("|---|---:|---|---:|---:|---|---:|---:|\n");
        fflush(stdout);
    }
    for (int k = 0; k < nt; k++) {
        double t0 = now_seconds();
        Task t = tasks[k];
        size_t nreq = 0;
        double **lls = xmalloc(t.n * sizeof *lls);
        for (size_t d = 0; d < t.n; d++) {
            lls[d] = xcalloc((size_t)t.docs[d].n, sizeof **lls);
            nreq += (size_t)t.docs[d].n;
        }
        Progress pr;
        progress_init(&pr, t.name, nreq, "requests", o->quiet);
        ZsWork w;
        TRY_OR_DIE(zeroshot_score(lls, &w, &rows, m, &tok, &t, 0, &pr));
        progress_finish(&pr);
        ZsResult r;
        int *pred = xmalloc(t.n * sizeof *pred), *pred_norm = xmalloc(t.n * sizeof *pred_norm);
        zeroshot_metrics(&r, pred, pred_norm, &t, lls);
        if (o->log_samples) log_samples(samples.fp, &t, lls, pred, pred_norm);
        double secs = now_seconds() - t0;
        size_t bad = 0;
        for (size_t d = 0; d < t.n; d++)
            for (int i = 0; i < t.docs[d].n; i++) bad += !isfinite(lls[d][i]);
        if (bad) {
            fprintf(stderr, "best-eval: %s: %zu of %zu loglikelihoods are not finite numbers\n", t.name, bad, nreq);
            finite = 0;
        }
        // MMLU: each subject's result, its groups' and the task's pooled over the subjects
        ZsResult *sub = xcalloc((size_t)t.n_parts + 1, sizeof *sub);
        for (int k = 0; k < t.n_parts; k++) {
            Task v = t;
            v.docs = t.docs + t.parts[k].first, v.n = t.parts[k].n, v.n_parts = 0;
            zeroshot_metrics(&sub[k], NULL, NULL, &v, lls + t.parts[k].first);
        }
        if (t.n_parts > 1) zeroshot_pool(&r, sub, t.n_parts);
        sum_acc += r.acc;
        sum_best += t.acc_norm ? r.acc_norm : r.acc;
        ntasks++;
        report_result(o, jt, t.name, t.version, t.split, t.num_fewshot, &r, t.acc_norm, t.path, &w, secs);
        for (int g = 0; t.n_parts > 1 && g < TASK_MMLU_N_GROUPS; g++) {
            ZsResult *in = xcalloc((size_t)t.n_parts, sizeof *in), gr;
            int k = 0;
            for (int i = 0; i < t.n_parts; i++)
                if (strcmp(t.parts[i].group, TASK_MMLU_GROUPS[g]) == 0) in[k++] = sub[i];
            if (k > 0 && strcmp(t.name, TASK_MMLU_GROUPS[g]) != 0) {
                zeroshot_pool(&gr, in, k);
                report_result(o, jt, TASK_MMLU_GROUPS[g], "2", t.split, t.num_fewshot, &gr, 0, NULL, NULL, -1);
            }
            free(in);
        }
        for (int k = 0; t.n_parts > 1 && k < t.n_parts; k++)
            report_result(o, jt, t.parts[k].name, "1.0", t.split, t.num_fewshot, &sub[k], 0, NULL, NULL, -1);
        free(sub);
        if (!o->quiet)
            fprintf(stderr, "best-eval: %s: %zu documents, %zu requests, %zu rows through the model (%zu tokens of "
                    "input without shared prefixes) in %.1fs\n", t.name, r.n, r.requests, w.rows, w.inputs, secs);
        for (size_t d = 0; d < t.n; d++) free(lls[d]);
        free(lls);
        free(pred);
        free(pred_norm);
        task_free(&t);
    }
    free(tasks);
    engine_rows_close(&rows);
    if (with_gsm) run_gsm8k(o, e, m, &tok, &gsm, jt, o->log_samples ? samples.fp : NULL);
    if (o->log_samples) TRY_OR_DIE(afile_commit(&samples));
    double mean = ntasks ? sum_acc / ntasks : NAN, mean_best = ntasks ? sum_best / ntasks : NAN;
    if (o->json) {
        char conv[160];
        if (tok.add_bos) snprintf(conv, sizeof conv, "BOS (id %d) before every context, as the tokenizer adds it", tok.bos_id);
        else snprintf(conv, sizeof conv, "no BOS (the tokenizer adds none)");
        json_t *j = json_pack("{s:o, s:o, s:o, s:i, s:s, s:s, s:s, s:s}", "tasks", jt, "mean_acc", json_number(mean),
                              "mean_acc_norm_or_acc", json_number(mean_best), "n_tasks", ntasks, "harness",
                              ZEROSHOT_HARNESS, "tokenizer", conv, "model", o->model, "device", engine_name(e));
        if (j && o->limit > 0) json_object_set_new(j, "limit", json_integer(o->limit));
        char *str = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
        if (!str) DIE("--json: cannot encode the result");
        printf("%s\n", str);
        free(str);
        json_decref(j);
    } else {
        json_decref(jt);
        if (ntasks > 0) {
            printf("| mean of %d (unweighted) | | | | | acc | %.4f | |\n", ntasks, mean);
            printf("| | | | | | acc_norm, else acc | %.4f | |\n", mean_best);
        }
    }
    free(list);
    tokenizer_free(&tok);
    return finite;
}

int main(int argc, char **argv) {
    blas_init(argv);
    Opts o = {.seq = 2048, .batch = 0, .join = " ", .max_new_tokens = 128, .temperature = 0, .top_p = 1.0,
              .seed = 0};
    const Option opts[] = {
        {"model", OPT_STRING, &o.model, "DIR|PACK", "Hugging Face model folder or packed checkpoint (required)"},
        {"data", OPT_MULTI, &o.datas, "FILE", "perplexity on a token shard (several: repeat, read in order), or on "
                                              "text (.txt, .jsonl, .gz, .zst; - for stdin)"},
        {"tokenizer", OPT_STRING, &o.tokenizer, "PATH", "tokenizer for text input and generation (default: the model's)"},
        {"any-tokenizer", OPT_FLAG, &o.any_tokenizer, NULL, "evaluate a shard made by another tokenizer than the "
                                                             "model's (refused by default: its ids mean other tokens)"},
        {"seq", OPT_INT, &o.seq, "N", "window length in tokens (capped by the model's context)"},
        {"max-tokens", OPT_INT, &o.max_tokens, "N", "use only the first N tokens (C4 protocol: 256 x seq); 0 = all"},
        {"batch", OPT_INT, &o.batch, "N", "windows per forward pass; 0: as many as fit a quarter of the memory "
                                          "available (at most 16)"},
        {"join", OPT_STRING, &o.join, "STR", "separator between documents of a text input before tokenizing"},
        {"generate", OPT_STRING, &o.generate, "TEXT", "generate a continuation of TEXT"},
        {"temperature", OPT_DOUBLE, &o.temperature, "T", "sampling temperature; 0 = greedy"},
        {"top-p", OPT_DOUBLE, &o.top_p, "P", "nucleus sampling mass"},
        {"seed", OPT_INT, &o.seed, "S", "sampling seed"},
        {"max-new-tokens", OPT_INT, &o.max_new_tokens, "N", "tokens to generate at most (EOS stops earlier)"},
        {"tasks", OPT_STRING, &o.tasks, "LIST", "accuracy on tasks, comma-separated: arc_easy, arc_challenge, boolq, hellaswag, openbookqa, rte, "
         "winogrande, or all for these seven; " TASK_NAMES_MMLU "; gsm8k (generation)"},
        {"task-dir", OPT_STRING, &o.task_dir, "DIR", "folder of the tasks' NAME.jsonl(.gz) (Hugging Face records); "
                                                     "default $BEST_TASK_DIR, else PREFIX/share/best/tasks"},
        {"limit", OPT_INT, &o.limit, "N", "only the first N documents of each task; 0 = all"},
        {"num-fewshot", OPT_INT, &o.num_fewshot, "K", "K examples before each document (MMLU's first K dev records); 0"},
        {"log-samples", OPT_STRING, &o.log_samples, "FILE", "one JSON line per task document: lls, gold, prediction"},
        {"threads", OPT_INT, &o.threads, "N", "threads; 0 = all cores (at most 4 per core)"},
        {"device", OPT_STRING, &o.device, "NAME", "cuda or cpu: where perplexity, tasks and generation run (default cuda "
                                                   "when a GPU is visible)"},
        {"json", OPT_FLAG, &o.json, NULL, "print one JSON object on stdout"},
        {"quiet", OPT_FLAG, &o.quiet, NULL, "nothing on stderr but warnings and errors"},
        {0},
    };
    const ArgSpec spec = {
        "best-eval", "--model DIR|PACK (--data SHARD|TEXT [--tokenizer PATH] [--seq N] [--max-tokens N] | --generate TEXT [...] |\n"
        "                 --tasks LIST --task-dir DIR [--limit N] [--log-samples FILE]) [--json]",
        "Perplexity with the protocol of the pruning literature (non-overlapping windows of --seq\n"
        "tokens, ppl = exp(total nll / predicted tokens)), text generation with a KV cache, or\n"
        "zero-shot accuracy with lm-evaluation-harness's protocol (docs/best-eval.md).",
        opts,
    };
    char **pos;
    int npos = args_parse(&pos, &spec, argc, argv);
    free(pos);
    if (npos) args_usage_error(&spec, "unexpected argument (inputs go after --data)");
    if (!o.model) args_usage_error(&spec, "--model is required");
    o.data = o.datas.n ? o.datas.v[0] : NULL;
    if (!!o.data + !!o.generate + !!o.tasks != 1) args_usage_error(&spec, "give exactly one of --data, --generate and --tasks");
    if (o.tasks && strcmp(o.tasks, "all") == 0) o.tasks = TASK_NAMES;
    // the tasks' folder: --task-dir, else $BEST_TASK_DIR, else PREFIX/share/best/tasks beside
    // an installed best-eval (PREFIX/bin), where one is there
    static char *installed; // (static: still reachable when a usage error exits)
    installed = path_beside_exe("../share/best/tasks");
    if (o.tasks && !o.task_dir && getenv("BEST_TASK_DIR") && *getenv("BEST_TASK_DIR")) o.task_dir = getenv("BEST_TASK_DIR");
    if (o.tasks && !o.task_dir && installed && path_is_dir(installed)) o.task_dir = installed;
    if (o.tasks && !o.task_dir)
        args_usage_error(&spec, "--tasks needs the folder of the tasks' files: --task-dir DIR, BEST_TASK_DIR=DIR, or "
                                "the files in %s", installed ? installed : "PREFIX/share/best/tasks");
    if (!o.tasks && (o.task_dir || o.limit || o.log_samples || o.num_fewshot))
        args_usage_error(&spec, "--task-dir, --limit, --num-fewshot and --log-samples go with --tasks");
    if (!(o.num_fewshot >= 0)) args_usage_error(&spec, "--num-fewshot %d is negative", o.num_fewshot);
    if (!(o.limit >= 0)) args_usage_error(&spec, "--limit %d is negative (0 = all)", o.limit);
    if (o.tasks) { // every name known, and named once (the mean counts each task once), before any work
        char *list = xstrdup(o.tasks), *save = NULL, *seen[64];
        int n = 0;
        for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save), n++) {
            if (!task_known(t) && strcmp(t, "gsm8k") != 0) args_usage_error(&spec, "--tasks: unknown task \"%s\" (tasks: %s; %s)", t, TASK_NAMES,
                                                   TASK_NAMES_MMLU);
            for (int i = 0; i < n && i < 64; i++)
                if (strcmp(seen[i], t) == 0) args_usage_error(&spec, "--tasks: %s named twice", t);
            if (n < 64) seen[n] = t;
        }
        free(list);
        if (n == 0) args_usage_error(&spec, "--tasks: no task named");
    }
    const char *ins[] = {o.model, o.tokenizer, o.task_dir};
    for (int i = 0; i < 3; i++)
        if (ins[i]) path_note_input(ins[i]);
    for (int i = 0; i < o.datas.n; i++) path_note_input(o.datas.v[i]);
    if (o.log_samples) TRY_OR_DIE(path_check_out_file(o.log_samples, NULL)); // (and none of ins)
    // Ranges as !(inside): a NaN is never inside (args.c refuses one anyway).
    if (!(o.seq >= 2)) args_usage_error(&spec, "--seq %d: a window needs at least 2 tokens", o.seq);
    if (!(o.batch >= 0)) args_usage_error(&spec, "--batch %d is negative (0: chosen from the memory available)", o.batch);
    if (!(o.max_tokens >= 0)) args_usage_error(&spec, "--max-tokens %d is negative (0 = all)", o.max_tokens);
    if (!(o.max_new_tokens >= 1)) args_usage_error(&spec, "--max-new-tokens %d must be at least 1", o.max_new_tokens);
    if (!(o.temperature >= 0)) args_usage_error(&spec, "--temperature %g must be >= 0", o.temperature);
    if (!(o.top_p > 0 && o.top_p <= 1)) args_usage_error(&spec, "--top-p %g is outside (0, 1]", o.top_p);
    size_t bad;
    // Checked before the model is loaded: the JSON of the result holds the prompt, and a
    // sentencepiece tokenizer would encode the bytes anyway, so the error came only after
    // generating (byte-level BPE refused it, with exit 1).
    if (o.generate && !utf8_valid(o.generate, strlen(o.generate), &bad))
        args_usage_error(&spec, "--generate: the prompt is not valid UTF-8 (byte %zu)", bad);
    if (o.device && strcmp(o.device, "cuda") != 0 && strcmp(o.device, "cpu") != 0)
        args_usage_error(&spec, "unknown --device %s (cuda, cpu)", o.device);
    args_threads(&spec, o.threads);

    Model m;
    TRY_OR_DIE(model_open(&m, o.model));
    Engine *e; // the default: the GPU when one is visible (engine_pick)
    TRY_OR_DIE(engine_open(&e, o.device, 0));
    int on_cuda = engine_kind(e) == ENGINE_CUDA;
    if (!o.quiet) {
        char np[32];
        human_count(np, sizeof np, (double)model_numel(&m));
        fprintf(stderr, "best-eval: %s (%s%s, %zu layers, dim %zu, %s parameters), %s\n", m.src_dir ? m.src_dir : o.model,
                config_arch_name(m.cfg.arch), m.ext ? ", packed" : "", m.L, m.C, np, on_cuda ? "device cuda" : "device cpu");
    }
    if (!o.quiet) {
        if (on_cuda) fprintf(stderr, "best-eval: device cuda: %s; bf16 matrix products\n", cuda_info());
        else fprintf(stderr, "best-eval: device cpu: %d threads\n", omp_get_max_threads());
    }
    if (o.generate && !on_cuda && !m.ext && (m.dtype == ST_BF16 || m.dtype == ST_F16)) {
        // decode the weights in the dtype they were saved in: half the bytes of fp32
        model_dense_store(&m);
        if (!o.quiet)
            fprintf(stderr, "best-eval: generating from the %s weights as they are (dense kernels, %s)\n",
                    st_dtype_name(m.dtype), spmv_isa_name(spmv_isa()));
    }
    if (o.generate && !on_cuda && m.ext && pack_tune_enabled()) {
        // a pack's encodings timed for this CPU (pack_tune.h; BEST_PACK_TUNE=0 keeps the pack's)
        PackTune tune;
        pack_model_tune(&tune, &m);
        if (!o.quiet) pack_tune_say(stderr, "best-eval", &tune);
    }
    int finite = 1;
    if (o.data) finite = run_ppl(&o, e, &m);
    else if (o.tasks) finite = run_tasks(&o, e, &m);
    else run_generate(&o, e, &m);
    engine_close(e);
    model_free(&m);
    free(installed);
    free(o.datas.v);
    TRY_OR_DIE(stdout_close()); // a lost result (a full disk) is an error
    // The result is printed (null in JSON), and the run is still a failure.
    if (!finite && o.tasks) DIE("%s: loglikelihoods that are not finite numbers (NaN or inf weights, or a diverged model)", o.model);
    if (!finite) DIE("%s: the perplexity on %s is not a finite number (NaN or inf weights, or a diverged model)", o.model, o.data);
    return 0;
}
