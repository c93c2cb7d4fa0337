// error.h: how libbest reports failure.
//
// Library functions never exit: they return -1 after ERR(...) has recorded one
// human line ("file: what is wrong") in a thread-local buffer, so that parsers
// can be fuzzed and tools decide what to do. Tools turn a failure into exit 1
// with TRY_OR_DIE / DIE, which print "prog: error: message"; with BEST_DEBUG=1 in the
// environment the source location follows ("... [lib/x.c:42]"), for us, not for users.
// CHECK is for internal invariants and allocation, where a failure is a bug or
// an out-of-memory, not bad input.
#ifndef BEST_ERROR_H
#define BEST_ERROR_H

#include <stddef.h>

#ifdef __cplusplus // the CUDA files (lib/*/*.cu) and C++ tests call these too
extern "C" {
#endif

// Records a message (printf format) and the source location; returns -1.
int err_set_(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define ERR(...) err_set_(__FILE__, __LINE__, __VA_ARGS__)

// The last message recorded on this thread ("" if none) and where it was set.
const char *err_msg(void);
const char *err_where(void);
// Prepends "prefix: " to the current message (to add a file name or a line).
void err_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// The program name used in messages ("best-tokenize"); set once by main.
void err_set_prog(const char *prog);

// Prints "prog: error: message [where]" and exits 1. Temp files registered
// with afile_* are removed by the exit handler.
void die_(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
#define DIE(...) die_(__FILE__, __LINE__, __VA_ARGS__)
// Prints the recorded library error and exits 1.
void die_err(void) __attribute__((noreturn));
#define TRY_OR_DIE(x) do { if ((x) < 0) die_err(); } while (0)
// Propagates a failure up one level inside lib/.
#define TRY(x) do { if ((x) < 0) return -1; } while (0)
#define CHECK(cond, ...) do { if (!(cond)) die_(__FILE__, __LINE__, __VA_ARGS__); } while (0)

// Flushes and closes stdout; a failure (a full disk, an I/O error: output is buffered, so
// `best-eval --json > /dev/full` fails only here) is an ERR "<stdout>: write failed: ...".
// Every tool ends with TRY_OR_DIE(stdout_close()) so that a lost result is exit 1.
int stdout_close(void);

// Allocation that cannot fail quietly: out of memory is fatal everywhere.
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
// A new string: the concatenation of the strings before the terminating NULL.
char *xstrcat(const char *first, ...);

#ifdef __cplusplus
}
#endif

#endif
