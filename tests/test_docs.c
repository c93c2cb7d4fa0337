// test_docs.c: the document reader on every input kind (text, JSON lines, gzip,
// zstd, tar, tar of compressed members, stdin-like raw) and on bad input.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/docs.h"
#include "base/error.h"
#include "test.h"

static char dir[] = "/tmp/best_test_docs_XXXXXX";

static void put(const char *name, const char *content, size_t n) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    fwrite(content, 1, n, f);
    fclose(f);
}

static int sh(const char *fmt, const char *arg) {
    char cmd[1024], inner[900];
    snprintf(inner, sizeof inner, fmt, arg);
    snprintf(cmd, sizeof cmd, "cd %s && %s", dir, inner);
    return system(cmd);
}

// Reads every document of a file; joins them with '|'. Returns -1 on error.
static int read_all(char *out, size_t cap, const char *name, const char *field) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    DocReader *r;
    if (docs_open(&r, p, field, DOC_AUTO) < 0) return -1;
    size_t k = 0;
    int rc, n = 0;
    const char *t;
    size_t len;
    out[0] = 0;
    while ((rc = docs_next(r, &t, &len)) == 1) {
        if (n++) out[k++] = '|';
        if (k + len + 2 > cap) break;
        memcpy(out + k, t, len);
        k += len;
        out[k] = 0;
    }
    docs_close(r);
    return rc < 0 ? -1 : n;
}

int main(void) {
    if (!mkdtemp(dir)) return 1;
    char got[4096];
    const char *jl = "{\"text\": \"hello\", \"id\": 1}\n\n{\"text\": \"w\\u00f6rld\\n2\"}\r\n{\"text\":\"last\"}";
    put("a.jsonl", jl, strlen(jl));
    put("b.txt", "whole\nfile\n", 11);
    put("noext", "{\"text\":\"sniffed\"}\n", 19);
    put("plain", "just text\n", 10);

    T_OK(read_all(got, sizeof got, "a.jsonl", "text") == 3 && strcmp(got, "hello|w\xc3\xb6rld\n2|last") == 0,
         "JSON lines: blank line skipped, CRLF, no final newline");
    T_OK(read_all(got, sizeof got, "b.txt", "text") == 1 && strcmp(got, "whole\nfile\n") == 0, "text file is one document");
    T_OK(read_all(got, sizeof got, "noext", "text") == 1 && strcmp(got, "sniffed") == 0, "no extension, JSON sniffed");
    T_OK(read_all(got, sizeof got, "plain", "text") == 1 && strcmp(got, "just text\n") == 0, "no extension, text sniffed");

    int have_gzip = sh("gzip -k a.jsonl %s", "") == 0, have_zstd = sh("zstd -q -k a.jsonl %s", "") == 0;
    if (have_gzip) T_OK(read_all(got, sizeof got, "a.jsonl.gz", "text") == 3 && strstr(got, "last"), "gzip JSON lines");
    else T_SKIP("gzip not installed");
    if (have_zstd) T_OK(read_all(got, sizeof got, "a.jsonl.zst", "text") == 3 && strstr(got, "last"), "zstd JSON lines");
    else T_SKIP("zstd not installed");
    if (have_zstd && have_gzip && sh("tar cf t.tar a.jsonl.zst b.txt a.jsonl.gz %s", "") == 0) {
        T_OK(read_all(got, sizeof got, "t.tar", "text") == 7, "tar of compressed members");
        T_OK(sh("gzip -k t.tar %s", "") == 0 && read_all(got, sizeof got, "t.tar.gz", "text") == 7,
             "gzipped tar of compressed members");
    }

    // Bad input: each error is one line naming the file (and the line for JSON).
    put("bad.jsonl", "{\"text\": \"ok\"}\n{\"text\": oops}\n", 30);
    T_OK(read_all(got, sizeof got, "bad.jsonl", "text") < 0 && strstr(err_msg(), "bad.jsonl:2: malformed JSON"),
         "malformed JSON names file:line: %s", err_msg());
    put("nofield.jsonl", "{\"body\": \"x\"}\n", 14);
    T_OK(read_all(got, sizeof got, "nofield.jsonl", "text") < 0 && strstr(err_msg(), "nofield.jsonl:1: no string field"),
         "missing field: %s", err_msg());
    T_OK(read_all(got, sizeof got, "nofield.jsonl", "body") == 1 && strcmp(got, "x") == 0, "--field picks another field");
    put("badutf.txt", "ok \xff\xfe bad", 10);
    T_OK(read_all(got, sizeof got, "badutf.txt", "text") < 0 && strstr(err_msg(), "invalid UTF-8 at byte 3"),
         "invalid UTF-8 in text: %s", err_msg());
    put("surrogate.txt", "\xed\xa0\x80", 3);
    T_OK(read_all(got, sizeof got, "surrogate.txt", "text") < 0, "UTF-8 encoded surrogate refused");
    put("overlong.txt", "\xc0\xaf", 2);
    T_OK(read_all(got, sizeof got, "overlong.txt", "text") < 0, "overlong UTF-8 refused");
    put("badutf.jsonl", "{\"text\": \"a\xff\"}\n", 15);
    T_OK(read_all(got, sizeof got, "badutf.jsonl", "text") < 0 && strstr(err_msg(), "badutf.jsonl:1"),
         "invalid UTF-8 in JSON names the line: %s", err_msg());
    put("trunc.jsonl.gz", "\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xab", 11);
    T_OK(read_all(got, sizeof got, "trunc.jsonl.gz", "text") < 0 && strstr(err_msg(), "trunc.jsonl.gz"),
         "truncated gzip refused: %s", err_msg());
    T_OK(read_all(got, sizeof got, "missing.jsonl", "text") < 0 && strstr(err_msg(), "missing.jsonl"),
         "missing file: %s", err_msg());
    put("empty.jsonl", "", 0);
    T_OK(read_all(got, sizeof got, "empty.jsonl", "text") == 0, "empty file has no documents: %s", err_msg());

    // A name that promises compression or a tar must keep its promise (else the bytes
    // would be read as text: a tar's headers, a mislabelled file's raw bytes).
    put("fake.txt.gz", "plain text, not gzip\n", 21);
    T_OK(read_all(got, sizeof got, "fake.txt.gz", "text") < 0 && strstr(err_msg(), "fake.txt.gz: not gzip"),
         "a .txt.gz that is not gzip is refused: %s", err_msg());
    put("fake.jsonl.zst", "{\"text\": \"not zstd\"}\n", 21);
    T_OK(read_all(got, sizeof got, "fake.jsonl.zst", "text") < 0 && strstr(err_msg(), "fake.jsonl.zst: not zstd"),
         "a .jsonl.zst that is not zstd is refused: %s", err_msg());
    if (have_gzip) {
        T_OK(sh("cp a.jsonl.gz gz.jsonl.zst %s", "") == 0 && read_all(got, sizeof got, "gz.jsonl.zst", "text") < 0 &&
                 strstr(err_msg(), "gz.jsonl.zst: not zstd") && strstr(err_msg(), "gzip"),
             "a .zst that holds gzip is refused: %s", err_msg());
    }
    put("notar.tar", "just some text\n", 15);
    T_OK(read_all(got, sizeof got, "notar.tar", "text") < 0 && strstr(err_msg(), "notar.tar: not a tar archive"),
         "a .tar that is not an archive is refused: %s", err_msg());
    if (have_gzip) {
        T_OK(sh("gzip -c b.txt > notar.tar.gz %s", "") == 0 && read_all(got, sizeof got, "notar.tar.gz", "text") < 0 &&
                 strstr(err_msg(), "notar.tar.gz: not a tar archive"),
             "a .tar.gz of no archive is refused: %s", err_msg());
    }
    if (sh("tar cf in.tar b.txt && tar cf outer.tar in.tar b.txt %s", "") == 0)
        T_OK(read_all(got, sizeof got, "outer.tar", "text") < 0 && strstr(err_msg(), "outer.tar:in.tar: a tar inside a tar"),
             "a tar inside a tar is refused, naming the member: %s", err_msg());
    if (sh("cp fake.txt.gz m.txt.gz && tar cf mfake.tar b.txt m.txt.gz %s", "") == 0)
        T_OK(read_all(got, sizeof got, "mfake.tar", "text") < 0 && strstr(err_msg(), "mfake.tar:m.txt.gz: not gzip"),
             "a member named .gz that is not gzip is refused: %s", err_msg());
    if (have_gzip && sh("gzip -c t.tar > t.tgz %s", "") == 0)
        T_OK(read_all(got, sizeof got, "t.tgz", "text") == 7, ".tgz is a gzipped tar: %s", err_msg());

    sh("rm -rf %s", dir);
    T_DONE();
}
