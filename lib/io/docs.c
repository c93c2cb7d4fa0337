// docs.c: the document reader over libarchive. See docs.h for what it accepts.
#include "io/docs.h"

#include <archive.h>
#include <omp.h>
#include <archive_entry.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h" // defines: ERR, xmalloc
#include "base/utf8.h"  // defines: utf8_valid
#include "base/vec.h"   // defines: ByteVec
#include "io/parquet.h" // defines: Parquet, ParquetText, parquet_read_group

#define BLOCK (1 << 20)

struct DocReader {
    char *path;            // as given ("-" for stdin)
    const char *field;
    DocFormat format;      // forced by the caller, or DOC_AUTO
    struct archive *outer; // the file: tar or raw, any compression
    struct archive *inner; // a compressed member inside a tar, or NULL
    struct archive *cur;   // where member bytes come from (outer or inner)
    int is_raw;            // the outer file is not an archive
    int in_member;
    int checked;           // the file's name against its content (check_compression)
    char name[1024];       // "file" or "file:member" for messages
    DocFormat mformat;     // format of the current member
    char *buf;             // member bytes not yet consumed: [pos, len)
    size_t pos, len, cap;
    int eof;               // current member fully read into buf
    uint64_t mread;        // bytes of the current member read so far (decompressed)
    int magic;             // what the member's first bytes look like: MAGIC_*
    uint64_t line;         // JSON lines: number of the last line returned
    ByteVec doc;           // the current JSON document's text
    // a .parquet file: its row groups decoded `threads` at a time into groups[0..n_dec)
    Parquet *pq;
    ParquetText *groups;   // (threads)
    int threads, n_dec, gcur, next_group;
    size_t cur_i;          // the next string of groups[cur]
    uint64_t nulls, pq_bytes;
    char inner_block[BLOCK > 65536 ? 65536 : BLOCK];
};

static la_ssize_t inner_read_cb(struct archive *a, void *ud, const void **out) {
    (void)a;
    DocReader *r = ud;
    la_ssize_t n = archive_read_data(r->outer, r->inner_block, sizeof r->inner_block);
    *out = r->inner_block;
    return n;
}

// A reader of raw bytes (one member: the whole file), with every compression undone;
// tar_too: a tar is walked member by member (the name, or the caller, said tar). Never
// both sniffed: a .jsonl whose first blocks are zeros (a file after a crash) would be
// an empty tar, and a tar named .txt would have its members read.
static struct archive *archive_new_reader(int tar_too) {
    struct archive *a = archive_read_new();
    CHECK(a, "out of memory");
    archive_read_support_filter_all(a);
    if (tar_too) archive_read_support_format_tar(a);
    archive_read_support_format_empty(a);
    archive_read_support_format_raw(a);
    return a;
}

static int has_suffix(const char *s, size_t n, const char *suf);
static int name_is_tar(const char *name);

// A .parquet file: read through parquet.h, not libarchive.
static int open_parquet(DocReader *r) {
    if (!r->field[0])
        return ERR("%s: --field \"\" (the whole record) is for JSON lines; a Parquet file needs a column name",
                   r->path);
    r->pq = xcalloc(1, sizeof *r->pq);
    if (parquet_open(r->pq, r->path, r->field) < 0) {
        free(r->pq);
        r->pq = NULL;
        return -1;
    }
    snprintf(r->name, sizeof r->name, "%s", r->path);
    r->threads = 1;
    r->groups = xcalloc(1, sizeof *r->groups);
    return 0;
}

// path names the input (messages, the format by name); f: read from it, else open path.
static int open_reader(DocReader **out, const char *path, FILE *f, const char *field, DocFormat format) {
    *out = NULL;
    DocReader *r = xcalloc(1, sizeof *r);
    r->path = xstrdup(path);
    r->field = field ? field : "text";
    r->format = format;
    if (strcmp(path, "-") != 0 && has_suffix(path, strlen(path), ".parquet")) {
        if (open_parquet(r) < 0) {
            docs_close(r);
            return -1;
        }
        *out = r;
        return 0;
    }
    r->outer = archive_new_reader(format == DOC_TAR || (strcmp(path, "-") != 0 && name_is_tar(path)));
    if (!f && strcmp(path, "-") == 0) f = stdin;
    int rc = f ? archive_read_open_FILE(r->outer, f) : archive_read_open_filename(r->outer, path, BLOCK);
    if (rc != ARCHIVE_OK) {
        ERR("%s: cannot read: %s", path, archive_error_string(r->outer));
        docs_close(r);
        return -1;
    }
    *out = r;
    return 0;
}

int docs_open(DocReader **out, const char *path, const char *field, DocFormat format) {
    return open_reader(out, path, NULL, field, format);
}

int docs_open_file(DocReader **out, const char *name, FILE *f, const char *field, DocFormat format) {
    return open_reader(out, name, f, field, format);
}

static int has_suffix(const char *s, size_t n, const char *suf) {
    size_t k = strlen(suf);
    return n >= k && strncasecmp(s + n - k, suf, k) == 0;
}

// Compression suffixes and the libarchive filter each one promises.
static const struct { const char *suffix, *name; int filter; } compressions[] = {
    {".gz", "gzip", ARCHIVE_FILTER_GZIP},   {".zst", "zstd", ARCHIVE_FILTER_ZSTD},
    {".zstd", "zstd", ARCHIVE_FILTER_ZSTD}, {".xz", "xz", ARCHIVE_FILTER_XZ},
    {".bz2", "bzip2", ARCHIVE_FILTER_BZIP2}, {".lz4", "lz4", ARCHIVE_FILTER_LZ4},
    {".Z", "compress", ARCHIVE_FILTER_COMPRESS},
};
enum { N_COMPRESSIONS = sizeof compressions / sizeof *compressions };

// The compression suffix that ends name[0, n), or -1.
static int compression_suffix(const char *name, size_t n) {
    for (int i = 0; i < N_COMPRESSIONS; i++)
        if (has_suffix(name, n, compressions[i].suffix)) return i;
    return -1;
}

// Length of name once compression suffixes are stripped; *compressed: any were.
static size_t strip_compression(const char *name, int *compressed) {
    size_t n = strlen(name);
    *compressed = 0;
    for (int c; (c = compression_suffix(name, n)) >= 0;) {
        n -= strlen(compressions[c].suffix);
        *compressed = 1;
    }
    return n;
}

// Format from a name once compression suffixes are stripped.
static DocFormat format_of_name(const char *name, int *compressed) {
    size_t n = strip_compression(name, compressed);
    if (has_suffix(name, n, ".jsonl") || has_suffix(name, n, ".json") || has_suffix(name, n, ".ndjson"))
        return DOC_JSONL;
    if (has_suffix(name, n, ".txt") || has_suffix(name, n, ".text") || has_suffix(name, n, ".md"))
        return DOC_TEXT;
    return DOC_AUTO;
}

// A name that says tar: .tar (compressed or not), .tgz, .tbz2, .txz, .tzst.
static int name_is_tar(const char *name) {
    int compressed;
    size_t n = strip_compression(name, &compressed);
    return has_suffix(name, n, ".tar") || has_suffix(name, n, ".tgz") || has_suffix(name, n, ".tbz2") ||
           has_suffix(name, n, ".txz") || has_suffix(name, n, ".tzst");
}

// Checks that a's filters are the compressions path's suffixes promise (path: its
// name; what: the name in messages), so that a mislabelled file is refused rather than
// read as text. a's filter count-2 is the outermost one (the last suffix), count-1 "none".
static int check_compression(struct archive *a, const char *path, const char *what) {
    int nf = archive_filter_count(a) - 1;
    size_t n = strlen(path);
    for (int k = 0, c; (c = compression_suffix(path, n)) >= 0; k++) {
        int at = nf - 1 - k;
        int code = at >= 0 ? archive_filter_code(a, at) : ARCHIVE_FILTER_NONE;
        if (code != compressions[c].filter) {
            const char *is = code == ARCHIVE_FILTER_NONE ? "not compressed" : archive_filter_name(a, at);
            return ERR("%s: not %s data, as its name (%s) says; the data is %s", what, compressions[c].name,
                       compressions[c].suffix, is);
        }
        n -= strlen(compressions[c].suffix);
    }
    return 0;
}

enum { MAGIC_NONE, MAGIC_TAR, MAGIC_PARQUET };

// A NUL byte at offset at of the current member: no text has one (JSON escapes it as
// \u0000), so the input is damaged (zeroed blocks after a crash) or binary. The first
// bytes say which binary, when they can.
static int nul_error(const DocReader *r, uint64_t at) {
    if (r->magic == MAGIC_PARQUET)
        return ERR("%s: Parquet data: give the .parquet file's path (its footer is at the end; it is not read "
                   "from stdin or under another name)", r->name);
    return ERR("%s: a NUL byte at offset %llu (not text; %s)", r->name, (unsigned long long)at,
               r->magic == MAGIC_TAR ? "a tar archive? one is read as such only by its name: .tar, .tgz, ..."
                                     : "a damaged file?");
}

// Reads more member bytes into buf; sets eof at the end of the member. Every byte read
// is checked not to be NUL (nul_error).
static int fill(DocReader *r) {
    if (r->pos > 0) { // keep only the unconsumed tail
        memmove(r->buf, r->buf + r->pos, r->len - r->pos);
        r->len -= r->pos;
        r->pos = 0;
    }
    if (r->cap - r->len < BLOCK) {
        r->cap = r->cap ? r->cap * 2 : 2 * BLOCK;
        while (r->cap - r->len < BLOCK) r->cap *= 2;
        r->buf = xrealloc(r->buf, r->cap + 1);
    }
    la_ssize_t n = archive_read_data(r->cur, r->buf + r->len, r->cap - r->len);
    if (n < 0) return ERR("%s: %s", r->name, archive_error_string(r->cur));
    if (n == 0) r->eof = 1;
    const char *got = r->buf + r->len;
    if (r->mread == 0 && n >= 4) // (a tar's "ustar" magic is at 257 of its first header)
        r->magic = memcmp(got, "PAR1", 4) == 0                      ? MAGIC_PARQUET
                   : n >= 262 && memcmp(got + 257, "ustar", 5) == 0 ? MAGIC_TAR
                                                                    : MAGIC_NONE;
    const char *nul = memchr(got, 0, (size_t)n);
    if (nul) return nul_error(r, r->mread + (uint64_t)(nul - got));
    r->mread += (uint64_t)n;
    r->len += (size_t)n;
    return 0;
}

static void member_end(DocReader *r) {
    if (r->inner) { archive_read_free(r->inner); r->inner = NULL; }
    r->cur = r->outer;
    r->in_member = 0;
    r->pos = r->len = 0;
    r->eof = 0;
    r->mread = 0;
    r->magic = MAGIC_NONE;
}

// Opens the next regular member; returns 1, or 0 when the input is exhausted.
static int member_next(DocReader *r) {
    for (;;) {
        struct archive_entry *e;
        int rc = archive_read_next_header(r->outer, &e);
        if (rc == ARCHIVE_EOF) return 0;
        if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN)
            return ERR("%s: cannot read: %s", r->path, archive_error_string(r->outer));
        r->is_raw = archive_format(r->outer) == ARCHIVE_FORMAT_RAW;
        if (!r->checked) { // once: the file's compression, and that a .tar is one
            TRY(check_compression(r->outer, r->path, r->path));
            if (r->is_raw && name_is_tar(r->path)) return ERR("%s: not a tar archive, as its name says", r->path);
            if (r->is_raw && r->format == DOC_TAR)
                return ERR("%s: not a tar archive, as --format tar says", strcmp(r->path, "-") ? r->path : "<stdin>");
            r->checked = 1;
        }
        if (!r->is_raw && archive_entry_filetype(e) != AE_IFREG) continue;
        const char *mname = archive_entry_pathname(e);
        if (!mname) mname = "?";
        if (!r->is_raw && name_is_tar(mname))
            return ERR("%s:%s: a tar inside a tar is not read (unpack it, give its files)", r->path, mname);
        const char *who = r->is_raw ? r->path : mname;
        int zc;
        size_t wn = strip_compression(who, &zc);
        if (has_suffix(who, wn, ".parquet"))
            return ERR("%s%s%s: Parquet is read from its own file (its footer is at the end), not %s: give the "
                       ".parquet file's path", r->path, r->is_raw ? "" : ":", r->is_raw ? "" : mname,
                       r->is_raw ? "compressed or from stdin" : "inside an archive");
        int compressed = 0;
        if (r->is_raw) {
            snprintf(r->name, sizeof r->name, "%s", strcmp(r->path, "-") == 0 ? "<stdin>" : r->path);
            r->mformat = format_of_name(r->path, &compressed);
            compressed = 0; // the outer filter already undid it
        } else {
            snprintf(r->name, sizeof r->name, "%s:%s", r->path, mname);
            r->mformat = format_of_name(mname, &compressed);
        }
        if (r->format == DOC_TEXT || r->format == DOC_JSONL) r->mformat = r->format;
        r->cur = r->outer;
        if (compressed) {
            r->inner = archive_new_reader(0);
            if (archive_read_open(r->inner, r, NULL, inner_read_cb, NULL) != ARCHIVE_OK ||
                archive_read_next_header(r->inner, &e) != ARCHIVE_OK) {
                int bad = ERR("%s: cannot decompress: %s", r->name, archive_error_string(r->inner));
                archive_read_free(r->inner);
                r->inner = NULL;
                return bad;
            }
            if (check_compression(r->inner, mname, r->name) < 0) {
                archive_read_free(r->inner);
                r->inner = NULL;
                return -1;
            }
            r->cur = r->inner;
        }
        r->in_member = 1;
        r->pos = r->len = 0;
        r->eof = 0;
        r->mread = 0;
        r->magic = MAGIC_NONE;
        r->line = 0;
        return 1;
    }
}

static int check_utf8(DocReader *r, const char *s, size_t n) {
    size_t bad;
    if (utf8_valid(s, n, &bad)) return 0;
    if (r->mformat == DOC_JSONL)
        return ERR("%s:%llu: invalid UTF-8 in the document", r->name, (unsigned long long)r->line);
    return ERR("%s: invalid UTF-8 at byte %zu", r->name, bad);
}

// One JSON line -> r->doc. Returns 1 (document), 0 (blank line), -1.
static int parse_json_line(DocReader *r, const char *s, size_t n) {
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')) i++;
    if (i == n) return 0;
    json_error_t jerr;
    json_t *root = json_loadb(s, n, JSON_ALLOW_NUL, &jerr);
    if (!root)
        return ERR("%s:%llu: malformed JSON line: %s", r->name, (unsigned long long)r->line, jerr.text);
    if (!r->field[0]) { // the record itself
        int obj = json_is_object(root);
        json_decref(root);
        if (!obj) return ERR("%s:%llu: not a JSON object", r->name, (unsigned long long)r->line);
        r->doc.n = 0;
        bytevec_append(&r->doc, s + i, n - i);
        return 1;
    }
    json_t *v = json_is_object(root) ? json_object_get(root, r->field) : NULL;
    if (!v || !json_is_string(v)) {
        json_decref(root);
        return ERR("%s:%llu: no string field \"%s\" (choose it with --field)", r->name,
                   (unsigned long long)r->line, r->field);
    }
    r->doc.n = 0;
    bytevec_append(&r->doc, json_string_value(v), json_string_length(v));
    json_decref(root);
    return 1;
}

// The next row of a Parquet file. Row groups are decoded `threads` at a time, in
// parallel; ERR is per thread, so a group that failed is decoded again on this thread
// for its message (decoding is deterministic).
static int parquet_next(DocReader *r, const char **text, size_t *len) {
    for (;;) {
        if (r->gcur < r->n_dec) {
            const ParquetText *t = &r->groups[r->gcur];
            if (r->cur_i < t->n) {
                *text = t->text.v ? t->text.v + t->off[r->cur_i] : "";
                *len = t->off[r->cur_i + 1] - t->off[r->cur_i];
                r->cur_i++;
                return 1;
            }
            r->gcur++, r->cur_i = 0;
            continue;
        }
        if (r->next_group >= r->pq->n_groups) return 0;
        int n = r->pq->n_groups - r->next_group < r->threads ? r->pq->n_groups - r->next_group : r->threads;
        int failed = -1;
#pragma omp parallel for schedule(dynamic, 1) num_threads(n) if (n > 1)
        for (int i = 0; i < n; i++)
            if (parquet_read_group(&r->groups[i], r->pq, r->next_group + i) < 0) {
#pragma omp critical
                if (failed < 0 || i < failed) failed = i;
            }
        if (failed >= 0) return parquet_read_group(&r->groups[failed], r->pq, r->next_group + failed);
        for (int i = 0; i < n; i++) r->nulls += r->groups[i].nulls;
        const ParquetChunk *last = &r->pq->chunks[r->next_group + n - 1];
        r->pq_bytes = last->offset + last->size;
        r->next_group += n;
        r->n_dec = n, r->gcur = 0, r->cur_i = 0;
    }
}

void docs_set_threads(DocReader *r, int n) {
    if (!r->pq || n < 1 || n == r->threads || r->next_group > 0) return; // before the first docs_next only
    for (int i = 0; i < r->threads; i++) parquet_text_free(&r->groups[i]);
    free(r->groups);
    r->groups = xcalloc((size_t)n, sizeof *r->groups);
    r->threads = n;
    r->n_dec = r->gcur = 0;
}

uint64_t docs_nulls(const DocReader *r) { return r->nulls; }

int docs_next(DocReader *r, const char **text, size_t *len) {
    if (r->pq) return parquet_next(r, text, len);
    for (;;) {
        if (!r->in_member) {
            int rc = member_next(r);
            if (rc <= 0) return rc;
            if (r->mformat == DOC_AUTO) { // sniff the first non-blank byte
                while (!r->eof && r->len < 4096) TRY(fill(r));
                size_t i = 0;
                if (r->len >= 4 && memcmp(r->buf, "PAR1", 4) == 0)
                    return ERR("%s: Parquet data: give the .parquet file's path (its footer is at the end; it is "
                               "not read from stdin or under another name)", r->name);
                while (i < r->len && (r->buf[i] == ' ' || r->buf[i] == '\n' || r->buf[i] == '\r' || r->buf[i] == '\t')) i++;
                r->mformat = (i < r->len && r->buf[i] == '{') ? DOC_JSONL : DOC_TEXT;
            }
        }
        if (r->mformat == DOC_TEXT) {
            while (!r->eof) TRY(fill(r));
            size_t n = r->len;
            member_end(r);   // keeps buf; the document stays valid until the next call
            if (n == 0) continue;
            TRY(check_utf8(r, r->buf, n));
            *text = r->buf;
            *len = n;
            return 1;
        }
        // JSON lines: find the next newline, reading more as needed.
        char *nl = NULL;
        while (!(r->len > r->pos && (nl = memchr(r->buf + r->pos, '\n', r->len - r->pos))) && !r->eof)
            TRY(fill(r));
        if (!nl && r->pos == r->len) { member_end(r); continue; }
        size_t start = r->pos, end = nl ? (size_t)(nl - r->buf) : r->len;
        r->pos = nl ? end + 1 : r->len;
        r->line++;
        int rc = parse_json_line(r, r->buf + start, end - start);
        TRY(rc);
        if (rc == 0) continue;
        TRY(check_utf8(r, r->doc.v, r->doc.n));
        *text = r->doc.v;
        *len = r->doc.n;
        return 1;
    }
}

uint64_t docs_line(const DocReader *r) { return r->line; }

uint64_t docs_bytes_read(const DocReader *r) {
    if (r->pq) return r->next_group >= r->pq->n_groups ? r->pq->size : r->pq_bytes;
    la_int64_t n = archive_filter_bytes(r->outer, -1);
    return n > 0 ? (uint64_t)n : 0;
}

void docs_close(DocReader *r) {
    if (!r) return;
    if (r->inner) archive_read_free(r->inner);
    if (r->outer) archive_read_free(r->outer);
    if (r->pq) {
        for (int i = 0; i < r->threads; i++) parquet_text_free(&r->groups[i]);
        parquet_close(r->pq);
    }
    free(r->pq);
    free(r->groups);
    free(r->buf);
    bytevec_free(&r->doc);
    free(r->path);
    free(r);
}
