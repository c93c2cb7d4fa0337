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
//
// MMLU (the harness's lm_eval/tasks/mmlu/default, as in 0.4.13: subjects version 1.0,
// groups version 2): DIR/mmlu.jsonl holds the test split of cais/mmlu's "all" (question,
// subject, choices: 4 strings, answer: 0-3). The names: mmlu (all 57 subjects), its groups
// mmlu_stem, mmlu_other, mmlu_social_sciences, mmlu_humanities, and mmlu_SUBJECT (one
// subject); a subject without records in the file is left out of mmlu and its groups, with
// a note. A document's context is the description "The following are multiple choice
// questions (with answers) about SUBJECT.\n\n" (SUBJECT with spaces for "_"), then, for
// K-shot, K examples "Q A\n\n" each (Q the example's question text below, A its answer's
// letter), then "{question.strip()}\nA. {c0}\nB. {c1}\nC. {c2}\nD. {c3}\nAnswer:"; the
// choices " A" .. " D"; acc. The examples are the first K records of the subject in
// DIR/mmlu_dev.jsonl (the dev split; the harness's first_n sampler), read only for K > 0.
// A task of several subjects has one part per subject (its documents contiguous, in
// subject order); --limit keeps the first documents of each subject, as the harness's
// per-task limit.
//
// K-shot for the seven tasks (task_load_fewshot): K examples "{context} {answer}\n\n" (the
// gold request's context and continuation) before each context, drawn from
// DIR/NAME_train.jsonl by the harness's default sampler: one random.Random(1234) for the
// documents in order, sample(train, K) each, K + 1 (the first K kept) for the tasks it
// evaluates on validation (boolq, hellaswag, rte, winogrande), to which it hands the
// document to leave out.
#ifndef BEST_TASKS_H
#define BEST_TASKS_H

#include <stddef.h>

#define TASK_NAMES "arc_easy,arc_challenge,boolq,hellaswag,openbookqa,rte,winogrande" // (--tasks all)
#define TASK_NAMES_MMLU "mmlu, its groups mmlu_stem, mmlu_other, mmlu_social_sciences, mmlu_humanities, mmlu_SUBJECT"

typedef struct {
    int n;          // choices (requests)
    char **ctx;     // (n) contexts: the same text n times but for winogrande
    char **cont;    // (n) continuations
    double *len;    // (n) the choice's length in code points (acc_norm's divisor)
    int gold;       // index of the right choice
} TaskDoc;

// A subject of MMLU within a task: its documents docs[first, first + n).
typedef struct {
    const char *name;  // the harness's task name, "mmlu_abstract_algebra"
    const char *group; // its group's, "mmlu_stem"
    size_t first, n;
} TaskPart;

typedef struct {
    const char *name;  // one of TASK_NAMES (for MMLU, the name asked for)
    const char *split; // the split the harness evaluates ("test", "validation")
    const char *version; // the harness's version of the task ("1.0"; MMLU's groups "2")
    int acc_norm;      // the harness reports acc_norm for it
    int num_fewshot;   // examples before each document (MMLU only; else 0)
    char *path;        // the file read
    TaskDoc *docs;
    size_t n;
    TaskPart *parts;   // (n_parts) MMLU's subjects, in subject order; NULL for the others
    int n_parts;
} Task;

// The task name (one of TASK_NAMES) read from dir; limit > 0 keeps only the first
// limit documents (of each subject, for MMLU). A record without a field the task needs,
// or with a gold answer that names no choice, is an error naming the file and line.
int task_load(Task *t, const char *dir, const char *name, size_t limit);
// *path (new) = DIR/NAME.jsonl, or .jsonl.gz, .jsonl.zst, .json, .json.gz, the first that
// opens; -1 after ERR naming dir and NAME when none does.
int task_find_file(char **path, const char *dir, const char *name);
// The harness's fewshot_random_seed: its samplers' random.Random seed.
#define TASK_FEWSHOT_SEED 1234
// task_load with num_fewshot examples before each document (above). A missing
// NAME_train.jsonl (mmlu_dev.jsonl), or fewer records than the sampler draws (than
// num_fewshot for an MMLU subject), is an error naming the file.
int task_load_fewshot(Task *t, const char *dir, const char *name, size_t limit, int num_fewshot);
// MMLU's groups in the harness's order of its mmlu group ("mmlu_stem", ...), and their
// count.
extern const char *const TASK_MMLU_GROUPS[];
enum { TASK_MMLU_N_GROUPS = 4 };
void task_free(Task *t);
// 1 when name is one of TASK_NAMES.
int task_known(const char *name);

// HellaSwag's text cleaning and Python's str.capitalize (above), as new strings.
char *task_hellaswag_preprocess(const char *text);
char *task_capitalize(const char *text);

#endif
