// train_out.c: best-train's OUT folder: its lock (OUT/.lock, held for the whole run),
// the refusal of a fresh run into an OUT that holds a state, what a killed run left there
// (temp files; a fresh run's stale moment dumps and masks), the log cut back to the saved
// step on resume, and the removal of what a fresh run wrote when its first save fails.
//
// Not here: when these are called (train_open, train_run: train.c); the state's files
// (train_state.c); temp files and atomic writes (base/fileio.h).
#include "run/train.h"
#include "run/train_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"  // defines: ERR, TRY
#include "base/fileio.h" // defines: AFile, path_join, path_fmt, path_unmake, path_remove_stale_temps
#include "nn/model.h"    // defines: model_unlink_saved

// --- what a killed run left, the log ------------------------------------------------------

// Keeps the lines of an existing log whose step is <= step (a killed run may have
// logged steps after its last save; the resumed run logs them again).
int out_log_truncate(const char *path, int step) {
    if (access(path, F_OK) != 0) return 0;
    char *text;
    size_t n;
    TRY(file_read_all(&text, &n, path));
    AFile f;
    if (afile_open(&f, path) < 0) {
        free(text);
        return -1;
    }
    for (char *line = text, *next; line < text + n; line = next) {
        char *nl = memchr(line, '\n', (size_t)(text + n - line));
        next = nl ? nl + 1 : text + n;
        int s;
        if (!nl) break;  // a half-written last line
        if (sscanf(line, "{\"step\":%d", &s) == 1 && s <= step) fwrite(line, 1, (size_t)(next - line), f.fp);
    }
    free(text);
    return afile_commit(&f);
}

// Removes the temp files (".NAME.tmp.XXXXXX", fileio.h) a killed run left in OUT's
// folders; called under OUT's lock, when that run is known to be over.
void out_remove_stale_temps(const char *out) {
    static const char *const sub[] = {"", "model", "state", "moments", "masks"};
    for (size_t i = 0; i < sizeof sub / sizeof *sub; i++) {
        char *dir = path_join(out, sub[i]);
        path_remove_stale_temps(dir, NULL);
        free(dir);
    }
}

// A fresh run into an OUT without a state: the moment dumps and masks (step-N.safetensors)
// an earlier run left there before it ever saved (a diverged run) belong to no state, and
// would mix with this run's (a pipeline takes the last mask of OUT/masks): removed, under
// OUT's lock. Other files there are not ours, and stay.
void out_remove_stale_steps(const char *out) {
    static const char *const sub[] = {"moments", "masks"};
    for (int i = 0; i < 2; i++) {
        char *dir = path_join(out, sub[i]);
        DIR *d = opendir(dir);
        for (struct dirent *e; d && (e = readdir(d));) {
            int n = 0;
            if (sscanf(e->d_name, "step-%*d%n", &n) < 0 || n == 0 || strcmp(e->d_name + n, ".safetensors") != 0)
                continue;
            char *p = path_join(dir, e->d_name);
            unlink(p);
            free(p);
        }
        if (d) closedir(d);
        free(dir);
    }
}

// --- the lock ----------------------------------------------------------------------------

// Takes OUT/.lock: an exclusive flock, waited for up to LOCK_WAIT_MS (a run killed a
// moment ago, say by Ctrl-C or kill -9 on its make, can still be tearing down and hold
// the lock for some milliseconds after its parent is gone; a live run holds it for
// hours), then this process's pid written into the file for the message of the next one. create 0: a missing lock file means
// nobody holds OUT and nothing is taken (nothing is created: OUT may be refused later
// for another reason); create 1: OUT exists, the file is made. The kernel drops the
// lock when the descriptor is closed, so when the process ends, however it ends.
#define LOCK_WAIT_MS 3000
static int lock_wait(int fd) {
    for (int waited = 0;; waited += 50) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return 0;
        if (errno != EWOULDBLOCK || waited >= LOCK_WAIT_MS) return -1;
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    }
}

int out_lock(Trainer *tr, const char *out, int create) {
    char *path = path_join(out, ".lock");
    int fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0644);
    int rc = 0;
    if (fd < 0) {
        if (create || errno != ENOENT) rc = ERR("%s: cannot open the lock file: %s", path, strerror(errno));
    } else if (lock_wait(fd) < 0) {
        int e = errno;
        char buf[24] = {0};
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        long pid = n > 0 ? strtol(buf, NULL, 10) : 0;
        if (e != EWOULDBLOCK) rc = ERR("%s: cannot lock: %s", path, strerror(e));
        else if (pid > 0) rc = ERR("%s is in use by another best-train (pid %ld)", out, pid);
        else rc = ERR("%s is in use by another best-train (pid unknown)", out);
        close(fd);
    } else {
        char pid[24];
        int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
        if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
            rc = ERR("%s: cannot write: %s", path, strerror(errno));
            close(fd);
        } else {
            tr->lock_fd = fd;
        }
    }
    free(path);
    return rc;
}

// A fresh run (no --resume) refuses an OUT that holds a state: checked before anything
// is read, and again once OUT's lock is taken (another fresh run may have made OUT and
// saved into it between the two: it held the lock while it did).
int out_check_fresh(const TrainConfig *c) {
    if (c->resume || !c->out) return 0;
    char *one = path_fmt("%s/state/state.safetensors", c->out), *man = path_fmt("%s/state/manifest.json", c->out);
    int exists = access(one, F_OK) == 0 || access(man, F_OK) == 0;
    free(one);
    free(man);
    if (exists)
        return ERR("%s: holds a training state already; continue it with --resume %s, or choose another --out", c->out,
                   c->out);
    return 0;
}

// --- a fresh run whose first save failed --------------------------------------------------

// train.h: what a fresh run whose first save failed had written goes again (rank 0).
void out_unmake_fresh(Trainer *tr) {
    const char *out = tr->cfg.out;
    char *mdir = path_join(out, "model");
    model_unlink_saved(mdir);
    rmdir(mdir);
    free(mdir);
    out_remove_stale_steps(out); // (the run removed earlier ones at its start: these are its own)
    static const char *const sub[] = {"moments", "masks", "state"};
    for (int i = 0; i < 3; i++) {
        char *d = path_join(out, sub[i]);
        rmdir(d); // when empty: what else is there, the run did not write
        free(d);
    }
    if (tr->log_made && tr->log_path) unlink(tr->log_path);
    char *lock = path_join(out, ".lock"); // OUT holds no state: nothing to guard
    unlink(lock);
    free(lock);
    if (tr->out_made) {
        path_unmake(tr->out_made, out);
        tr->out_made = NULL;
    }
}
