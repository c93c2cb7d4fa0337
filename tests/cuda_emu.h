// cuda_emu.h: a CPU emulator of the CUDA execution model, just enough to run our own
// kernels (lib/*/*.cu) in `make test` on machines without a GPU. Test-only, C++17, g++.
// tests/test_kernels.cpp includes this, then the .cu files themselves.
//
// What it does: a launch runs the grid's blocks one after another; a block's threads
// are fibers of the calling host thread (ucontext: a stack each), all alive at once but
// taking turns (one runs at a time, until its next barrier), so that __syncthreads is a
// real barrier over the block and __shfl_*_sync a real exchange within a warp (32
// consecutive threads; one barrier over the warp per exchange). threadIdx / blockIdx are
// the running fiber's (set at each switch); __shared__ variables are function statics
// (blocks never overlap, so one copy serves every block). Launch geometry is checked as
// the hardware would (0 blocks, over 1024 threads, grid limits): the error comes back
// from cudaGetLastError, so the library's own CUDA_CHECK(cudaGetLastError()) reports it.
//
// Strict where CUDA is undefined: threads of a block that meet different barriers
// (__syncthreads against a thread that returned), a shuffle mask other than the
// warp's lanes, or barriers that can never complete (a shuffle some lanes skip) stop
// the test with "not ok - cuda_emu: ...". The order of turns between barriers is the
// block's policy (lowest thread first, highest first, random: below), so a race, a
// missing barrier, shows as a wrong result instead of passing by luck.
//
// Limits (docs/cuda.md): no tensor-core fragments (mma, wgmma), no dynamic shared
// memory, no cp.async or other asynchronous copies, no memory model (a thread's writes
// are visible to the next thread at once: a missing __threadfence, or a read that a
// GPU would serve from a stale cache, passes here), no lockstep within a warp (a lane
// runs to its next barrier alone: warp-synchronous code without __syncwarp is not
// modelled), one device, streams ignored (launches and copies run to completion in
// order; a stream capture records them for a graph's replay), device memory is host memory (so ASan sees a kernel's out-of-bounds access in
// the sanitizer build; cudaMalloc/cudaFree/cudaMemcpy(Async)/cudaMemset(Async) are host
// operations, a new buffer all-ones bytes), and only the intrinsics our kernels use.
// In the sanitizer build AddressSanitizer checks each fiber's stack as a thread's (its
// fiber annotations); it says once on stderr that it "doesn't fully support
// makecontext/swapcontext" (a warning about programs without those annotations).
#ifndef BEST_CUDA_EMU_H
#define BEST_CUDA_EMU_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <functional>
#include <vector>


// --- the language ---------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __forceinline__ inline
#define __launch_bounds__(...)

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

// The 16-byte vector types (one load each on a GPU; here plain structs, as aligned).
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
struct alignas(16) float4 {
    float x, y, z, w;
};

// The running thread's indices: the scheduler (below) sets them as it switches threads.
static dim3 threadIdx, blockIdx;
static dim3 blockDim, gridDim; // set before a launch's threads start, read-only during it
static const int warpSize = 32;

// --- the runtime ------------------------------------------------------------------------
typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorInvalidConfiguration = 9 };
struct CUstream_st;
typedef CUstream_st *cudaStream_t;

static cudaError_t emu_last_error = cudaSuccess;
static const char *emu_last_why = "";

static inline cudaError_t cudaGetLastError(void) {
    cudaError_t e = emu_last_error;
    emu_last_error = cudaSuccess;
    return e;
}
static inline const char *cudaGetErrorString(cudaError_t e) {
    return e == cudaSuccess ? "no error" : emu_last_why;
}

[[noreturn]] static void emu_fail(const char *what) {
    printf("not ok - cuda_emu: %s\n", what);
    fflush(stdout);
    _exit(1); // other threads may be blocked in a barrier: no exit handlers
}

// Device memory is host memory. cudaMalloc fills a new buffer with all-ones bytes (NaN as
// a float or bf16, -1 as an integer), so that reading what was never written shows; copies
// and sets are plain memcpy/memset, done at once (streams are ignored: every launch and
// copy has finished when the call returns, so cudaStreamSynchronize has nothing to wait for).
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                      cudaMemcpyDeviceToDevice, cudaMemcpyDefault };
static inline cudaError_t cudaMalloc(void **p, size_t bytes) {
    *p = malloc(bytes ? bytes : 1);
    if (!*p) emu_fail("cudaMalloc: out of host memory");
    memset(*p, 0xff, bytes);
    return cudaSuccess;
}
static inline cudaError_t cudaFree(void *p) { free(p); return cudaSuccess; }
// A device of 2 GiB with 1 GiB free (what a walk sizing its batches by it sees).
static inline cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
    *free_bytes = (size_t)1 << 30;
    *total_bytes = (size_t)2 << 30;
    return cudaSuccess;
}
static inline cudaError_t cudaMallocHost(void **p, size_t bytes) { return cudaMalloc(p, bytes); }
static inline cudaError_t cudaFreeHost(void *p) { return cudaFree(p); }

// Stream capture (CUDA graphs): between cudaStreamBeginCapture and cudaStreamEndCapture,
// the asynchronous work (launches, cudaMemcpyAsync, cudaMemsetAsync, and a test's host
// shims through emu_enqueue) is recorded instead of done, with its arguments as they are
// then; cudaGraphLaunch does it all again, in order. So a decode step that bakes a value
// of the host (a position) into its graph gives wrong results on replay, as on a GPU.
// Synchronous copies and synchronisation during a capture are errors, as CUDA's.
struct EmuGraph {
    std::vector<std::function<void()>> ops;
};
struct CUgraph_st : EmuGraph {};
struct CUgraphExec_st : EmuGraph {};
typedef CUgraph_st *cudaGraph_t;
typedef CUgraphExec_st *cudaGraphExec_t;
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal,
                             cudaStreamCaptureModeRelaxed };
static EmuGraph *emu_capture; // the graph being recorded, or NULL

static inline void emu_enqueue(std::function<void()> op) {
    if (emu_capture) emu_capture->ops.push_back(std::move(op));
    else op();
}
static inline void emu_no_capture(const char *what) {
    if (emu_capture) emu_fail(what);
}
static inline cudaError_t cudaStreamBeginCapture(cudaStream_t, cudaStreamCaptureMode) {
    emu_no_capture("cudaStreamBeginCapture during a capture");
    emu_capture = new EmuGraph;
    return cudaSuccess;
}
static inline cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t *g) {
    if (!emu_capture) emu_fail("cudaStreamEndCapture without a capture");
    *g = new CUgraph_st;
    (*g)->ops = std::move(emu_capture->ops);
    delete emu_capture;
    emu_capture = NULL;
    return cudaSuccess;
}
static inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long = 0) {
    *e = new CUgraphExec_st;
    (*e)->ops = g->ops;
    return cudaSuccess;
}
static inline cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t) {
    emu_no_capture("cudaGraphLaunch during a capture");
    for (auto &op : e->ops) op();
    return cudaSuccess;
}
static inline cudaError_t cudaGraphDestroy(cudaGraph_t g) { delete g; return cudaSuccess; }
static inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e) { delete e; return cudaSuccess; }

static inline cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind) {
    emu_no_capture("cudaMemcpy (synchronous) during a stream capture");
    if (bytes) memmove(dst, src, bytes);
    return cudaSuccess;
}
static inline cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind,
                                          cudaStream_t = 0) {
    emu_enqueue([=] { if (bytes) memmove(dst, src, bytes); });
    return cudaSuccess;
}
static inline cudaError_t cudaMemset(void *p, int v, size_t bytes) {
    emu_no_capture("cudaMemset (synchronous) during a stream capture");
    if (bytes) memset(p, v, bytes);
    return cudaSuccess;
}
static inline cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes, cudaStream_t = 0) {
    emu_enqueue([=] { if (bytes) memset(p, v, bytes); });
    return cudaSuccess;
}
static inline cudaError_t cudaStreamSynchronize(cudaStream_t) {
    emu_no_capture("cudaStreamSynchronize during a stream capture");
    return cudaSuccess;
}
static inline cudaError_t cudaDeviceSynchronize(void) {
    emu_no_capture("cudaDeviceSynchronize during a stream capture");
    return cudaSuccess;
}
// Streams and events order nothing here (every operation has finished when its call
// returns): a stream or an event is a distinct pointer, and waiting on one is a no-op. An
// event keeps the host's clock at its record, so that elapsed times (--profile) are
// those of the emulated work: they mean nothing for a GPU, but the code runs.
struct CUevent_st { double t; };
typedef CUevent_st *cudaEvent_t;
enum { cudaStreamNonBlocking = 1, cudaEventDisableTiming = 2 };
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) {
    *s = (cudaStream_t)malloc(1);
    return cudaSuccess;
}
static inline cudaError_t cudaStreamDestroy(cudaStream_t s) { free(s); return cudaSuccess; }
static inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) {
    *e = (cudaEvent_t)calloc(1, sizeof(CUevent_st));
    return cudaSuccess;
}
static inline cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }
static inline cudaError_t cudaEventDestroy(cudaEvent_t e) { free(e); return cudaSuccess; }
static inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t = 0) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    e->t = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    return cudaSuccess;
}
static inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
static inline cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    *ms = (float)(1e3 * (b->t - a->t));
    return cudaSuccess;
}
static inline cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned = 0) { return cudaSuccess; }

#define CUDA_CHECK(call)                                                                 \
    do {                                                                                 \
        cudaError_t e_ = (call);                                                         \
        if (e_ != cudaSuccess) {                                                         \
            char m_[256];                                                                \
            snprintf(m_, sizeof m_, "%s failed at %s:%d: %s", #call, __FILE__, __LINE__,  \
                     cudaGetErrorString(e_));                                            \
            emu_fail(m_);                                                                \
        }                                                                                \
    } while (0)

// --- scheduling and barriers --------------------------------------------------------------
// The threads of a block are fibers of the host thread (ucontext: each its own stack,
// kept for later launches), all alive at once but taking turns: one holds the baton
// until it reaches a barrier, then switches straight to a runnable thread (a thread
// that returns goes back to the launch, which hands the baton on). Which one is the
// block's policy, by turns (launch number + block number, mod 3): the lowest thread
// index first, the highest first, or at random (seeded per launch, so a run is
// reproducible). The first two let one warp run as far ahead of the others as the
// barriers allow, in either direction; random mixes. So the races a GPU would have (a
// thread reading what another writes without a barrier between, or writing what
// another has yet to read) become wrong results here, deterministically, as soon as a
// kernel runs 3 blocks (the test caps grids at 3). A barrier that cannot complete is
// seen at once (no live thread left to run) instead of hanging. (The threads were host
// threads once, handing a mutex around: the same turns, but an OS context switch a turn
// and a thread started per GPU thread per launch; test_step took 9 minutes, now 10 s.)
enum { EMU_MAX_THREADS = 1024, EMU_STACK_BYTES = 256 << 10 };
struct EmuFiber {
    ucontext_t ctx;
    char *stack;     // EMU_STACK_BYTES above a guard page; NULL until first needed
    dim3 idx;        // its threadIdx
    unsigned nshfl;  // exchanges it made in this block
    void *asan_fake; // AddressSanitizer's fake stack while switched out
};
static EmuFiber emu_fib[EMU_MAX_THREADS]; // by linear thread index (never moved: ctx points into itself)
static ucontext_t emu_host_ctx;           // the launch's own context, while a fiber runs
static std::vector<unsigned> emu_ready;   // runnable threads (not the running one)
// emu_ready again, as a set: a bit per thread, and each one's place in emu_ready (the
// lowest or highest ready thread found a word at a time, not by a scan of emu_ready)
static uint64_t emu_ready_bits[EMU_MAX_THREADS / 64];
static unsigned emu_ready_at[EMU_MAX_THREADS];
static unsigned emu_ready_words; // words of emu_ready_bits the launch's threads span
static int emu_running = -1;              // the fiber holding the baton, -1 for the host
static int emu_previous = -1;             // the one that held it before
static unsigned emu_live;                 // threads not yet finished
static uint64_t emu_rng, emu_launches, emu_blocks_done;
static unsigned emu_tid;                  // linear thread index of the running fiber

// The sanitizer build tells AddressSanitizer about each switch of stacks (its fiber
// interface), so that it checks each fiber's frames against that fiber's stack.
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#define EMU_ASAN 1
#else
#define EMU_ASAN 0
#endif
static const void *emu_host_stack; // the host thread's stack, as AddressSanitizer has it
static size_t emu_host_stack_bytes;
static void *emu_host_fake;        // its fake stack while a fiber runs

// AddressSanitizer: the running context leaves for fiber `to` (-1: the host), saving its
// fake stack in *fake (NULL: it has finished, its fake stack goes).
static inline void emu_asan_leave(void **fake, int to) {
#if EMU_ASAN
    __sanitizer_start_switch_fiber(fake, to < 0 ? emu_host_stack : emu_fib[to].stack,
                                   to < 0 ? emu_host_stack_bytes : (size_t)EMU_STACK_BYTES);
#else
    (void)fake, (void)to;
#endif
}
// AddressSanitizer: a context arrived on its stack (fake: its own fake stack, NULL for a
// new fiber); *from_stack, *from_bytes: the stack it came from.
static inline void emu_asan_arrive(void *fake, const void **from_stack, size_t *from_bytes) {
#if EMU_ASAN
    __sanitizer_finish_switch_fiber(fake, from_stack, from_bytes);
#else
    (void)fake, (void)from_stack, (void)from_bytes;
#endif
}

// Thread t becomes runnable.
static inline void emu_make_ready(unsigned t) {
    emu_ready_at[t] = (unsigned)emu_ready.size();
    emu_ready.push_back(t);
    emu_ready_bits[t / 64] |= 1ull << (t % 64);
}

// Picks the next thread to run from emu_ready by the block's policy and takes it out;
// -1 when no thread is left to run.
static int emu_pick(void) {
    if (emu_ready.empty()) {
        if (emu_live > 0)
            emu_fail("deadlock: every live thread waits at a barrier that cannot complete "
                     "(a __syncthreads or shuffle not reached by all threads of the block or warp)");
        return -1;
    }
    size_t k = 0;
    unsigned w;
    switch ((emu_launches + emu_blocks_done) % 3) {
    case 0: // lowest index first
        for (w = 0; !emu_ready_bits[w]; w++) {}
        k = emu_ready_at[w * 64 + (unsigned)__builtin_ctzll(emu_ready_bits[w])];
        break;
    case 1: // highest first
        for (w = emu_ready_words - 1; !emu_ready_bits[w]; w--) {}
        k = emu_ready_at[w * 64 + 63 - (unsigned)__builtin_clzll(emu_ready_bits[w])];
        break;
    default:
        emu_rng = emu_rng * 6364136223846793005ull + 1442695040888963407ull;
        k = (size_t)((emu_rng >> 33) % emu_ready.size());
    }
    unsigned next = emu_ready[k];
    emu_ready[k] = emu_ready.back(); // the last one takes its place
    emu_ready_at[emu_ready[k]] = (unsigned)k;
    emu_ready.pop_back();
    emu_ready_bits[next / 64] &= ~(1ull << (next % 64));
    return (int)next;
}

// The running context (fiber emu_running, or the host) gives the baton to fiber `to`, or
// to the host (-1), and returns when it gets the baton back.
static void emu_switch(int to) {
    int from = emu_running;
    emu_running = to;
    emu_previous = from;
    ucontext_t *save = from < 0 ? &emu_host_ctx : &emu_fib[from].ctx;
    void **fake = from < 0 ? &emu_host_fake : &emu_fib[from].asan_fake;
    emu_asan_leave(fake, to);
    if (swapcontext(save, to < 0 ? &emu_host_ctx : &emu_fib[to].ctx) != 0) emu_fail("swapcontext failed");
    // back: other contexts ran in between and changed this file's globals (the compiler
    // must not keep them in registers across the switch)
    __asm__ __volatile__("" ::: "memory");
    emu_asan_arrive(*fake, NULL, NULL);
    if (from >= 0) {
        emu_tid = (unsigned)from;
        threadIdx = emu_fib[from].idx;
    }
}

enum EmuKind { EMU_SYNCTHREADS = 1, EMU_BLOCK_END, EMU_SHUFFLE };
static const char *emu_kind_name(int k) {
    return k == EMU_SYNCTHREADS ? "__syncthreads" : k == EMU_BLOCK_END ? "the end of the kernel"
         : "a warp shuffle";
}

struct EmuBarrier {
    unsigned n = 0;                // threads that must arrive
    std::vector<unsigned> waiting; // those that have
    int kind = 0;                  // what they arrived at
};

// Waits until all b->n threads arrived, at the same kind of barrier.
static void emu_arrive(EmuBarrier *b, int kind) {
    if (b->waiting.empty()) b->kind = kind;
    else if (b->kind != kind) {
        char m[200];
        snprintf(m, sizeof m, "threads of one %s met different barriers: %s and %s (undefined in CUDA)",
                 kind == EMU_SHUFFLE || b->kind == EMU_SHUFFLE ? "warp" : "block",
                 emu_kind_name(b->kind), emu_kind_name(kind));
        emu_fail(m);
    }
    unsigned me = emu_tid;
    b->waiting.push_back(me);
    if (b->waiting.size() == b->n) {
        for (unsigned t : b->waiting) emu_make_ready(t);
        b->waiting.clear();
        emu_blocks_done += kind == EMU_BLOCK_END;
    }
    int next = emu_pick(); // this thread itself, when the barrier it completed lets it on
    if (next != (int)me) emu_switch(next);
}

struct EmuWarp {
    EmuBarrier bar;
    unsigned lanes = 32;  // threads in this warp (the last may be partial)
    uint64_t slot[2][32]; // the values being exchanged, by the parity of the exchange
};

static EmuBarrier emu_block_bar;
static std::vector<EmuWarp> emu_warps;

static inline void __syncthreads(void) { emu_arrive(&emu_block_bar, EMU_SYNCTHREADS); }

// One exchange: every lane publishes v, then reads lane src(lane)'s (its own when src
// is out of range, as __shfl_down_sync does past the warp's end). One barrier each:
// exchanges alternate between two sets of slots, and no lane can write the set it
// read last time before every lane has arrived at the next exchange, that is, has read.
template <class T, class F>
static T emu_shfl(unsigned mask, T v, F src_of) {
    static_assert(sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
    EmuWarp &w = emu_warps[emu_tid / 32];
    unsigned lane = emu_tid % 32;
    unsigned want = w.lanes == 32 ? 0xffffffffu : (1u << w.lanes) - 1;
    if (mask != want) {
        char m[120];
        snprintf(m, sizeof m, "shuffle mask %08x, but this warp's lanes are %08x", mask, want);
        emu_fail(m);
    }
    uint64_t *slot = w.slot[emu_fib[emu_tid].nshfl++ & 1];
    memcpy(&slot[lane], &v, sizeof v);
    emu_arrive(&w.bar, EMU_SHUFFLE);
    int src = src_of((int)lane);
    T r = v;
    if (src >= 0 && src < 32) {
        if ((unsigned)src >= w.lanes) emu_fail("shuffle reads a lane past the block's last thread");
        memcpy(&r, &slot[src], sizeof r);
    }
    return r;
}

// Bit counting: __popc (set bits), __ffs (1 + the lowest set bit, 0 for none).
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }

// Rounded float arithmetic that nvcc never contracts into an fma (sparsegpt.cu's update,
// which must round as the CPU's w - e * u does). g++ -std=c++17 does not contract either.
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fsub_rn(float a, float b) { return a - b; }

template <class T> static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    if (width != 32) emu_fail("shuffle width other than 32");
    return emu_shfl(mask, v, [=](int l) { return l ^ lane_mask; });
}
template <class T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    if (width != 32) emu_fail("shuffle width other than 32");
    return emu_shfl(mask, v, [=](int l) { return l + (int)delta < 32 ? l + (int)delta : -1; });
}
template <class T> static inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
    if (width != 32) emu_fail("shuffle width other than 32");
    return emu_shfl(mask, v, [=](int l) { return l - (int)delta; }); // below lane 0: its own
}
template <class T> static inline T __shfl_sync(unsigned mask, T v, int src_lane, int width = 32) {
    if (width != 32) emu_fail("shuffle width other than 32");
    return emu_shfl(mask, v, [=](int) { return src_lane & 31; });
}

// --- atomics ----------------------------------------------------------------------------
// One thread runs at a time, and only a barrier switches threads: a plain add is atomic.
template <class T> static inline T atomicAdd(T *p, T v) {
    T old = *p;
    *p = old + v;
    return old;
}

// --- launches ---------------------------------------------------------------------------

static std::function<void()> emu_kernel_block; // the launch's kernel on its arguments

// A new fiber's first steps on its stack: AddressSanitizer told, the host's stack noted
// when the host started it (a dying fiber goes back there).
static __attribute__((noinline)) void emu_thread_start(void) {
    const void *from_stack = NULL;
    size_t from_bytes = 0;
    emu_asan_arrive(NULL, &from_stack, &from_bytes);
    if (emu_previous < 0) {
        emu_host_stack = from_stack;
        emu_host_stack_bytes = from_bytes;
    }
}

// A thread's life: the launch's kernel for each block of the grid, in order.
static __attribute__((noinline)) void emu_thread_run(unsigned tid) {
    emu_tid = tid;
    threadIdx = emu_fib[tid].idx;
    for (unsigned z = 0; z < gridDim.z; z++)
        for (unsigned y = 0; y < gridDim.y; y++)
            for (unsigned x = 0; x < gridDim.x; x++) {
                blockIdx = dim3(x, y, z); // the same for every thread until the block ends
                emu_fib[tid].nshfl = 0;
                emu_kernel_block();
                // the block ends when all its threads have returned (a lane that returns
                // while its warp shuffles leaves the shuffle unable to complete: deadlock)
                emu_arrive(&emu_block_bar, EMU_BLOCK_END);
            }
    emu_live--;
}

// The fiber's entry (makecontext passes ints); its return goes back to the launch
// (uc_link), which hands the baton on. No locals here: its frame outlives its fake stack.
static void emu_thread_entry(int tid) {
    emu_thread_start();
    emu_thread_run((unsigned)tid);
    emu_previous = emu_running;
    emu_running = -1;
    emu_asan_leave(NULL, -1);
}

// Runs kernel(args...) over grid x block; returns when every block has finished.
template <class... KArgs, class... Args>
static void emu_launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, Args... args) {
    static_assert(sizeof...(KArgs) == sizeof...(Args), "kernel launched with the wrong arity");
    unsigned long nt = (unsigned long)block.x * block.y * block.z;
    const char *bad = nt == 0 || grid.x == 0 || grid.y == 0 || grid.z == 0 ? "an empty grid or block"
                    : nt > EMU_MAX_THREADS || block.z > 64 ? "more than 1024 threads in a block"
                    : grid.y > 65535 || grid.z > 65535 ? "grid.y or grid.z above 65535"
                    : NULL;
    if (bad) {
        emu_last_error = cudaErrorInvalidConfiguration;
        emu_last_why = bad;
        return;
    }
    gridDim = grid;
    blockDim = block;
    emu_block_bar.n = (unsigned)nt;
    emu_warps.assign((nt + 31) / 32, EmuWarp());
    for (size_t w = 0; w < emu_warps.size(); w++) {
        emu_warps[w].lanes = w + 1 < emu_warps.size() || nt % 32 == 0 ? 32 : (unsigned)(nt % 32);
        emu_warps[w].bar.n = emu_warps[w].lanes;
    }
    emu_rng = 0x9E3779B97F4A7C15ull * ++emu_launches;
    emu_kernel_block = [&] { kernel(static_cast<KArgs>(args)...); };
    emu_ready.clear();
    memset(emu_ready_bits, 0, sizeof emu_ready_bits);
    emu_ready_words = (unsigned)((nt + 63) / 64);
    for (unsigned t = 0; t < nt; t++) { // every thread a fresh fiber, all ready
        EmuFiber &f = emu_fib[t];
        if (!f.stack) { // a guard page below, so that an overflow faults
            size_t page = (size_t)sysconf(_SC_PAGESIZE);
            void *m = mmap(NULL, EMU_STACK_BYTES + page, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (m == MAP_FAILED || mprotect(m, page, PROT_NONE) != 0) emu_fail("mmap of a thread's stack failed");
            f.stack = (char *)m + page;
        }
        f.idx = dim3(t % block.x, t / block.x % block.y, t / (block.x * block.y));
        if (getcontext(&f.ctx) != 0) emu_fail("getcontext failed");
        f.ctx.uc_stack.ss_sp = f.stack;
        f.ctx.uc_stack.ss_size = EMU_STACK_BYTES;
        f.ctx.uc_link = &emu_host_ctx;
        makecontext(&f.ctx, (void (*)(void))emu_thread_entry, 1, (int)t);
        // AddressSanitizer's swapcontext clears the shadow of the whole stack it switches
        // to, each time (a memset of 32 KiB a switch, two thirds of the sanitizer pass's
        // time, and the poisoned frames of a fiber that is not done): told no stack, it
        // leaves it be. The stack is makecontext's alone; glibc reads uc_stack nowhere else. The
        // fibers' frames are unwound when they return, so a stack goes back clean.
        if (EMU_ASAN) f.ctx.uc_stack.ss_size = 0;
        emu_make_ready(t);
    }
    emu_live = (unsigned)nt;
    // the host hands the baton to a first thread, and on each time a thread returns
    for (int next = emu_pick(); next >= 0; next = emu_pick()) emu_switch(next);
    emu_kernel_block = nullptr;
}

// Makes the next launch's block 0 take turns by order k (0: lowest first, 1: highest
// first, 2: random) and its block i by order k + i (mod 3), whatever ran before: a test
// that runs a case with k = 0, 1, 2 puts every block under every order, even when the
// case makes several launches.
static inline void emu_set_turn_order(unsigned k) {
    unsigned next = (unsigned)((emu_launches + 1 + emu_blocks_done) % 3);
    emu_launches += (k % 3 + 3 - next) % 3;
}

// A launch, or its record during a stream capture (the arguments copied as they are now).
template <class... KArgs, class... Args>
static void emu_launch_async(void (*kernel)(KArgs...), dim3 grid, dim3 block, Args... args) {
    emu_enqueue([=] { emu_launch(kernel, grid, block, args...); });
}

#define LAUNCH(kernel, grid, block, stream, ...)                                         \
    ((void)(stream), emu_launch_async(kernel, dim3(grid), dim3(block), __VA_ARGS__))

#endif
