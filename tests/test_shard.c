// test_shard.c: token shards: round trip at both widths, and every kind of damage
// (magic, version, header bytes, payload bytes, truncation, out-of-vocab) is refused;
// shard_sniff reads a pipe only once.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "io/shard.h"
#include "test.h"

static char dir[] = "/tmp/best_test_shard_XXXXXX";

static int write_shard(const char *path, uint32_t vocab, int ndocs) {
    ShardWriter w;
    if (shard_writer_open(&w, path, vocab, SHARD_FLAG_BOS, 0x1234) < 0) return -1;
    for (int d = 0; d < ndocs; d++) {
        int32_t ids[50];
        for (int i = 0; i < 50; i++) ids[i] = (int32_t)((uint32_t)(d * 7919 + i * 104729) % vocab);
        if (shard_writer_add_doc(&w, ids, (size_t)(d % 50)) < 0) return -1;
    }
    return shard_writer_close(&w);
}

static void corrupt(const char *src, const char *dst, long at, int truncate_to) {
    FILE *f = fopen(src, "rb");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n);
    if (fread(b, 1, (size_t)n, f) != (size_t)n) abort();
    fclose(f);
    if (at >= 0 && at < n) b[at] ^= 0x20;
    if (truncate_to >= 0) n = truncate_to;
    f = fopen(dst, "wb");
    fwrite(b, 1, (size_t)n, f);
    fclose(f);
    free(b);
}

// shard_sniff on path must give back a stream of exactly want (n bytes), from the first.
static int sniff_gives(const char *path, const char *want, size_t n) {
    FILE *f;
    if (shard_sniff(path, &f) != 0) return 0;
    char *got = malloc(n + 1);
    size_t k = fread(got, 1, n + 1, f);
    int ok = k == n && memcmp(got, want, n) == 0;
    if (f != stdin) fclose(f);
    free(got);
    return ok;
}

// Text, then a shard, through a pipe opened by name (/dev/fd/N, as bash's <(...) gives):
// the sniff must not lose the bytes it read (it lost the first 4 KB), and a shard there
// is an error (it is memory-mapped).
static void test_sniff(const char *shard) {
    enum { N = 10000 }; // more than the 4 KB a FILE reads ahead, less than a pipe's 64 KB
    static char text[N];
    for (int i = 0; i < N; i++) text[i] = (char)('a' + i * 7 % 26);
    char path[64], txt[256];
    snprintf(txt, sizeof txt, "%s/t.txt", dir);
    FILE *f = fopen(txt, "wb");
    fwrite(text, 1, N, f);
    fclose(f);
    T_OK(sniff_gives(txt, text, N), "shard_sniff of a text file gives every byte from the first");
    FILE *dummy;
    T_OK(shard_sniff(shard, &dummy) == 1 && !dummy, "shard_sniff recognises a shard");
    int fd[2];
    CHECK(pipe(fd) == 0, "pipe");
    CHECK(write(fd[1], text, N) == N, "write");
    close(fd[1]);
    snprintf(path, sizeof path, "/dev/fd/%d", fd[0]);
    T_OK(sniff_gives(path, text, N), "shard_sniff of a pipe gives every byte from the first");
    close(fd[0]);
    CHECK(pipe(fd) == 0, "pipe");
    f = fopen(shard, "rb");
    char head[4096];
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    CHECK(write(fd[1], head, n) == (ssize_t)n, "write");
    close(fd[1]);
    snprintf(path, sizeof path, "/dev/fd/%d", fd[0]);
    T_OK(shard_sniff(path, &dummy) < 0 && strstr(err_msg(), "must be a named regular file"),
         "a shard through a pipe is refused: %s", err_msg());
    close(fd[0]);
}

static int refused(const char *path, const char *want) {
    Shard s;
    if (shard_open(&s, path) == 0) { shard_close(&s); return 0; }
    return strstr(err_msg(), want) != NULL && strstr(err_msg(), path) != NULL;
}

int main(void) {
    if (!mkdtemp(dir)) return 1;
    char p16[256], p32[256], bad[256];
    snprintf(p16, sizeof p16, "%s/a.bin", dir);
    snprintf(p32, sizeof p32, "%s/b.bin", dir);
    snprintf(bad, sizeof bad, "%s/bad.bin", dir);

    T_OK(write_shard(p16, 32000, 100) == 0, "write a uint16 shard");
    T_OK(write_shard(p32, 151936, 100) == 0, "write a uint32 shard");
    for (int k = 0; k < 2; k++) {
        const char *p = k ? p32 : p16;
        uint32_t vocab = k ? 151936 : 32000;
        Shard s;
        int ok = shard_open(&s, p) == 0;
        T_OK(ok, "open %s shard: %s", k ? "uint32" : "uint16", ok ? "" : err_msg());
        if (!ok) continue;
        T_OK(s.h.width == (k ? 4u : 2u) && s.h.vocab_size == vocab && s.h.ndocs == 100 &&
             s.h.tokenizer_hash == 0x1234 && s.h.flags == SHARD_FLAG_BOS, "header fields (width %u)", s.h.width);
        uint64_t pos = 0;
        int same = 1;
        for (int d = 0; d < 100; d++) {
            int32_t got[50];
            shard_read(&s, got, pos, (size_t)(d % 50));
            for (int i = 0; i < d % 50; i++)
                same &= got[i] == (int32_t)((uint32_t)(d * 7919 + i * 104729) % vocab);
            pos += (uint64_t)(d % 50);
        }
        T_OK(same && pos == s.h.ntokens, "tokens read back equal the tokens written");
        shard_close(&s);
    }
    test_sniff(p16);
    corrupt(p16, bad, 0, -1);
    T_OK(refused(bad, "bad magic"), "flipped magic byte refused");
    corrupt(p16, bad, 8, -1);
    T_OK(refused(bad, "version"), "unknown version refused");
    corrupt(p16, bad, 30, -1);
    T_OK(refused(bad, "header checksum"), "flipped header byte refused");
    corrupt(p16, bad, 200, -1);
    T_OK(refused(bad, "payload checksum"), "flipped payload byte refused: %s", err_msg());
    corrupt(p16, bad, -1, 1000);
    T_OK(refused(bad, "truncated") && strstr(err_msg(), "file is 1000 bytes"), "truncated shard refused, its size "
         "named: %s", err_msg());
    corrupt(p16, bad, -1, 10);
    T_OK(refused(bad, "header"), "shard shorter than its header refused");

    ShardWriter w;
    char p3[256];
    snprintf(p3, sizeof p3, "%s/c.bin", dir);
    T_OK(shard_writer_open(&w, p3, 100, 0, 0) == 0, "open writer");
    int32_t badid[] = {5, 100};
    T_OK(shard_writer_add_doc(&w, badid, 2) < 0 && strstr(err_msg(), "outside vocab"), "id >= vocab refused");
    shard_writer_abort(&w);
    T_OK(access(p3, F_OK) != 0, "aborted writer leaves no file");
    T_OK(shard_writer_open(&w, "-", 100, 0, 0) < 0, "shard to stdout refused");

    // No temp files left behind in the folder.
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls -a %s | grep -q tmp", dir);
    T_OK(system(cmd) != 0, "no temp files left");
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) {}
    T_DONE();
}
