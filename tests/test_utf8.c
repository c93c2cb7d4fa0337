// test_utf8.c: strict UTF-8 validation and repair (utf8.h) against Python's own
// decoder on fixed cases: what str.decode accepts, utf8_valid accepts; utf8_repair
// leaves valid text alone and turns each offending byte into U+FFFD.
#include <string.h>

#include "base/error.h"
#include "base/utf8.h"
#include "test.h"

typedef struct { const char *s; size_t n; int valid; size_t bad_at; } Case;

int main(void) {
    // verdicts as Python 3's bytes.decode("utf-8") gives them (strict)
    static const Case cases[] = {
        {"", 0, 1, 0},
        {"plain ascii text", 16, 1, 0},
        {"caf\xC3\xA9", 5, 1, 0},
        {"\xE2\x82\xAC euro", 8, 1, 0},
        {"\xF0\x9F\x98\x80", 4, 1, 0},
        {"\xC0\xAF", 2, 0, 0},              // overlong '/'
        {"ab\xED\xA0\x80", 5, 0, 2},        // surrogate U+D800
        {"\xF4\x90\x80\x80", 4, 0, 0},      // past U+10FFFF
        {"abc\xE2\x82", 5, 0, 3},           // truncated at the end
        {"x\x80y", 3, 0, 1},                // lone continuation byte
        {"0123456789\xFF", 11, 0, 10},      // after the 8-byte ASCII fast path
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t at = 12345;
        int v = utf8_valid(cases[i].s, cases[i].n, &at);
        if (v != cases[i].valid || (!v && at != cases[i].bad_at)) {
            bad++;
            printf("# case %zu: valid %d at %zu\n", i, v, at);
        }
    }
    T_OK(bad == 0, "utf8_valid agrees with Python's strict decoder on %zu cases",
         sizeof cases / sizeof *cases);

    size_t n;
    char *r = utf8_repair("caf\xC3\xA9", 5, &n);
    T_OK(n == 5 && memcmp(r, "caf\xC3\xA9", 5) == 0 && r[5] == 0, "valid text is copied unchanged");
    free(r);
    r = utf8_repair("a\xE2\x82" "b\xFF", 5, &n);
    const char *want = "a\xEF\xBF\xBD\xEF\xBF\xBD" "b\xEF\xBF\xBD";
    T_OK(n == strlen(want) && memcmp(r, want, n) == 0 && utf8_valid(r, n, NULL),
         "each offending byte becomes U+FFFD and the result is valid (%zu bytes)", n);
    free(r);
    r = utf8_repair("", 0, &n);
    T_OK(n == 0 && r[0] == 0, "empty input");
    free(r);
    T_DONE();
}
