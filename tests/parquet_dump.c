// parquet_dump FILE [FIELD [THREADS]]: every document io/docs.h reads from FILE (a
// .parquet file: one per non-null row of the column FIELD, default "text"), written to
// stdout as an 8-byte little-endian length and the bytes; the null rows skipped on
// stderr. tests/t_parquet.sh compares the output with pyarrow's reading of the same file.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/error.h" // defines: TRY_OR_DIE, err_set_prog
#include "io/docs.h"    // defines: docs_open, docs_next, docs_set_threads, docs_nulls

int main(int argc, char **argv) {
    err_set_prog("parquet_dump");
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: parquet_dump FILE [FIELD [THREADS]]\n");
        return 2;
    }
    DocReader *r;
    TRY_OR_DIE(docs_open(&r, argv[1], argc > 2 ? argv[2] : "text", DOC_AUTO));
    docs_set_threads(r, argc > 3 ? atoi(argv[3]) : 1);
    const char *text;
    size_t len;
    int rc;
    while ((rc = docs_next(r, &text, &len)) == 1) {
        uint64_t n = len;
        fwrite(&n, 8, 1, stdout);
        fwrite(text, 1, len, stdout);
    }
    TRY_OR_DIE(rc);
    fprintf(stderr, "nulls %llu\n", (unsigned long long)docs_nulls(r));
    docs_close(r);
    TRY_OR_DIE(stdout_close());
    return 0;
}
