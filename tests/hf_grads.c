// hf_grads.c: the loss and the gradient of every parameter that libbest's training step
// computes on one batch, for tests/hf_grad_check.py to set against PyTorch autograd
// through Hugging Face transformers on the same folder. Not a test itself (tests/run.sh
// runs only test_*): a helper of tests/t_hf_grad.sh and tests/gpu/run.sh.
//
//   hf_grads [--device cuda] MODEL TOKENS B T OUT
//
// MODEL is a Hugging Face folder; TOKENS holds B*(T+1) int32 ids (little-endian, as the
// machine), row b = inputs ids[b][0..T) and targets ids[b][1..T]. OUT gets a safetensors
// file: "loss" (1,) the mean next-token loss, and "grad.NAME" for every parameter NAME
// (the table's shape), d loss / d NAME, fp32. The CPU path (model_forward/backward), or
// with --device cuda the device step (DevModel of model.h: bf16 products), in builds with
// CUDA on a machine with a GPU (tests/gpu/run.sh).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"      // defines: TRY_OR_DIE, DIE, CHECK, xmalloc
#include "io/safetensors.h"  // defines: StWriter
#include "base/cuda.h"         // defines: cuda_ctx_create, cuda_device_count
#include "nn/model.h"        // defines: Model, ModelActs, model_forward, model_backward, DevModel

int main(int argc, char **argv) {
    err_set_prog("hf_grads");
    int on_device = argc == 8 && !strcmp(argv[1], "--device") && !strcmp(argv[2], "cuda");
    if (on_device) argv += 2, argc -= 2;
    if (argc != 6) {
        fprintf(stderr, "usage: hf_grads [--device cuda] MODEL TOKENS B T OUT\n");
        return 2;
    }
    int B = atoi(argv[3]), T = atoi(argv[4]);
    CHECK(B > 0 && T > 0, "bad B or T");
    Model m;
    TRY_OR_DIE(model_load(&m, argv[1]));
    size_t n = (size_t)B * (T + 1);
    int32_t *ids = xmalloc(n * sizeof *ids);
    FILE *f = fopen(argv[2], "rb");
    CHECK(f && fread(ids, sizeof *ids, n, f) == n, "%s: cannot read %zu ids", argv[2], n);
    fclose(f);
    int32_t *tok = xmalloc((size_t)B * T * sizeof *tok), *tgt = xmalloc((size_t)B * T * sizeof *tgt);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int32_t id = ids[(size_t)b * (T + 1) + t], next = ids[(size_t)b * (T + 1) + t + 1];
            CHECK(id >= 0 && (size_t)id < m.V && next >= 0 && (size_t)next < m.V, "token id out of range");
            tok[(size_t)b * T + t] = id;
            tgt[(size_t)b * T + t] = next;
        }

    float loss;
    model_grads_init(&m);
    if (on_device) {
#ifdef BEST_CUDA
        CudaCtx *c;
        DevModel d;
        TRY_OR_DIE(cuda_ctx_create(&c, 0, (size_t)32 << 20));
        // with recomputation: test_step shows it the same bits as without
        TRY_OR_DIE(devmodel_init(&d, c, &m, B, T, 0, DEVMODEL_RECOMPUTE));
        devmodel_zero_grad(&d);
        TRY_OR_DIE(devmodel_forward(&d, tok, tgt));
        loss = d.loss;
        devmodel_backward(&d, 1.0f);
        devmodel_download_grads(&d, m.grads);
        devmodel_free(&d);
        cuda_ctx_free(c);
#else
        DIE("--device cuda: this build has no CUDA (%s)", cuda_info());
#endif
    } else {
        ModelActs a;
        TRY_OR_DIE(model_acts_init(&a, &m, B, T, 1));
        TRY_OR_DIE(model_forward(&m, &a, tok, tgt));
        loss = a.loss;
        model_backward(&m, &a, 1.0f);
        model_acts_free(&a);
    }

    StWriter w;
    st_writer_init(&w);
    int64_t one = 1;
    TRY_OR_DIE(st_writer_add(&w, "loss", ST_F32, 1, &one, &loss));
    char **names = xmalloc((size_t)m.n_info * sizeof *names);
    for (int i = 0; i < m.n_info; i++) {
        const ParamInfo *p = &m.info[i];
        size_t len = strlen(p->name) + 6;
        names[i] = xmalloc(len);
        snprintf(names[i], len, "grad.%s", p->name);
        int64_t shape[2] = {p->shape[0], p->shape[1]};
        TRY_OR_DIE(st_writer_add(&w, names[i], ST_F32, p->ndim, shape, m.grads + p->offset));
    }
    TRY_OR_DIE(st_writer_write(&w, argv[5]));
    st_writer_free(&w);
    for (int i = 0; i < m.n_info; i++) free(names[i]);
    free(names);
    model_free(&m);
    free(ids);
    free(tok);
    free(tgt);
    return 0;
}
