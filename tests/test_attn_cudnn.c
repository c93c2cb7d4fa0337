// test_attn_cudnn.c: cuDNN's attention graphs (lib/nn/attention_cudnn.cpp), the part a
// machine without a GPU can check: the library loads and the frontend validates the
// forward and backward graphs of the shapes the step asks for. On a GPU, test_step_gpu
// runs them (docs/cuda.md). Skips where the build has no frontend or no libcudnn.so.9.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h" // defines: err_msg
#include "test.h"
#ifdef BEST_CUDA
#include "nn/attention_cudnn.h" // defines: attn_cudnn_validate
#endif

int main(void) {
#ifndef BEST_CUDA
    T_SKIP("cuDNN attention: a build without CUDA");
#else
    static const struct { size_t B, T, NH, KV, HD; } shapes[] = {
        {2, 256, 8, 2, 64},    // GQA
        {1, 2048, 32, 32, 128}, // LLaMA-2-7B
        {8, 2048, 16, 8, 128}, // Qwen3-1.7B-like
        {4, 16, 4, 4, 8},      // the llama_tied fixture
    };
    int rc = attn_cudnn_validate(shapes[0].B, shapes[0].T, shapes[0].NH, shapes[0].KV, shapes[0].HD,
                                 1.0f / sqrtf((float)shapes[0].HD));
    if (rc < 0 && (strstr(err_msg(), "not built in") || strstr(err_msg(), "cannot load"))) {
        T_SKIP("%s", err_msg());
        T_DONE();
    }
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        float scale = 1.0f / sqrtf((float)shapes[i].HD);
        rc = attn_cudnn_validate(shapes[i].B, shapes[i].T, shapes[i].NH, shapes[i].KV, shapes[i].HD, scale);
        T_OK(rc == 0, "cuDNN %ld: the frontend validates the forward and backward graphs of B %zu T %zu, %zu heads "
             "over %zu, HD %zu%s%s", attn_cudnn_version(), shapes[i].B, shapes[i].T, shapes[i].NH, shapes[i].KV,
             shapes[i].HD, rc ? ": " : "", rc ? err_msg() : "");
    }
    // the fixtures' head dimension of 12 (not a multiple of 8): refused, and said why
    rc = attn_cudnn_validate(4, 16, 4, 2, 12, 1.0f / sqrtf(12.0f));
    T_OK(rc < 0, "cuDNN: HD 12 (llama and qwen3 fixtures) does not validate: %s", rc < 0 ? err_msg() : "it did");
#endif
    T_DONE();
}
