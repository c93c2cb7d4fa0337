// fileio.c: atomic outputs (temp + rename, cleaned up at exit), whole-file reads, mmap.
#include "base/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h" // defines: ERR, xmalloc

// Temp files still open, removed if the process exits before committing them.
#define MAX_OPEN_TEMPS 64
static char *open_temps[MAX_OPEN_TEMPS];
static pthread_mutex_t temps_lock = PTHREAD_MUTEX_INITIALIZER;
static int cleanup_registered;

static void temps_cleanup(void) {
    for (int i = 0; i < MAX_OPEN_TEMPS; i++)
        if (open_temps[i]) unlink(open_temps[i]);
}

static void temps_add(char *tmp) {
    pthread_mutex_lock(&temps_lock);
    if (!cleanup_registered) { atexit(temps_cleanup); cleanup_registered = 1; }
    for (int i = 0; i < MAX_OPEN_TEMPS; i++)
        if (!open_temps[i]) { open_temps[i] = tmp; break; }
    pthread_mutex_unlock(&temps_lock);
}

static void temps_remove(const char *tmp) {
    pthread_mutex_lock(&temps_lock);
    for (int i = 0; i < MAX_OPEN_TEMPS; i++)
        if (open_temps[i] == tmp) open_temps[i] = NULL;
    pthread_mutex_unlock(&temps_lock);
}

char *path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = xmalloc(a + b + 2);
    memcpy(p, dir, a);
    size_t k = a;
    if (a && dir[a - 1] != '/') p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

int path_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int path_mkdir_p(const char *dir) {
    char *p = xstrdup(dir);
    for (char *s = p + 1; ; s++) {
        if (*s != '/' && *s) continue;
        char saved = *s;
        *s = 0;
        if (mkdir(p, 0777) < 0 && errno != EEXIST) {
            int e = errno;
            free(p);
            return ERR("%s: cannot create folder: %s", dir, strerror(e));
        }
        *s = saved;
        if (!saved) break;
    }
    free(p);
    return path_is_dir(dir) ? 0 : ERR("%s: exists and is not a folder", dir);
}

int afile_open(AFile *f, const char *path) {
    memset(f, 0, sizeof *f);
    if (strcmp(path, "-") == 0) {
        f->fp = stdout;
        f->path = xstrdup(path);
        return 0;
    }
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path + 1) : 0;
    size_t n = strlen(path) + 32;
    char *tmp = xmalloc(n);
    snprintf(tmp, n, "%.*s.%s.tmp.XXXXXX", (int)dirlen, path, path + dirlen);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return ERR("%s: cannot create: %s", path, strerror(e));
    }
    fchmod(fd, 0644);
    f->fp = fdopen(fd, "wb");
    if (!f->fp) { close(fd); unlink(tmp); free(tmp); return ERR("%s: fdopen failed", path); }
    f->path = xstrdup(path);
    f->tmp = tmp;
    temps_add(tmp);
    return 0;
}

int afile_commit(AFile *f) {
    int rc = 0;
    if (!f->tmp) { // stdout
        if (fflush(f->fp) != 0) rc = ERR("%s: write failed: %s", f->path, strerror(errno));
        free(f->path);
        f->path = NULL;
        return rc;
    }
    if (fflush(f->fp) != 0 || ferror(f->fp) || fsync(fileno(f->fp)) != 0)
        rc = ERR("%s: write failed: %s", f->path, strerror(errno));
    if (fclose(f->fp) != 0 && rc == 0) rc = ERR("%s: close failed: %s", f->path, strerror(errno));
    if (rc == 0 && rename(f->tmp, f->path) != 0)
        rc = ERR("%s: cannot rename into place: %s", f->path, strerror(errno));
    if (rc != 0) unlink(f->tmp);
    temps_remove(f->tmp);
    free(f->tmp);
    free(f->path);
    memset(f, 0, sizeof *f);
    return rc;
}

void afile_abort(AFile *f) {
    if (f->tmp) {
        fclose(f->fp);
        unlink(f->tmp);
        temps_remove(f->tmp);
        free(f->tmp);
    }
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
