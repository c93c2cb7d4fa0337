# Makefile: builds libbest and the tools, runs tests, fuzzers, benchmarks and the demo.
#
#   make            lib/libbest.a, bin/best-*, the test and bench programs (-O2 -Wall -Wextra -Werror)
#   make tools      lib/libbest.a and bin/best-* only
#   make test       installs missing packages (and, with CUDA, the cuDNN frontend's
#                   headers: make cudnn-frontend), builds, runs tests/run.sh twice:
#                   plain and under AddressSanitizer + UBSan (objects in build-san/),
#                   plus a short run of every fuzz target; JOBS (2) compilers and tests
#                   at a time
#   make test SAN=1 only the sanitizer pass
#   make fuzz       runs every libFuzzer target in tests/fuzz for FUZZ_SECONDS each
#   make deps       installs missing Debian packages and the Python test oracles
#   make bench      runs the benchmarks in bench/ (needs ../shared)
#   make demo       installs missing packages, builds the tools, runs the whole pipeline on
#                   a synthetic corpus on the CPU (pipelines/demo.mk)
#   make report     the demo's report (RUNS="OUT...": compare pipeline runs)
#   make install    PREFIX=/usr/local (DESTDIR=STAGE): the tools, their man pages, this
#                   manual and the recipes (tests/t_install.sh)
#   make cuda-flags the CUDA settings found, as shell assignments (tests/gpu/run.sh)
#   make cudnn-frontend  the cuDNN frontend's headers into .deps/ (pip): BEST_ATTN=cudnn
#
# EXTRA_CFLAGS, EXTRA_CXXFLAGS, EXTRA_NVCCFLAGS and EXTRA_LDFLAGS (from the environment or
# the command line) are added to the compilers' and the links' flags; on a lent GPU
# machine, tests/gpu/deps.sh's env.sh puts in EXTRA_LDFLAGS the rpath to the packages it
# unpacked under .gpudeps/root (docs/cuda.md).
#
# Optional dependencies are probed and reported, never guessed; the CPU path is always
# built. CUDA: where an NVIDIA driver is (or CUDA_BUILD=1, or `make test`), nvcc on PATH,
# else /usr/local/cuda/bin/nvcc (NVCC=PATH picks one, NVCC=none builds without). When found, every lib/*/*.cu is compiled for sm_80 and
# sm_90a plus compute_90a PTX (named, never guessed) into libbest.a, the C code sees
# BEST_CUDA=1 and the programs link cudart and cuBLASLt from the toolkit's lib64. One
# line says what was found. The sanitizer and fuzz builds stay CPU-only. docs/cuda.md.
#
# Fresh machines: the pkg-config flags below are read when make parses this file, so a
# target that installs the packages (deps) must build in a new make process that parses
# it again: `test` and `demo` run deps, then $(MAKE) for the build. (`demo` used to list
# `all` beside deps as prerequisites; on a machine without the -dev packages it then
# linked without -ljansson -larchive ...: the first `make demo` failed, the second
# worked. tests/t_demo.sh now runs `make demo` on a copy of the tree as on a fresh
# machine.) A build started while a package is missing stops at once with one line
# naming it. `demo` builds only the tools (`make tools`), not the test and bench programs.

CC      ?= gcc
SAN     ?= 0
ifeq ($(SAN),1)
BUILD   := build-san
BINDIR  := build-san/bin
LIBA    := build-san/libbest.a
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
OPT     := -O1
else
BUILD   := build
BINDIR  := bin
LIBA    := lib/libbest.a
SANFLAGS :=
OPT     := -O2
endif

PKGS    := libarchive jansson libutf8proc libpcre2-8 libxxhash libzstd zlib snappy
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
# The packages pkg-config does not find (openblas too: it is linked as -lopenblas). Only
# the targets that install them, or build nothing, may run without them.
PKG_MISSING := $(shell pkg-config --exists $(PKGS) openblas 2>/dev/null || \
                 for p in $(PKGS) openblas; do pkg-config --exists $$p 2>/dev/null || echo $$p; done)
ifneq ($(PKG_MISSING),)
ifneq ($(filter-out deps test check demo clean cuda-flags cudnn-frontend cudnn-frontend-maybe,$(or $(MAKECMDGOALS),all)),)
$(error missing pkg-config packages: $(PKG_MISSING); run 'make deps' to install them (or 'make demo' / 'make test', which do))
endif
endif
# --- CUDA, probed ------------------------------------------------------------------------
# The kernels are built where they can run (an NVIDIA driver: /proc/driver/nvidia), when
# asked (CUDA_BUILD=1, or NVCC=PATH), and by `make test` (so that CI compiles them):
# elsewhere nvcc's two architectures would only slow `make` and `make demo` by a minute.
GPU_DRIVER := $(wildcard /proc/driver/nvidia/version)
CUDA_BUILD ?= $(if $(GPU_DRIVER),1,0)
ifeq ($(origin NVCC),undefined)
ifeq ($(CUDA_BUILD),1)
NVCC := $(or $(shell command -v nvcc 2>/dev/null),$(wildcard /usr/local/cuda/bin/nvcc))
else
NVCC_SKIPPED := 1
endif
endif
CUDA := 0
CUDA_WHY :=
ifeq ($(NVCC_SKIPPED),1)
CUDA_WHY := no NVIDIA driver here, so the CUDA kernels are not built (CUDA_BUILD=1 or NVCC=PATH builds them; make test does)
else ifeq ($(filter-out none,$(NVCC)),)
CUDA_WHY := no nvcc ($(if $(NVCC),NVCC=none,none on PATH nor /usr/local/cuda/bin/nvcc))
else ifeq ($(SAN),1)
CUDA_WHY := not in the sanitizer build
else
NVCC_PATH := $(realpath $(shell command -v $(NVCC) 2>/dev/null))
NVCC_VERSION := $(shell $(NVCC) --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\),.*/\1/p')
CUDA_HOME := $(patsubst %/bin/nvcc,%,$(NVCC_PATH))
CUDA_INC := $(CUDA_HOME)/include
CUDA_LIBDIR := $(firstword $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/lib))
ifeq ($(NVCC_VERSION),)
# NVCC named by the user that does not run is their mistake, not a CPU-only machine
ifneq ($(origin NVCC),file)
$(error NVCC=$(NVCC) does not run (nvcc --version failed); name a working nvcc or NVCC=none)
endif
CUDA_WHY := $(NVCC) does not run (nvcc --version failed)
else ifneq ($(words $(wildcard $(CUDA_INC)/cublasLt.h $(CUDA_LIBDIR)/libcublasLt.so)),2)
CUDA_WHY := nvcc $(NVCC_VERSION) at $(NVCC_PATH) but no cuBLASLt (cublasLt.h, libcublasLt.so) under $(CUDA_HOME)
else
CUDA := 1
endif
endif
ifeq ($(CUDA),1)
# sm_80 (A100) and sm_90a (H100/H200: wgmma, setmaxnreg) machine code, compute_90a PTX for
# later GPUs; the -gencode form, which HOPPER.md found reliable for sm_90a
CUDA_ARCH := -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90a,code=sm_90a \
             -gencode arch=compute_90a,code=compute_90a
NVCCFLAGS := -O3 -std=c++17 $(CUDA_ARCH) -lineinfo -Werror all-warnings \
             -Xcompiler -Wall,-Wextra,-Werror -DBEST_CUDA=1 -Ilib -MMD -MP $(EXTRA_NVCCFLAGS)
# C code may call the CUDA runtime's C API (bench/bench_mask_gpu.c)
CFLAGS_CUDA := -DBEST_CUDA=1 -isystem $(CUDA_INC)
CUDA_LDLIBS := -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR) -lcudart -lcublasLt -lstdc++
CUDA_LINE := cuda: nvcc $(NVCC_VERSION) ($(NVCC_PATH)), include $(CUDA_INC), lib $(CUDA_LIBDIR), cuBLASLt yes: lib/*/*.cu for sm_80 sm_90a + compute_90a PTX
# NCCL, for GPU ranks (lib/dist/dist_nccl.cu): nccl.h and libnccl beside the toolkit, or
# under NCCL_HOME (DIR/include, DIR/lib64 or DIR/lib; pip's nvidia-nccl has libnccl.so.2
# alone). Without it dist_nccl.cu refuses GPU ranks in one line, and the programs do not
# link NCCL.
NCCL_HOME ?= $(CUDA_HOME)
NCCL_LIB := $(firstword $(foreach d,lib64 lib,$(foreach f,libnccl.so libnccl.so.2,$(wildcard $(NCCL_HOME)/$(d)/$(f)))))
ifneq ($(and $(wildcard $(NCCL_HOME)/include/nccl.h),$(NCCL_LIB)),)
NVCCFLAGS += -DBEST_NCCL=1 -isystem $(NCCL_HOME)/include
CUDA_LDLIBS += -L$(dir $(NCCL_LIB)) -Wl,-rpath,$(dir $(NCCL_LIB)) -l:$(notdir $(NCCL_LIB))
CUDA_LINE += ; nccl: $(NCCL_LIB): GPU ranks under mpirun
else
CUDA_LINE += ; nccl: off, no nccl.h and libnccl under $(NCCL_HOME) (NCCL_HOME=DIR): one GPU rank
endif
# cuDNN's fused attention (lib/nn/attention_cudnn.cpp, host C++ built by $(CXX)): with the
# cuDNN frontend's headers (`make cudnn-frontend` unpacks them into .deps/; CUDNN_FE=DIR
# names others) and cudnn.h (under CUDNN_HOME/include or the toolkit's include). Nothing
# links cuDNN: libcudnn.so.9 is loaded when BEST_ATTN=cudnn asks for it. Without them the
# file builds stubs that say so.
CUDNN_FE ?= .deps/cudnn-frontend/include
CUDNN_INC := $(firstword $(foreach d,$(CUDNN_HOME) $(CUDA_HOME),$(if $(wildcard $(d)/include/cudnn.h),$(d)/include)))
ifneq ($(and $(wildcard $(CUDNN_FE)/cudnn_frontend.h),$(CUDNN_INC)),)
CUDNN_CXXFLAGS := -DBEST_CUDNN=1 -DNV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING -isystem $(CUDNN_FE) -isystem $(CUDNN_INC)
CUDA_LINE += ; cudnn attention: built (frontend $(CUDNN_FE), cudnn.h in $(CUDNN_INC); BEST_ATTN=cudnn loads libcudnn.so.9)
else
CUDA_LINE += ; cudnn attention: off, $(if $(CUDNN_INC),no cuDNN frontend headers in $(CUDNN_FE) (make cudnn-frontend),no cudnn.h (CUDNN_HOME=DIR))
endif
else
CUDA_LINE := cuda: off, $(CUDA_WHY): CPU build only
endif
# --- MPI, probed -------------------------------------------------------------------------
# mpicc (Debian's libopenmpi-dev, installed by `make deps`) gives the flags; MPICC=none
# builds without. When found, lib/dist/dist_mpi.c is compiled with them and linked into
# best-train (and tests/dist_check) ahead of libbest, whose dist_single.c then stays out:
# `mpirun -np N best-train` runs N ranks. Without it best-train is one rank, and refuses
# to be started by mpirun for several. The fuzz builds never link MPI.
MPICC ?= $(shell command -v mpicc 2>/dev/null)
ifneq ($(filter-out none,$(MPICC)),)
MPI_CFLAGS := $(shell $(MPICC) --showme:compile 2>/dev/null)
MPI_LIBS := $(shell $(MPICC) --showme:link 2>/dev/null)
endif
ifneq ($(MPI_LIBS),)
MPI := 1
MPI_LINE := mpi: $(MPICC) ($(MPI_LIBS)): best-train runs under mpirun
else
MPI := 0
MPI_LINE := mpi: off, $(if $(filter-out none,$(MPICC)),$(MPICC) --showme:link failed,no mpicc (make deps installs libopenmpi-dev)): best-train is one rank
endif
# Said once per top-level make (sub-makes of `make test` stay quiet), after the check for
# missing packages so that a build without them still fails in one line.
ifeq ($(MAKELEVEL),0)
$(info $(CUDA_LINE))
$(info $(MPI_LINE))
endif

CFLAGS  := $(OPT) -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fopenmp -MMD -MP \
           -Ilib $(SANFLAGS) $(PKG_CFLAGS) $(CFLAGS_CUDA) $(EXTRA_CFLAGS)
CXXFLAGS := $(OPT) -g -std=c++17 -D_GNU_SOURCE -Wall -Wextra -Werror -pthread -MMD -MP \
            -Ilib $(SANFLAGS) $(EXTRA_CXXFLAGS)
LDFLAGS := -fopenmp $(SANFLAGS) $(EXTRA_LDFLAGS)
LDLIBS  := $(PKG_LIBS) -lopenblas -lm -lpthread
# the programs' links (the fuzz targets link LDLIBS alone: they are CPU-only)
LINK_LIBS := $(LDLIBS) $(CUDA_LDLIBS)

LIB_SRC := $(filter-out lib/dist/dist_mpi.c,$(wildcard lib/*/*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
# CUDA objects are NAME.cu.o: layers.cu is layers.c's twin, beside it
LIB_CU  := $(if $(filter 1,$(CUDA)),$(wildcard lib/*/*.cu))
LIB_OBJ += $(LIB_CU:%.cu=$(BUILD)/%.cu.o)
# host C++ of the CUDA build (cuDNN's attention): NAME.cpp.o
LIB_CXX := $(if $(filter 1,$(CUDA)),$(wildcard lib/*/*.cpp))
LIB_OBJ += $(LIB_CXX:%.cpp=$(BUILD)/%.cpp.o)
TOOLS   := $(notdir $(wildcard tools/best-*))
BINS    := $(TOOLS:%=$(BINDIR)/%)
TEST_SRC := $(wildcard tests/test_*.c)
# and tests/hf_logits.c, hf_grads.c, oneshot_layer.c, parquet_dump.c: helpers that
# tests/t_hf_load.sh, t_hf_grad.sh, t_oneshot.sh and t_parquet.sh run
# (tests/run.sh runs only test_*)
TEST_BINS := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%) $(BUILD)/tests/hf_logits $(BUILD)/tests/hf_grads \
             $(BUILD)/tests/oneshot_layer $(BUILD)/tests/parquet_dump
# C++ tests (the CUDA kernels run on the CPU through tests/cuda_emu.h), built by $(CXX)
TEST_CXX_BINS := $(patsubst tests/%.cpp,$(BUILD)/tests/%,$(wildcard tests/test_*.cpp))
# and with CUDA, the C++ tests of the kernels again built by nvcc (NAME_gpu), launching the
# kernels on a real GPU (they print "skip - no CUDA device" where there is none)
TEST_GPU_BINS := $(if $(LIB_CU),$(patsubst tests/%.cpp,$(BUILD)/tests/%_gpu,$(wildcard tests/test_kernels.cpp tests/test_step.cpp tests/test_spmv_cuda.cpp tests/test_calib_cuda.cpp tests/test_oneshot_cuda.cpp)))
TEST_BINS += $(TEST_CXX_BINS) $(TEST_GPU_BINS)
# tests/dist_check: the collectives under mpirun (tests/t_mpi.sh), with MPI only; and
# step_ranks: test_step.cpp's GPU ranks in the emulator (TEST_RANKS), under mpirun too
TEST_BINS += $(if $(filter 1,$(MPI)),$(BUILD)/tests/dist_check $(BUILD)/tests/step_ranks)
BENCH_SRC := $(wildcard bench/bench_*.c)
BENCH_BINS := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

.PHONY: all tools test check deps fuzz fuzz-build bench demo report install clean cuda-flags cudnn-frontend cudnn-frontend-maybe FORCE
# keep objects made through pattern chains (tests, fuzz targets): no "rm *.o" after a build
.SECONDARY:
all: $(LIBA) $(BINS) $(TEST_BINS) $(BENCH_BINS)
tools: $(LIBA) $(BINS)

# Objects depend on whether CUDA is on (BEST_CUDA=1 changes the C code): a stamp that
# changes when the setting does, so that switching (NVCC=none, then a plain make) rebuilds.
CUDA_STAMP := $(BUILD)/cuda.stamp
$(CUDA_STAMP): FORCE
	@mkdir -p $(dir $@) && echo $(CUDA) | cmp -s - $@ || echo $(CUDA) >$@
FORCE:

$(BUILD)/%.o: %.c $(CUDA_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# The build's version (base/version.h), for version.c alone: a stamp that changes when
# `git describe` does, so a new commit recompiles that one file.
BEST_VERSION := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
VERSION_STAMP := $(BUILD)/version.stamp
$(VERSION_STAMP): FORCE
	@mkdir -p $(dir $@) && echo '$(BEST_VERSION)' | cmp -s - $@ || echo '$(BEST_VERSION)' >$@
$(BUILD)/lib/base/version.o: CFLAGS += -DBEST_VERSION='"$(BEST_VERSION)"'
$(BUILD)/lib/base/version.o: $(VERSION_STAMP)
build-fuzz/lib/base/version.o: FUZZ_CFLAGS += -DBEST_VERSION='"$(BEST_VERSION)"'

$(BUILD)/%.cu.o: %.cu $(CUDA_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

# (-O1 and no -g: glue around the cuDNN frontend's templates, whose compile time -O2
# doubles and whose debug information adds 36 MB to each program; the stamp rebuilds it
# when the frontend is found or lost)
CUDNN_STAMP := $(BUILD)/cudnn.stamp
$(CUDNN_STAMP): FORCE
	@mkdir -p $(dir $@) && echo '$(CUDNN_CXXFLAGS)' | cmp -s - $@ || echo '$(CUDNN_CXXFLAGS)' >$@
$(BUILD)/lib/%.cpp.o: lib/%.cpp $(CUDA_STAMP) $(CUDNN_STAMP)
	@mkdir -p $(dir $@)
	$(CXX) $(filter-out -O2 -g,$(CXXFLAGS)) -O1 -DBEST_CUDA=1 -isystem $(CUDA_INC) $(CUDNN_CXXFLAGS) -c $< -o $@

# The cuDNN frontend's headers (header-only C++, MIT), pinned, from PyPI's wheel.
CUDNN_FE_VERSION := 1.32.0
cudnn-frontend:
	@mkdir -p .deps/wheels
	python3 -m pip download -q --no-deps --only-binary=:all: -d .deps/wheels nvidia-cudnn-frontend==$(CUDNN_FE_VERSION)
	rm -rf .deps/cudnn-frontend.tmp && mkdir -p .deps/cudnn-frontend.tmp
	python3 -c "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); \
	    [z.extract(n, sys.argv[2]) for n in z.namelist() if n.startswith('include/')]" \
	    .deps/wheels/nvidia_cudnn_frontend-$(CUDNN_FE_VERSION)-*.whl .deps/cudnn-frontend.tmp
	rm -rf .deps/cudnn-frontend && mv .deps/cudnn-frontend.tmp .deps/cudnn-frontend
	@echo "cuDNN frontend $(CUDNN_FE_VERSION) headers in .deps/cudnn-frontend/include: rebuild (make)"

# make test: the frontend's headers when the build has CUDA and they are missing, so that
# the real file is compiled (-Werror) and tests/test_attn_cudnn validates its graphs; a
# machine that cannot reach PyPI builds the stubs, and that test says so
cudnn-frontend-maybe:
ifeq ($(CUDA),1)
	@[ -f $(CUDNN_FE)/cudnn_frontend.h ] || $(MAKE) --no-print-directory cudnn-frontend || \
	    echo "note: no cuDNN frontend headers (the download failed): cuDNN's attention builds as stubs"
endif

$(BUILD)/tests/%.o: tests/%.cpp $(CUDA_STAMP)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -c $< -o $@

$(BUILD)/tests/%_gpu.o: tests/%.cpp $(CUDA_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -DTEST_ON_GPU -x cu -c $< -o $@

$(LIBA): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# A tool is every .c file of its folder linked against libbest.
.SECONDEXPANSION:
# (No '%' inside the functions: make would put the stem there before expanding.)
$(BINDIR)/%: $$(addprefix $(BUILD)/,$$(subst .c,.o,$$(wildcard tools/$$*/*.c))) $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(LIBA) $(LINK_LIBS)

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBA) $(LINK_LIBS)

# MPI's objects and links (see the probe above)
ifeq ($(MPI),1)
$(BUILD)/lib/dist/dist_mpi.o: lib/dist/dist_mpi.c $(CUDA_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) -c $< -o $@
$(BINDIR)/best-train: $(BUILD)/lib/dist/dist_mpi.o
$(BINDIR)/best-train: LINK_LIBS += $(MPI_LIBS)
$(BUILD)/tests/dist_check: $(BUILD)/tests/dist_check.o $(BUILD)/lib/dist/dist_mpi.o $(LIBA)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(LIBA) $(LINK_LIBS) $(MPI_LIBS)
$(BUILD)/tests/step_ranks.o: tests/test_step.cpp $(CUDA_STAMP)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -DTEST_RANKS -c $< -o $@
$(BUILD)/tests/step_ranks: $(BUILD)/tests/step_ranks.o $(BUILD)/lib/dist/dist_mpi.o $(LIBA)
	$(CXX) $(LDFLAGS) -pthread -o $@ $(filter %.o,$^) $(LIBA) $(LINK_LIBS) $(MPI_LIBS)
endif

$(TEST_CXX_BINS) $(TEST_GPU_BINS): $(BUILD)/tests/%: $(BUILD)/tests/%.o $(LIBA)
	@mkdir -p $(dir $@)
	$(CXX) $(LDFLAGS) -pthread -o $@ $< $(LIBA) $(LINK_LIBS)

# the cuSPARSE peer of the GPU SpMV benchmark, when the toolkit has cuSPARSE (only this
# program links it)
CUSPARSE := $(if $(filter 1,$(CUDA)),$(if $(filter 2,$(words $(wildcard $(CUDA_INC)/cusparse.h $(CUDA_LIBDIR)/libcusparse.so))),1))
$(BUILD)/bench/bench_spmv_gpu.o: CFLAGS += $(if $(CUSPARSE),-DBEST_CUSPARSE=1)
$(BUILD)/bench/bench_spmv_gpu: LINK_LIBS += $(if $(CUSPARSE),-lcusparse)
$(BUILD)/bench/%: $(BUILD)/bench/%.o $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBA) $(LINK_LIBS)

# One command runs everything: the suite on the plain build, again on the ASan+UBSan
# build, and the fuzz targets briefly (FUZZ_SECONDS_CI each). SAN=1 runs only the
# sanitizer pass.
FUZZ_SECONDS_CI ?= 15
# CUDA_BUILD=1 in the environment: the kernels compiled here whether or not a driver is,
# and every make a test runs (make install, make cuda-flags) sees the same build.
# JOBS: how many compilers, and how many tests, run at a time (tests/run.sh).
JOBS ?= 2
test: deps
	@CUDA_BUILD=1 $(MAKE) --no-print-directory cudnn-frontend-maybe
	@CUDA_BUILD=1 $(MAKE) --no-print-directory -j$(JOBS) all
	@$(MAKE) --no-print-directory -j$(JOBS) SAN=1 all
	@$(MAKE) --no-print-directory -j$(JOBS) fuzz-build
	@CUDA_BUILD=1 JOBS=$(JOBS) FUZZ_SECONDS=$(FUZZ_SECONDS_CI) MODES="$(if $(filter 1,$(SAN)),san,plain san)" sh tests/run.sh

# The edit-test loop: the unit programs, t_layout and a smoke of the tools' command lines on
# the plain build (no sanitizers, no fuzzing, no pipelines), about 2.5 minutes on 2 cores;
# `make test` is the whole suite, what CI runs.
check: deps
	@$(MAKE) --no-print-directory -j$(JOBS) all
	@JOBS=$(JOBS) TIER=check sh tests/run.sh

# Debian packages the build and the tests need; nothing happens when all are present.
APT_PKGS := build-essential pkg-config clang libarchive-dev libxxhash-dev libzstd-dev \
            libjansson-dev libutf8proc-dev libpcre2-dev libopenblas-dev zlib1g-dev zstd python3 python3-pip python3-venv \
            openmpi-bin libopenmpi-dev libsnappy-dev librsvg2-bin groff-base
deps:
	@sh tests/deps.sh $(APT_PKGS)

# libFuzzer targets: lib/ rebuilt with clang, ASan and coverage.
FUZZ_SRC  := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(FUZZ_SRC:tests/fuzz/%.c=build-fuzz/%)
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=build-fuzz/%.o)
# (parquet.h's limits made small, so that a few fuzzed bytes cannot ask for gigabytes)
FUZZ_CFLAGS := -O1 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fopenmp -Ilib \
               -DPARQUET_MAX_PAGE_VALUES=65536 -DPARQUET_MAX_PAGE_BYTES=16777216 -DPARQUET_MAX_GROUP_TEXT=16777216 \
               -fsanitize=fuzzer-no-link,address,undefined $(PKG_CFLAGS)
FUZZ_SECONDS ?= 60
# (-MMD: an object is rebuilt when a header it includes changes; a stale one read a
# struct of the old layout and the fuzzer reported an overflow that was not there)
build-fuzz/%.o: %.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@
-include $(FUZZ_LIB_OBJ:.o=.d)
build-fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_LIB_OBJ)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS)
fuzz-build: $(FUZZ_BINS)
fuzz: fuzz-build
	@sh tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_BINS)

bench: all
	@sh bench/run.sh

# The demo: the whole pipeline on the CPU with nothing from outside the repository (a
# synthetic corpus, a tokenizer learned from it, a tiny LLaMA pretrained from random init,
# BEST and one-shot magnitude to 90%, perplexity, packing, decode speed, a sample, a
# report): pipelines/demo.mk, one target per product under out/demo, so an interrupted
# demo resumes where it stopped. `make report` redraws its report; with RUNS="OUT..." it
# compares the perplexities of pipeline runs (pipelines/best.mk) in REPORT_OUT (out/report).
# deps first, then a new make for the build (see the top of this file); the demo needs
# only the tools.
DEMO := out/demo
demo: deps
	@$(MAKE) --no-print-directory tools
	@$(MAKE) --no-print-directory -f pipelines/demo.mk OUT=$(DEMO) BIN=$(BINDIR)

RUNS ?=
REPORT_OUT ?= out/report
report: $(if $(RUNS),,tools) # (comparing runs needs python3 alone; the demo's report, the tools)
ifeq ($(RUNS),)
	@$(MAKE) --no-print-directory -f pipelines/demo.mk OUT=$(DEMO) BIN=$(BINDIR) report
	@echo "report: $(DEMO)/report/summary.md"
else
	python3 pipelines/report.py --out $(REPORT_OUT) --title 'perplexity against sparsity' --print \
	    $(foreach r,$(RUNS),--results $(r)/report/results.jsonl)
endif

# make install: the tools in PREFIX/bin; a man page each in PREFIX/share/man/man1, made
# from its --help by docs/man.sh; this manual (docs/*.md) in PREFIX/share/doc/best; the
# recipes and report.py in PREFIX/share/best/pipelines, whose BIN defaults to PREFIX/bin
# (make -f PREFIX/share/best/pipelines/llama2-7b-90.mk runs the installed tools).
# DESTDIR stages the whole tree under another root (packaging); nothing else is written.
PREFIX ?= /usr/local
I_BIN := $(DESTDIR)$(PREFIX)/bin
I_MAN := $(DESTDIR)$(PREFIX)/share/man/man1
I_DOC := $(DESTDIR)$(PREFIX)/share/doc/best
I_PIPE := $(DESTDIR)$(PREFIX)/share/best/pipelines
install: tools
	install -d $(I_BIN) $(I_MAN) $(I_DOC) $(I_PIPE)
	install -m 755 $(BINS) $(I_BIN)
	for t in $(TOOLS); do sh docs/man.sh $(BINDIR)/$$t $(PREFIX)/share/doc/best > $(I_MAN)/$$t.1.tmp && \
	    mv $(I_MAN)/$$t.1.tmp $(I_MAN)/$$t.1 || exit 1; done
	install -m 644 docs/*.md $(I_DOC)
	install -m 644 pipelines/*.mk pipelines/*.json $(I_PIPE)
	install -m 755 pipelines/*.py $(I_PIPE)
	sed -i 's|^BIN \( *\)?= bin$$|BIN \1?= $(PREFIX)/bin|' $(I_PIPE)/best.mk $(I_PIPE)/demo.mk
	@echo "installed: $(TOOLS) in $(I_BIN), man pages in $(I_MAN), docs in $(I_DOC), recipes in $(I_PIPE)"

# The compiler settings as shell assignments, for tests/gpu/run.sh's fallback build on a
# machine without the packages (so this target skips the package check).
cuda-flags:
	@echo "CUDA=$(CUDA)"
	@echo "NVCC='$(NVCC)'"
	@echo "NVCCFLAGS='$(NVCCFLAGS)'"
	@echo "CUDA_LDLIBS='$(CUDA_LDLIBS)'"
	@echo "CFLAGS='$(CFLAGS)'"

clean:
	rm -rf build build-san build-fuzz build-gpu bin lib/libbest.a

-include $(LIB_OBJ:.o=.d) $(TEST_BINS:=.d) $(BENCH_BINS:=.d) $(wildcard $(BUILD)/tools/*/*.d)
