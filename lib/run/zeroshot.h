// zeroshot.h: zero-shot accuracy as lm-evaluation-harness measures it (its
// multiple_choice output type, HFLM's loglikelihood; versions 0.4.9.2 and later, where
// BOS is what the model's tokenizer adds by default).
//
// A request (context, continuation) is tokenized as the harness's _encode_pair does:
// the context's trailing whitespace moves to the front of the continuation; whole =
// encode(context + continuation), ctx = encode(context), each with BOS first when the
// tokenizer adds one (LLaMA: <s>; Qwen: none); the continuation's tokens are whole's
// after ctx's length (so a token merged across the boundary is sliced by length, as
// there). An empty context is [BOS, or EOS without one] and the continuation encoded
// alone. The model reads (ctx + continuation)[-(L+1):][:-1], L the model's context
// (max_position_embeddings), and the loglikelihood is the sum of the log-softmax of the
// continuation's tokens.
//
// Requests of one document share their tokens up to some point (the context, for every
// task but winogrande, whose two contexts share their start): that prefix runs once and
// each request's rest after it, the documents in order packed into batches of rows
// (model.h's model_forward_packed, layers.h's attention_packed segments), logits only for
// the rows that score.
//
// Metrics per task: acc = the mean of [first argmax of lls == gold], acc_norm the same
// with lls / the choice's length in code points; the standard error of a mean is the
// sample standard deviation (n - 1) over sqrt(n), as the harness's mean_stderr.
#ifndef BEST_ZEROSHOT_H
#define BEST_ZEROSHOT_H

#include <stddef.h>

#include "base/progress.h" // defines: Progress
#include "engine/engine.h"     // defines: EngineRows
#include "nn/model.h"      // defines: Model
#include "run/tasks.h"     // defines: Task, TaskDoc
#include "tok/tokenizer.h" // defines: Tokenizer

#define ZEROSHOT_HARNESS "lm-evaluation-harness >= 0.4.9.2 (multiple_choice, loglikelihood; BOS as the tokenizer adds it)"

typedef struct {
    size_t n, requests;               // documents, loglikelihood requests
    double acc, acc_stderr;           // stderr NaN when n < 2
    double acc_norm, acc_norm_stderr; // NaN when the task does not report acc_norm
} ZsResult;

// The work of a task: rows through the model (each document's shared prefix once), and
// the tokens of the requests' inputs summed (what one request a row would run).
typedef struct {
    size_t rows, inputs;
} ZsWork;

// lls: one array per document of t (t->docs[i].n loglikelihoods each), filled in; w (may
// be NULL) the work. The packed batches run on er (engine.h's rows, opened on m once for
// every task: the CPU's model_forward_packed, or CUDA's devmodel_forward_packed with
// bf16 matrix products, which tests/gpu/eval_check.sh compares with the CPU's: within 2%
// on an H200). max_length 0: the model's context. Progress counts requests. -1 after ERR
// (a continuation with no token of its own, or longer than max_length).
int zeroshot_score(double **lls, ZsWork *w, EngineRows *er, const Model *m, const Tokenizer *tok, const Task *t,
                   int max_length, Progress *pr);
// zeroshot_score_rows: the plain reference of the packed batches, one request a row
// through model_eval, the requests by length in batches of about 16k tokens, each row
// padded on the right (causal: the padding changes no earlier position); checked
// against zeroshot_score in tests/test_tasks.c.
int zeroshot_score_rows(double **lls, const Model *m, const Tokenizer *tok, const Task *t, int max_length,
                        Progress *pr);
// The metrics of a task from its lls; pred and pred_norm (t->n each, may be NULL) get
// the chosen index per document (pred_norm: -1 when the task has no acc_norm).
void zeroshot_metrics(ZsResult *r, int *pred, int *pred_norm, const Task *t, double *const *lls);
// The mean of x (n; NaN for none) and its standard error, the harness's mean_stderr: the
// sample standard deviation (n - 1) over sqrt(n); NaN for n < 2.
void zeroshot_mean_stderr(double *mean, double *se, const double *x, size_t n);
// A group of k results as the harness aggregates one whose aggregate_metric_list says
// weight_by_size (MMLU's, over its leaf subjects): acc the mean weighted by documents, its
// stderr the pooled sample stderr of lm_eval/api/metrics.py,
// sqrt(sum_i (n_i - 1) n_i se_i^2 / (N - k) / N) with N = sum_i n_i (NaN when a part's is);
// n and requests summed. acc_norm: NaN (MMLU reports acc).
void zeroshot_pool(ZsResult *r, const ZsResult *parts, int k);

#endif
