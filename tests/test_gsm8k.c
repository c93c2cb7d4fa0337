// test_gsm8k.c: GSM8K's answer extraction and exact_match normalisation (run/gsm8k.h)
// against lm-evaluation-harness's: the expected strings below were produced by the
// harness's code as tests/gsm8k_ref.py writes it again (RegexFilter + take_first over
// gsm8k.yaml's two patterns; exact_match_hf_evaluate's regexes_to_ignore and lower case),
// run by Python's re on each input (2026-11-29); the end to end check against transformers'
// generations is tests/t_zeroshot.sh's. Also: NUL bytes inside a generation.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/gsm8k.h"
#include "test.h"

static const struct {
    const char *text, *strict, *flexible;
} EXTRACT[] = {
    {"The answer is 42.\n#### 42", "42", "42"},
    {"#### 1,234.", "1,234.", "1,234."},
    {"so $18 total. #### $18", "[invalid]", "$18"},
    {"no number here", "[invalid]", "[invalid]"},
    {"#### -7 and #### 8", "-7", "8"},
    {"It costs $1,000.50 and then 3 more", "[invalid]", "3"},
    {"a 5 b 6", "[invalid]", "6"},
    {"x -12.5.", "[invalid]", "-12.5."},
    {"#### 72\n\nQuestion: next", "72", "72"},
    {"5,", "[invalid]", "5,"},
    {"..", "[invalid]", ".."},
    {"$.", "[invalid]", "$."},
    {"- 3", "[invalid]", "3"},
    {"The total is 2.5\n", "[invalid]", "2.5"},
    {"##### 9", "9", "9"},
    {"####  10", "[invalid]", "10"},
    {"answer: 1,2,3 or 4", "[invalid]", "4"},
    {"x\xc2""\xa0""#### 3\xc2""\xa0""", "3", "3"},
    {"$$ 12 $", "[invalid]", "12"},
    {"#### 4\n#### 5", "4", "5"},
};

static const struct {
    const char *in, *out;
} NORMALIZE[] = {
    {"He sold 48 + 24 = <<48+24=72>>72.\n#### 72", "72"},
    {"#### 1,234", "1234"},
    {"Total: $18.\n#### 18", "18"},
    {"#### -2", "-2"},
    {"#### 3.", "3"},
    {"#### Ab", "ab"},
    {"x.\n", "x\n"},
    {"\xc3""\x89""T\xc3""\x89"" #### \xc3""\x89""T\xc3""\x89""", "\xc3""\xa9""t\xc3""\xa9"""},
    {"$.", ""},
    {"$18", "18"},
    {"-12.5.", "-12.5"},
    {"..", "."},
    {"1,234.", "1234"},
    {"10", "10"},
    {"12", "12"},
    {"2.5", "2.5"},
    {"3", "3"},
    {"4", "4"},
    {"42", "42"},
    {"5", "5"},
    {"5,", "5"},
    {"6", "6"},
    {"72", "72"},
    {"8", "8"},
    {"9", "9"},
    {"[invalid]", "[invalid]"},
};

int main(void) {
    size_t bad = 0, n = sizeof EXTRACT / sizeof *EXTRACT;
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 2; k++) {
            char *got = gsm8k_extract(EXTRACT[i].text, strlen(EXTRACT[i].text), k);
            const char *want = k ? EXTRACT[i].flexible : EXTRACT[i].strict;
            if (strcmp(got, want) != 0) {
                fprintf(stderr, "# %s of \"%s\": \"%s\", the harness's \"%s\"\n", k ? "flexible" : "strict",
                        EXTRACT[i].text, got, want);
                bad++;
            }
            free(got);
        }
    T_OK(bad == 0, "strict-match and flexible-extract of %zu texts: the harness's answers (%zu differ)", n, bad);
    bad = 0, n = sizeof NORMALIZE / sizeof *NORMALIZE;
    for (size_t i = 0; i < n; i++) {
        char *got = gsm8k_normalize(NORMALIZE[i].in);
        if (strcmp(got, NORMALIZE[i].out) != 0) {
            fprintf(stderr, "# normalize \"%s\": \"%s\", the harness's \"%s\"\n", NORMALIZE[i].in, got, NORMALIZE[i].out);
            bad++;
        }
        free(got);
    }
    T_OK(bad == 0, "exact_match's normalisation of %zu answers and targets: the harness's (%zu differ)", n, bad);
    // a generation with a NUL byte: the text after it is still searched (Python's str has no end there)
    static const char nul[] = "12 \0 then #### 34 and 56";
    char *s = gsm8k_extract(nul, sizeof nul - 1, 0), *f = gsm8k_extract(nul, sizeof nul - 1, 1);
    T_OK(strcmp(s, "34") == 0 && strcmp(f, "56") == 0, "a NUL byte inside a generation: strict \"%s\" (34), flexible \"%s\" (56)", s, f);
    free(s);
    free(f);
    T_DONE();
}
