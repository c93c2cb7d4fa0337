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
    // utf8_repair_py and utf8_py_strip against Python 3.11 (b.decode("utf-8", "replace"),
    // str.strip(); the expected bytes printed by it, 2026-11-29)
    static const struct { const char *in; size_t n; const char *out; size_t out_n; } PY[] = {
        {"abc", 3, "abc", 3},
        {"\xff""", 1, "\xef""\xbf""\xbd""", 3},
        {"\xc3""", 1, "\xef""\xbf""\xbd""", 3},
        {"\xc3""(", 2, "\xef""\xbf""\xbd""(", 4},
        {"\xe2""\x82""", 2, "\xef""\xbf""\xbd""", 3},
        {"\xe2""\x82""(", 3, "\xef""\xbf""\xbd""(", 4},
        {"\xf0""\x9f""\x98""", 3, "\xef""\xbf""\xbd""", 3},
        {"\xf0""\x9f""\x98""\x80""", 4, "\xf0""\x9f""\x98""\x80""", 4},
        {"\xed""\xa0""\x80""", 3, "\xef""\xbf""\xbd""\xef""\xbf""\xbd""\xef""\xbf""\xbd""", 9},
        {"\xe0""\x80""\xaf""", 3, "\xef""\xbf""\xbd""\xef""\xbf""\xbd""\xef""\xbf""\xbd""", 9},
        {"\xf4""\x90""\x80""\x80""", 4, "\xef""\xbf""\xbd""\xef""\xbf""\xbd""\xef""\xbf""\xbd""\xef""\xbf""\xbd""", 12},
        {"a\x00""b", 3, "a\x00""b", 3},
        {"\x80""\x80""", 2, "\xef""\xbf""\xbd""\xef""\xbf""\xbd""", 6},
        {"\xc0""\xaf""", 2, "\xef""\xbf""\xbd""\xef""\xbf""\xbd""", 6},
        {"\xf5""\x80""", 2, "\xef""\xbf""\xbd""\xef""\xbf""\xbd""", 6},
    };
    size_t nbad = 0;
    for (size_t i = 0; i < sizeof PY / sizeof *PY; i++) {
        r = utf8_repair_py(PY[i].in, PY[i].n, &n);
        nbad += n != PY[i].out_n || memcmp(r, PY[i].out, n) != 0 || r[n] != 0;
        free(r);
    }
    T_OK(nbad == 0, "utf8_repair_py: Python's errors=\"replace\" on %zu byte strings (truncated, surrogate, overlong, "
         "past U+10FFFF, NUL; %zu differ)", sizeof PY / sizeof *PY, nbad);
    static const struct { const char *in, *out; } STRIP[] = {
        {"  a b  ", "a b"},
        {"\xc2""\xa0""x\xe3""\x80""\x80""", "x"},
        {"\xe2""\x80""\xa8""y\xc2""\x85""", "y"},
        {"\x1c""z\x1f""", "z"},
        {"", ""},
        {"   ", ""},
        {"\xe2""\x80""\x8b""q\xe2""\x80""\x8b""", "\xe2""\x80""\x8b""q\xe2""\x80""\x8b"""},
    };
    nbad = 0;
    for (size_t i = 0; i < sizeof STRIP / sizeof *STRIP; i++) {
        r = utf8_py_strip(STRIP[i].in);
        nbad += strcmp(r, STRIP[i].out) != 0;
        free(r);
    }
    T_OK(bad == 0, "utf8_py_strip: Python's str.strip() on %zu strings (no-break, ideographic, line and paragraph "
         "separators, NEL, \\x1c-\\x1f; a zero-width space is kept; %zu differ)", sizeof STRIP / sizeof *STRIP, nbad);
    T_DONE();
}
