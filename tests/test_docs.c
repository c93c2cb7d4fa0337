// test_docs.c: the document reader on every input kind (text, JSON lines, gzip,
// zstd, tar, tar of compressed members, stdin-like raw) and on bad input; each input
// read as its name says (a tar only by name or DOC_TAR; a NUL byte is an error).
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

// Reads every document of a file (f: from that stream instead, named name); joins them
// with '|'. Returns the number of documents, -1 on error.
static int read_as(char *out, size_t cap, const char *name, FILE *f, const char *field, DocFormat format) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    DocReader *r;
    if ((f ? docs_open_file(&r, name, f, field, format) : docs_open(&r, p, field, format)) < 0) return -1;
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

static int read_all(char *out, size_t cap, const char *name, const char *field) {
    return read_as(out, cap, name, NULL, field, DOC_AUTO);
}

// Reads file (in dir) as a stream named name ("-": stdin) in format.
static int read_stream(char *out, size_t cap, const char *file, const char *name, DocFormat format) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    FILE *f = fopen(p, "rb");
    if (!f) return -1;
    int n = read_as(out, cap, name, f, "text", format);
    fclose(f);
    return n;
}

// Inputs are read as what their names say, never as what their bytes look like (issue
// 33): a tar only by its name (or DOC_TAR), and a NUL byte in text is an error naming
// the file and the offset. Before, a .jsonl whose first 8 KB were zeros was an empty
// tar (0 documents, no error) and a tar named .txt or with no suffix had its members read.
static void test_names_not_bytes(int have_tar, int have_gzip) {
    char got[4096], e[128];
    const char *lines = "{\"text\": \"one\"}\n{\"text\": \"two\"}\n";
    size_t nl = strlen(lines);
    char *z = calloc(1, 8192 + nl);
    memcpy(z + 8192, lines, nl);
    put("zeroed.jsonl", z, 8192 + nl);
    T_OK(read_all(got, sizeof got, "zeroed.jsonl", "text") < 0 &&
             strstr(err_msg(), "zeroed.jsonl: a NUL byte at offset 0 (not text; a damaged file?)"),
         "a .jsonl whose first 8 KB are zeros: an error at offset 0, not an empty tar: %s", err_msg());
    free(z);
    put("mid.txt", "hello\0world", 11);
    T_OK(read_all(got, sizeof got, "mid.txt", "text") < 0 && strstr(err_msg(), "mid.txt: a NUL byte at offset 5"),
         "a NUL in the middle of a .txt names its offset: %s", err_msg());
    put("line3.jsonl", "{\"text\": \"a\"}\n{\"text\": \"b\"}\n{\"text\": \"\0\"}\n", 42);
    T_OK(read_all(got, sizeof got, "line3.jsonl", "text") < 0 && strstr(err_msg(), "line3.jsonl: a NUL byte at offset 38"),
         "a raw NUL in a JSON line names its offset: %s", err_msg());
    put("esc.jsonl", "{\"text\": \"a\\u0000b\"}\n", 21);
    T_OK(read_all(got, sizeof got, "esc.jsonl", "text") == 1, "an escaped \\u0000 in JSON is not a NUL byte: %s", err_msg());
    // past the first blocks read: the offset counts every byte before it
    size_t big = 3000000;
    char *b = malloc(big + 1);
    memset(b, 'a', big + 1);
    b[big - 7] = 0;
    put("big.txt", b, big + 1);
    snprintf(e, sizeof e, "big.txt: a NUL byte at offset %zu ", big - 7);
    T_OK(read_all(got, sizeof got, "big.txt", "text") < 0 && strstr(err_msg(), e), "a NUL 3 MB in: %s", err_msg());
    free(b);
    if (have_gzip) {
        T_OK(sh("gzip -c mid.txt > midz.txt.gz %s", "") == 0 && read_all(got, sizeof got, "midz.txt.gz", "text") < 0 &&
                 strstr(err_msg(), "midz.txt.gz: a NUL byte at offset 5"),
             "in a .txt.gz the offset is in the decompressed bytes: %s", err_msg());
    }
    if (!have_tar) { T_SKIP("tar not installed"); return; }
    sh("cp t.tar tar.txt && cp t.tar tarnoext && cp t.tar tar.jsonl %s", "");
    T_OK(read_all(got, sizeof got, "tar.txt", "text") < 0 && strstr(err_msg(), "tar.txt: a NUL byte at offset") &&
             strstr(err_msg(), "a tar archive?"),
         "a tar named .txt is text (refused for its NULs), not walked: %s", err_msg());
    T_OK(read_all(got, sizeof got, "tar.jsonl", "text") < 0 && strstr(err_msg(), "tar.jsonl: a NUL byte at offset"),
         "a tar named .jsonl is JSON lines (refused), not walked: %s", err_msg());
    T_OK(read_all(got, sizeof got, "tarnoext", "text") < 0 && strstr(err_msg(), "tarnoext: a NUL byte at offset"),
         "a tar with no suffix is text (refused), not walked: %s", err_msg());
    T_OK(read_stream(got, sizeof got, "t.tar", "-", DOC_AUTO) < 0 && strstr(err_msg(), "<stdin>: a NUL byte at offset"),
         "a tar on stdin is text (refused) unless asked for: %s", err_msg());
    T_OK(read_stream(got, sizeof got, "t.tar", "-", DOC_TAR) == 7, "DOC_TAR reads a tar on stdin: %s", err_msg());
    T_OK(read_as(got, sizeof got, "tarnoext", NULL, "text", DOC_TAR) == 7, "DOC_TAR reads a tar of any name: %s",
         err_msg());
    T_OK(read_stream(got, sizeof got, "b.txt", "-", DOC_TAR) < 0 &&
             strstr(err_msg(), "<stdin>: not a tar archive, as --format tar says"),
         "DOC_TAR on text is refused: %s", err_msg());
    T_OK(sh("tar cf tnul.tar b.txt mid.txt %s", "") == 0 && read_all(got, sizeof got, "tnul.tar", "text") < 0 &&
             strstr(err_msg(), "tnul.tar:mid.txt: a NUL byte at offset 5"),
         "a NUL in a tar's member names file:member and the member's offset: %s", err_msg());
    T_OK(sh("cp tarnoext member && tar cf tmem.tar member %s", "") == 0 &&
             read_all(got, sizeof got, "tmem.tar", "text") < 0 && strstr(err_msg(), "tmem.tar:member: a NUL byte"),
         "a tar member with no suffix that holds a tar is text (refused), not walked: %s", err_msg());
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
    int have_tar = have_zstd && have_gzip && sh("tar cf t.tar a.jsonl.zst b.txt a.jsonl.gz %s", "") == 0;
    if (have_tar) {
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
    put("badutf.txt", "ok \xff\xfe bad", 9);
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

    test_names_not_bytes(have_tar, have_gzip);

    sh("rm -rf %s", dir);
    T_DONE();
}
