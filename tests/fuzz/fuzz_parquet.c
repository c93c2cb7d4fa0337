// fuzz_parquet.c: libFuzzer target for the Parquet reader (io/parquet.h): the footer,
// the schema, page headers, levels, dictionaries and every codec's data, from bytes in
// memory. The first input byte picks the column ("text" or "content"); every row
// group is decoded. The seeds (tests/fuzz/corpus/parquet) are small files pyarrow wrote.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/parquet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *column = data[0] & 1 ? "content" : "text";
    data++, size--;
    uint8_t *buf = malloc(size ? size : 1); // a copy of its own size, so ASan sees overreads
    if (size) memcpy(buf, data, size);
    Parquet p;
    if (parquet_open_mem(&p, buf, size, "fuzz.parquet", column) == 0) {
        ParquetText t = {0};
        for (int g = 0; g < p.n_groups; g++)
            if (parquet_read_group(&t, &p, g) < 0) break;
        parquet_text_free(&t);
        parquet_close(&p);
    }
    free(buf);
    return 0;
}
