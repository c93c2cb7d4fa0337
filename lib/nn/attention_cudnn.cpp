// attention_cudnn.cpp: attention_cudnn.h's fused attention, through the cuDNN frontend's
// graph API (host C++ only: g++ builds it, no device code here). Each shape's forward and
// backward graph is built once (validate, operation graph, heuristics A then fallback,
// support check, plan) and kept with its workspace for the process.
//
// Without the frontend's headers (BEST_CUDNN undefined) only the stubs at the end are
// built, and attn_cudnn_open says how to get them.
#include "nn/attention_cudnn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h" // defines: ERR

#ifdef BEST_CUDNN
#include <dlfcn.h>

#include <cuda_runtime_api.h>
#include <cudnn_frontend.h>

#include <memory>
#include <string>
#include <unordered_map>

namespace fe = cudnn_frontend;

// The frontend's handle on libcudnn (its dynamic loading reads this global).
void *cudnn_frontend::cudnn_dlhandle = nullptr;

namespace {

// The tensors of both graphs, by uid.
enum : int64_t { UID_Q = 1, UID_K, UID_V, UID_O, UID_STATS, UID_DO, UID_DQ, UID_DK, UID_DV };

struct GraphKey {
    int backward, deterministic;
    size_t B, T, NH, KV, HD;
    float scale;
    bool operator==(const GraphKey &o) const {
        return backward == o.backward && deterministic == o.deterministic && B == o.B && T == o.T && NH == o.NH &&
               KV == o.KV && HD == o.HD && memcmp(&scale, &o.scale, sizeof scale) == 0;
    }
};

struct Built {
    GraphKey key;
    std::shared_ptr<fe::graph::Graph> graph;
    void *workspace; // (workspace_bytes) cudaMalloc'd, kept for the process
    int64_t workspace_bytes;
};

enum { MAX_GRAPHS = 16 };
Built graphs[MAX_GRAPHS];
int n_graphs;
int open_rc = 1;        // 1: not tried yet
char open_why[512];
long version;
cudnnHandle_t handle;

// (B, H, T, D) dims of a (B, T, H, D) row-major buffer, and its strides.
void bthd(std::vector<int64_t> *dim, std::vector<int64_t> *stride, size_t B, size_t T, size_t H, size_t D) {
    *dim = {(int64_t)B, (int64_t)H, (int64_t)T, (int64_t)D};
    *stride = {(int64_t)(T * H * D), (int64_t)D, (int64_t)(H * D), 1};
}

std::shared_ptr<fe::graph::Tensor_attributes> input(fe::graph::Graph &g, const char *name, int64_t uid, size_t B,
                                                    size_t T, size_t H, size_t D) {
    std::vector<int64_t> dim, stride;
    bthd(&dim, &stride, B, T, H, D);
    return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dim).set_stride(stride));
}

void output(const std::shared_ptr<fe::graph::Tensor_attributes> &t, int64_t uid, size_t B, size_t T, size_t H,
            size_t D) {
    std::vector<int64_t> dim, stride;
    bthd(&dim, &stride, B, T, H, D);
    t->set_output(true).set_uid(uid).set_dim(dim).set_stride(stride);
}

// stats (B, NH, T) as cuDNN's (B, NH, T, 1), fp32
std::vector<int64_t> stats_dim(size_t B, size_t T, size_t NH) { return {(int64_t)B, (int64_t)NH, (int64_t)T, 1}; }
std::vector<int64_t> stats_stride(size_t T, size_t NH) { return {(int64_t)(NH * T), (int64_t)T, 1, 1}; }

// The graph of key, described (not validated, not built); for a GPU of compute capability
// sm (90: Hopper), or the current device's with sm 0.
std::shared_ptr<fe::graph::Graph> graph_make(const GraphKey &key, int sm) {
    auto g = std::make_shared<fe::graph::Graph>();
    if (sm > 0) g->set_sm_version(sm); // (before the nodes: each copies the graph's context)
    g->set_io_data_type(fe::DataType_t::BFLOAT16)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    auto Q = input(*g, "q", UID_Q, key.B, key.T, key.NH, key.HD);
    auto K = input(*g, "k", UID_K, key.B, key.T, key.KV, key.HD);
    auto V = input(*g, "v", UID_V, key.B, key.T, key.KV, key.HD);
    if (!key.backward) {
        auto opts = fe::graph::SDPA_attributes()
                        .set_name("best_attention")
                        .set_generate_stats(true)
                        .set_causal_mask(true)
                        .set_attn_scale(key.scale);
        auto [O, stats] = g->sdpa(Q, K, V, opts);
        output(O, UID_O, key.B, key.T, key.NH, key.HD);
        stats->set_output(true).set_uid(UID_STATS).set_data_type(fe::DataType_t::FLOAT)
            .set_dim(stats_dim(key.B, key.T, key.NH)).set_stride(stats_stride(key.T, key.NH));
    } else {
        auto O = input(*g, "o", UID_O, key.B, key.T, key.NH, key.HD);
        auto dO = input(*g, "dout", UID_DO, key.B, key.T, key.NH, key.HD);
        auto stats = g->tensor(fe::graph::Tensor_attributes()
                                   .set_name("stats")
                                   .set_uid(UID_STATS)
                                   .set_data_type(fe::DataType_t::FLOAT)
                                   .set_dim(stats_dim(key.B, key.T, key.NH))
                                   .set_stride(stats_stride(key.T, key.NH)));
        auto opts = fe::graph::SDPA_backward_attributes()
                        .set_name("best_attention_backward")
                        .set_causal_mask(true)
                        .set_attn_scale(key.scale)
                        .set_deterministic_algorithm(key.deterministic != 0);
        auto [dQ, dK, dV] = g->sdpa_backward(Q, K, V, O, dO, stats, opts);
        output(dQ, UID_DQ, key.B, key.T, key.NH, key.HD);
        output(dK, UID_DK, key.B, key.T, key.KV, key.HD);
        output(dV, UID_DV, key.B, key.T, key.KV, key.HD);
    }
    return g;
}

const char *what(const GraphKey &key) { return key.backward ? "backward" : "forward"; }

// The graph of key, built, or NULL after ERR with cuDNN's reason.
Built *graph_for(const GraphKey &key) {
    for (int i = 0; i < n_graphs; i++)
        if (graphs[i].key == key) return &graphs[i];
    if (n_graphs == MAX_GRAPHS) {
        ERR("cuDNN attention: more than %d shapes in one process", MAX_GRAPHS);
        return NULL;
    }
    auto g = graph_make(key, 0);
    auto st = g->build(handle, {fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK});
    if (!st.is_good()) {
        ERR("cuDNN has no %s attention for B %zu, T %zu, %zu query heads over %zu, head dimension %zu%s: %s",
            what(key), key.B, key.T, key.NH, key.KV, key.HD,
            key.deterministic ? " (deterministic)" : "", st.get_message().c_str());
        return NULL;
    }
    int64_t ws = 0;
    if (!g->get_workspace_size(ws).is_good() || ws < 0) {
        ERR("cuDNN attention: no workspace size for its plan");
        return NULL;
    }
    void *p = NULL;
    if (ws > 0 && cudaMalloc(&p, (size_t)ws) != cudaSuccess) {
        (void)cudaGetLastError();
        ERR("cuDNN attention: out of device memory for its workspace (%lld bytes)", (long long)ws);
        return NULL;
    }
    Built *b = &graphs[n_graphs++];
    b->key = key;
    b->graph = g;
    b->workspace = p;
    b->workspace_bytes = ws;
    return b;
}

int run(const GraphKey &key, std::unordered_map<int64_t, void *> &ptrs, cudaStream_t stream) {
    if (attn_cudnn_open() < 0) return -1;
    try {
        Built *b = graph_for(key);
        if (!b) return -1;
        if (fe::detail::set_stream(handle, stream) != CUDNN_STATUS_SUCCESS)
            return ERR("cuDNN attention: cudnnSetStream failed");
        auto st = b->graph->execute(handle, ptrs, b->workspace);
        if (!st.is_good()) return ERR("cuDNN attention: execute: %s", st.get_message().c_str());
    } catch (const std::exception &e) { // the frontend throws where a library or symbol is missing
        return ERR("cuDNN attention: %s", e.what());
    }
    return 0;
}

// libcudnn loaded and its version read, into open_why on failure (a handle is open's).
int lib_rc = 1;
void lib_load() {
    if (lib_rc <= 0) return;
    const char *lib = getenv("BEST_CUDNN_LIB");
    if (!lib || !*lib) lib = "libcudnn.so.9";
    // the frontend loads the CUDA runtime for a few calls: ours, not another major version
    char rt[32];
    snprintf(rt, sizeof rt, "libcudart.so.%d", CUDART_VERSION / 1000);
    setenv("CUDNN_FRONTEND_CUDART_LIB_NAME", rt, 0);
    void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(open_why, sizeof open_why, "cuDNN attention: cannot load %s (%s; BEST_CUDNN_LIB=PATH names it)", lib,
                 e ? e : "not found");
    } else {
        cudnn_frontend::cudnn_dlhandle = h;
        try {
            version = (long)fe::detail::get_backend_version();
            if (version < 90000)
                snprintf(open_why, sizeof open_why, "cuDNN attention: %s is version %ld; 9.0 or later is needed", lib,
                         version);
        } catch (const std::exception &e) {
            snprintf(open_why, sizeof open_why, "cuDNN attention: %s: %s", lib, e.what());
        }
    }
    lib_rc = open_why[0] ? -1 : 0;
}

} // namespace

extern "C" int attn_cudnn_open(void) {
    if (open_rc <= 0) {
        if (open_rc < 0) ERR("%s", open_why);
        return open_rc;
    }
    lib_load();
    if (lib_rc == 0) {
        try {
            if (fe::detail::create_handle(&handle) != CUDNN_STATUS_SUCCESS)
                snprintf(open_why, sizeof open_why, "cuDNN attention: cudnnCreate failed (no GPU?)");
        } catch (const std::exception &e) {
            snprintf(open_why, sizeof open_why, "cuDNN attention: %s", e.what());
        }
    }
    open_rc = open_why[0] ? -1 : 0;
    if (open_rc < 0) ERR("%s", open_why);
    return open_rc;
}

extern "C" long attn_cudnn_version(void) { return lib_rc == 0 ? version : 0; }

extern "C" int attn_cudnn_validate(size_t B, size_t T, size_t NH, size_t KV, size_t HD, float scale) {
    lib_load();
    if (lib_rc < 0) return ERR("%s", open_why);
    try {
        for (int bwd = 0; bwd < 2; bwd++) {
            GraphKey key = {bwd, bwd, B, T, NH, KV, HD, scale};
            auto st = graph_make(key, 90)->validate(); // Hopper's rules, with no device to ask
            if (!st.is_good())
                return ERR("cuDNN attention: the %s graph for B %zu, T %zu, %zu heads over %zu, HD %zu does not "
                           "validate: %s", what(key), B, T, NH, KV, HD, st.get_message().c_str());
        }
    } catch (const std::exception &e) {
        return ERR("cuDNN attention: %s", e.what());
    }
    return 0;
}

extern "C" int attn_cudnn_prepare(size_t B, size_t T, size_t NH, size_t KV, size_t HD, float scale,
                                  int deterministic) {
    if (attn_cudnn_open() < 0) return -1;
    try {
        GraphKey fwd = {0, 0, B, T, NH, KV, HD, scale}, bwd = {1, deterministic != 0, B, T, NH, KV, HD, scale};
        if (!graph_for(fwd) || !graph_for(bwd)) return -1;
    } catch (const std::exception &e) {
        return ERR("cuDNN attention: %s", e.what());
    }
    return 0;
}

extern "C" int attn_cudnn_forward(uint16_t *o, float *stats, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                  size_t B, size_t T, size_t NH, size_t KV, size_t HD, float scale,
                                  struct CUstream_st *stream) {
    GraphKey key = {0, 0, B, T, NH, KV, HD, scale};
    std::unordered_map<int64_t, void *> ptrs = {
        {UID_Q, (void *)q}, {UID_K, (void *)k}, {UID_V, (void *)v}, {UID_O, o}, {UID_STATS, stats}};
    return run(key, ptrs, stream);
}

extern "C" int attn_cudnn_backward(uint16_t *dq, uint16_t *dk, uint16_t *dv, const uint16_t *dout,
                                   const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *o,
                                   const float *stats, size_t B, size_t T, size_t NH, size_t KV, size_t HD,
                                   float scale, int deterministic, struct CUstream_st *stream) {
    GraphKey key = {1, deterministic != 0, B, T, NH, KV, HD, scale};
    std::unordered_map<int64_t, void *> ptrs = {
        {UID_Q, (void *)q},  {UID_K, (void *)k},         {UID_V, (void *)v},       {UID_O, (void *)o},
        {UID_DO, (void *)dout}, {UID_STATS, (void *)stats}, {UID_DQ, dq}, {UID_DK, dk}, {UID_DV, dv}};
    return run(key, ptrs, stream);
}

#else // built without the cuDNN frontend's headers

extern "C" int attn_cudnn_open(void) {
    return ERR("cuDNN attention: not built in (this build had no cuDNN frontend headers: make cudnn-frontend, "
               "then rebuild)");
}
extern "C" long attn_cudnn_version(void) { return 0; }
extern "C" int attn_cudnn_validate(size_t B, size_t T, size_t NH, size_t KV, size_t HD, float scale) {
    (void)B, (void)T, (void)NH, (void)KV, (void)HD, (void)scale;
    return attn_cudnn_open();
}
extern "C" int attn_cudnn_prepare(size_t B, size_t T, size_t NH, size_t KV, size_t HD, float scale,
                                  int deterministic) {
    (void)B, (void)T, (void)NH, (void)KV, (void)HD, (void)scale, (void)deterministic;
    return attn_cudnn_open();
}
extern "C" int attn_cudnn_forward(uint16_t *o, float *stats, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                  size_t B, size_t T, size_t NH, size_t KV, size_t HD, float scale,
                                  struct CUstream_st *stream) {
    (void)o, (void)stats, (void)q, (void)k, (void)v, (void)B, (void)T, (void)NH, (void)KV, (void)HD, (void)scale,
        (void)stream;
    return attn_cudnn_open();
}
extern "C" int attn_cudnn_backward(uint16_t *dq, uint16_t *dk, uint16_t *dv, const uint16_t *dout,
                                   const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *o,
                                   const float *stats, size_t B, size_t T, size_t NH, size_t KV, size_t HD,
                                   float scale, int deterministic, struct CUstream_st *stream) {
    (void)dq, (void)dk, (void)dv, (void)dout, (void)q, (void)k, (void)v, (void)o, (void)stats, (void)B, (void)T,
        (void)NH, (void)KV, (void)HD, (void)scale, (void)deterministic, (void)stream;
    return attn_cudnn_open();
}
#endif
