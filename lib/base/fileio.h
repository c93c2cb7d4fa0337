// fileio.h: reading whole files and writing outputs atomically.
//
// Every output a tool writes goes to "DIR/.NAME.tmp.XXXXXX" next to its final
// path (DIR created when missing, and removed again if the write fails) and is renamed
// into place only by afile_commit, so a killed or failed run
// never leaves a half-written file under the real name. Open temp files are
// remembered and removed by an exit handler (die() exits 1) and by a handler of
// SIGTERM, SIGINT, SIGHUP and SIGPIPE, which then dies of the signal (exit status
// 128 + signal in a shell; a signal ignored at start stays ignored). Path "-" writes
// to stdout directly (no rename possible; documented per tool), and so does a path that
// exists and is not a regular file, nor a link to one: a device (/dev/null), a FIFO,
// /dev/stdout or /proc/self/fd/1 is written in place, never replaced by a file (a
// folder or a socket is an error). A writer holds an flock on its temp file until the
// rename; kill -9 leaves the temp behind, unlocked: the next afile_open of the same path
// removes those of its temps that no live process holds.
#ifndef BEST_FILEIO_H
#define BEST_FILEIO_H

#include <stdint.h>
#include <stdio.h>

typedef struct {
    FILE *fp;
    char *path;      // final name
    char *tmp;       // temp name, NULL when writing to stdout or in place
    int direct;      // written in place (a device, a FIFO): afile_commit closes it
    char *made;      // the missing folders afile_open created (path_mkdir_made), removed
                     // again by afile_abort and by a failed afile_commit; NULL for none
    char *made_list; // the same for the exit and signal handlers (a killed run's are removed too)
} AFile;

int afile_open(AFile *f, const char *path);  // "-" = stdout
int afile_commit(AFile *f);                  // flush, fsync, rename; closes
// Whether f can be rewound (a file, a device like /dev/null; not a FIFO or pipe).
int afile_seekable(const AFile *f);
// Whether a folder entry is one of afile_open's temporaries (".NAME.tmp.XXXXXX") of the
// output named name (NULL: of any output).
int path_is_temp_of(const char *entry, const char *name);
// Removes from dir the temporaries of name (NULL: of every output) that no live writer
// holds (its flock, taken at afile_open: the kernel drops it when the writer dies).
void path_remove_stale_temps(const char *dir, const char *name);
void afile_abort(AFile *f);                  // close and unlink the temp file
// rel resolved against the folder of this program's executable (/proc/self/exe):
// "../share/best/tasks" for an installed tool; a fresh string, or NULL when unknown.
char *path_beside_exe(const char *rel);
// One line (copied; at most 1 KiB) that the handler above writes to stderr when one of
// those signals ends the process, after removing the temps: what a long run had saved and
// how to continue it. NULL: none. Called from one thread (a newer line replaces the older).
void signal_note_set(const char *line);

// Reads a whole file into a fresh NUL-terminated buffer. Errors name the path.
int file_read_all(char **out, size_t *n, const char *path);

// A read-only memory map of a whole file (empty files map to a non-NULL dummy).
typedef struct { const uint8_t *data; size_t size; int mapped; } MappedFile;
int mapped_open(MappedFile *m, const char *path);
void mapped_close(MappedFile *m);

int path_is_dir(const char *path);
// Creates dir and its missing parents (like mkdir -p); an existing folder is fine.
int path_mkdir_p(const char *dir);
// The same for a save that may fail: *made is the topmost folder this call created (a
// fresh string, a prefix of dir), or NULL when dir was there already. On failure the
// folders it made are removed again and *made is NULL.
int path_mkdir_made(char **made, const char *dir);
// After a failed save into dir: removes dir and its parents up to made, the folders
// path_mkdir_made created, as long as they are empty (the caller first unlinks what it
// wrote there; never a folder that was there before). Frees made; NULL does nothing.
void path_unmake(char *made, const char *dir);
// Before a tool writes any of its outputs, whether each can be written, so that a bad
// last output does not fail the run after the first ones were written. ERR names the
// output and the problem. path_check_out_file: "-" (stdout) is fine; else path is not a
// folder, and its folder is writable, or missing with the nearest existing one above it
// writable (afile_open creates the rest, as for a folder output). new_dir: unused, kept
// for callers that name the folder they create first. path_check_out_dir: dir is a
// writable folder, or the nearest existing one above it is (path_mkdir_p creates the rest).
int path_check_out_file(const char *path, const char *new_dir);
int path_check_out_dir(const char *dir);
// "dir/name" in a fresh buffer.
char *path_join(const char *dir, const char *name);
// A path made by printf's format in a fresh buffer (dies when out of memory, as xmalloc).
char *path_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// The files a run reads, noted by device and inode before it writes anything (each tool
// notes its inputs: files, and for a folder the files directly in it; "-" and names that
// do not exist are skipped): an output that is one of them, by any name or link, is an
// error (path_check_out_file, afile_open and afile_commit check), so that no run writes
// over what it reads. path_check_not_input: 0, or ERR "OUT: is also an input of this
// run (IN)".
void path_note_input(const char *path);
int path_check_not_input(const char *out);

#endif
