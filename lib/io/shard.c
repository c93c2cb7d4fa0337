// shard.c: writing (streaming, temp + rename) and reading (mmap, verified) token shards.
#include "io/shard.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h" // defines: ERR, xmalloc

static void put32(uint8_t *p, uint32_t x) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(x >> (8 * i)); }
static void put64(uint8_t *p, uint64_t x) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(x >> (8 * i)); }
static uint32_t get32(const uint8_t *p) { uint32_t x = 0; for (int i = 3; i >= 0; i--) x = x << 8 | p[i]; return x; }
static uint64_t get64(const uint8_t *p) { uint64_t x = 0; for (int i = 7; i >= 0; i--) x = x << 8 | p[i]; return x; }

static void header_encode(uint8_t out[SHARD_HEADER_BYTES], const ShardHeader *h) {
    memset(out, 0, SHARD_HEADER_BYTES);
    memcpy(out, SHARD_MAGIC, 8);
    put32(out + 8, h->version);
    put32(out + 12, h->width);
    put32(out + 16, h->vocab_size);
    put32(out + 20, h->flags);
    put64(out + 24, h->ntokens);
    put64(out + 32, h->ndocs);
    put64(out + 40, h->payload_hash);
    put64(out + 48, h->tokenizer_hash);
    put64(out + 56, XXH64(out, 56, 0));
}

int shard_header_parse(ShardHeader *h, const uint8_t *p, size_t n, const char *name) {
    if (n < SHARD_HEADER_BYTES)
        return ERR("%s: not a token shard (%zu bytes, shorter than the 64-byte header)", name, n);
    if (memcmp(p, SHARD_MAGIC, 8) != 0) return ERR("%s: not a token shard (bad magic)", name);
    h->version = get32(p + 8);
    if (h->version != SHARD_VERSION)
        return ERR("%s: shard version %u not supported (this build reads %d)", name, h->version, SHARD_VERSION);
    if (get64(p + 56) != XXH64(p, 56, 0)) return ERR("%s: shard header checksum mismatch", name);
    h->width = get32(p + 12);
    h->vocab_size = get32(p + 16);
    h->flags = get32(p + 20);
    h->ntokens = get64(p + 24);
    h->ndocs = get64(p + 32);
    h->payload_hash = get64(p + 40);
    h->tokenizer_hash = get64(p + 48);
    if (h->width != 2 && h->width != 4) return ERR("%s: bad token width %u", name, h->width);
    if (h->vocab_size == 0 || (h->width == 2 && h->vocab_size > 65536))
        return ERR("%s: vocab size %u does not fit token width %u", name, h->vocab_size, h->width);
    if (h->ndocs > h->ntokens && h->ntokens > 0)
        return ERR("%s: %llu documents for %llu tokens", name, (unsigned long long)h->ndocs,
                   (unsigned long long)h->ntokens);
    return 0;
}

int shard_writer_open(ShardWriter *w, const char *path, uint32_t vocab_size, uint32_t flags,
                      uint64_t tokenizer_hash) {
    memset(w, 0, sizeof *w);
    if (strcmp(path, "-") == 0)
        return ERR("%s: a shard needs a file name (its header is written last); use --ids for text on stdout", path);
    if (vocab_size == 0) return ERR("%s: vocab size 0", path);
    struct stat st; // (a FIFO refused before it is opened: opening one waits for a reader)
    int fifo = stat(path, &st) == 0 && S_ISFIFO(st.st_mode);
    if (!fifo) TRY(afile_open(&w->f, path));
    if (fifo || !afile_seekable(&w->f)) {
        if (!fifo) afile_abort(&w->f);
        return ERR("%s: a shard's header is written last, so it needs a file (or a device) it can rewind, not a "
                   "FIFO or pipe; use --ids for text on a pipe", path);
    }
    w->h.version = SHARD_VERSION;
    w->h.width = vocab_size <= 65536 ? 2 : 4;
    w->h.vocab_size = vocab_size;
    w->h.flags = flags;
    w->h.tokenizer_hash = tokenizer_hash;
    w->xx = XXH64_createState();
    CHECK(w->xx, "out of memory");
    XXH64_reset(w->xx, 0);
    uint8_t zero[SHARD_HEADER_BYTES] = {0}; // placeholder, rewritten at close
    if (fwrite(zero, 1, sizeof zero, w->f.fp) != sizeof zero) {
        int e = errno;
        afile_abort(&w->f);
        return ERR("%s: write failed: %s", path, strerror(e));
    }
    return 0;
}

int shard_writer_add_doc(ShardWriter *w, const int32_t *ids, size_t n) {
    size_t bytes = n * w->h.width;
    if (bytes > w->buf_cap) {
        w->buf_cap = bytes * 2;
        w->buf = xrealloc(w->buf, w->buf_cap);
    }
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (uint32_t)ids[i] >= w->h.vocab_size)
            return ERR("%s: token id %d outside vocab size %u", w->f.path, ids[i], w->h.vocab_size);
        if (w->h.width == 2) { w->buf[2 * i] = (uint8_t)ids[i]; w->buf[2 * i + 1] = (uint8_t)(ids[i] >> 8); }
        else put32(w->buf + 4 * i, (uint32_t)ids[i]);
    }
    if (bytes) {
        if (fwrite(w->buf, 1, bytes, w->f.fp) != bytes)
            return ERR("%s: write failed: %s", w->f.path, strerror(errno));
        XXH64_update(w->xx, w->buf, bytes);
    }
    w->h.ntokens += n;
    w->h.ndocs++;
    return 0;
}

int shard_writer_close(ShardWriter *w) {
    w->h.payload_hash = XXH64_digest(w->xx);
    uint8_t head[SHARD_HEADER_BYTES];
    header_encode(head, &w->h);
    int rc = 0;
    if (fseek(w->f.fp, 0, SEEK_SET) != 0 || fwrite(head, 1, sizeof head, w->f.fp) != sizeof head) {
        rc = ERR("%s: cannot write the header: %s", w->f.path, strerror(errno));
        afile_abort(&w->f);
    } else {
        rc = afile_commit(&w->f);
    }
    XXH64_freeState(w->xx);
    free(w->buf);
    memset(w, 0, sizeof *w);
    return rc;
}

void shard_writer_abort(ShardWriter *w) {
    afile_abort(&w->f);
    if (w->xx) XXH64_freeState(w->xx);
    free(w->buf);
    memset(w, 0, sizeof *w);
}

// A stream that gives the bytes already read from f (head) again, then the rest of f:
// how a pipe is "rewound" after sniffing (fopencookie, glibc).
typedef struct { FILE *f; char head[8]; size_t n, pos; } Replay;

static ssize_t replay_read(void *c, char *buf, size_t size) {
    Replay *r = c;
    if (r->pos < r->n) {
        size_t k = r->n - r->pos < size ? r->n - r->pos : size;
        memcpy(buf, r->head + r->pos, k);
        r->pos += k;
        return (ssize_t)k;
    }
    size_t got = fread(buf, 1, size, r->f);
    return got == 0 && ferror(r->f) ? -1 : (ssize_t)got;
}

static int replay_close(void *c) {
    Replay *r = c;
    int rc = r->f == stdin ? 0 : fclose(r->f);
    free(r);
    return rc;
}

int shard_sniff(const char *path, FILE **fp) {
    *fp = NULL;
    int is_stdin = strcmp(path, "-") == 0;
    const char *name = is_stdin ? "<stdin>" : path;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) return ERR("%s: cannot open: %s", name, strerror(errno));
    struct stat st;
    int regular = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
    long start = regular ? ftell(f) : -1;
    char head[8];
    size_t n = fread(head, 1, sizeof head, f);
    if (ferror(f)) {
        int e = errno;
        if (!is_stdin) fclose(f);
        return ERR("%s: cannot read: %s", name, strerror(e));
    }
    if (n == 8 && memcmp(head, SHARD_MAGIC, 8) == 0) {
        if (!is_stdin) fclose(f);
        if (!regular || is_stdin)
            return ERR("%s: a token shard must be a named regular file (it is memory-mapped), not a pipe or stdin", name);
        return 1;
    }
    if (start >= 0 && fseek(f, start, SEEK_SET) == 0) { // a regular file: rewound
        *fp = f;
        return 0;
    }
    Replay *r = xcalloc(1, sizeof *r);
    r->f = f;
    memcpy(r->head, head, n);
    r->n = n;
    *fp = fopencookie(r, "rb", (cookie_io_functions_t){replay_read, NULL, NULL, replay_close});
    CHECK(*fp, "out of memory");
    return 0;
}

int shard_open(Shard *s, const char *path) {
    memset(s, 0, sizeof *s);
    TRY(mapped_open(&s->m, path));
    const uint8_t *p = s->m.data;
    if (shard_header_parse(&s->h, p, s->m.size, path) < 0) { mapped_close(&s->m); return -1; }
    uint64_t want = SHARD_HEADER_BYTES + s->h.ntokens * s->h.width;
    if (s->h.ntokens > (UINT64_MAX - SHARD_HEADER_BYTES) / 4 || want != s->m.size) {
        size_t size = s->m.size; // before mapped_close clears it
        mapped_close(&s->m);
        return ERR("%s: file is %zu bytes but its header promises %llu tokens (%llu bytes): truncated or corrupt",
                   path, size, (unsigned long long)s->h.ntokens, (unsigned long long)want);
    }
    s->tokens = p + SHARD_HEADER_BYTES;
    size_t nbytes = s->h.ntokens * s->h.width;
    if (XXH64(s->tokens, nbytes, 0) != s->h.payload_hash) {
        mapped_close(&s->m);
        return ERR("%s: payload checksum mismatch (the file is corrupt)", path);
    }
    uint32_t maxid = 0;
    if (s->h.width == 2) {
        for (size_t i = 0; i < s->h.ntokens; i++) {
            uint32_t t = s->tokens[2 * i] | (uint32_t)s->tokens[2 * i + 1] << 8;
            if (t > maxid) maxid = t;
        }
    } else {
        for (size_t i = 0; i < s->h.ntokens; i++) {
            uint32_t t = get32(s->tokens + 4 * i);
            if (t > maxid) maxid = t;
        }
    }
    if (s->h.ntokens && maxid >= s->h.vocab_size) {
        mapped_close(&s->m);
        return ERR("%s: token %u outside the vocab size %u", path, maxid, s->h.vocab_size);
    }
    s->path = xstrdup(path);
    return 0;
}

void shard_read(const Shard *s, int32_t *dst, uint64_t start, size_t n) {
    CHECK(start <= s->h.ntokens && n <= s->h.ntokens - start, "shard_read out of range");
    const uint8_t *p = s->tokens + start * s->h.width;
    if (s->h.width == 2)
        for (size_t i = 0; i < n; i++) dst[i] = (int32_t)(p[2 * i] | (uint32_t)p[2 * i + 1] << 8);
    else
        for (size_t i = 0; i < n; i++) dst[i] = (int32_t)get32(p + 4 * i);
}

void shard_close(Shard *s) {
    mapped_close(&s->m);
    free(s->path);
    memset(s, 0, sizeof *s);
}
