// tasks.h: the seven zero-shot tasks of the pruning literature as lm-evaluation-harness
// defines them (its task files lm_eval/tasks/..., the same since v0.4.2): each document
// of a task becomes the harness's loglikelihood requests, one (context, continuation)
// pair per choice, with the gold choice and what acc_norm divides by.
//
//   task           file records (HF layout)                 context                                       choices
//   arc_easy       ai2_arc ARC-Easy test: question,          "Question: {question}\nAnswer:"               choices.text;
//   arc_challenge  choices {text, label}, answerKey          (ARC-Challenge test the same)                 gold = label index of answerKey
//   boolq          super_glue boolq validation: passage,     "{passage}\nQuestion: {question}?\nAnswer:"   no, yes; gold = label
//                  question, label
//   hellaswag      hellaswag validation: activity_label,     preprocess(activity_label + ": " + ctx_a +    preprocess(each ending);
//                  ctx_a, ctx_b, endings, label              " " + capitalize(ctx_b))                      gold = int(label)
//   openbookqa     openbookqa main test: question_stem,      question_stem as it is                        choices.text; gold = label
//                  choices {text, label}, answerKey                                                        index of answerKey.lstrip()
//   rte            glue rte validation: sentence1,           "{sentence1}\nQuestion: {sentence2} True or   True, False; gold = label
//                  sentence2, label (0 = entailment)         False?\nAnswer:"                              (0 -> True)
//   winogrande     winogrande_xl validation: sentence,       one per option: the sentence up to its "_"    the rest after "_", stripped,
//                  option1, option2, answer ("1", "2")       with the option in its place                  shared; gold = answer - 1
//
// Continuations are " " + the choice (winogrande: " " + the rest). HellaSwag's preprocess:
// strip, " [title]" -> ". ", every "[...]" (no newline inside) removed, "  " -> " " in one
// pass; capitalize is Python's (the first character title case, the rest lower case; one
// code point to one, utf8proc's simple mappings). acc for every task, acc_norm (the
// loglikelihood over the choice's length in code points) for arc_easy, arc_challenge,
// hellaswag and openbookqa, as the harness reports them.
//
// A task is read from DIR/NAME.jsonl (or .jsonl.gz, .jsonl.zst, .json, .json.gz): the
// records as the Hugging Face dataset's to_json() writes them, one JSON object a line.
#ifndef BEST_TASKS_H
#define BEST_TASKS_H

#include <stddef.h>

#define TASK_NAMES "arc_easy,arc_challenge,boolq,hellaswag,openbookqa,rte,winogrande"

typedef struct {
    int n;          // choices (requests)
    char **ctx;     // (n) contexts: the same text n times but for winogrande
    char **cont;    // (n) continuations
    double *len;    // (n) the choice's length in code points (acc_norm's divisor)
    int gold;       // index of the right choice
} TaskDoc;

typedef struct {
    const char *name;  // one of TASK_NAMES
    const char *split; // the split the harness evaluates ("test", "validation")
    const char *version; // the harness's version of the task ("1.0")
    int acc_norm;      // the harness reports acc_norm for it
    char *path;        // the file read
    TaskDoc *docs;
    size_t n;
} Task;

// The task name (one of TASK_NAMES) read from dir; limit > 0 keeps only the first
// limit documents. A record without a field the task needs, or with a gold answer that
// names no choice, is an error naming the file and line.
int task_load(Task *t, const char *dir, const char *name, size_t limit);
void task_free(Task *t);
// 1 when name is one of TASK_NAMES.
int task_known(const char *name);

// HellaSwag's text cleaning and Python's str.capitalize (above), as new strings.
char *task_hellaswag_preprocess(const char *text);
char *task_capitalize(const char *text);

#endif
