// test_tasks.c: the harness's task documents (run/tasks.h) against strings built by hand
// from lm-evaluation-harness's task files (arc_easy.yaml, super_glue/boolq/default.yaml,
// hellaswag.yaml + utils.py, openbookqa.yaml, glue/rte/default.yaml, winogrande/
// default.yaml + preprocess_winogrande.py), on records written here for all seven tasks
// and on the first records of ../shared/tasks when present; HellaSwag's preprocess and
// Python's capitalize on their edges; the acc / acc_norm / stderr arithmetic on known
// scores; errors that name the file and line. With ../shared, stories260K's loglikelihoods
// two ways: packed prefixes (zeroshot_score, the CPU's; the device's batches are the same)
// and one request a row in padded batches (zeroshot_score_rows, with model_eval), each
// loglikelihood within the bound its logits give it (request_bound).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/fileio.h"
#include "nn/model.h"
#include "tok/tokenizer.h"
#include "run/tasks.h"
#include "run/zeroshot.h"
#include "test.h"

static char dir[] = "/tmp/test_tasks.XXXXXX";

static void write_file(const char *name, const char *text) {
    char *p = path_join(dir, name);
    FILE *f = fopen(p, "wb");
    fputs(text, f);
    fclose(f);
    free(p);
}

static int str_eq(const char *got, const char *want, const char *what) {
    int ok = strcmp(got, want) == 0;
    if (!T_OK(ok, "%s", what)) printf("#   got  [%s]\n#   want [%s]\n", got, want);
    return ok;
}

// Every choice of doc d of t: contexts, continuations, lengths, gold.
static void check_doc(const Task *t, size_t d, const char *const *ctx, const char *const *cont, const double *len,
                      int n, int gold) {
    char what[160];
    const TaskDoc *doc = &t->docs[d];
    snprintf(what, sizeof what, "%s doc %zu: %d choices, gold %d", t->name, d, n, gold);
    if (!T_OK(doc->n == n && doc->gold == gold, "%s (got %d, %d)", what, doc->n, doc->gold)) return;
    for (int i = 0; i < n; i++) {
        snprintf(what, sizeof what, "%s doc %zu choice %d: context", t->name, d, i);
        str_eq(doc->ctx[i], ctx[i], what);
        snprintf(what, sizeof what, "%s doc %zu choice %d: continuation", t->name, d, i);
        str_eq(doc->cont[i], cont[i], what);
        if (len) T_OK(doc->len[i] == len[i], "%s doc %zu choice %d: length %g (want %g)", t->name, d, i, doc->len[i], len[i]);
    }
}

static void test_handmade(void) {
    // ARC: labels may be digits; the answer is the label's index
    write_file("arc_easy.jsonl",
               "{\"id\": \"Mercury_1\", \"question\": \"Which is a gas?\", \"choices\": {\"text\": [\"ice\", \"steam\", "
               "\"rock\"], \"label\": [\"1\", \"2\", \"3\"]}, \"answerKey\": \"2\"}\n"
               "\n"
               "{\"question\": \"Caf\\u00e9 or tea?\", \"choices\": {\"text\": [\"caf\\u00e9 au lait\", \"tea\"], "
               "\"label\": [\"A\", \"B\"]}, \"answerKey\": \"A\"}\n");
    Task t;
    if (T_OK(task_load(&t, dir, "arc_easy", 0) == 0, "arc_easy: loads (%s)", err_msg())) {
        T_OK(t.n == 2 && t.acc_norm && strcmp(t.split, "test") == 0, "arc_easy: 2 documents (blank line skipped), acc_norm, test split");
        const char *c0[] = {"Question: Which is a gas?\nAnswer:", "Question: Which is a gas?\nAnswer:",
                            "Question: Which is a gas?\nAnswer:"};
        const char *k0[] = {" ice", " steam", " rock"};
        double l0[] = {3, 5, 4};
        check_doc(&t, 0, c0, k0, l0, 3, 1);
        const char *c1[] = {"Question: Caf\xc3\xa9 or tea?\nAnswer:", "Question: Caf\xc3\xa9 or tea?\nAnswer:"};
        const char *k1[] = {" caf\xc3\xa9 au lait", " tea"};
        double l1[] = {12, 3}; // code points, not bytes (13)
        check_doc(&t, 1, c1, k1, l1, 2, 0);
        task_free(&t);
    }
    // BoolQ (not in ../shared): the "?" is the template's; label 1 = yes; a boolean label too
    write_file("boolq.jsonl.gz", ""); // not found first: .jsonl wins
    write_file("boolq.jsonl",
               "{\"question\": \"is the sky blue\", \"passage\": \"The sky is blue.\", \"idx\": 0, \"label\": 1}\n"
               "{\"question\": \"do fish fly\", \"passage\": \"Fish swim.\", \"idx\": 1, \"label\": false}\n");
    if (T_OK(task_load(&t, dir, "boolq", 0) == 0, "boolq: loads (%s)", err_msg())) {
        T_OK(!t.acc_norm && strcmp(t.split, "validation") == 0 && strcmp(t.version, "2.0") == 0,
             "boolq: acc only, validation split, version 2.0");
        const char *c[] = {"The sky is blue.\nQuestion: is the sky blue?\nAnswer:",
                           "The sky is blue.\nQuestion: is the sky blue?\nAnswer:"};
        const char *k[] = {" no", " yes"};
        check_doc(&t, 0, c, k, NULL, 2, 1);
        const char *c1[] = {"Fish swim.\nQuestion: do fish fly?\nAnswer:", "Fish swim.\nQuestion: do fish fly?\nAnswer:"};
        check_doc(&t, 1, c1, k, NULL, 2, 0);
        task_free(&t);
    }
    // HellaSwag: the HF layout (ctx_b capitalized), preprocess on query and endings
    write_file("hellaswag.jsonl",
               "{\"ind\": 24, \"activity_label\": \"Roof shingle removal\", \"ctx_a\": \"A man is sitting on a roof.\", "
               "\"ctx_b\": \"he\", \"ctx\": \"A man is sitting on a roof. he\", \"endings\": [\"is using wrap to wrap a "
               "pair of skis.\", \"is ripping level tiles off.\", \"is holding a rubik's cube.\", \"starts pulling up "
               "roofing on a roof.\"], \"source_id\": \"activitynet~v_-JhWjGDPHMY\", \"split\": \"val\", \"split_type\": "
               "\"indomain\", \"label\": \"3\"}\n"
               "{\"activity_label\": \"Home and Garden\", \"ctx_a\": \"[header] How to grow [title] Dig a hole.\", "
               "\"ctx_b\": \"\", \"endings\": [\"[step] Plant  it [substeps] now.\", \"Water  it.\"], \"label\": 1}\n");
    if (T_OK(task_load(&t, dir, "hellaswag", 0) == 0, "hellaswag: loads (%s)", err_msg())) {
        const char *q = "Roof shingle removal: A man is sitting on a roof. He";
        const char *c[] = {q, q, q, q};
        const char *k[] = {" is using wrap to wrap a pair of skis.", " is ripping level tiles off.",
                           " is holding a rubik's cube.", " starts pulling up roofing on a roof."};
        double l[] = {37, 27, 26, 36};
        check_doc(&t, 0, c, k, l, 4, 3);
        // "...: [header] How to grow [title] Dig a hole. ": stripped, " [title]" -> ". ", "[header]"
        // out, then "  " -> " "
        const char *c1[] = {"Home and Garden: How to grow. Dig a hole.", "Home and Garden: How to grow. Dig a hole."};
        const char *k1[] = {"  Plant it now.", " Water it."};
        check_doc(&t, 1, c1, k1, NULL, 2, 1);
        task_free(&t);
    }
    // OpenBookQA: the bare stem; answerKey lstripped
    write_file("openbookqa.jsonl",
               "{\"id\": \"7-980\", \"question_stem\": \"The sun is responsible for\", \"choices\": {\"text\": "
               "[\"puppies learning new tricks\", \"plants sprouting, blooming and wilting\"], \"label\": [\"A\", "
               "\"B\"]}, \"answerKey\": \" B\"}\n");
    if (T_OK(task_load(&t, dir, "openbookqa", 0) == 0, "openbookqa: loads (%s)", err_msg())) {
        const char *c[] = {"The sun is responsible for", "The sun is responsible for"};
        const char *k[] = {" puppies learning new tricks", " plants sprouting, blooming and wilting"};
        check_doc(&t, 0, c, k, NULL, 2, 1);
        task_free(&t);
    }
    // RTE: label 0 (entailment) is " True"
    write_file("rte.jsonl", "{\"sentence1\": \"A dog barks.\", \"sentence2\": \"An animal makes a sound.\", "
                            "\"label\": 0, \"idx\": 3}\n");
    if (T_OK(task_load(&t, dir, "rte", 0) == 0, "rte: loads (%s)", err_msg())) {
        const char *q = "A dog barks.\nQuestion: An animal makes a sound. True or False?\nAnswer:";
        const char *c[] = {q, q}, *k[] = {" True", " False"};
        check_doc(&t, 0, c, k, NULL, 2, 0);
        task_free(&t);
    }
    // Winogrande: two contexts (up to "_", the option in its place), one continuation
    write_file("winogrande.jsonl", "{\"sentence\": \"Sarah was a much better surgeon than Maria so _ always got the "
                                   "easier cases.\", \"option1\": \"Sarah\", \"option2\": \"Maria\", \"answer\": \"2\"}\n");
    if (T_OK(task_load(&t, dir, "winogrande", 0) == 0, "winogrande: loads (%s)", err_msg())) {
        const char *c[] = {"Sarah was a much better surgeon than Maria so Sarah",
                           "Sarah was a much better surgeon than Maria so Maria"};
        const char *k[] = {" always got the easier cases.", " always got the easier cases."};
        check_doc(&t, 0, c, k, NULL, 2, 1);
        T_OK(!t.acc_norm, "winogrande: acc only");
        task_free(&t);
    }
    // --limit
    if (T_OK(task_load(&t, dir, "arc_easy", 1) == 0, "limit 1: loads")) {
        T_OK(t.n == 1, "limit 1: one document");
        task_free(&t);
    }
}

static void test_errors(void) {
    Task t;
    struct { const char *file, *text, *task, *want; } cases[] = {
        {"arc_challenge.jsonl", "{\"question\": \"q\", \"choices\": {\"text\": [\"a\"], \"label\": [\"A\"]}, \"answerKey\": \"A\"}\n"
                                "{\"question\": \"q\", \"choices\": {\"text\": [\"a\"], \"label\": [\"A\"]}, \"answerKey\": \"C\"}\n",
         "arc_challenge", "arc_challenge.jsonl:2: answerKey \"C\" is none of the choices' labels"},
        {"rte.jsonl", "{\"sentence1\": \"a\", \"label\": 0}\n", "rte", "rte.jsonl:1: no string field \"sentence2\""},
        {"rte.jsonl", "{\"sentence1\": \"a\", \"sentence2\": \"b\", \"label\": 2}\n", "rte", "rte.jsonl:1: label 2 is not 0 or 1"},
        {"winogrande.jsonl", "{\"sentence\": \"no blank\", \"option1\": \"a\", \"option2\": \"b\", \"answer\": \"1\"}\n",
         "winogrande", "winogrande.jsonl:1: the sentence has no \"_\" to fill"},
        {"winogrande.jsonl", "{\"sentence\": \"a _ b\", \"option1\": \"a\", \"option2\": \"b\", \"answer\": \"\"}\n",
         "winogrande", "answer \"\" is not \"1\" or \"2\""},
        {"hellaswag.jsonl", "{\"activity_label\": \"x\", \"ctx_a\": \"a\", \"ctx_b\": \"b\", \"endings\": [\"e\"], \"label\": \"1\"}\n",
         "hellaswag", "hellaswag.jsonl:1: label 1 names no ending"},
        {"openbookqa.jsonl", "[1, 2]\n", "openbookqa", "openbookqa.jsonl:1: not a JSON object"},
        {"openbookqa.jsonl", "{\"question_stem\": \"q\", \"choices\": {\"text\": [\"a\"], \"label\": [\"A\", \"B\"]}, \"answerKey\": \"A\"}\n",
         "openbookqa", "not {\"text\": [...], \"label\": [...]} of one length"},
        {"openbookqa.jsonl", "", "openbookqa", "openbookqa.jsonl: no records"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        write_file(cases[i].file, cases[i].text);
        int rc = task_load(&t, dir, cases[i].task, 0);
        T_OK(rc < 0 && strstr(err_msg(), cases[i].want), "%s: an error naming \"%s\" (got \"%s\")", cases[i].task,
             cases[i].want, rc < 0 ? err_msg() : "no error");
        if (rc == 0) task_free(&t);
    }
    T_OK(task_load(&t, dir, "piqa", 0) < 0 && strstr(err_msg(), "unknown task \"piqa\""), "unknown task: %s", err_msg());
    T_OK(task_load(&t, "/nonexistent", "rte", 0) < 0 && strstr(err_msg(), "/nonexistent: no rte.jsonl"), "missing file: %s",
         err_msg());
    T_OK(task_known("winogrande") && !task_known("winogrande_xl"), "task_known");
}

static void test_text(void) {
    struct { const char *in, *want; } pre[] = {
        {"  a [title] b  ", "a. b"},             // strip, then " [title]" -> ". "
        {"x [a [your name] y", "x y"},           // the first '[' to the first ']', then "  " -> " "
        {"a   b", "a  b"},                       // three spaces: one pass leaves two
        {"a    b", "a  b"},                      // four: two
        {"[step] one [substeps] two", " one two"}, // no strip after the removal
        {"a [b\nc] d", "a [b\nc] d"},            // no newline inside a bracket
        {"[unclosed", "[unclosed"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof pre / sizeof *pre; i++) {
        char *got = task_hellaswag_preprocess(pre[i].in), what[96];
        snprintf(what, sizeof what, "hellaswag preprocess, case %zu", i);
        str_eq(got, pre[i].want, what);
        free(got);
    }
    struct { const char *in, *want; } cap[] = {
        {"he", "He"}, {"hE LLO", "He llo"}, {"", ""}, {"\"quoted\"", "\"quoted\""},
        {"\xc3\xa9t\xc3\x89", "\xc3\x89t\xc3\xa9"}, // étÉ -> Été
        {"1st Place", "1st place"},
    };
    for (size_t i = 0; i < sizeof cap / sizeof *cap; i++) {
        char *got = task_capitalize(cap[i].in), what[96];
        snprintf(what, sizeof what, "capitalize [%s]", cap[i].in);
        str_eq(got, cap[i].want, what);
        free(got);
    }
}

// acc, acc_norm and their standard errors on scores made by hand
static void test_metrics(void) {
    TaskDoc docs[3] = {0};
    double len[3][2] = {{1, 10}, {1, 10}, {4, 4}};
    double ll0[] = {-2, -10}, ll1[] = {-5, -5}, ll2[] = {-1, -3};
    double *lls[] = {ll0, ll1, ll2};
    int gold[] = {1, 1, 0};
    for (int i = 0; i < 3; i++) docs[i] = (TaskDoc){2, NULL, NULL, len[i], gold[i]};
    Task t = {.name = "x", .acc_norm = 1, .docs = docs, .n = 3};
    ZsResult r;
    int pred[3], pn[3];
    zeroshot_metrics(&r, pred, pn, &t, lls);
    // doc 0: -2 > -10 -> 0 (wrong); norm -2 < -1 -> 1 (right). doc 1: tie -> first (0, wrong);
    // norm -5 < -0.5 -> 1 (right). doc 2: 0 both (right).
    T_OK(pred[0] == 0 && pred[1] == 0 && pred[2] == 0 && pn[0] == 1 && pn[1] == 1 && pn[2] == 0,
         "argmax: first on ties; acc_norm divides by the length");
    double se = sqrt((2.0 / 3 * 2.0 / 3 + 2 * (1.0 / 3) * (1.0 / 3)) / 2) / sqrt(3); // acc = 1/3: sample sd
    T_OK(fabs(r.acc - 1.0 / 3) < 1e-15 && fabs(r.acc_stderr - se) < 1e-15, "acc %g stderr %g (want 1/3, %g)", r.acc,
         r.acc_stderr, se);
    T_OK(r.acc_norm == 1 && r.acc_norm_stderr == 0, "acc_norm 1, stderr 0");
    t.acc_norm = 0;
    zeroshot_metrics(&r, NULL, NULL, &t, lls);
    T_OK(isnan(r.acc_norm) && r.requests == 6 && r.n == 3, "no acc_norm where the task has none");
    t.n = 1;
    zeroshot_metrics(&r, NULL, NULL, &t, lls);
    T_OK(isnan(r.acc_stderr), "one document: no standard error");
}

// The first records of ../shared/tasks: what the harness builds from them, by hand.
static void test_shared_records(void) {
    const char *shared = test_shared();
    if (!shared) { T_SKIP("../shared/tasks first records: ../shared not found"); return; }
    char *tdir = path_join(shared, "tasks");
    Task t;
    if (T_OK(task_load(&t, tdir, "arc_easy", 1) == 0, "shared arc_easy loads (%s)", err_msg())) {
        const char *q = "Question: Which statement best explains why photosynthesis is the foundation of most food webs?\nAnswer:";
        const char *c[] = {q, q, q, q};
        const char *k[] = {" Sunlight is the source of energy for nearly all ecosystems.",
                           " Most ecosystems are found on land instead of in water.",
                           " Carbon dioxide is more available than other gases.", " The producers in all ecosystems are plants."};
        check_doc(&t, 0, c, k, NULL, 4, 0);
        task_free(&t);
    }
    if (T_OK(task_load(&t, tdir, "openbookqa", 1) == 0, "shared openbookqa loads (%s)", err_msg())) {
        const char *q = "A person wants to start saving money so that they can afford a nice vacation at the end of the "
                        "year. After looking over their budget and expenses, they decide the best way to save money is to";
        const char *c[] = {q, q, q, q};
        const char *k[] = {" make more phone calls", " quit eating lunch out", " buy less with monopoly money",
                           " have lunch with friends"};
        check_doc(&t, 0, c, k, NULL, 4, 1);
        task_free(&t);
    }
    if (T_OK(task_load(&t, tdir, "rte", 1) == 0, "shared rte loads (%s)", err_msg())) {
        const char *q = "Dana Reeve, the widow of the actor Christopher Reeve, has died of lung cancer at age 44, according "
                        "to the Christopher Reeve Foundation.\nQuestion: Christopher Reeve had an accident. True or False?\nAnswer:";
        const char *c[] = {q, q}, *k[] = {" True", " False"};
        check_doc(&t, 0, c, k, NULL, 2, 1);
        task_free(&t);
    }
    if (T_OK(task_load(&t, tdir, "winogrande", 1) == 0, "shared winogrande loads (%s)", err_msg())) {
        const char *c[] = {"Sarah was a much better surgeon than Maria so Sarah",
                           "Sarah was a much better surgeon than Maria so Maria"};
        const char *k[] = {" always got the easier cases.", " always got the easier cases."};
        check_doc(&t, 0, c, k, NULL, 2, 1);
        task_free(&t);
    }
    if (T_OK(task_load(&t, tdir, "hellaswag", 1) == 0, "shared hellaswag loads (%s)", err_msg())) {
        // ../shared's records hold the whole context in ctx_a (ctx_b empty): capitalize never
        // runs, so "he" stays lower case where the harness, on the HF record, has "He"
        const char *q = "Roof shingle removal: A man is sitting on a roof. he";
        const char *c[] = {q, q, q, q};
        const char *k[] = {" is using wrap to wrap a pair of skis.", " is ripping level tiles off.",
                           " is holding a rubik's cube.", " starts pulling up roofing on a roof."};
        check_doc(&t, 0, c, k, NULL, 4, 3);
        task_free(&t);
    }
    if (T_OK(task_load(&t, tdir, "arc_challenge", 0) == 0, "shared arc_challenge loads whole (%s)", err_msg())) {
        T_OK(t.n == 1172, "shared arc_challenge: 1172 documents (the test split)");
        task_free(&t);
    }
    free(tdir);
}

// The bound of the difference between two fp32 scorings of one request (ctx, cont) whose
// logits each agree with the exact ones to TOL of the largest |logit| (test_model.c's TOL,
// hf_check.py's LOGIT_TOL, 1e-5; the two paths differ in the order of their sums, as
// BLAS kernels and thread slices cut them): a log-softmax moves by at most twice the
// largest change of its inputs, and a loglikelihood sums k of them, so 2 k TOL Z, k the
// continuation's tokens, Z the largest |logit| of the rows scored. The tokens as the
// harness's _encode_pair makes them (trailing whitespace of the context moved to the
// continuation); Z from one more forward of the request alone.
#define TWO_WAYS_TOL 1e-5
static double request_bound(const Model *m, TokEncoder *enc, const Tokenizer *tok, const char *ctx, const char *cont) {
    size_t nc = strlen(ctx);
    while (nc && (ctx[nc - 1] == ' ' || (ctx[nc - 1] >= '\t' && ctx[nc - 1] <= '\r'))) nc--;
    size_t nw = strlen(ctx) + strlen(cont);
    char *whole = xmalloc(nw + 1);
    snprintf(whole, nw + 1, "%s%s", ctx, cont);
    IdVec c = {0}, full = {0};
    if (tok->add_bos) idvec_push(&c, tok->bos_id), idvec_push(&full, tok->bos_id);
    double bound = INFINITY;
    if (tok_encode(enc, &c, ctx, nc) == 0 && tok_encode(enc, &full, whole, nw) == 0 && full.n > c.n &&
        full.n - 1 <= (size_t)m->cfg.max_position_embeddings) {
        size_t in = full.n - 1, k = full.n - c.n;
        float *logits = xmalloc(in * (size_t)m->V * sizeof *logits);
        ModelActs a;
        if (model_acts_init(&a, m, 1, (int)in, 0) == 0) {
            if (model_eval(logits, NULL, m, &a, full.v, NULL) == 0) {
                double z = 0;
                for (size_t j = (in - k) * (size_t)m->V; j < in * (size_t)m->V; j++) z = fmax(z, fabs(logits[j]));
                bound = 2.0 * (double)k * TWO_WAYS_TOL * z;
            }
            model_acts_free(&a);
        }
        free(logits);
    }
    idvec_free(&c), idvec_free(&full);
    free(whole);
    return bound;
}

// stories260K on the first documents of ../shared/tasks: the packed scorer against the
// rows scorer, every loglikelihood within its request_bound.
static void test_two_ways(void) {
    const char *shared = test_shared();
    if (!shared) { T_SKIP("packed prefixes against one request a row: ../shared not found"); return; }
    char *mdir = path_join(shared, "models/stories260K"), *tdir = path_join(shared, "tasks");
    Model m;
    Tokenizer tok;
    if (!T_OK(model_load(&m, mdir) == 0 && tokenizer_load(&tok, mdir) == 0, "stories260K loads (%s)", err_msg())) {
        free(mdir), free(tdir);
        return;
    }
    // hellaswag's 400 requests of up to ~250 tokens make several batches of ~16k tokens
    const char *names[] = {"arc_easy", "hellaswag", "winogrande", "rte"};
    const size_t limit[] = {25, 100, 25, 25};
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        Task t;
        if (!T_OK(task_load(&t, tdir, names[k], limit[k]) == 0, "%s loads", names[k])) continue;
        double **a = xmalloc(t.n * sizeof *a), **b = xmalloc(t.n * sizeof *b), worst = 0;
        for (size_t d = 0; d < t.n; d++) {
            a[d] = xcalloc((size_t)t.docs[d].n, sizeof **a);
            b[d] = xcalloc((size_t)t.docs[d].n, sizeof **b);
        }
        Engine *cpu = NULL; // the packed batches on the CPU's engine (the device's are the same batches)
        EngineRows er;
        int rc = engine_open(&cpu, "cpu", 0);
        if (rc == 0 && (rc = engine_rows_open(&er, cpu, &m)) == 0) {
            rc = zeroshot_score(a, NULL, &er, &m, &tok, &t, 0, NULL);
            engine_rows_close(&er);
        }
        engine_close(cpu);
        int rr = zeroshot_score_rows(b, &m, &tok, &t, 0, NULL);
        double ratio = 0, smallest = INFINITY;
        TokEncoder enc;
        tok_encoder_init(&enc, &tok);
        for (size_t d = 0; d < t.n; d++)
            for (int i = 0; i < t.docs[d].n; i++) {
                const TaskDoc *doc = &t.docs[d];
                double e = fabs(a[d][i] - b[d][i]), bound = request_bound(&m, &enc, &tok, doc->ctx[i], doc->cont[i]);
                worst = e > worst || isnan(e) ? e : worst;
                ratio = e / bound > ratio || isnan(e) ? e / bound : ratio;
                smallest = fmin(smallest, bound);
            }
        tok_encoder_free(&enc);
        T_OK(rc == 0 && rr == 0 && ratio <= 1, "%s, %zu documents: packed prefixes and one request a row agree within "
             "%.1e, at most %.2g of each request's bound 2 k 1e-5 max|logit| (the smallest %.1e)", names[k], t.n, worst,
             ratio, smallest);
        for (size_t d = 0; d < t.n; d++) free(a[d]), free(b[d]);
        free(a), free(b);
        task_free(&t);
    }
    tokenizer_free(&tok);
    model_free(&m);
    free(mdir), free(tdir);
}

int main(void) {
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    test_two_ways();
    test_text();
    test_handmade();
    test_errors();
    test_metrics();
    test_shared_records();
    const char *names[] = {"arc_easy.jsonl", "arc_challenge.jsonl", "boolq.jsonl", "boolq.jsonl.gz", "hellaswag.jsonl",
                           "openbookqa.jsonl", "rte.jsonl", "winogrande.jsonl"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char *p = path_join(dir, names[i]);
        remove(p);
        free(p);
    }
    rmdir(dir);
    T_DONE();
}
