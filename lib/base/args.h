// args.h: the long-option parser every tool uses.
//
// A tool lists its options in one table, with the defaults already stored in the
// destination variables, so `--help` can print every default from one place.
// `--name value` and `--name=value` both work; `--` ends options; a lone `-` is a
// positional argument (stdin/stdout). Usage errors print one line and exit 2;
// `--help` prints the table and exits 0.
#ifndef BEST_ARGS_H
#define BEST_ARGS_H

typedef enum {
    OPT_FLAG,     // int *: set to 1
    OPT_FLAG_OFF, // int *: set to 0 (for --no-x beside --x)
    OPT_INT,      // int *
    OPT_DOUBLE,   // double *: a finite number ("nan", "inf" are usage errors)
    OPT_STRING,   // const char **
    OPT_MULTI,    // StrList *: may repeat; each use appends
} OptType;

typedef struct { const char **v; int n; } StrList;

typedef struct {
    const char *name;  // without the leading "--"
    OptType type;
    void *dest;
    const char *arg;   // what the value is, for --help ("PATH", "N")
    const char *help;
} Option;

typedef struct {
    const char *prog;     // "best-tokenize"
    const char *usage;    // "--tokenizer PATH [options] [INPUT... | -]"
    const char *about;    // one paragraph shown by --help
    const Option *opts;   // terminated by an entry with name == NULL
} ArgSpec;

// --threads N, checked and applied: 0 means every core; a negative N, or more than
// ARGS_THREADS_PER_CORE threads per core (OpenMP's runtime crashes long before 100000),
// is a usage error (exit 2). N > 0 sets OpenMP's thread count (0 leaves OpenMP's default:
// OMP_NUM_THREADS, else every core). Returns N, or the number of cores for 0.
#define ARGS_THREADS_PER_CORE 4
int args_threads(const ArgSpec *spec, int n);

// Parses argv; returns the positional arguments in *pos (a fresh array, NULL
// terminated) and their count. Exits 2 on a usage error, 0 after --help.
int args_parse(char ***pos, const ArgSpec *spec, int argc, char **argv);
// 1 when the last args_parse of spec met --name on the command line (a value equal to
// the default included), else 0: for options whose default comes from elsewhere (a
// resumed state) unless given.
int args_given(const ArgSpec *spec, const char *name);
// Prints "prog: usage error: MESSAGE" and "try 'prog --help'", exits 2.
void args_usage_error(const ArgSpec *spec, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

#ifdef __cplusplus // (the CUDA files read switches from the environment too)
extern "C" {
#endif
// The index of s among choices (n): 0, the first (the default), when s is NULL or empty;
// -1 when it is none of them. For the switches read from the environment
// (BEST_OPTIM=fused|fused1|passes, ...), whose callers name the variable in their error.
int args_choice(const char *s, const char *const *choices, int n);
#ifdef __cplusplus
}
#endif

#endif
