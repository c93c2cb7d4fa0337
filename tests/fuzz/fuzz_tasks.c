// fuzz_tasks.c: libFuzzer target for the zero-shot task files (run/tasks.h, task_load):
// the first byte picks the task, the rest is the file (JSON lines); the same bytes are its
// split of examples too (NAME_train, mmlu_dev, gsm8k_train), and the first byte's bits 4-5
// pick 0, 1 or 2 examples. gsm8k (run/gsm8k.h, gsm8k_load): prompts and targets that are strings. Whatever is accepted
// must be documents the scorer can use: at least one choice each, a gold index among
// them, contexts and continuations that are strings, choice lengths >= 0.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run/gsm8k.h"
#include "run/tasks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char *names[] = {"arc_easy", "arc_challenge", "boolq",      "hellaswag",
                                  "openbookqa", "rte",         "winogrande", "mmlu", "gsm8k"};
    static char dir[64];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/fuzz_tasks.%d", (int)getpid());
        mkdir(dir, 0700);
    }
    if (size < 1) return 0;
    const char *name = names[data[0] % 9];
    int gsm = name[0] == 'g', shots = (data[0] >> 4) % 3;
    char path[128], dev[128];
    snprintf(path, sizeof path, "%s/%s.jsonl", dir, name);
    snprintf(dev, sizeof dev, "%s/%s%s.jsonl", dir, name[0] == 'm' ? "mmlu_dev" : name, name[0] == 'm' ? "" : "_train");
    for (int k = 0; k < 1 + (shots > 0); k++) {
        FILE *f = fopen(k ? dev : path, "wb");
        if (!f) return 0;
        fwrite(data + 1, 1, size - 1, f);
        fclose(f);
    }
    if (gsm) {
        Gsm8kTask g;
        if (gsm8k_load(&g, dir, 0, shots) == 0) {
            if (g.n == 0) abort();
            for (size_t d = 0; d < g.n; d++)
                if (!g.docs[d].context || !g.docs[d].target || !strstr(g.docs[d].context, "Question: ")) abort();
            gsm8k_free(&g);
        }
        unlink(path);
        unlink(dev);
        return 0;
    }
    Task t;
    if (task_load_fewshot(&t, dir, name, 0, shots) == 0) {
        if (t.n == 0) abort();
        for (size_t d = 0; d < t.n; d++) {
            const TaskDoc *doc = &t.docs[d];
            if (doc->n < 1 || doc->gold < 0 || doc->gold >= doc->n) abort();
            for (int i = 0; i < doc->n; i++)
                if (!doc->ctx[i] || !doc->cont[i] || !(doc->len[i] >= 0) || doc->cont[i][0] != ' ') abort();
        }
        task_free(&t);
    }
    unlink(path);
    unlink(dev);
    return 0;
}
