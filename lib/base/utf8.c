// utf8.c: strict UTF-8 validation with an ASCII fast path.
#include "base/utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "base/error.h" // defines: xmalloc
#include "base/vec.h"   // defines: ByteVec

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

char *utf8_repair_py(const char *s, size_t n, size_t *out_n) {
    const unsigned char *u = (const unsigned char *)s;
    ByteVec b = {0};
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        size_t len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        unsigned lo = 0x80, hi = 0xBF; // the second byte's range
        if (c == 0xE0) lo = 0xA0;
        else if (c == 0xED) hi = 0x9F;
        else if (c == 0xF0) lo = 0x90;
        else if (c == 0xF4) hi = 0x8F;
        size_t k = 1;
        while (len > 1 && k < len && i + k < n && u[i + k] >= (k == 1 ? lo : 0x80) && u[i + k] <= (k == 1 ? hi : 0xBF)) k++;
        if (len >= 1 && k == len) bytevec_append(&b, s + i, len);
        else bytevec_append(&b, "\xEF\xBF\xBD", 3);
        i += len >= 1 && k == len ? len : k;
    }
    *out_n = b.n;
    bytevec_push(&b, '\0');
    return b.v;
}

// Python's str.isspace for a code point.
static int py_space(utf8proc_int32_t c) {
    const utf8proc_property_t *p = utf8proc_get_property(c);
    return p->category == UTF8PROC_CATEGORY_ZS || p->bidi_class == UTF8PROC_BIDI_CLASS_WS ||
           p->bidi_class == UTF8PROC_BIDI_CLASS_B || p->bidi_class == UTF8PROC_BIDI_CLASS_S;
}

char *utf8_py_strip(const char *s) {
    size_t n = strlen(s), a = 0, b = 0, at = 0;
    int seen = 0;
    while (at < n) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + at, (utf8proc_ssize_t)(n - at), &c);
        if (k <= 0) { // not UTF-8: kept, as are the bytes after it
            if (!seen) a = at;
            b = n;
            break;
        }
        if (!py_space(c)) {
            if (!seen) a = at, seen = 1;
            b = at + (size_t)k;
        }
        at += (size_t)k;
    }
    char *r = xmalloc(b > a ? b - a + 1 : 1);
    memcpy(r, s + a, b > a ? b - a : 0);
    r[b > a ? b - a : 0] = '\0';
    return r;
}
