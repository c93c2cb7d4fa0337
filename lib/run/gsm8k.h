// gsm8k.h: GSM8K as lm-evaluation-harness's gsm8k task defines it (lm_eval/tasks/gsm8k/
// gsm8k.yaml, version 3.0, as in 0.4.13): a generate_until task scored by exact match.
//
//   records     DIR/gsm8k.jsonl(.gz): the test split of openai/gsm8k "main" (question,
//               answer: the worked solution ending in "#### N"); K-shot examples from
//               DIR/gsm8k_train.jsonl(.gz), the train split
//   prompt      K examples "Question: {q}\nAnswer: {answer}\n\n", then
//               "Question: {question}\nAnswer:"; the examples drawn for document i by
//               random.Random(1234).sample(train, K), one generator for the documents in
//               order (the harness's default sampler with its fewshot seed; pyrandom.h)
//   generation  greedy, at most 256 new tokens, until "Question:", "</s>", "<|im_end|>" or
//               the tokenizer's EOS; the context cut on the left to the model's context less
//               256 tokens; the text is the new tokens decoded and cut at the first of each
//               stop string in turn (HFLM.generate_until, postprocess_generated_text)
//   filters     strict-match: the first match of "#### (\-?[0-9\.\,]+)", its group;
//               flexible-extract: the last match of "(-?[$0-9.,]{2,})|(-?[0-9]+)", its first
//               non-empty group; each stripped; "[invalid]" without a match
//   metric      exact_match: answer and target (the record's answer) with ",", "\$",
//               "(?s).*#### " and "\.$" removed (re.sub, each in turn), lower-cased, equal
#ifndef BEST_GSM8K_H
#define BEST_GSM8K_H

#include <stddef.h>

#include "engine/engine.h" // defines: Engine
#include "nn/model.h"      // defines: Model
#include "tok/tokenizer.h" // defines: Tokenizer

#define GSM8K_VERSION "3.0"
#define GSM8K_MAX_GEN 256 // the harness's max_gen_toks

typedef struct {
    char *context; // the prompt
    char *target;  // the record's answer
} Gsm8kDoc;

typedef struct {
    char *path; // the test file read
    Gsm8kDoc *docs;
    size_t n;
    int num_fewshot;
} Gsm8kTask;

// The first limit documents (0: all) of DIR/gsm8k.jsonl with num_fewshot examples each from
// DIR/gsm8k_train.jsonl (read only for num_fewshot > 0). -1 after ERR naming the file and
// line (a record without "question" or "answer", fewer train records than num_fewshot).
int gsm8k_load(Gsm8kTask *t, const char *dir, size_t limit, int num_fewshot);
void gsm8k_free(Gsm8kTask *t);

// The filters' answer (new string) in text (len bytes; it may hold NUL bytes, as a
// generation can): flexible 0 strict-match, 1 flexible-extract.
char *gsm8k_extract(const char *text, size_t len, int flexible);
// exact_match's normalisation of an answer or a target (new string).
char *gsm8k_normalize(const char *s);
// The text generated for context (new, NUL-terminated, *text_len bytes before that; valid
// UTF-8 as HF's decode makes it, NUL bytes included), and its tokens (n_tokens, may be
// NULL). -1 after ERR.
int gsm8k_generate(char **text, size_t *text_len, size_t *n_tokens, Engine *e, const Model *m,
                   const Tokenizer *tok, const char *context);

#endif
