// tasks.c: lm-evaluation-harness's zero-shot task documents (tasks.h).
#include "run/tasks.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/error.h"  // defines: ERR, TRY, xmalloc, xstrdup
#include "base/fileio.h" // defines: path_join
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

int task_known(const char *name) { return task_info(name) != NULL; }

// A new string: the concatenation of the NULL-terminated arguments.
static char *cat(const char *first, ...) {
    ByteVec b = {0};
    va_list ap;
    va_start(ap, first);
    for (const char *s = first; s; s = va_arg(ap, const char *)) bytevec_append(&b, s, strlen(s));
    va_end(ap);
    bytevec_push(&b, '\0');
    return b.v;
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
        d->cont[i] = cat(" ", choices[i], NULL);
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
        char *ctx = cat("Question: ", q, "\nAnswer:", NULL);
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
        char *ctx = boolq ? cat(a, "\nQuestion: ", b, "?\nAnswer:", NULL)
                          : cat(a, "\nQuestion: ", b, " True or False?\nAnswer:", NULL);
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
        char *capb = task_capitalize(cb), *raw = cat(act, ": ", ca, " ", capb, NULL);
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
        d->ctx[i] = cat(head, opt[i], NULL);
        d->cont[i] = cat(" ", rest, NULL);
        d->len[i] = (double)codepoints(d->ctx[i]); // the harness's choice is the context (acc only)
    }
    d->gold = ans[0] - '1';
    free(rest);
    free(head);
    return 0;
}

// --- files ------------------------------------------------------------------------------

static int find_file(char **path, const char *dir, const char *name) {
    static const char *suffix[] = {".jsonl", ".jsonl.gz", ".jsonl.zst", ".json", ".json.gz"};
    for (size_t i = 0; i < sizeof suffix / sizeof *suffix; i++) {
        char *base = cat(name, suffix[i], NULL);
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

int task_load(Task *t, const char *dir, const char *name, size_t limit) {
    memset(t, 0, sizeof *t);
    const TaskInfo *info = task_info(name);
    if (!info) return ERR("unknown task \"%s\" (tasks: %s)", name, TASK_NAMES);
    t->name = info->name;
    t->split = info->split;
    t->version = info->version;
    t->acc_norm = info->acc_norm;
    TRY(find_file(&t->path, dir, name));
    DocReader *r;
    if (docs_open(&r, t->path, "", DOC_JSONL) < 0) { task_free(t); return -1; }
    size_t cap = 0;
    const char *text;
    size_t len;
    int rc = 0;
    while ((limit == 0 || t->n < limit) && (rc = docs_next(r, &text, &len)) == 1) {
        Where w = {t->path, (unsigned long long)docs_line(r)};
        json_error_t jerr;
        json_t *o = json_loadb(text, len, 0, &jerr);
        if (!o) { rc = ERR("%s:%llu: %s", w.path, w.line, jerr.text); break; }
        if (t->n == cap) {
            cap = cap ? 2 * cap : 256;
            t->docs = xrealloc(t->docs, cap * sizeof *t->docs);
        }
        TaskDoc *d = &t->docs[t->n];
        memset(d, 0, sizeof *d);
        rc = doc_build(d, name, &w, o);
        json_decref(o);
        t->n++;
        if (rc < 0) break;
    }
    docs_close(r);
    if (rc < 0) { task_free(t); return -1; }
    if (t->n == 0) {
        ERR("%s: no records", t->path);
        task_free(t);
        return -1;
    }
    return 0;
}

void task_free(Task *t) {
    for (size_t i = 0; i < t->n; i++) doc_free(&t->docs[i]);
    free(t->docs);
    free(t->path);
    memset(t, 0, sizeof *t);
}
