// weight.h: 2-D weights that a model does not hold in its fp32 block (model.h): the
// tensors of a packed checkpoint, kept in their own encoding in the file's map (pack/
// pack_model.h). The model asks such a stored weight for what
// it needs instead of knowing its format:
//   decode   the whole weight in fp32, the very bits the block would hold, for the BLAS
//            products that must match the dense model bit for bit (evaluation)
//   matvec   a product with one vector, straight from the storage (one-token decoding)
//   embed    rows of an embedding
//   bytes    what one matvec reads, for the memory-bound decode estimate
// and, on a CUDA device (builds with CUDA, stores that have them; else NULL):
//   dev_upload   the weight's storage copied to device memory, as it is stored
//   dev_matvec   a product with one device vector (one-token decoding on the device)
//   dev_decode   rows of it on the device, in fp32 (embedding rows) or as bf16 bits (the
//                operand of a bf16 matrix product: evaluation on the device)
//   dev_fused    the fused products of a decode step over several of its weights
//                (nn/decode_fused.h), where the store's device layout has a kernel for it
// A store holds one weight per table entry (ParamInfo) of 2 dimensions; the 1-D ones
// (norms, biases) are always in the block.
#ifndef BEST_WEIGHT_H
#define BEST_WEIGHT_H

#include <stddef.h>
#include <stdint.h>

struct CUstream_st; // cudaStream_t's struct (base/cuda.h)
struct DecodeJob;   // nn/decode_fused.h

typedef struct {
    void (*decode)(float *w, const void *t);            // w (rows, cols) = W in fp32
    // y (rows) = W x + b (b may be NULL), or y += W x + b with acc; y must not overlap x
    void (*matvec)(float *y, const float *x, const void *t, const float *b, int acc);
    void (*embed)(float *x, const int32_t *tokens, const void *t, size_t N); // x (N, cols)
    size_t (*bytes)(const void *t);                     // read by one matvec
    size_t (*row_bytes)(const void *t);                 // read by one embedding row
    // *dt = t on the current device, *bytes what it takes there; 0, or ERR (out of memory)
    int (*dev_upload)(void **dt, size_t *bytes, const void *t);
    void (*dev_free)(void *dt);
    // matvec with device arrays y, x, b (b may be NULL), asynchronous on stream
    void (*dev_matvec)(float *y, const float *x, const void *dt, const float *b, int acc,
                       struct CUstream_st *stream);
    // out (n, cols) = rows ids[i] of W (ids: n device ints, or NULL: all rows, n = rows),
    // fp32 (bf16 0) or bf16 bits rounded to nearest even (bf16 1), zeros where not stored
    void (*dev_decode)(void *out, int bf16, const int32_t *ids, size_t n, const void *dt,
                       struct CUstream_st *stream);
    // the job over dt[0..job->n) (or NULL): 0 when launched, -1 when those weights cannot
    // take it (nothing launched: the caller runs the unfused products)
    int (*dev_fused)(const struct DecodeJob *job, const void *const *dt, struct CUstream_st *stream);
} WeightOps;

typedef struct WeightStore {
    const WeightOps *ops;
    const void **t;       // (n_info) the stored weight of each table entry, NULL for 1-D
    size_t max_numel;     // of the largest stored weight (the decode buffer's size)
    const char *path;     // where the weights are, for messages
    const char *what;     // "a packed checkpoint"
    const char *hint;     // how to get the weights into a folder, for messages
    void (*close)(struct WeightStore *s); // frees everything behind the store, and s
} WeightStore;

#endif
