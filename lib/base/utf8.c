// utf8.c: strict UTF-8 validation with an ASCII fast path.
#include "base/utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h" // defines: xmalloc

int utf8_valid(const char *str, size_t n, size_t *bad_at) {
    const uint8_t *s = (const uint8_t *)str;
    size_t i = 0;
    while (i < n) {
        // ASCII runs are most text: test 8 bytes at a time.
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        uint8_t c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t len;
        uint32_t cp, min;
        if (c >= 0xC2 && c <= 0xDF) { len = 2; cp = c & 0x1F; min = 0x80; }
        else if (c >= 0xE0 && c <= 0xEF) { len = 3; cp = c & 0x0F; min = 0x800; }
        else if (c >= 0xF0 && c <= 0xF4) { len = 4; cp = c & 0x07; min = 0x10000; }
        else goto bad;
        if (i + len > n) goto bad;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) goto bad;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) goto bad;
        i += len;
    }
    return 1;
bad:
    if (bad_at) *bad_at = i;
    return 0;
}

char *utf8_repair(const char *s, size_t n, size_t *out_n) {
    char *out = xmalloc(3 * n + 1);  // at worst every byte becomes EF BF BD
    size_t o = 0, i = 0, bad;
    while (!utf8_valid(s + i, n - i, &bad)) {
        memcpy(out + o, s + i, bad);
        o += bad;
        memcpy(out + o, "\xEF\xBF\xBD", 3);
        o += 3;
        i += bad + 1;
    }
    memcpy(out + o, s + i, n - i);
    o += n - i;
    out[o] = 0;
    if (out_n) *out_n = o;
    return out;
}
