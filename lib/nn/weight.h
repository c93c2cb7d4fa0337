// weight.h: 2-D weights that a model does not hold in its fp32 block (model.h): the
// tensors of a packed checkpoint, kept in their own encoding in the file's map (pack/
// pack_model.h), and later device buffers. The model asks such a stored weight for what
// it needs instead of knowing its format:
//   decode   the whole weight in fp32, the very bits the block would hold, for the BLAS
//            products that must match the dense model bit for bit (evaluation)
//   matvec   a product with one vector, straight from the storage (one-token decoding)
//   embed    rows of an embedding
//   bytes    what one matvec reads, for the memory-bound decode estimate
// A store holds one weight per table entry (ParamInfo) of 2 dimensions; the 1-D ones
// (norms, biases) are always in the block.
#ifndef BEST_WEIGHT_H
#define BEST_WEIGHT_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    void (*decode)(float *w, const void *t);            // w (rows, cols) = W in fp32
    // y (rows) = W x + b (b may be NULL), or y += W x + b with acc; y must not overlap x
    void (*matvec)(float *y, const float *x, const void *t, const float *b, int acc);
    void (*embed)(float *x, const int32_t *tokens, const void *t, size_t N); // x (N, cols)
    size_t (*bytes)(const void *t);                     // read by one matvec
    size_t (*row_bytes)(const void *t);                 // read by one embedding row
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
