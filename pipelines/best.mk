# best.mk: the generic pruning run, resumable by make:
#
#   tokenize -> (one-shot mask) -> train with BEST -> mask report -> eval WikiText-2 and C4
#            -> pack -> report
#
#   make -f pipelines/best.mk MODEL=DIR DATA='data/train-*.parquet' SPARSITY=0.9 LR=1e-4 [VAR=...]
#
# Every product has a fixed path under OUT (docs/pipelines.md lists them); a step runs only
# when its product is missing or older than its inputs, so rerunning after an interruption
# picks up where it stopped (and training itself resumes from its last saved state, every
# SAVE_EVERY steps). The tools write their files through a temporary name and a rename;
# the few products written here (JSON captured from stdout, stamps) do the same, and
# .DELETE_ON_ERROR removes the target of a failed recipe, so a failed step leaves no
# file that looks finished. `make -n` prints the commands without running them.
#
# The paper's settings live in thin files that set variables and include this one
# (pipelines/llama2-7b-90.mk and so on, via pipelines/paper.mk); anything can be
# overridden on the command line.
#
# NPROC=N trains on N ranks: best-train under `$(MPIRUN) -np N` (data parallel, ZeRO-1,
# docs/best-train.md "Many ranks"), CPU ranks only so far; the other steps run once.

# --- what to prune, on what, how -------------------------------------------------------
NAME       ?= best
OUT        ?= out/$(NAME)
# How the report names this run and its model in its tables (and `make report RUNS=...`
# when it compares runs): RUN, the OUT folder; MODEL_NAME, MODEL's folder name. The method's
# label is LABEL (below: BEST, magnitude+, ...); LABEL=... on the command line tells two runs
# of one method apart in a plot.
RUN        ?= $(OUT)
BIN        ?= bin
MODEL      ?=
MODEL_NAME ?= $(notdir $(patsubst %/,%,$(MODEL)))
TOKENIZER  ?= $(MODEL)
DATA       ?=
FIELD      ?= text
METHOD     ?= best
SPARSITY   ?= 0.9
LR         ?= 1e-4
BATCH      ?= 64
MICRO_BATCH ?= 0
SEQ        ?= 2048
TOKENS     ?=
# STEPS wins over TOKENS; TOKENS gives ceil(TOKENS / (BATCH x SEQ)) steps
STEPS      ?= $(if $(TOKENS),$(shell expr \( $(TOKENS) + $(BATCH) \* $(SEQ) - 1 \) / \( $(BATCH) \* $(SEQ) \)),4000)
WARMUP     ?= 0.1
SCHEDULE   ?= cubic
PRUNE_START ?= 0
PRUNE_END  ?= 0.5
PRUNE_UPDATES ?= 50
SALIENCY   ?= second
GROUP      ?= global
# The one-shot baselines (METHOD magnitude, wanda, sparsegpt and their "+"): per-layer
# uniform sparsity by default, the protocol of SparseGPT, Wanda and the paper's baselines
# (every prunable tensor loses the fraction SPARSITY); global: one threshold for the model
ONESHOT_GROUP ?= layer
# calibration documents of wanda and sparsegpt: NSAMPLES windows of CALIB_SEQ tokens
CALIB      ?= data/c4/c4-train.00000-of-01024.json.gz
NSAMPLES   ?= 128
CALIB_SEQ  ?= 2048
SEED       ?= 0
SAVE_EVERY ?= 200
THREADS    ?= 0
TRAIN_ARGS ?=
NPROC      ?= 1
# DEVICE=cuda|cpu: the --device of best-train, best-eval and best-mask --method (empty:
# each tool's default, the GPU when one is visible). best-mask's saliency masks (BEST's
# own, global magnitude) are computed on the CPU and take no --device.
DEVICE     ?=
# PATTERN=N:M (2:4, 4:8): a semi-structured mask, N of every M consecutive weights of a row
# kept (best-mask --pattern; docs/best-mask.md), for the one-shot methods and their "+"
# (the retraining keeps the mask, so the model stays N:M), and for METHOD=best (best-train
# --pattern: BEST's ramp, each group protecting its best, the last update exactly N:M;
# NM_RAMP=global|group, docs/best-train.md); its sparsity (M - N) / M replaces SPARSITY.
# Empty: unstructured.
PATTERN    ?=
NM_RAMP    ?= global
ifneq ($(PATTERN),)
ifeq ($(shell echo '$(PATTERN)' | grep -E '^[0-9]+:[0-9]+$$'),)
$(error PATTERN=$(PATTERN): N:M, as 2:4 or 4:8 (empty: unstructured))
endif
ifeq ($(ONESHOT_GROUP),global)
$(error PATTERN=$(PATTERN) with ONESHOT_GROUP=global: an N:M mask is chosen group by group)
endif
override SPARSITY := $(shell echo '$(PATTERN)' | awk -F: '{ printf "%.17g", ($$2 - $$1) / $$2 }')
endif
ifneq ($(filter-out cuda cpu,$(DEVICE)),)
$(error DEVICE=$(DEVICE): cuda or cpu (empty: each tool's default, the GPU when one is visible))
endif

# --- evaluation ---------------------------------------------------------------------------
# Text or JSON-lines files (or token shards) evaluated with best-eval's perplexity protocol
# (docs/best-eval.md), tokenized with the model's tokenizer. Empty: that evaluation is skipped.
EVAL_WIKI  ?= data/wikitext2/wiki.test.joined.txt
EVAL_C4    ?= data/c4/c4-validation.00000-of-00008.json.gz
SEQ_EVAL   ?= 2048
WIKI_TOKENS ?= 0
C4_TOKENS  ?= $(shell expr 256 \* $(SEQ_EVAL))
EVAL_DENSE ?= 1
# More evaluation sets, any number, each NAME=FILE (a text, JSON-lines file or token shard):
# EVAL_MORE="ptb=data/ptb.test.txt lambada=data/lambada.jsonl". Each is reported under its
# NAME, at most MORE_TOKENS tokens of it (0: all).
EVAL_MORE  ?=
MORE_TOKENS ?= 0
# Zero-shot accuracy (best-eval --tasks, lm-evaluation-harness's protocol): the folder of
# the task files (NAME.jsonl or .jsonl.gz, Hugging Face records). Empty: skipped. TASKS:
# comma-separated; default, those of the seven whose file is in TASK_DIR. TASK_LIMIT: the
# first N documents of each (0 = all).
TASK_DIR   ?=
ALL_TASKS  := arc_easy arc_challenge boolq hellaswag openbookqa rte winogrande
comma      := ,
empty      :=
space      := $(empty) $(empty)
TASKS      ?= $(subst $(space),$(comma),$(strip $(foreach t,$(ALL_TASKS),$(if $(wildcard $(TASK_DIR)/$(t).jsonl $(TASK_DIR)/$(t).jsonl.gz),$(t)))))
TASK_LIMIT ?= 0

# --- packing ------------------------------------------------------------------------------
QUANT      ?= none
# auto: pack when bin/best-pack exists (it is the newest tool); 1: always; 0: never
PACK       ?= auto

# -----------------------------------------------------------------------------------------
.DELETE_ON_ERROR:
# stdout of a recipe into its target, all or nothing: `CMD $(SAVE)`; the temporary carries
# the shell's pid, so that two makes on one OUT never write the same one
SAVE = >$@.tmp.$$$$ && mv $@.tmp.$$$$ $@ || { rm -f $@.tmp.$$$$; exit 1; }
.SUFFIXES:
.PHONY: all tokenize train mask eval pack report check help

PIPELINES  := $(dir $(lastword $(MAKEFILE_LIST)))
DATA_FILES := $(wildcard $(DATA))

# NPROC > 1: best-train's ranks are started by mpirun (Open MPI; a hostfile or --host in
# MPIRUN_ARGS for several machines, where OUT must be on a filesystem they share). Each
# rank gets THREADS threads, or with THREADS=0 this machine's cores / NPROC.
MPIRUN      ?= mpirun
MPIRUN_ARGS ?= --bind-to none
ifneq ($(NPROC),1)
ifeq ($(shell command -v $(MPIRUN) 2>/dev/null),)
$(error NPROC=$(NPROC): $(MPIRUN) not found; run 'make deps' (Open MPI), then rebuild best-train)
endif
endif

# METHOD decides where the pruned model comes from:
#   best        progressive BEST during training (best-train --sparsity)
#   magnitude   one-shot magnitude mask (per layer: ONESHOT_GROUP), no training
#   wanda, sparsegpt  one-shot masks from calibration data (best-mask --method NAME
#               --calib OUT/data/calib.bin), no training
#   NAME+       the one-shot mask of NAME, then training under that fixed mask with the
#               same budget as BEST (magnitude+, wanda+, sparsegpt+)
ONESHOT    := $(patsubst %+,%,$(METHOD))
ifeq ($(METHOD),best)
LABEL      := BEST
TRAINED    := 1
TRAIN_FROM := --model $(MODEL) --sparsity $(SPARSITY) --schedule $(SCHEDULE) --prune-start $(PRUNE_START) \
              --prune-end $(PRUNE_END) --prune-updates $(PRUNE_UPDATES) --saliency $(SALIENCY) --group $(GROUP) \
              $(if $(PATTERN),--pattern $(PATTERN) --nm-ramp $(NM_RAMP))
TRAIN_DEPS :=
# (--save-masks: the mask of every prune update; the last is the run's own, drawn below)
TRAIN_MASKS := --save-masks
else ifneq ($(filter magnitude wanda sparsegpt,$(ONESHOT)),)
LABEL      := $(METHOD)$(if $(filter global,$(ONESHOT_GROUP)), global)
TRAINED    := $(if $(filter %+,$(METHOD)),1,0)
# from the one-shot model (SparseGPT's kept weights are updated; the others' are the model's)
TRAIN_FROM := --model $(OUT)/oneshot/model --mask $(OUT)/oneshot/mask.safetensors
TRAIN_DEPS := $(OUT)/oneshot/model/model.safetensors
TRAIN_MASKS :=
else
$(error METHOD=$(METHOD): not one of best, magnitude, magnitude+, wanda, wanda+, sparsegpt, sparsegpt+)
endif
ifeq ($(filter layer global,$(ONESHOT_GROUP)),)
$(error ONESHOT_GROUP=$(ONESHOT_GROUP): not layer or global)
endif
# best-mask's arguments for the one-shot mask (per layer: exactly floor(n S) pruned in
# each tensor; global magnitude: one threshold, --saliency magnitude --group global)
ifeq ($(ONESHOT)$(ONESHOT_GROUP),magnitudeglobal)
ONESHOT_ARGS := --saliency magnitude --group global
CALIB_DEPS :=
else ifeq ($(ONESHOT),magnitude)
ONESHOT_ARGS := --method magnitude $(if $(DEVICE),--device $(DEVICE)) $(if $(PATTERN),--pattern $(PATTERN))
CALIB_DEPS :=
else ifeq ($(ONESHOT_GROUP),global)
$(error ONESHOT_GROUP=global: $(ONESHOT) prunes each tensor on its own (per row or per block); only magnitude has a global form)
else
ONESHOT_ARGS := --method $(ONESHOT) --calib $(OUT)/data/calib.bin --nsamples $(NSAMPLES) --seq $(CALIB_SEQ) \
                --seed $(SEED) $(if $(DEVICE),--device $(DEVICE)) $(if $(PATTERN),--pattern $(PATTERN))
CALIB_DEPS := $(OUT)/data/calib.bin
endif

# EVAL_MORE: NAME=FILE words, each name a plain word used once and not one of ours
more_name = $(word 1,$(subst =, ,$(1)))
more_file = $(patsubst $(call more_name,$(1))=%,%,$(1))
MORE_NAMES := $(foreach e,$(EVAL_MORE),$(call more_name,$(e)))
$(foreach e,$(EVAL_MORE),$(if $(and $(findstring =,$(e)),$(call more_file,$(e)),$(filter-out $(call more_name,$(e)),$(e))),,\
  $(error EVAL_MORE: "$(e)" is not NAME=FILE)))
$(foreach n,$(MORE_NAMES),$(if $(filter wikitext2 c4 zeroshot,$(n)),$(error EVAL_MORE: the name $(n) is taken (EVAL_WIKI, EVAL_C4, TASK_DIR)))\
  $(if $(filter-out 1,$(words $(filter $(n),$(MORE_NAMES)))),$(error EVAL_MORE: the name $(n) is given twice)))

# Inputs are checked before anything runs, so that a missing file is one clear line and
# not a half-done run. A dry run (`make -n`) is let through, so that the commands of a
# run can be read before its files exist; so are `make check` and `make help`.
DRY := $(findstring n,$(firstword -$(MAKEFLAGS)))
ifeq ($(DRY)$(filter check help,$(MAKECMDGOALS)),)
ifneq ($(filter wanda sparsegpt,$(ONESHOT)),)
ifeq ($(wildcard $(CALIB)),)
$(error CALIB=$(CALIB): not found. Pass CALIB=FILE, the calibration documents of $(ONESHOT) (C4 train shard 0: c4-train.00000-of-01024.json.gz))
endif
endif
ifeq ($(wildcard $(MODEL)/config.json),)
$(error MODEL=$(MODEL): no config.json there. Pass MODEL=DIR, a Hugging Face model folder (for example: huggingface-cli download meta-llama/Llama-2-7b-hf --local-dir models/Llama-2-7b-hf))
endif
ifeq ($(DATA_FILES)$(filter 0,$(TRAINED)),)
$(error DATA=$(DATA): no such files. Name the training documents: .parquet, .jsonl.zst, .json.gz, .jsonl or .txt files, or globs of them)
endif
# (the evaluation files only when a goal evaluates)
EVAL_GOAL := $(if $(MAKECMDGOALS),$(filter all eval report,$(MAKECMDGOALS)),all)
ifneq ($(EVAL_WIKI),)
ifneq ($(EVAL_GOAL),)
ifeq ($(wildcard $(EVAL_WIKI)),)
$(error EVAL_WIKI=$(EVAL_WIKI): not found. Pass EVAL_WIKI=FILE (WikiText-2 test rows joined with two newlines), or EVAL_WIKI= to skip it)
endif
endif
endif
ifneq ($(TASK_DIR),)
ifneq ($(EVAL_GOAL),)
ifeq ($(strip $(TASKS)),)
$(error TASK_DIR=$(TASK_DIR): none of the task files there ($(ALL_TASKS:%=%.jsonl)). Pass TASK_DIR=DIR of Hugging Face records (docs/best-eval.md), or TASK_DIR= to skip zero-shot)
endif
endif
endif
ifneq ($(EVAL_C4),)
ifneq ($(EVAL_GOAL),)
ifeq ($(wildcard $(EVAL_C4)),)
$(error EVAL_C4=$(EVAL_C4): not found. Pass EVAL_C4=FILE (C4 validation documents, .json.gz or .jsonl), or EVAL_C4= to skip it)
endif
endif
endif
ifneq ($(EVAL_GOAL),)
$(foreach e,$(EVAL_MORE),$(if $(wildcard $(call more_file,$(e))),,$(error EVAL_MORE: $(call more_name,$(e))=$(call more_file,$(e)): not found)))
endif
endif
LAUNCH     := $(if $(filter-out 1,$(NPROC)),$(MPIRUN) -np $(NPROC) $(MPIRUN_ARGS))

PACK_ON    := $(if $(filter auto,$(PACK)),$(if $(wildcard $(BIN)/best-pack),1,0),$(PACK))
ifeq ($(PACK)$(PACK_ON),auto0)
$(info best.mk: packing skipped: $(BIN)/best-pack is not built)
endif
DEV        := $(if $(DEVICE),--device $(DEVICE))
TH         := --threads $(if $(filter-out 1,$(NPROC)),$(if $(filter 0,$(THREADS)),$(shell n=$$(($$(nproc) / $(NPROC))); echo $$((n > 0 ? n : 1))),$(THREADS)),$(THREADS))

ifeq ($(TRAINED),1)
FINAL      := $(OUT)/train/model
FINAL_DEP  := $(OUT)/train/DONE
else
FINAL      := $(OUT)/oneshot/model
FINAL_DEP  := $(OUT)/oneshot/model/model.safetensors
endif

EVALS      := $(if $(EVAL_WIKI),wikitext2) $(if $(EVAL_C4),c4) $(MORE_NAMES)
EVALS      += $(if $(TASK_DIR),zeroshot)
EVAL_FILES := $(EVALS:%=$(OUT)/eval/%.json) $(if $(filter 1,$(EVAL_DENSE)),$(EVALS:%=$(OUT)/eval/dense-%.json))
PACK_FILES := $(if $(filter 1,$(PACK_ON)),$(OUT)/pack/model.pack $(OUT)/pack/verify.txt)
MASK_FILES := $(if $(filter 0,$(SPARSITY)),,$(OUT)/mask/report.json)

# (No recipe, so that `make -q` answers 0 once everything is made; the report prints its
# tables when it is drawn, and they stay in OUT/report/summary.md.)
all: $(if $(filter 1,$(TRAINED)),train) mask eval pack report

tokenize: $(OUT)/data/train.bin
train: $(FINAL_DEP)
mask: $(MASK_FILES)
eval: $(EVAL_FILES)
pack: $(PACK_FILES)
report: $(OUT)/report/summary.md
help:
	@echo "make -f $(firstword $(MAKEFILE_LIST)) [MODEL=DIR DATA='FILES' SPARSITY=S LR=X STEPS=N|TOKENS=N BATCH=N SEQ=N OUT=DIR ...] [TARGET]"
	@echo "targets: all (default) tokenize train mask eval pack report check help; make -n shows the commands"
	@echo "variables and products: docs/pipelines.md"
check:
	@echo "MODEL=$(MODEL) DATA=$(DATA_FILES) METHOD=$(METHOD) SPARSITY=$(SPARSITY) LR=$(LR)"
	@echo "ONESHOT_GROUP=$(ONESHOT_GROUP) CALIB=$(CALIB) NSAMPLES=$(NSAMPLES) CALIB_SEQ=$(CALIB_SEQ)"
	@echo "STEPS=$(STEPS) BATCH=$(BATCH) SEQ=$(SEQ) NPROC=$(NPROC) OUT=$(OUT)"
	@echo "EVAL_WIKI=$(EVAL_WIKI) EVAL_C4=$(EVAL_C4) SEQ_EVAL=$(SEQ_EVAL) QUANT=$(QUANT) PACK=$(PACK_ON)"
	@echo "TASK_DIR=$(TASK_DIR) TASKS=$(TASKS) TASK_LIMIT=$(TASK_LIMIT)"

# --- tokenize -----------------------------------------------------------------------------
$(OUT)/data/train.bin: $(DATA_FILES)
	@mkdir -p $(@D)
	$(BIN)/best-tokenize --tokenizer $(TOKENIZER) $(TH) --field $(FIELD) --out $@ $(or $(DATA_FILES),$(DATA))

# Calibration tokens of wanda and sparsegpt (best-mask draws NSAMPLES windows from them).
$(OUT)/data/calib.bin: $(wildcard $(CALIB))
	@mkdir -p $(@D)
	$(BIN)/best-tokenize --tokenizer $(TOKENIZER) $(TH) --out $@ $(CALIB)

# --- one-shot mask (magnitude, wanda, sparsegpt and their +) ------------------------------
$(OUT)/oneshot/mask.safetensors: $(CALIB_DEPS)
	@mkdir -p $(@D)
	$(BIN)/best-mask --model $(MODEL) --sparsity $(SPARSITY) $(ONESHOT_ARGS) $(TH) \
	    --report $(@D)/report.json --plot $(@D)/heatmap.svg --out $@

$(OUT)/oneshot/model/model.safetensors: $(CALIB_DEPS)
	@mkdir -p $(OUT)/oneshot
	$(BIN)/best-mask --model $(MODEL) --sparsity $(SPARSITY) $(ONESHOT_ARGS) $(TH) \
	    --report $(OUT)/oneshot/report.json --plot $(OUT)/oneshot/heatmap.svg \
	    --out $(OUT)/oneshot/mask.safetensors --apply --out-model $(OUT)/oneshot/model

# --- train --------------------------------------------------------------------------------
# best-train saves its state every SAVE_EVERY steps; a state left by an interrupted run is
# resumed (with the hyperparameters it was started with: change a setting, change OUT).
# DONE is written after success: the last line of the log.
$(OUT)/train/DONE: $(OUT)/data/train.bin $(TRAIN_DEPS)
	@mkdir -p $(@D)
	if [ -f $(@D)/state/state.safetensors ] || [ -f $(@D)/state/manifest.json ]; then \
	    $(LAUNCH) $(BIN)/best-train --resume $(@D) --save-every $(SAVE_EVERY) $(TRAIN_MASKS) $(TH) $(DEV); \
	else \
	    $(LAUNCH) $(BIN)/best-train $(TRAIN_FROM) --data $< --out $(@D) --steps $(STEPS) --batch $(BATCH) \
	        --micro-batch $(MICRO_BATCH) --seq $(SEQ) --lr $(LR) --warmup $(WARMUP) --seed $(SEED) \
	        --save-every $(SAVE_EVERY) $(TRAIN_MASKS) $(TH) $(DEV) $(TRAIN_ARGS); \
	fi
	tail -n 1 $(@D)/log.jsonl $(SAVE)

# --- where the sparsity went --------------------------------------------------------------
# The run's own mask, reported and drawn by best-mask --mask, titled from the mask's
# metadata: BEST's last prune update (train/masks/step-N.safetensors, in force from that
# update to the end: "BEST, cubic schedule, second-order saliency, global, sparsity 0.9,
# step N"), or the one-shot mask the model was pruned (and for NAME+ trained) under.
ifeq ($(METHOD),best)
$(OUT)/mask/report.json: $(FINAL_DEP)
	@mkdir -p $(@D)
	last=$$(ls -v $(OUT)/train/masks/step-*.safetensors | tail -n 1) && \
	$(BIN)/best-mask --model $(FINAL) --mask $$last $(TH) --quiet --plot $(@D)/heatmap.svg --report $@
else
$(OUT)/mask/report.json: $(FINAL_DEP)
	@mkdir -p $(@D)
	$(BIN)/best-mask --model $(FINAL) --mask $(OUT)/oneshot/mask.safetensors $(TH) --quiet \
	    --plot $(@D)/heatmap.svg --report $@
endif

# --- evaluate -----------------------------------------------------------------------------
# (not --quiet: an evaluation of a 7B model takes a while, and its progress line has an ETA;
# the JSON goes to the target, the progress to the terminal)
EVAL = $(BIN)/best-eval --seq $(SEQ_EVAL) $(TH) $(DEV) --json
ZEROSHOT = $(BIN)/best-eval --tasks $(TASKS) --task-dir $(TASK_DIR) --limit $(TASK_LIMIT) $(TH) $(DEV) --json
$(OUT)/eval/wikitext2.json: $(FINAL_DEP) $(wildcard $(EVAL_WIKI))
	@mkdir -p $(@D)
	$(EVAL) --model $(FINAL) --data $(EVAL_WIKI) --max-tokens $(WIKI_TOKENS) $(SAVE)
$(OUT)/eval/c4.json: $(FINAL_DEP) $(wildcard $(EVAL_C4))
	@mkdir -p $(@D)
	$(EVAL) --model $(FINAL) --data $(EVAL_C4) --max-tokens $(C4_TOKENS) $(SAVE)
$(OUT)/eval/dense-wikitext2.json: $(wildcard $(EVAL_WIKI))
	@mkdir -p $(@D)
	$(EVAL) --model $(MODEL) --data $(EVAL_WIKI) --max-tokens $(WIKI_TOKENS) $(SAVE)
$(OUT)/eval/dense-c4.json: $(wildcard $(EVAL_C4))
	@mkdir -p $(@D)
	$(EVAL) --model $(MODEL) --data $(EVAL_C4) --max-tokens $(C4_TOKENS) $(SAVE)
# each EVAL_MORE set: the run's model and the dense one
define more_eval
$(OUT)/eval/$(1).json: $(FINAL_DEP) $(wildcard $(2))
	@mkdir -p $$(@D)
	$$(EVAL) --model $$(FINAL) --data $(2) --max-tokens $(MORE_TOKENS) $$(SAVE)
$(OUT)/eval/dense-$(1).json: $(wildcard $(2))
	@mkdir -p $$(@D)
	$$(EVAL) --model $$(MODEL) --data $(2) --max-tokens $(MORE_TOKENS) $$(SAVE)
endef
$(foreach e,$(EVAL_MORE),$(eval $(call more_eval,$(call more_name,$(e)),$(call more_file,$(e)))))
$(OUT)/eval/zeroshot.json: $(FINAL_DEP)
	@mkdir -p $(@D)
	$(ZEROSHOT) --model $(FINAL) --log-samples $(@D)/zeroshot-samples.jsonl $(SAVE)
$(OUT)/eval/dense-zeroshot.json:
	@mkdir -p $(@D)
	$(ZEROSHOT) --model $(MODEL) --log-samples $(@D)/dense-zeroshot-samples.jsonl $(SAVE)

# --- pack ---------------------------------------------------------------------------------
$(OUT)/pack/model.pack: $(FINAL_DEP)
	@mkdir -p $(@D)
	$(BIN)/best-pack --model $(FINAL) --out $@ --quant $(QUANT)
$(OUT)/pack/verify.txt: $(OUT)/pack/model.pack
	($(BIN)/best-pack --verify $< && $(BIN)/best-pack --info $<) $(SAVE)

# --- report -------------------------------------------------------------------------------
# The runs' labels as the demo writes them: "BEST 90%" (SPARSITY in percent)
PCT := $(shell awk 'BEGIN { printf "%g", 100 * $(SPARSITY) }')
PPL_ARGS := $(foreach e,$(filter-out zeroshot,$(EVALS)),--ppl '$(LABEL):$(SPARSITY):$(e)=$(OUT)/eval/$(e).json' \
              $(if $(filter 1,$(EVAL_DENSE)),--ppl 'dense:0:$(e)=$(OUT)/eval/dense-$(e).json')) \
            $(if $(TASK_DIR),$(if $(filter 1,$(EVAL_DENSE)),--zeroshot 'dense=$(OUT)/eval/dense-zeroshot.json') \
              --zeroshot '$(LABEL) $(PCT)%=$(OUT)/eval/zeroshot.json')
$(OUT)/report/summary.md: $(EVAL_FILES) $(MASK_FILES) $(PACK_FILES) $(PIPELINES)report.py
	python3 $(PIPELINES)report.py --print --out $(@D) --title '$(NAME): $(LABEL) at $(PCT)% sparsity' \
	    --run '$(RUN)' --model '$(MODEL_NAME)' $(if $(MASK_FILES),--mask-report $(OUT)/mask/report.json) \
	    $(if $(filter 1,$(TRAINED)),--log '$(LABEL) $(PCT)%=$(OUT)/train/log.jsonl') \
	    $(if $(MASK_FILES),--heatmap '$(LABEL) $(PCT)%=$(OUT)/mask/heatmap.svg') \
	    $(PPL_ARGS) \
	    $(if $(PACK_FILES),--pack '$(LABEL) $(PCT)%=$(OUT)/pack/model.pack:$(FINAL)')
