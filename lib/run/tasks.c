// tasks.c: lm-evaluation-harness's zero-shot task documents (tasks.h).
#include "run/tasks.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/error.h"  // defines: ERR, TRY, xmalloc, xstrdup
#include "base/fileio.h" // defines: path_join
#include "base/pyrandom.h" // defines: PyRandom, pyrandom_seed, pyrandom_sample
#include "base/utf8.h"   // defines: utf8_py_strip
#include "base/vec.h"    // defines: ByteVec
#include "io/docs.h"     // defines: docs_open, docs_next, docs_line

typedef struct {
    const char *name, *split, *version;
    int acc_norm;
} TaskInfo;

// the harness's task versions (metadata.version of each task file)
static const TaskInfo TASKS[] = {
    {"arc_easy", "test", "1.0", 1},        {"arc_challenge", "test", "1.0", 1}, {"boolq", "validation", "2.0", 0},
    {"hellaswag", "validation", "1.0", 1}, {"openbookqa", "test", "1.0", 1},    {"rte", "validation", "1.0", 0},
    {"winogrande", "validation", "1.0", 0},
};
enum { N_TASKS = sizeof TASKS / sizeof *TASKS };

static const TaskInfo *task_info(const char *name) {
    for (int i = 0; i < N_TASKS; i++)
        if (strcmp(TASKS[i].name, name) == 0) return &TASKS[i];
    return NULL;
}

// --- MMLU: its 57 subjects and their groups (each subject's "tag" in the harness) ----------

enum { G_STEM, G_OTHER, G_SOCIAL_SCIENCES, G_HUMANITIES };
const char *const TASK_MMLU_GROUPS[] = {"mmlu_stem", "mmlu_other", "mmlu_social_sciences", "mmlu_humanities"};
static const struct {
    const char *subject;
    int group;
} MMLU[] = {
    {"abstract_algebra", G_STEM}, {"anatomy", G_STEM}, {"astronomy", G_STEM}, {"business_ethics", G_OTHER},
    {"clinical_knowledge", G_OTHER}, {"college_biology", G_STEM}, {"college_chemistry", G_STEM},
    {"college_computer_science", G_STEM}, {"college_mathematics", G_STEM}, {"college_medicine", G_OTHER},
    {"college_physics", G_STEM}, {"computer_security", G_STEM}, {"conceptual_physics", G_STEM},
    {"econometrics", G_SOCIAL_SCIENCES}, {"electrical_engineering", G_STEM}, {"elementary_mathematics", G_STEM},
    {"formal_logic", G_HUMANITIES}, {"global_facts", G_OTHER}, {"high_school_biology", G_STEM},
    {"high_school_chemistry", G_STEM}, {"high_school_computer_science", G_STEM},
    {"high_school_european_history", G_HUMANITIES}, {"high_school_geography", G_SOCIAL_SCIENCES},
    {"high_school_government_and_politics", G_SOCIAL_SCIENCES}, {"high_school_macroeconomics", G_SOCIAL_SCIENCES},
    {"high_school_mathematics", G_STEM}, {"high_school_microeconomics", G_SOCIAL_SCIENCES},
    {"high_school_physics", G_STEM}, {"high_school_psychology", G_SOCIAL_SCIENCES},
    {"high_school_statistics", G_STEM}, {"high_school_us_history", G_HUMANITIES},
    {"high_school_world_history", G_HUMANITIES}, {"human_aging", G_OTHER}, {"human_sexuality", G_SOCIAL_SCIENCES},
    {"international_law", G_HUMANITIES}, {"jurisprudence", G_HUMANITIES}, {"logical_fallacies", G_HUMANITIES},
    {"machine_learning", G_STEM}, {"management", G_OTHER}, {"marketing", G_OTHER}, {"medical_genetics", G_OTHER},
    {"miscellaneous", G_OTHER}, {"moral_disputes", G_HUMANITIES}, {"moral_scenarios", G_HUMANITIES},
    {"nutrition", G_OTHER}, {"philosophy", G_HUMANITIES}, {"prehistory", G_HUMANITIES},
    {"professional_accounting", G_OTHER}, {"professional_law", G_HUMANITIES}, {"professional_medicine", G_OTHER},
    {"professional_psychology", G_SOCIAL_SCIENCES}, {"public_relations", G_SOCIAL_SCIENCES},
    {"security_studies", G_SOCIAL_SCIENCES}, {"sociology", G_SOCIAL_SCIENCES},
    {"us_foreign_policy", G_SOCIAL_SCIENCES}, {"virology", G_OTHER}, {"world_religions", G_HUMANITIES},
};
enum { MMLU_N = sizeof MMLU / sizeof *MMLU };
static char mmlu_names[MMLU_N][48]; // "mmlu_" + subject (the parts' names)

// want[MMLU_N]: the subjects name selects (mmlu, one of its groups, mmlu_SUBJECT); how many.
static int mmlu_select(int *want, const char *name) {
    int n = 0;
    for (int i = 0; i < MMLU_N; i++) {
        want[i] = strncmp(name, "mmlu", 4) == 0 &&
                  (strcmp(name, "mmlu") == 0 || strcmp(name, TASK_MMLU_GROUPS[MMLU[i].group]) == 0 ||
                   (strncmp(name, "mmlu_", 5) == 0 && strcmp(name + 5, MMLU[i].subject) == 0));
        n += want[i];
    }
    return n;
}

static int mmlu_subject(const char *s) {
    for (int i = 0; i < MMLU_N; i++)
        if (strcmp(MMLU[i].subject, s) == 0) return i;
    return -1;
}

int task_known(const char *name) {
    int want[MMLU_N];
    return task_info(name) != NULL || mmlu_select(want, name) > 0;
}


static size_t codepoints(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

// Python's str.isspace for ASCII (with \x1c-\x1f, which Python counts as whitespace).
static int py_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

static char *strip(const char *s) {
    size_t a = 0, b = strlen(s);
    while (a < b && py_space((unsigned char)s[a])) a++;
    while (b > a && py_space((unsigned char)s[b - 1])) b--;
    char *r = xmalloc(b - a + 1);
    memcpy(r, s + a, b - a);
    r[b - a] = '\0';
    return r;
}

char *task_hellaswag_preprocess(const char *text) {
    char *s = strip(text);
    ByteVec b = {0};
    // " [title]" -> ". "
    for (const char *p = s; *p;) {
        if (strncmp(p, " [title]", 8) == 0) { bytevec_append(&b, ". ", 2); p += 8; }
        else bytevec_push(&b, *p++);
    }
    bytevec_push(&b, '\0');
    free(s);
    // re.sub("\\[.*?\\]", "", text): from each '[' to the first ']' with no newline between
    ByteVec c = {0};
    for (const char *p = b.v; *p;) {
        if (*p == '[') {
            const char *q = p + 1;
            while (*q && *q != ']' && *q != '\n') q++;
            if (*q == ']') { p = q + 1; continue; }
        }
        bytevec_push(&c, *p++);
    }
    bytevec_push(&c, '\0');
    bytevec_free(&b);
    // "  " -> " ", one pass over non-overlapping pairs (three spaces stay two)
    ByteVec d = {0};
    for (const char *p = c.v; *p;) {
        if (p[0] == ' ' && p[1] == ' ') { bytevec_push(&d, ' '); p += 2; }
        else bytevec_push(&d, *p++);
    }
    bytevec_push(&d, '\0');
    bytevec_free(&c);
    return d.v;
}

char *task_capitalize(const char *text) {
    ByteVec b = {0};
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)text;
    utf8proc_ssize_t left = (utf8proc_ssize_t)strlen(text);
    for (int first = 1; left > 0; first = 0) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(p, left, &cp);
        if (k <= 0) { // not UTF-8 (docs.c checked it already): the byte as it is
            bytevec_push(&b, (char)*p);
            p++, left--;
            continue;
        }
        utf8proc_uint8_t out[4];
        utf8proc_ssize_t m = utf8proc_encode_char(first ? utf8proc_totitle(cp) : utf8proc_tolower(cp), out);
        bytevec_append(&b, out, (size_t)m);
        p += k, left -= k;
    }
    bytevec_push(&b, '\0');
    return b.v;
}

// --- one record -------------------------------------------------------------------------

typedef struct {
    const char *path;
    unsigned long long line;
} Where;

static const char *get_str(const Where *w, json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    if (!json_is_string(v)) {
        ERR("%s:%llu: no string field \"%s\"", w->path, w->line, key);
        return NULL;
    }
    return json_string_value(v);
}

// An integer field, also as a string of digits ("3") or a boolean (BoolQ's label may be one).
static int get_int(const Where *w, json_t *o, const char *key, int *out) {
    json_t *v = json_object_get(o, key);
    if (json_is_integer(v)) { *out = (int)json_integer_value(v); return 0; }
    if (json_is_boolean(v)) { *out = json_is_true(v); return 0; }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *end;
        long x = strtol(s, &end, 10);
        if (*s && !*end && x >= 0 && x < 1000) { *out = (int)x; return 0; }
    }
    return ERR("%s:%llu: no integer field \"%s\"", w->path, w->line, key);
}

static void doc_alloc(TaskDoc *d, int n) {
    d->n = n;
    d->ctx = xcalloc((size_t)n, sizeof *d->ctx);
    d->cont = xcalloc((size_t)n, sizeof *d->cont);
    d->len = xcalloc((size_t)n, sizeof *d->len);
    d->gold = -1;
}

static void doc_free(TaskDoc *d) {
    for (int i = 0; i < d->n; i++) free(d->ctx[i]), free(d->cont[i]);
    free(d->ctx);
    free(d->cont);
    free(d->len);
    memset(d, 0, sizeof *d);
}

// One context for every choice; continuation " " + choice.
static void doc_choices(TaskDoc *d, const char *ctx, const char *const *choices, int n) {
    doc_alloc(d, n);
    for (int i = 0; i < n; i++) {
        d->ctx[i] = xstrdup(ctx);
        d->cont[i] = xstrcat(" ", choices[i], NULL);
        d->len[i] = (double)codepoints(choices[i]);
    }
}

// ARC and OpenBookQA: choices {text: [...], label: [...]}, gold = the label's index.
static int doc_labeled(TaskDoc *d, const Where *w, json_t *o, const char *ctx, const char *key) {
    json_t *ch = json_object_get(o, "choices"), *text = json_object_get(ch, "text"), *lab = json_object_get(ch, "label");
    size_t n = json_array_size(text);
    if (!json_is_array(text) || !json_is_array(lab) || n == 0 || json_array_size(lab) != n)
        return ERR("%s:%llu: \"choices\" is not {\"text\": [...], \"label\": [...]} of one length", w->path, w->line);
    const char **choices = xcalloc(n, sizeof *choices);
    int gold = -1;
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(text, i), *l = json_array_get(lab, i);
        if (!json_is_string(t) || !json_is_string(l)) {
            free(choices);
            return ERR("%s:%llu: choice %zu is not a string with a string label", w->path, w->line, i);
        }
        choices[i] = json_string_value(t);
        if (gold < 0 && strcmp(json_string_value(l), key) == 0) gold = (int)i;
    }
    if (gold < 0) {
        free(choices);
        return ERR("%s:%llu: answerKey \"%s\" is none of the choices' labels", w->path, w->line, key);
    }
    doc_choices(d, ctx, choices, (int)n);
    d->gold = gold;
    free(choices);
    return 0;
}

static int doc_build(TaskDoc *d, const char *task, const Where *w, json_t *o) {
    if (strcmp(task, "arc_easy") == 0 || strcmp(task, "arc_challenge") == 0) {
        const char *q = get_str(w, o, "question"), *key = get_str(w, o, "answerKey");
        if (!q || !key) return -1;
        char *ctx = xstrcat("Question: ", q, "\nAnswer:", NULL);
        int rc = doc_labeled(d, w, o, ctx, key);
        free(ctx);
        return rc;
    }
    if (strcmp(task, "openbookqa") == 0) {
        const char *q = get_str(w, o, "question_stem"), *key = get_str(w, o, "answerKey");
        if (!q || !key) return -1;
        while (*key == ' ' || (*key >= '\t' && *key <= '\r')) key++; // answerKey.lstrip()
        return doc_labeled(d, w, o, q, key);
    }
    if (strcmp(task, "boolq") == 0 || strcmp(task, "rte") == 0) {
        int boolq = task[0] == 'b', label;
        const char *a = get_str(w, o, boolq ? "passage" : "sentence1");
        const char *b = a ? get_str(w, o, boolq ? "question" : "sentence2") : NULL;
        if (!b || get_int(w, o, "label", &label) < 0) return -1;
        static const char *const yes_no[] = {"no", "yes"}, *const true_false[] = {"True", "False"};
        char *ctx = boolq ? xstrcat(a, "\nQuestion: ", b, "?\nAnswer:", NULL)
                          : xstrcat(a, "\nQuestion: ", b, " True or False?\nAnswer:", NULL);
        doc_choices(d, ctx, boolq ? yes_no : true_false, 2);
        free(ctx);
        if (label != 0 && label != 1) return ERR("%s:%llu: label %d is not 0 or 1", w->path, w->line, label);
        d->gold = label;
        return 0;
    }
    if (strcmp(task, "hellaswag") == 0) {
        const char *act = get_str(w, o, "activity_label"), *ca = act ? get_str(w, o, "ctx_a") : NULL;
        const char *cb = ca ? get_str(w, o, "ctx_b") : NULL;
        json_t *ends = json_object_get(o, "endings");
        int label;
        if (!cb || get_int(w, o, "label", &label) < 0) return -1;
        size_t n = json_array_size(ends);
        if (!json_is_array(ends) || n == 0) return ERR("%s:%llu: \"endings\" is not a list of strings", w->path, w->line);
        char *capb = task_capitalize(cb), *raw = xstrcat(act, ": ", ca, " ", capb, NULL);
        char *ctx = task_hellaswag_preprocess(raw);
        free(capb);
        free(raw);
        char **choices = xcalloc(n, sizeof *choices);
        int rc = 0;
        for (size_t i = 0; i < n && rc == 0; i++) {
            json_t *e = json_array_get(ends, i);
            if (!json_is_string(e)) rc = ERR("%s:%llu: ending %zu is not a string", w->path, w->line, i);
            else choices[i] = task_hellaswag_preprocess(json_string_value(e));
        }
        if (rc == 0) doc_choices(d, ctx, (const char *const *)choices, (int)n);
        for (size_t i = 0; i < n; i++) free(choices[i]);
        free(choices);
        free(ctx);
        if (rc < 0) return rc;
        if (label < 0 || label >= (int)n) return ERR("%s:%llu: label %d names no ending", w->path, w->line, label);
        d->gold = label;
        return 0;
    }
    // winogrande
    const char *s = get_str(w, o, "sentence"), *o1 = s ? get_str(w, o, "option1") : NULL;
    const char *o2 = o1 ? get_str(w, o, "option2") : NULL, *ans = o2 ? get_str(w, o, "answer") : NULL;
    if (!ans) return -1;
    const char *blank = strchr(s, '_');
    if (!blank) return ERR("%s:%llu: the sentence has no \"_\" to fill", w->path, w->line);
    if (strcmp(ans, "1") != 0 && strcmp(ans, "2") != 0)
        return ERR("%s:%llu: answer \"%s\" is not \"1\" or \"2\"", w->path, w->line, ans);
    char *rest = strip(blank + 1), *head = xmalloc((size_t)(blank - s) + 1);
    memcpy(head, s, (size_t)(blank - s));
    head[blank - s] = '\0';
    doc_alloc(d, 2);
    const char *opt[2] = {o1, o2};
    for (int i = 0; i < 2; i++) {
        d->ctx[i] = xstrcat(head, opt[i], NULL);
        d->cont[i] = xstrcat(" ", rest, NULL);
        d->len[i] = (double)codepoints(d->ctx[i]); // the harness's choice is the context (acc only)
    }
    d->gold = ans[0] - '1';
    free(rest);
    free(head);
    return 0;
}

// --- files ------------------------------------------------------------------------------

int task_find_file(char **path, const char *dir, const char *name) {
    static const char *suffix[] = {".jsonl", ".jsonl.gz", ".jsonl.zst", ".json", ".json.gz"};
    for (size_t i = 0; i < sizeof suffix / sizeof *suffix; i++) {
        char *base = xstrcat(name, suffix[i], NULL);
        *path = path_join(dir, base);
        free(base);
        FILE *f = fopen(*path, "rb");
        if (f) { fclose(f); return 0; }
        free(*path);
    }
    *path = NULL;
    return ERR("%s: no %s.jsonl (or .jsonl.gz, .jsonl.zst, .json, .json.gz): the records of the Hugging Face dataset "
               "as to_json() writes them", dir, name);
}

// --- MMLU's files ---------------------------------------------------------------------------

// An MMLU record's question text "{question.strip()}\nA. ...\nD. ...\nAnswer:" (new), its
// answer (0-3) and subject index; -1 after ERR naming the line.
static int mmlu_record(char **text, int *answer, int *subject, const Where *w, json_t *o) {
    const char *q = get_str(w, o, "question"), *subj = q ? get_str(w, o, "subject") : NULL;
    if (!subj || get_int(w, o, "answer", answer) < 0) return -1;
    if ((*subject = mmlu_subject(subj)) < 0) return ERR("%s:%llu: subject \"%s\" is not one of MMLU's 57", w->path, w->line, subj);
    json_t *ch = json_object_get(o, "choices");
    const char *c[4];
    for (int i = 0; i < 4; i++) c[i] = json_string_value(json_array_get(ch, (size_t)i));
    if (!json_is_array(ch) || json_array_size(ch) != 4 || !c[0] || !c[1] || !c[2] || !c[3])
        return ERR("%s:%llu: \"choices\" is not a list of 4 strings", w->path, w->line);
    if (*answer < 0 || *answer > 3) return ERR("%s:%llu: answer %d is not 0, 1, 2 or 3", w->path, w->line, *answer);
    char *qs = utf8_py_strip(q);
    *text = xstrcat(qs, "\nA. ", c[0], "\nB. ", c[1], "\nC. ", c[2], "\nD. ", c[3], "\nAnswer:", NULL);
    free(qs);
    return 0;
}

// Calls each(arg, text, answer, subject, where) for every record of an MMLU file, in order;
// stops at the first error (-1).
typedef int (*MmluEach)(void *arg, char *text, int answer, int subject, const Where *w);
static int mmlu_read(const char *path, MmluEach each, void *arg) {
    DocReader *r;
    TRY(docs_open(&r, path, "", DOC_JSONL));
    const char *line;
    size_t len;
    int rc;
    while ((rc = docs_next(r, &line, &len)) == 1) {
        Where w = {path, (unsigned long long)docs_line(r)};
        json_error_t jerr;
        json_t *o = json_loadb(line, len, 0, &jerr);
        if (!o) { rc = ERR("%s:%llu: %s", w.path, w.line, jerr.text); break; }
        char *text = NULL;
        int answer = 0, subject = 0;
        rc = mmlu_record(&text, &answer, &subject, &w, o);
        json_decref(o);
        if (rc < 0) break;
        if ((rc = each(arg, text, answer, subject, &w)) < 0) break;
    }
    docs_close(r);
    return rc < 0 ? -1 : 0;
}

typedef struct {
    const int *want;
    int k;                 // examples a subject (dev) / limit a subject (test; 0: all)
    char *shots[MMLU_N];   // dev: the concatenated examples of each subject
    int have[MMLU_N];      // records kept of each subject
    TaskDoc *docs[MMLU_N]; // test: each subject's documents
    size_t cap[MMLU_N];
} MmluRead;

static const char LETTERS[4][3] = {" A", " B", " C", " D"};

static int mmlu_dev_each(void *arg, char *text, int answer, int subject, const Where *w) {
    (void)w;
    MmluRead *m = arg;
    if (m->want[subject] && m->have[subject] < m->k) {
        char *old = m->shots[subject];
        m->shots[subject] = xstrcat(old ? old : "", text, LETTERS[answer], "\n\n", NULL);
        free(old);
        m->have[subject]++;
    }
    free(text);
    return 0;
}

static int mmlu_test_each(void *arg, char *text, int answer, int subject, const Where *w) {
    (void)w;
    MmluRead *m = arg;
    if (!m->want[subject] || (m->k > 0 && m->have[subject] >= m->k)) { free(text); return 0; }
    size_t i = (size_t)m->have[subject]++;
    if (i == m->cap[subject]) {
        m->cap[subject] = m->cap[subject] ? 2 * m->cap[subject] : 64;
        m->docs[subject] = xrealloc(m->docs[subject], m->cap[subject] * sizeof *m->docs[subject]);
    }
    TaskDoc *d = &m->docs[subject][i];
    doc_alloc(d, 4);
    for (int c = 0; c < 4; c++) {
        d->ctx[c] = c == 0 ? text : xstrdup(text); // the context: completed in task_load_mmlu
        d->cont[c] = xstrdup(LETTERS[c]);
        d->len[c] = 1;
    }
    d->gold = answer;
    return 0;
}

static int task_load_mmlu(Task *t, const char *dir, const char *name, size_t limit, int num_fewshot) {
    int want[MMLU_N];
    mmlu_select(want, name);
    t->name = name;
    t->split = "test";
    int subjects = 0;
    for (int i = 0; i < MMLU_N; i++) subjects += want[i];
    t->version = subjects > 1 ? "2" : "1.0"; // a group's metadata version, a subject's
    t->num_fewshot = num_fewshot;
    MmluRead test = {want, (int)(limit > 0x7fffffff ? 0x7fffffff : limit), {0}, {0}, {0}, {0}};
    int rc = task_find_file(&t->path, dir, "mmlu");
    if (rc == 0) rc = mmlu_read(t->path, mmlu_test_each, &test);
    // the examples of the subjects that have documents (a subject without: left out)
    int keep[MMLU_N], missing = 0;
    for (int i = 0; i < MMLU_N; i++) keep[i] = want[i] && test.have[i] > 0, missing += want[i] && !keep[i];
    if (rc == 0 && missing && subjects > 1)
        fprintf(stderr, "note: %s: %d of the %d subjects of %s have no records: left out of it\n", t->path, missing,
                subjects, name);
    MmluRead dev = {keep, num_fewshot, {0}, {0}, {0}, {0}};
    if (rc == 0 && num_fewshot > 0) {
        char *dpath;
        if (task_find_file(&dpath, dir, "mmlu_dev") < 0)
            rc = ERR("%s: no mmlu_dev.jsonl (or .jsonl.gz, ...), the dev split of cais/mmlu that %d-shot examples "
                     "come from", dir, num_fewshot);
        else {
            rc = mmlu_read(dpath, mmlu_dev_each, &dev);
            for (int i = 0; rc == 0 && i < MMLU_N; i++)
                if (keep[i] && dev.have[i] < num_fewshot)
                    rc = ERR("%s: %d records of subject %s, fewer than the %d examples asked for", dpath, dev.have[i],
                             MMLU[i].subject, num_fewshot);
            free(dpath);
        }
    }
    // the documents in subject order, each context description + examples + question
    size_t n = 0;
    for (int i = 0; i < MMLU_N; i++) n += (size_t)test.have[i];
    t->docs = xcalloc(n ? n : 1, sizeof *t->docs);
    t->parts = xcalloc(MMLU_N, sizeof *t->parts);
    for (int i = 0; i < MMLU_N; i++) {
        if (!keep[i]) continue;
        if (!mmlu_names[i][0]) snprintf(mmlu_names[i], sizeof mmlu_names[i], "mmlu_%s", MMLU[i].subject);
        TaskPart *p = &t->parts[t->n_parts++];
        p->name = mmlu_names[i], p->group = TASK_MMLU_GROUPS[MMLU[i].group], p->first = t->n, p->n = (size_t)test.have[i];
        char *subj = xstrdup(MMLU[i].subject);
        for (char *c = subj; *c; c++)
            if (*c == '_') *c = ' ';
        char *head = xstrcat("The following are multiple choice questions (with answers) about ", subj, ".\n\n",
                         dev.shots[i] ? dev.shots[i] : "", NULL);
        free(subj);
        for (int j = 0; j < test.have[i]; j++) {
            TaskDoc *d = &test.docs[i][j];
            for (int c = 0; c < 4; c++) {
                char *full = xstrcat(head, d->ctx[c], NULL);
                free(d->ctx[c]);
                d->ctx[c] = full;
            }
            t->docs[t->n++] = *d;
        }
        free(head);
        free(test.docs[i]);
        free(dev.shots[i]);
    }
    for (int i = 0; i < MMLU_N; i++)
        if (!keep[i]) { // (nothing kept of a subject not asked for, or without documents)
            free(test.docs[i]);
            free(dev.shots[i]);
        }
    if (rc == 0 && t->n == 0) rc = ERR("%s: no records of %s", t->path, name);
    if (rc < 0) {
        task_free(t);
        return -1;
    }
    return 0;
}

int task_load(Task *t, const char *dir, const char *name, size_t limit) {
    return task_load_fewshot(t, dir, name, limit, 0);
}

// The documents of task name in path (the first limit; 0: all) into *docs (*n of them).
static int read_docs(TaskDoc **docs, size_t *n, const char *path, const char *name, size_t limit) {
    *docs = NULL, *n = 0;
    DocReader *r;
    TRY(docs_open(&r, path, "", DOC_JSONL));
    size_t cap = 0;
    const char *text;
    size_t len;
    int rc = 0;
    while ((limit == 0 || *n < limit) && (rc = docs_next(r, &text, &len)) == 1) {
        Where w = {path, (unsigned long long)docs_line(r)};
        json_error_t jerr;
        json_t *o = json_loadb(text, len, 0, &jerr);
        if (!o) { rc = ERR("%s:%llu: %s", w.path, w.line, jerr.text); break; }
        if (*n == cap) {
            cap = cap ? 2 * cap : 256;
            *docs = xrealloc(*docs, cap * sizeof **docs);
        }
        TaskDoc *d = &(*docs)[*n];
        memset(d, 0, sizeof *d);
        rc = doc_build(d, name, &w, o);
        json_decref(o);
        (*n)++;
        if (rc < 0) break;
    }
    docs_close(r);
    if (rc >= 0 && *n == 0) rc = ERR("%s: no records", path);
    if (rc < 0) {
        for (size_t i = 0; i < *n; i++) doc_free(&(*docs)[i]);
        free(*docs);
        *docs = NULL, *n = 0;
        return -1;
    }
    return 0;
}

// K-shot examples before each document of t (the seven tasks): the harness's default
// sampler over DIR/NAME_train.jsonl, one random.Random(1234) for the documents in order;
// where the task evaluates its validation split (no test split) the harness hands the
// document to the sampler, which draws K + 1 and keeps the first K (the document, from
// another split, is never among them). Each example is its gold context and continuation
// ("{context} {answer}"; winogrande's context with the right option) and "\n\n".
static int add_fewshot(Task *t, const char *dir, int k) {
    char *base = xstrcat(t->name, "_train", NULL), *path = NULL;
    int rc = task_find_file(&path, dir, base);
    free(base);
    if (rc < 0) return ERR("%s: no %s_train.jsonl, the training split that %d-shot examples come from", dir, t->name, k);
    TaskDoc *train;
    size_t ntrain;
    rc = read_docs(&train, &ntrain, path, t->name, 0);
    size_t draw = (size_t)k + (strcmp(t->split, "validation") == 0);
    if (rc == 0 && ntrain < draw)
        rc = ERR("%s: %zu records, fewer than the %zu the sampler draws for %d examples", path, ntrain, draw, k);
    free(path);
    if (rc < 0) {
        for (size_t i = 0; i < ntrain; i++) doc_free(&train[i]);
        free(train);
        return -1;
    }
    PyRandom rnd;
    pyrandom_seed(&rnd, TASK_FEWSHOT_SEED);
    size_t *pick = xmalloc(draw * sizeof *pick);
    for (size_t d = 0; d < t->n; d++) {
        ByteVec b = {0};
        pyrandom_sample(pick, &rnd, ntrain, draw);
        for (int e = 0; e < k; e++) {
            const TaskDoc *x = &train[pick[e]];
            bytevec_append(&b, x->ctx[x->gold], strlen(x->ctx[x->gold]));
            bytevec_append(&b, x->cont[x->gold], strlen(x->cont[x->gold]));
            bytevec_append(&b, "\n\n", 2);
        }
        bytevec_push(&b, '\0');
        TaskDoc *doc = &t->docs[d];
        for (int i = 0; i < doc->n; i++) {
            char *full = xstrcat(b.v, doc->ctx[i], NULL);
            free(doc->ctx[i]);
            doc->ctx[i] = full;
        }
        free(b.v);
    }
    free(pick);
    for (size_t i = 0; i < ntrain; i++) doc_free(&train[i]);
    free(train);
    t->num_fewshot = k;
    return 0;
}

int task_load_fewshot(Task *t, const char *dir, const char *name, size_t limit, int num_fewshot) {
    memset(t, 0, sizeof *t);
    int want[MMLU_N];
    if (num_fewshot < 0) return ERR("--num-fewshot %d: not a count", num_fewshot);
    if (!task_info(name) && mmlu_select(want, name) > 0) return task_load_mmlu(t, dir, name, limit, num_fewshot);
    const TaskInfo *info = task_info(name);
    if (!info) return ERR("unknown task \"%s\" (tasks: %s; %s)", name, TASK_NAMES, TASK_NAMES_MMLU);
    t->name = info->name;
    t->split = info->split;
    t->version = info->version;
    t->acc_norm = info->acc_norm;
    TRY(task_find_file(&t->path, dir, name));
    if (read_docs(&t->docs, &t->n, t->path, name, limit) < 0 || (num_fewshot > 0 && add_fewshot(t, dir, num_fewshot) < 0)) {
        task_free(t);
        return -1;
    }
    return 0;
}

void task_free(Task *t) {
    for (size_t i = 0; i < t->n; i++) doc_free(&t->docs[i]);
    free(t->docs);
    free(t->path);
    free(t->parts);
    memset(t, 0, sizeof *t);
}
