# Makefile: builds libbest and the tools, runs tests, fuzzers, benchmarks and the demo.
#
#   make            lib/libbest.a, bin/best-*, the test and bench programs (-O2 -Wall -Wextra -Werror)
#   make tools      lib/libbest.a and bin/best-* only
#   make test       installs missing packages, builds, runs tests/run.sh twice:
#                   plain and under AddressSanitizer + UBSan (objects in build-san/),
#                   plus a short run of every fuzz target
#   make test SAN=1 only the sanitizer pass
#   make fuzz       runs every libFuzzer target in tests/fuzz for FUZZ_SECONDS each
#   make deps       installs missing Debian packages and the Python test oracles
#   make bench      runs the benchmarks in bench/ (needs ../shared)
#   make demo       installs missing packages, builds the tools, runs the whole pipeline on
#                   a synthetic corpus on the CPU (pipelines/demo.mk)
#   make report     the demo's report (RUNS="OUT...": compare pipeline runs)
#
# Optional dependencies are probed and reported, never guessed: nvcc is not
# needed yet; the CPU path is always built.
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

PKGS    := libarchive jansson libutf8proc libpcre2-8 libxxhash
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
# The packages pkg-config does not find (openblas too: it is linked as -lopenblas). Only
# the targets that install them, or build nothing, may run without them.
PKG_MISSING := $(shell pkg-config --exists $(PKGS) openblas 2>/dev/null || \
                 for p in $(PKGS) openblas; do pkg-config --exists $$p 2>/dev/null || echo $$p; done)
ifneq ($(PKG_MISSING),)
ifneq ($(filter-out deps test demo clean,$(or $(MAKECMDGOALS),all)),)
$(error missing pkg-config packages: $(PKG_MISSING); run 'make deps' to install them (or 'make demo' / 'make test', which do))
endif
endif
CFLAGS  := $(OPT) -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fopenmp -MMD -MP \
           -Ilib $(SANFLAGS) $(PKG_CFLAGS) $(EXTRA_CFLAGS)
LDFLAGS := -fopenmp $(SANFLAGS)
LDLIBS  := $(PKG_LIBS) -lopenblas -lm -lpthread

LIB_SRC := $(wildcard lib/*/*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
TOOLS   := $(notdir $(wildcard tools/best-*))
BINS    := $(TOOLS:%=$(BINDIR)/%)
TEST_SRC := $(wildcard tests/test_*.c)
# and tests/hf_logits.c, a helper that tests/t_hf_load.sh runs (tests/run.sh runs only test_*)
TEST_BINS := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%) $(BUILD)/tests/hf_logits
BENCH_SRC := $(wildcard bench/bench_*.c)
BENCH_BINS := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

.PHONY: all tools test deps fuzz fuzz-build bench demo report clean
# keep objects made through pattern chains (tests, fuzz targets): no "rm *.o" after a build
.SECONDARY:
all: $(LIBA) $(BINS) $(TEST_BINS) $(BENCH_BINS)
tools: $(LIBA) $(BINS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(LIBA): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# A tool is every .c file of its folder linked against libbest.
.SECONDEXPANSION:
# (No '%' inside the functions: make would put the stem there before expanding.)
$(BINDIR)/%: $$(addprefix $(BUILD)/,$$(subst .c,.o,$$(wildcard tools/$$*/*.c))) $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(LIBA) $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBA) $(LDLIBS)

$(BUILD)/bench/%: $(BUILD)/bench/%.o $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBA) $(LDLIBS)

# One command runs everything: the suite on the plain build, again on the ASan+UBSan
# build, and the fuzz targets briefly (FUZZ_SECONDS_CI each). SAN=1 runs only the
# sanitizer pass.
FUZZ_SECONDS_CI ?= 15
test: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory SAN=1 all
	@$(MAKE) --no-print-directory fuzz-build
	@FUZZ_SECONDS=$(FUZZ_SECONDS_CI) MODES="$(if $(filter 1,$(SAN)),san,plain san)" sh tests/run.sh

# Debian packages the build and the tests need; nothing happens when all are present.
APT_PKGS := build-essential pkg-config clang libarchive-dev libxxhash-dev libzstd-dev \
            libjansson-dev libutf8proc-dev libpcre2-dev libopenblas-dev zlib1g-dev zstd python3 python3-pip python3-venv
deps:
	@sh tests/deps.sh $(APT_PKGS)

# libFuzzer targets: lib/ rebuilt with clang, ASan and coverage.
FUZZ_SRC  := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(FUZZ_SRC:tests/fuzz/%.c=build-fuzz/%)
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=build-fuzz/%.o)
FUZZ_CFLAGS := -O1 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fopenmp -Ilib \
               -fsanitize=fuzzer-no-link,address,undefined $(PKG_CFLAGS)
FUZZ_SECONDS ?= 60
build-fuzz/%.o: %.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -c $< -o $@
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
# compares the perplexities of pipeline runs (pipelines/best.mk) in out/report.
# deps first, then a new make for the build (see the top of this file); the demo needs
# only the tools.
DEMO := out/demo
demo: deps
	@$(MAKE) --no-print-directory tools
	@$(MAKE) --no-print-directory -f pipelines/demo.mk OUT=$(DEMO) BIN=$(BINDIR)

RUNS ?=
report: all
ifeq ($(RUNS),)
	@$(MAKE) --no-print-directory -f pipelines/demo.mk OUT=$(DEMO) BIN=$(BINDIR) report
	@echo "report: $(DEMO)/report/summary.md"
else
	python3 pipelines/report.py --out out/report --title 'perplexity against sparsity' --print \
	    $(foreach r,$(RUNS),--results $(r)/report/results.jsonl)
endif

clean:
	rm -rf build build-san build-fuzz bin lib/libbest.a

-include $(LIB_OBJ:.o=.d) $(TEST_BINS:=.d) $(BENCH_BINS:=.d) $(wildcard $(BUILD)/tools/*/*.d)
