// fileio.c: atomic outputs (temp + rename, cleaned up at exit and on SIGTERM/INT/HUP/PIPE),
// whole-file reads, mmap.
#include "base/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <sys/file.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h" // defines: ERR, xmalloc

// Temp files still open, removed if the process exits before committing them: by an
// exit handler, or by a signal handler for the signals that end a run from outside
// (SIGTERM, SIGINT, SIGHUP, SIGPIPE). The handler may run on any thread at any moment,
// so the slots are lock-free atomic pointers it only loads (the mutex orders writers);
// a path is taken out of its slot before it is freed.
#define MAX_OPEN_TEMPS 64
_Static_assert(ATOMIC_POINTER_LOCK_FREE == 2, "the signal handler needs lock-free pointers");
static _Atomic(char *) open_temps[MAX_OPEN_TEMPS];
// The folders afile_open made for outputs still open, each a list "deepest\0...\0first\0\0"
// (AFile.made_list), removed while empty by the same handlers after the temps.
static _Atomic(char *) open_made[MAX_OPEN_TEMPS];
static pthread_mutex_t temps_lock = PTHREAD_MUTEX_INITIALIZER;
static int cleanup_registered;
static const int cleanup_signals[] = {SIGTERM, SIGINT, SIGHUP, SIGPIPE};

static void temps_cleanup(void) {
    for (int i = 0; i < MAX_OPEN_TEMPS; i++) {
        char *p = atomic_load(&open_temps[i]);
        if (p) unlink(p);
    }
    for (int i = 0; i < MAX_OPEN_TEMPS; i++) {
        char *l = atomic_load(&open_made[i]);
        for (char *d = l; d && *d; d += strlen(d) + 1)
            if (rmdir(d) != 0) break; // not empty: something else is in it now
    }
}

// Async-signal-safe: unlink, then die of the signal itself (its default action once
// the handler returns and the signal, blocked while handling it, is delivered again),
// so that the exit status still tells a shell or make what happened.
// signal_note_set's lines: two buffers, the one in use published by a pointer swap, so that
// the handler never reads a line being written.
static char note_buf[2][1024];
static size_t note_len[2];
static _Atomic int note_which = -1; // the published buffer, -1: none

static void temps_signal(int sig) {
    int saved = errno;
    temps_cleanup();
    int w = atomic_load(&note_which);
    if (w >= 0 && write(2, note_buf[w], note_len[w]) < 0) { /* nothing to do about it */ }
    signal(sig, SIG_DFL);
    raise(sig);
    errno = saved;
}

// A signal the process was started with ignored (nohup's SIGHUP, a background job's
// SIGINT) stays ignored.
static void handlers_install(void) {
    atexit(temps_cleanup);
    for (size_t i = 0; i < sizeof cleanup_signals / sizeof *cleanup_signals; i++) {
        struct sigaction old, sa;
        if (sigaction(cleanup_signals[i], NULL, &old) != 0 || old.sa_handler == SIG_IGN) continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = temps_signal;
        sigemptyset(&sa.sa_mask);
        for (size_t j = 0; j < sizeof cleanup_signals / sizeof *cleanup_signals; j++)
            sigaddset(&sa.sa_mask, cleanup_signals[j]); // one cleanup at a time
        sigaction(cleanup_signals[i], &sa, NULL);
    }
}

void signal_note_set(const char *line) {
    pthread_mutex_lock(&temps_lock);
    if (!cleanup_registered) { handlers_install(); cleanup_registered = 1; }
    pthread_mutex_unlock(&temps_lock);
    if (!line) {
        atomic_store(&note_which, -1);
        return;
    }
    int w = atomic_load(&note_which) == 0 ? 1 : 0; // the buffer not published
    snprintf(note_buf[w], sizeof note_buf[w], "%s\n", line);
    note_len[w] = strlen(note_buf[w]);
    atomic_store(&note_which, w);
}

// p into a free slot of the handlers' array slots (open_temps, open_made).
static void slot_add(_Atomic(char *) *slots, char *p) {
    pthread_mutex_lock(&temps_lock);
    if (!cleanup_registered) { handlers_install(); cleanup_registered = 1; }
    for (int i = 0; i < MAX_OPEN_TEMPS; i++)
        if (!atomic_load(&slots[i])) { atomic_store(&slots[i], p); break; }
    pthread_mutex_unlock(&temps_lock);
}

static void slot_remove(_Atomic(char *) *slots, const char *p) {
    pthread_mutex_lock(&temps_lock);
    for (int i = 0; i < MAX_OPEN_TEMPS; i++)
        if (atomic_load(&slots[i]) == p) atomic_store(&slots[i], NULL);
    pthread_mutex_unlock(&temps_lock);
}

static void temps_add(char *tmp) { slot_add(open_temps, tmp); }
static void temps_remove(const char *tmp) { slot_remove(open_temps, tmp); }

char *path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = xmalloc(a + b + 2);
    memcpy(p, dir, a);
    size_t k = a;
    if (a && dir[a - 1] != '/') p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

char *path_fmt(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    CHECK(s, "out of memory");
    return s;
}

int path_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int path_mkdir_made(char **made, const char *dir) {
    if (made) *made = NULL;
    char *p = xstrdup(dir), *first = NULL; // the first folder this call created
    int rc = 0;
    for (char *s = p + 1; ; s++) {
        if (*s != '/' && *s) continue;
        char saved = *s;
        *s = 0;
        if (mkdir(p, 0777) == 0) {
            if (!first) first = xstrdup(p);
        } else if (errno != EEXIST) {
            rc = ERR("%s: cannot create folder: %s", dir, strerror(errno));
            break;
        }
        *s = saved;
        if (!saved) break;
    }
    free(p);
    if (rc == 0 && !path_is_dir(dir)) rc = ERR("%s: exists and is not a folder", dir);
    if (rc < 0) {
        path_unmake(first, dir); // a parent made before a deeper mkdir failed
        return -1;
    }
    if (made) *made = first;
    else free(first);
    return 0;
}

int path_mkdir_p(const char *dir) { return path_mkdir_made(NULL, dir); }

void path_unmake(char *made, const char *dir) {
    if (!made) return;
    char *p = xstrdup(dir);
    size_t stop = strlen(made);
    for (size_t n = strlen(p); n >= stop;) {
        while (n > stop && p[n - 1] == '/') p[--n] = 0; // "a/b/" and "a//b" name a/b
        if (rmdir(p) != 0) break;                      // not empty: someone else's now
        if (n == stop) break;
        char *slash = strrchr(p, '/');
        if (!slash) break;
        *slash = 0;
        n = (size_t)(slash - p);
    }
    free(p);
    free(made);
}

// A fresh copy of path without its last component and trailing slashes ("." if none,
// "/" for the root).
static char *path_parent(const char *path) {
    char *p = xstrdup(path);
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') p[--n] = 0;
    char *slash = strrchr(p, '/');
    if (!slash) { free(p); return xstrdup("."); }
    while (slash > p && slash[-1] == '/') slash--;
    slash[slash == p] = 0;
    return p;
}

// Whether a is b or one of its parents, by their names ("a/b/" is "a/b").
static int path_is_within(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    while (na > 1 && a[na - 1] == '/') na--;
    while (nb > 1 && b[nb - 1] == '/') nb--;
    return na <= nb && strncmp(a, b, na) == 0 && (na == nb || b[na] == '/');
}

// dir (an existing name) is a folder this process may create files in.
static int check_writable_dir(const char *what, const char *dir) {
    struct stat st;
    if (stat(dir, &st) != 0) return ERR("%s: cannot write: %s: %s", what, dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return ERR("%s: cannot write: %s is not a folder", what, dir);
    if (access(dir, W_OK | X_OK) != 0) return ERR("%s: cannot write in %s: %s", what, dir, strerror(errno));
    return 0;
}

// --- the run's inputs (path_note_input) ---
typedef struct {
    dev_t dev;
    ino_t ino;
    char *name;
} InputFile;
static InputFile *inputs; // (n_inputs), for the process's life
static size_t n_inputs;
static pthread_mutex_t inputs_lock = PTHREAD_MUTEX_INITIALIZER;

static void note_file(const char *path, const struct stat *st) {
    pthread_mutex_lock(&inputs_lock);
    inputs = xrealloc(inputs, (n_inputs + 1) * sizeof *inputs);
    inputs[n_inputs++] = (InputFile){st->st_dev, st->st_ino, xstrdup(path)};
    pthread_mutex_unlock(&inputs_lock);
}

void path_note_input(const char *path) {
    struct stat st;
    if (strcmp(path, "-") == 0 || stat(path, &st) != 0) return;
    if (S_ISREG(st.st_mode)) note_file(path, &st);
    if (!S_ISDIR(st.st_mode)) return;
    DIR *d = opendir(path);
    for (struct dirent *e; d && (e = readdir(d));) {
        char *p = path_join(path, e->d_name);
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) note_file(p, &st);
        free(p);
    }
    if (d) closedir(d);
}

int path_check_not_input(const char *out) {
    struct stat st;
    if (strcmp(out, "-") == 0 || stat(out, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    int rc = 0;
    pthread_mutex_lock(&inputs_lock);
    for (size_t i = 0; i < n_inputs && rc == 0; i++)
        if (inputs[i].dev == st.st_dev && inputs[i].ino == st.st_ino)
            rc = ERR("%s: is also an input of this run (%s): write the output elsewhere", out, inputs[i].name);
    pthread_mutex_unlock(&inputs_lock);
    return rc;
}

int path_check_out_file(const char *path, const char *new_dir) {
    if (strcmp(path, "-") == 0) return 0;
    TRY(path_check_not_input(path));
    if (path_is_dir(path)) return ERR("%s: cannot write: it is a folder", path);
    char *parent = path_parent(path);
    int rc = 0;
    struct stat st;
    if (stat(parent, &st) == 0 || errno != ENOENT) // there, or under a file (ENOTDIR)
        rc = check_writable_dir(path, parent);
    else if (!new_dir || !path_is_within(parent, new_dir))
        rc = path_check_out_dir(parent); // missing: afile_open creates it (as folder outputs are)
    free(parent);
    return rc;
}

int path_check_out_dir(const char *dir) {
    char *p = xstrdup(dir);
    struct stat st;
    // up to the nearest name that exists: "file/sub" stops at file, not a folder
    while (stat(p, &st) != 0 && (errno == ENOENT || errno == ENOTDIR) && strcmp(p, ".") && strcmp(p, "/")) {
        char *up = path_parent(p);
        free(p);
        p = up;
    }
    int rc = check_writable_dir(dir, p);
    free(p);
    return rc;
}

int path_is_temp_of(const char *entry, const char *name) {
    if (entry[0] != '.') return 0;
    const char *tail = NULL;
    if (name) {
        size_t n = strlen(name);
        if (strncmp(entry + 1, name, n) == 0) tail = entry + 1 + n;
    } else {
        tail = strstr(entry + 1, ".tmp.");
        while (tail && strstr(tail + 1, ".tmp.")) tail = strstr(tail + 1, ".tmp."); // the last one
    }
    return tail && tail > entry + 1 && strncmp(tail, ".tmp.", 5) == 0 && strlen(tail + 5) == 6;
}

void path_remove_stale_temps(const char *dir, const char *name) {
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!path_is_temp_of(e->d_name, name)) continue;
        char *p = path_join(dir, e->d_name);
        int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0) unlink(p);
        if (fd >= 0) close(fd);
        free(p);
    }
    if (d) closedir(d);
}

// f->made_list: the folders from dir (with or without a trailing slash) up to f->made,
// deepest first, for the exit and signal handlers to remove if f is never committed.
static void made_list_add(AFile *f, const char *dir) {
    size_t n = strlen(dir), stop = strlen(f->made);
    char *l = xmalloc(2 * (n + 2)), *w = l, *p = xstrdup(dir);
    while (n > stop && p[n - 1] == '/') p[--n] = 0;
    for (;;) {
        memcpy(w, p, n + 1);
        w += n + 1;
        char *slash = strrchr(p, '/');
        if (n <= stop || !slash) break;
        *slash = 0;
        n = (size_t)(slash - p);
    }
    *w = 0;
    free(p);
    f->made_list = l;
    slot_add(open_made, l);
}

// Takes f's folders out of the handlers' list (they stay, or made_undo removed them).
static void made_list_drop(AFile *f) {
    if (!f->made_list) return;
    slot_remove(open_made, f->made_list);
    free(f->made_list);
    f->made_list = NULL;
}

int afile_open(AFile *f, const char *path) {
    memset(f, 0, sizeof *f);
    if (strcmp(path, "-") == 0) {
        f->fp = stdout;
        f->path = xstrdup(path);
        return 0;
    }
    TRY(path_check_not_input(path));
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) { // (stat follows links)
        if (S_ISDIR(st.st_mode)) return ERR("%s: cannot write: it is a folder", path);
        if (S_ISSOCK(st.st_mode)) return ERR("%s: cannot write: it is a socket", path);
        int fd = open(path, O_WRONLY | O_CLOEXEC); // a FIFO waits here for its reader
        if (fd < 0) return ERR("%s: cannot open: %s", path, strerror(errno));
        f->fp = fdopen(fd, "wb");
        if (!f->fp) {
            close(fd);
            return ERR("%s: fdopen failed", path);
        }
        f->path = xstrdup(path);
        f->direct = 1;
        return 0;
    }
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path + 1) : 0;
    char *dir = dirlen ? strndup(path, dirlen) : xstrdup(".");
    CHECK(dir, "out of memory");
    if (dirlen > 1 && stat(dir, &st) != 0 && errno == ENOENT) { // a missing folder: made, as folder outputs are
        if (path_mkdir_made(&f->made, dir) < 0) { // (its ERR names the folder)
            free(dir);
            return -1;
        }
        made_list_add(f, dir);
    }
    path_remove_stale_temps(dir, path + dirlen);
    size_t n = strlen(path) + 32;
    char *tmp = xmalloc(n);
    snprintf(tmp, n, "%.*s.%s.tmp.XXXXXX", (int)dirlen, path, path + dirlen);
    // a signal between creating the temp and remembering it would leave it behind
    sigset_t block, old;
    sigemptyset(&block);
    for (size_t i = 0; i < sizeof cleanup_signals / sizeof *cleanup_signals; i++) sigaddset(&block, cleanup_signals[i]);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int fd = mkostemp(tmp, O_CLOEXEC), e = errno;
    if (fd >= 0) temps_add(tmp);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (fd < 0) {
        free(tmp);
        made_list_drop(f);
        path_unmake(f->made, dir);
        f->made = NULL;
        free(dir);
        return ERR("%s: cannot create: %s", path, strerror(e));
    }
    free(dir);
    fchmod(fd, 0644);
    flock(fd, LOCK_EX | LOCK_NB); // held while it is written: not stale (path_remove_stale_temps)
    f->fp = fdopen(fd, "wb");
    if (!f->fp) {
        close(fd);
        unlink(tmp);
        temps_remove(tmp);
        free(tmp);
        return ERR("%s: fdopen failed", path);
    }
    f->path = xstrdup(path);
    f->tmp = tmp;
    return 0;
}

// The folder of f's path, for path_unmake.
static void made_undo(AFile *f) {
    made_list_drop(f);
    if (!f->made) return;
    const char *slash = strrchr(f->path, '/');
    char *dir = strndup(f->path, slash ? (size_t)(slash - f->path) : 1);
    CHECK(dir, "out of memory");
    path_unmake(f->made, dir);
    f->made = NULL;
    free(dir);
}

int afile_commit(AFile *f) {
    int rc = 0;
    if (!f->tmp) { // stdout, or in place
        if (fflush(f->fp) != 0 || ferror(f->fp)) rc = ERR("%s: write failed: %s", f->path, strerror(errno));
        if (f->direct && fclose(f->fp) != 0 && rc == 0) rc = ERR("%s: close failed: %s", f->path, strerror(errno));
        free(f->path);
        memset(f, 0, sizeof *f);
        return rc;
    }
    if (fflush(f->fp) != 0 || ferror(f->fp) || fsync(fileno(f->fp)) != 0)
        rc = ERR("%s: write failed: %s", f->path, strerror(errno));
    if (rc == 0) rc = path_check_not_input(f->path); // (an input noted since afile_open)
    // renamed while still open: its lock says "in use" until it has its final name
    if (rc == 0 && rename(f->tmp, f->path) != 0)
        rc = ERR("%s: cannot rename into place: %s", f->path, strerror(errno));
    if (rc != 0) unlink(f->tmp);
    if (fclose(f->fp) != 0 && rc == 0) rc = ERR("%s: close failed: %s", f->path, strerror(errno));
    temps_remove(f->tmp);
    if (rc != 0) made_undo(f);
    made_list_drop(f);
    free(f->made);
    free(f->tmp);
    free(f->path);
    memset(f, 0, sizeof *f);
    return rc;
}

int afile_seekable(const AFile *f) { return lseek(fileno(f->fp), 0, SEEK_CUR) >= 0; }

void afile_abort(AFile *f) {
    if (f->direct) fclose(f->fp); // (what went out is out: a device or a FIFO keeps no file)
    if (f->tmp) {
        fclose(f->fp);
        unlink(f->tmp);
        temps_remove(f->tmp);
        free(f->tmp);
    }
    made_undo(f);
    free(f->path);
    memset(f, 0, sizeof *f);
}

int file_read_all(char **out, size_t *n, const char *path) {
    *out = NULL;
    *n = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp) return ERR("%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *buf = xmalloc(cap + 1);
    for (;;) {
        size_t got = fread(buf + len, 1, cap - len, fp);
        len += got;
        if (len < cap) break;
        cap *= 2;
        buf = xrealloc(buf, cap + 1);
    }
    int bad = ferror(fp);
    fclose(fp);
    if (bad) { free(buf); return ERR("%s: read error", path); }
    buf[len] = 0;
    *out = buf;
    *n = len;
    return 0;
}

int mapped_open(MappedFile *m, const char *path) {
    static const uint8_t empty[1];
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return ERR("%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return ERR("%s: not a regular file", path);
    }
    m->size = (size_t)st.st_size;
    if (m->size == 0) {
        m->data = empty;
        close(fd);
        return 0;
    }
    void *p = mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return ERR("%s: mmap failed: %s", path, strerror(errno));
    m->data = p;
    m->mapped = 1;
    return 0;
}

void mapped_close(MappedFile *m) {
    if (m->mapped) munmap((void *)m->data, m->size);
    memset(m, 0, sizeof *m);
}

char *path_beside_exe(const char *rel) {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return NULL;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return NULL;
    *slash = 0;
    return path_join(exe, rel);
}
