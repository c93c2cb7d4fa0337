// safetensors.h: reading and writing the safetensors format (Hugging Face weights,
// our Adam moments, masks and saliency dumps).
//
// Layout: u64 little-endian header length N, N bytes of UTF-8 JSON (an object that
// maps tensor names to {"dtype","shape","data_offsets"} plus an optional
// "__metadata__" string->string object, padded with spaces), then the data region.
// The reader maps the file and checks what the reference implementation checks
// (huggingface/safetensors, safetensors/src/tensor.rs, read_metadata + validate):
// header at most 100 MB and inside the file, valid UTF-8, valid JSON, known dtypes,
// shape products without overflow, end - begin == bytes of the shape, tensors
// contiguous and non-overlapping in offset order, and the last one ending exactly
// at the end of the file (no gaps, no trailing bytes). We also reject duplicate
// keys, which the reference's spec forbids but its parser does not catch.
//
// The writer produces the same bytes as safetensors.numpy.save_file (0.8.0) for the
// same tensors and metadata: entries sorted by descending dtype rank then name,
// compact serde_json-style JSON, "__metadata__" first, spaces to a multiple of 8.
// The only difference: Python keeps metadata in a Rust HashMap, whose order is
// random, so files with two or more metadata keys match it only up to key order;
// we sort the keys by their bytes.
//
// Not here: sharded models (model.safetensors.index.json) and the mapping of HF
// parameter names onto our model structs; those belong to the model loader.
#ifndef BEST_SAFETENSORS_H
#define BEST_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "base/fileio.h" // defines: MappedFile

// Element types, in the reference's order of increasing alignment: the writer sorts
// by this rank (descending). Sub-byte types (F4, F6_*) are rejected by the reader.
typedef enum {
    ST_BOOL, ST_U8, ST_I8, ST_F8_E5M2, ST_F8_E4M3, ST_F8_E8M0, ST_F8_E4M3FNUZ,
    ST_F8_E5M2FNUZ, ST_I16, ST_U16, ST_F16, ST_BF16, ST_I32, ST_U32, ST_F32, ST_C64,
    ST_F64, ST_I64, ST_U64,
    ST_NDTYPES
} StDtype;

#define ST_MAX_DIMS 8
#define ST_MAX_HEADER ((size_t)100000000) // the reference's MAX_HEADER_SIZE

const char *st_dtype_name(StDtype d);   // "F32"; "?" if out of range
size_t st_dtype_size(StDtype d);        // bytes per element; 0 if out of range
int st_dtype_parse(StDtype *out, const char *name); // -1 (no ERR) if unknown

typedef struct {
    const char *name;             // NUL-terminated, owned by the SafeTensors
    StDtype dtype;
    int ndim;                     // 0 for a scalar
    int64_t shape[ST_MAX_DIMS];   // (ndim,)
    size_t nelem;                 // product of shape (1 for a scalar)
    size_t nbytes;                // nelem * st_dtype_size(dtype)
    size_t offset;                // begin offset inside the data region
    const void *data;             // (nbytes,) inside the buffer; NOT aligned in general
} StTensor;

typedef struct {
    MappedFile map;          // the mapping when opened from a file
    char *path;              // file name (or the name given to st_open_mem), for messages
    const uint8_t *buf;      // whole file (size,)
    size_t size;
    size_t header_len;       // N
    const uint8_t *data;     // data region, buf + 8 + N
    size_t data_size;
    StTensor *tensors;       // (n_tensors,) in data order (ascending offsets)
    int n_tensors;
    int *index;              // open-addressing hash of tensor indices, -1 = empty
    size_t index_cap;        // power of two
    char **meta_keys;        // (n_meta,) in header order
    char **meta_vals;        // (n_meta,)
    int n_meta;
} SafeTensors;

// Maps and validates a file. On error nothing stays open.
int st_open(SafeTensors *st, const char *path);
// Parses a buffer that must outlive st; name is used in messages.
int st_open_mem(SafeTensors *st, const void *buf, size_t size, const char *name);
void st_close(SafeTensors *st);

// Tensor by name, or NULL. i-th tensor in data order: &st->tensors[i].
const StTensor *st_find(const SafeTensors *st, const char *name);
// Metadata value for key, or NULL.
const char *st_meta(const SafeTensors *st, const char *key);

// Converts a F32, BF16 or F16 tensor to float32: out has t->nelem floats.
// Other dtypes are an error naming the file and the tensor.
int st_to_f32(float *out, const SafeTensors *st, const StTensor *t);
// The same into a fresh xmalloc'd array (*out = NULL on error).
int st_to_f32_alloc(float **out, const SafeTensors *st, const StTensor *t);

// Scalar conversions (IEEE binary16 and bfloat16; float -> 16 bit rounds to nearest
// even, NaN stays NaN).
float st_f16_to_f32(uint16_t h);
float st_bf16_to_f32(uint16_t b);
uint16_t st_f32_to_f16(float f);
uint16_t st_f32_to_bf16(float f);

// --- writer -------------------------------------------------------------------

// Produces bytes [off, off + n) of a tensor's data into buf; returns 0, or -1 after
// ERR. Lets a caller convert (say f32 master weights to bf16) chunk by chunk while
// writing, without a second full copy.
typedef int (*StFillFn)(void *buf, size_t off, size_t n, void *ctx);

typedef struct {
    char *name;
    StDtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    size_t nbytes;
    const void *data;     // borrowed; NULL when fill is set
    StFillFn fill;
    void *ctx;
} StWriterEntry;

typedef struct {
    StWriterEntry *entries;  // (n, cap)
    int n, cap;
    char **meta_keys, **meta_vals; // (n_meta, cap_meta)
    int n_meta, cap_meta;
} StWriter;

void st_writer_init(StWriter *w);
// Adds a tensor whose nbytes = prod(shape) * size(dtype) bytes stay readable at
// data until st_writer_write returns (nothing is copied). Rejects duplicate names,
// "__metadata__", names that are not UTF-8, ndim > ST_MAX_DIMS, negative dims.
int st_writer_add(StWriter *w, const char *name, StDtype dtype, int ndim,
                  const int64_t *shape, const void *data);
// The same, with the data produced by fill(buf, off, n, ctx) at write time.
int st_writer_add_fn(StWriter *w, const char *name, StDtype dtype, int ndim,
                     const int64_t *shape, StFillFn fill, void *ctx);
// Sets a metadata entry (a second call with the same key replaces the value).
int st_writer_meta(StWriter *w, const char *key, const char *value);
// Writes the file through a temp name + rename (fileio.h); "-" writes to stdout.
int st_writer_write(const StWriter *w, const char *path);
void st_writer_free(StWriter *w);

// --- content hash -------------------------------------------------------------

// What a file says, hashed whatever its header's layout (best-train's states carry it
// in their own metadata, docs/formats.md): xxh64 (seed 0) over the metadata pairs but
// the key skip, in byte order of their keys, each as key NUL value NUL; then over the
// tensors in byte order of their names, each as name NUL dtype NUL dims NUL data, with
// dtype its name ("F32") and dims the shape in decimal joined by ',' ("" for a scalar).
uint64_t st_content_hash(const SafeTensors *st, const char *skip);
// The same of the file w will write; ERR for a tensor filled at write time.
int st_writer_content_hash(uint64_t *out, const StWriter *w, const char *skip);
// 0 when metadata key holds st_content_hash(st, key) as 16 lowercase hex digits, else
// ERR naming the file (a missing key, or a mismatch).
int st_check_content_hash(const SafeTensors *st, const char *key);

#endif
