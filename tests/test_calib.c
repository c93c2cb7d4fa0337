// test_calib.c: calib_windows (lib/sparse/calib.c): windows of seq tokens drawn only from
// documents longer than seq, each inside one document, for shards whose documents start
// with BOS, end with EOS, or are not marked (one document); the same seed the same
// windows, another seed others; every long document and offset can come out; no long
// enough document is an error naming the longest.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "io/shard.h"
#include "sparse/calib.h"
#include "test.h"

// Document d (lengths len[d]) holds tokens 1000 * (d + 1) + i (i its position); with BOS
// its first token is 1, with EOS its last is 2.
static int write_docs(const char *path, const int *len, int nd, uint32_t flags) {
    ShardWriter w;
    if (shard_writer_open(&w, path, 100000, flags, 0) < 0) return -1;
    for (int d = 0; d < nd; d++) {
        int32_t ids[200];
        for (int i = 0; i < len[d]; i++) ids[i] = 1000 * (d + 1) + i;
        if (flags & SHARD_FLAG_BOS) ids[0] = 1;
        if (flags & SHARD_FLAG_EOS) ids[len[d] - 1] = 2;
        if (shard_writer_add_doc(&w, ids, (size_t)len[d]) < 0) return -1;
    }
    return shard_writer_close(&w);
}

// The document a window lies in (by its second token, never BOS or EOS), or -1 when
// its tokens are not consecutive positions of one document.
static int doc_of(const int32_t *win, int seq, int *offset) {
    int d = win[1] / 1000 - 1, p = win[1] % 1000 - 1;
    for (int i = 1; i < seq - 1; i++)
        if (win[i] != 1000 * (d + 1) + p + i) return -1;
    *offset = p;
    return d;
}

int main(void) {
    char dir[] = "/tmp/best_test_calib_XXXXXX", path[64];
    if (!mkdtemp(dir)) return 1;
    snprintf(path, sizeof path, "%s/c.bin", dir);
    const int len[] = {5, 40, 12, 100, 31, 30};
    const uint32_t flags[] = {SHARD_FLAG_BOS, SHARD_FLAG_EOS, SHARD_FLAG_BOS | SHARD_FLAG_EOS};
    enum { N = 2000, SEQ = 30 };
    static int32_t win[N * SEQ], again[N * SEQ];
    for (int f = 0; f < 3; f++) {
        if (!T_OK(write_docs(path, len, 6, flags[f]) == 0, "write a shard of 6 documents (flags %u)", flags[f])) continue;
        int rc = calib_windows(win, path, N, SEQ, 7);
        int bad = 0, seen[6] = {0}, offs[100] = {0};
        for (int s = 0; s < N && rc == 0; s++) {
            int off, d = doc_of(win + s * SEQ, SEQ, &off);
            if (d < 0 || len[d] <= SEQ || off + SEQ > len[d]) bad++;
            else seen[d]++;
            if (d == 3) offs[off]++;
        }
        int all_offs = 1;
        for (int o = 0; o < 100 - SEQ; o++) all_offs &= offs[o] > 0; // len - seq offsets of document 3
        T_OK(rc == 0 && bad == 0 && seen[1] > 0 && seen[3] > 0 && seen[4] > 0 && seen[0] + seen[2] + seen[5] == 0,
             "flags %u: %d windows of %d, each inside one document longer than %d (%d, %d, %d from documents 1, 3, 4)",
             flags[f], N, SEQ, SEQ, seen[1], seen[3], seen[4]);
        T_OK(all_offs, "flags %u: every offset 0 .. %d of the 100-token document comes out", flags[f], 100 - SEQ - 1);
        calib_windows(again, path, N, SEQ, 7);
        int same = memcmp(win, again, sizeof win) == 0;
        calib_windows(again, path, N, SEQ, 8);
        T_OK(same && memcmp(win, again, sizeof win) != 0, "flags %u: seed 7 twice the same windows, seed 8 others",
             flags[f]);
    }
    // not marked: the whole shard is one document of 218 tokens
    T_OK(write_docs(path, len, 6, 0) == 0 && calib_windows(win, path, 3, 200, 1) == 0,
         "no document flags: one document, windows of 200 of its 218 tokens");
    T_OK(write_docs(path, len, 6, SHARD_FLAG_BOS) == 0 && calib_windows(win, path, 3, 100, 1) < 0 &&
             strstr(err_msg(), "no document is longer than --seq 100") && strstr(err_msg(), "has 100"),
         "no document longer than seq: an error naming the longest (%s)", err_msg());
    unlink(path);
    rmdir(dir);
    T_DONE();
}
