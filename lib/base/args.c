// args.c: long options from a table; --help from the same table. See args.h.
#include "base/args.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/blas.h"    // defines: blas_describe
#include "base/error.h"   // defines: xmalloc, err_set_prog, stdout_close, die_err
#include "base/version.h" // defines: best_version

// The positional array being built, freed by the exits of --help and usage errors.
static char **args_positional;
// Which options of args_seen_spec the last args_parse met (by table index), for args_given.
#define ARGS_MAX_OPTIONS 128
static const ArgSpec *args_seen_spec;
static unsigned char args_seen[ARGS_MAX_OPTIONS];

void args_usage_error(const ArgSpec *spec, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: usage error: ", spec->prog);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (try '%s --help')\n", spec->prog);
    free(args_positional);
    exit(2);
}

static void print_help(const ArgSpec *spec) {
    printf("usage: %s %s\n\n%s\n\noptions:\n", spec->prog, spec->usage, spec->about);
    for (const Option *o = spec->opts; o->name; o++) {
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        printf("  %-24s %s", left, o->help);
        // a help text that says its default itself gets no second one
        switch (strstr(o->help, "default") ? -1 : (int)o->type) {
        case OPT_INT: printf(" (default %d)", *(int *)o->dest); break;
        case OPT_DOUBLE: // NaN marks "no default" (a required value)
            if (*(double *)o->dest == *(double *)o->dest) printf(" (default %g)", *(double *)o->dest);
            break;
        case OPT_STRING: {
            const char *s = *(const char **)o->dest;
            if (!s) break;
            if (*s && !strpbrk(s, " \t\n\r")) { // a word as it is, else quoted with escapes
                printf(" (default %s)", s);
                break;
            }
            printf(" (default \"");
            for (; *s; s++) printf(*s == '\n' ? "\\n" : *s == '\t' ? "\\t" : *s == '\r' ? "\\r" : "%c", *s);
            printf("\")");
            break;
        }
        default: break;
        }
        printf("\n");
    }
    printf("  %-24s %s\n", "--help", "print this help and exit");
    printf("  %-24s %s\n", "--version", "print the build's version (git describe) and its BLAS kernels, and exit");
    printf("\nexit status: 0 success, 1 runtime error (bad input file, I/O), 2 usage error\n");
}

static void set_value(const ArgSpec *spec, const Option *o, const char *val) {
    char *end;
    switch (o->type) {
    case OPT_INT: {
        errno = 0;
        long x = strtol(val, &end, 10);
        if (errno || *end || end == val || x < INT_MIN || x > INT_MAX)
            args_usage_error(spec, "--%s wants an integer, got '%s'", o->name, val);
        *(int *)o->dest = (int)x;
        break;
    }
    case OPT_DOUBLE: {
        errno = 0;
        double x = strtod(val, &end);
        // strtod reads "nan" and "inf": no option means either, and a NaN would pass
        // every range check written as x < lo || x > hi.
        if (errno || *end || end == val || !isfinite(x))
            args_usage_error(spec, "--%s wants a finite number, got '%s'", o->name, val);
        *(double *)o->dest = x;
        break;
    }
    case OPT_STRING: *(const char **)o->dest = val; break;
    case OPT_MULTI: {
        StrList *l = o->dest;
        l->v = xrealloc(l->v, (size_t)(l->n + 2) * sizeof *l->v);
        l->v[l->n++] = val;
        l->v[l->n] = NULL;
        break;
    }
    default: break;
    }
}

int args_parse(char ***pos, const ArgSpec *spec, int argc, char **argv) {
    err_set_prog(spec->prog);
    char **out = args_positional = xmalloc((size_t)(argc + 1) * sizeof *out);
    int npos = 0, options_done = 0;
    args_seen_spec = spec;
    memset(args_seen, 0, sizeof args_seen);
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (options_done || a[0] != '-' || a[1] != '-' ) {
            if (!options_done && a[0] == '-' && a[1] && a[1] != '-')
                args_usage_error(spec, "unknown option '%s' (options are long: --name)", a);
            out[npos++] = a;
            continue;
        }
        if (a[2] == 0) { options_done = 1; continue; }
        if (strcmp(a, "--version") == 0) {
            printf("%s %s (%s)\n", spec->prog, best_version(), blas_describe());
            free(out);
            if (stdout_close() < 0) die_err();
            exit(0);
        }
        if (strcmp(a, "--help") == 0) {
            print_help(spec);
            free(out);
            if (stdout_close() < 0) die_err();
            exit(0);
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const Option *o = spec->opts;
        for (; o->name; o++)
            if (strlen(o->name) == len && strncmp(o->name, name, len) == 0) break;
        if (!o->name) args_usage_error(spec, "unknown option '--%.*s'", (int)len, name);
        CHECK(o - spec->opts < ARGS_MAX_OPTIONS, "%s: more than %d options", spec->prog, ARGS_MAX_OPTIONS);
        args_seen[o - spec->opts] = 1;
        if (o->type == OPT_FLAG || o->type == OPT_FLAG_OFF) {
            if (eq) args_usage_error(spec, "--%s takes no value", o->name);
            *(int *)o->dest = o->type == OPT_FLAG;
            continue;
        }
        const char *val = eq ? eq + 1 : NULL;
        if (!val) {
            if (i + 1 >= argc) args_usage_error(spec, "--%s needs a value (%s)", o->name, o->arg ? o->arg : "VALUE");
            val = argv[++i];
        }
        set_value(spec, o, val);
    }
    out[npos] = NULL;
    *pos = out;
    args_positional = NULL; // the caller owns it now
    return npos;
}

int args_given(const ArgSpec *spec, const char *name) {
    CHECK(spec == args_seen_spec, "args_given before args_parse of %s", spec->prog);
    for (const Option *o = spec->opts; o->name && o - spec->opts < ARGS_MAX_OPTIONS; o++)
        if (strcmp(o->name, name) == 0) return args_seen[o - spec->opts];
    CHECK(0, "%s: args_given of an unknown option --%s", spec->prog, name);
    return 0;
}

int args_threads(const ArgSpec *spec, int n) {
    int cores = omp_get_num_procs(), most = ARGS_THREADS_PER_CORE * cores;
    if (n < 0) args_usage_error(spec, "--threads %d is negative (0 uses every core)", n);
    if (n > most)
        args_usage_error(spec, "--threads %d is more than %d per core (%d cores: at most %d; 0 uses every core)", n,
                         ARGS_THREADS_PER_CORE, cores, most);
    if (n > 0) omp_set_num_threads(n);
    return n ? n : cores;
}

int args_choice(const char *s, const char *const *choices, int n) {
    if (!s || !*s) return 0;
    for (int i = 0; i < n; i++)
        if (strcmp(s, choices[i]) == 0) return i;
    return -1;
}
