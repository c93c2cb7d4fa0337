// parquet_dump FILE [FIELD [THREADS [count]]]: every document io/docs.h reads from FILE
// (a .parquet file: one per non-null row of the column FIELD, default "text"), written
// to stdout as an 8-byte little-endian length and the bytes; the null rows skipped on
// stderr. tests/t_parquet.sh compares the output with pyarrow's reading of the same file.
// With "count", only the number of documents and their bytes are printed
// (bench/parquet_speed.py times the reading alone so).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/error.h" // defines: TRY_OR_DIE, err_set_prog
#include "io/docs.h"    // defines: docs_open, docs_next, docs_set_threads, docs_nulls

int main(int argc, char **argv) {
    err_set_prog("parquet_dump");
    if (argc < 2 || argc > 5) {
        fprintf(stderr, "usage: parquet_dump FILE [FIELD [THREADS [count]]]\n");
        return 2;
    }
    DocReader *r;
    TRY_OR_DIE(docs_open(&r, argv[1], argc > 2 ? argv[2] : "text", DOC_AUTO));
    docs_set_threads(r, argc > 3 ? atoi(argv[3]) : 1);
    const char *text;
    size_t len;
    int rc, count = argc > 4;
    uint64_t docs = 0, bytes = 0;
    while ((rc = docs_next(r, &text, &len)) == 1) {
        uint64_t n = len;
        docs++, bytes += n;
        if (count) continue;
        fwrite(&n, 8, 1, stdout);
        fwrite(text, 1, len, stdout);
    }
    TRY_OR_DIE(rc);
    if (count) printf("%llu documents, %llu bytes\n", (unsigned long long)docs, (unsigned long long)bytes);
    fprintf(stderr, "nulls %llu\n", (unsigned long long)docs_nulls(r));
    docs_close(r);
    TRY_OR_DIE(stdout_close());
    return 0;
}
