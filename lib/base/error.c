// error.c: the thread-local error message, fatal exits, checked allocation.
// See error.h for the convention.
#include "base/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char err_buf[1024];
static _Thread_local char err_loc[128];
static const char *err_prog = "best";

void err_set_prog(const char *prog) {
    const char *slash = strrchr(prog, '/');
    err_prog = slash ? slash + 1 : prog;
}

int err_set_(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_buf, sizeof err_buf, fmt, ap);
    va_end(ap);
    snprintf(err_loc, sizeof err_loc, "%s:%d", file, line);
    return -1;
}

const char *err_msg(void) { return err_buf; }
const char *err_where(void) { return err_loc; }

void err_prefix(const char *fmt, ...) {
    char pre[512], old[sizeof err_buf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, err_buf, sizeof old);
    size_t k = strlen(pre);
    if (k > sizeof err_buf - 3) k = sizeof err_buf - 3;
    memcpy(err_buf, pre, k);
    memcpy(err_buf + k, ": ", 2);
    size_t rest = strlen(old), room = sizeof err_buf - k - 3;
    if (rest > room) rest = room;
    memcpy(err_buf + k + 2, old, rest);
    err_buf[k + 2 + rest] = 0;
}

static int stdout_closed; // by stdout_close: print_line must not flush it any more

int stdout_close(void) {
    errno = 0;
    int bad = fflush(stdout) != 0 || ferror(stdout), e = errno;
    stdout_closed = 1;
    if (fclose(stdout) != 0 && !bad) bad = 1, e = errno;
    if (bad) return ERR("<stdout>: write failed: %s", e ? strerror(e) : "I/O error");
    return 0;
}

static void print_line(const char *msg, const char *where) {
    // Messages must stay on one line, whatever a file name or a parsed string holds.
    char clean[sizeof err_buf];
    size_t i = 0;
    for (; msg[i] && i + 1 < sizeof clean; i++)
        clean[i] = (msg[i] == '\n' || msg[i] == '\r') ? ' ' : msg[i];
    clean[i] = 0;
    if (!stdout_closed) fflush(stdout);
    const char *dbg = getenv("BEST_DEBUG");
    if (dbg && *dbg && strcmp(dbg, "0") != 0) fprintf(stderr, "%s: error: %s [%s]\n", err_prog, clean, where);
    else fprintf(stderr, "%s: error: %s\n", err_prog, clean);
}

void die_(const char *file, int line, const char *fmt, ...) {
    char msg[sizeof err_buf], where[sizeof err_loc];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(where, sizeof where, "%s:%d", file, line);
    print_line(msg, where);
    exit(1);
}

void die_err(void) {
    print_line(err_buf[0] ? err_buf : "unknown error", err_loc);
    exit(1);
}

void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    CHECK(p, "out of memory allocating %zu bytes", n);
    return p;
}

void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    CHECK(p, "out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    CHECK(q, "out of memory reallocating %zu bytes", n);
    return q;
}

char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = xmalloc(n);
    memcpy(p, s, n);
    return p;
}

char *xstrcat(const char *first, ...) {
    va_list ap;
    size_t n = 0;
    va_start(ap, first);
    for (const char *s = first; s; s = va_arg(ap, const char *)) n += strlen(s);
    va_end(ap);
    char *p = xmalloc(n + 1), *at = p;
    va_start(ap, first);
    for (const char *s = first; s; s = va_arg(ap, const char *)) {
        size_t k = strlen(s);
        memcpy(at, s, k);
        at += k;
    }
    va_end(ap);
    *at = '\0';
    return p;
}
