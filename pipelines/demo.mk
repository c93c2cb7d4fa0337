# demo.mk: the whole pipeline on the CPU with nothing from outside the repository, in a
# few minutes on 2 cores (`make demo` builds the tools, then runs this file):
#
#   synthetic corpus -> byte-level BPE tokenizer learned from it -> token shards
#   -> pretrain a tiny LLaMA from random init (pipelines/demo-config.json)
#   -> BEST to 90% during continued training | one-shot magnitude to 90%
#   -> perplexity of the three -> pack -> decode speed dense vs packed -> a sample
#   -> report (SVG plots, summary.md) and the final table
#
#   make -f pipelines/demo.mk [OUT=out/demo] [BIN=bin] [THREADS=0] [target]
#
# Each step is a target with a file as its product, so an interrupted demo resumes where
# it stopped and a finished one only prints its table again. Products are written through
# a temporary name and a rename (by the tools, or here), and .DELETE_ON_ERROR removes the
# target of a failed recipe. `make -n -f pipelines/demo.mk` lists the commands.
# The settings are chosen to fit the time budget, not for quality: the corpus is a small
# grammar (pipelines/make_corpus.py), so a model of 230K parameters learns most of it.
# Not here: the generic run on a real model (pipelines/best.mk), the paper's settings.

OUT      ?= out/demo
BIN      ?= bin
THREADS  ?= 0
PIPELINES := $(dir $(lastword $(MAKEFILE_LIST)))
# OpenMP threads that wait by sleeping, not spinning: on a machine shared with other work
# the spinning default made training 2 to 4 times slower here (measured on 2 cores with two
# other jobs running); on an idle machine the difference is small.
OMP_WAIT_POLICY ?= PASSIVE
export OMP_WAIT_POLICY

DOCS          ?= 20000
VALID_DOCS    ?= 500
MERGES        ?= 255
SEQ           ?= 128
BATCH         ?= 16
PRETRAIN_STEPS ?= 300
PRETRAIN_LR   ?= 3e-3
STEPS         ?= 200
LR            ?= 2e-3
SPARSITY      ?= 0.9
PRUNE_UPDATES ?= 20
PROMPT        ?= Once upon a time,
SPEED_NAMES   ?= Tom Lily Ben Mia Sam Anna Max Zoe
PACK          ?= $(if $(wildcard $(BIN)/best-pack),1,0)

D   := $(OUT)
TH  := --threads $(THREADS)
PCT := $(shell python3 -c 'print(round($(SPARSITY) * 100))')

.DELETE_ON_ERROR:
# stdout of a recipe into its target, all or nothing: `CMD $(SAVE)`; the temporary carries
# the shell's pid, so that two makes on one OUT never write the same one
SAVE = >$@.tmp.$$$$ && mv $@.tmp.$$$$ $@ || { rm -f $@.tmp.$$$$; exit 1; }
.SUFFIXES:
.PHONY: all corpus tokenizer pretrain best magnitude eval pack speed sample report

PACK_PRODUCTS := $(if $(filter 1,$(PACK)),$(D)/pack/best.pack $(D)/eval/best-packed.json $(D)/speed/packed.jsonl)

all: report
	@cat $(D)/report/table.md
	$(if $(filter 1,$(PACK)),,@echo "(packing skipped: $(BIN)/best-pack is not built yet)")
	@echo "pictures and summary: $(D)/report/"

corpus: $(D)/corpus/train.jsonl $(D)/corpus/valid.jsonl
tokenizer: $(D)/tokenizer/tokenizer.json
pretrain: $(D)/dense/DONE
best: $(D)/best/DONE $(D)/best/mask-report.json
magnitude: $(D)/magnitude/model/model.safetensors
eval: $(D)/eval/dense.json $(D)/eval/best.json $(D)/eval/magnitude.json
pack: $(PACK_PRODUCTS)
speed: $(D)/speed/dense.jsonl $(D)/speed/best.jsonl $(if $(filter 1,$(PACK)),$(D)/speed/packed.jsonl)
sample: $(D)/sample.json
report: $(D)/report/summary.md

# --- data: a corpus and a tokenizer made here ----------------------------------------------
$(D)/corpus/train.jsonl: $(PIPELINES)make_corpus.py
	@mkdir -p $(@D)
	python3 $(PIPELINES)make_corpus.py $@ $(DOCS) 1234
$(D)/corpus/valid.jsonl: $(PIPELINES)make_corpus.py
	@mkdir -p $(@D)
	python3 $(PIPELINES)make_corpus.py $@ $(VALID_DOCS) 4321
$(D)/tokenizer/tokenizer.json: $(D)/corpus/train.jsonl $(PIPELINES)make_tokenizer.py
	python3 $(PIPELINES)make_tokenizer.py $(@D) $< $(MERGES)
$(D)/config.json: $(PIPELINES)demo-config.json $(D)/tokenizer/tokenizer.json
	python3 $(PIPELINES)make_tokenizer.py --config $< $@ $(D)/tokenizer/tokenizer.json
$(D)/data/%.bin: $(D)/corpus/%.jsonl $(D)/tokenizer/tokenizer.json
	@mkdir -p $(@D)
	$(BIN)/best-tokenize --tokenizer $(D)/tokenizer --quiet $(TH) --out $@ $<

# --- training: pretraining from random init, then BEST ------------------------------------
# A state left by an interrupted run is resumed; DONE (the log's last line) marks success.
# Not --quiet: the two runs take most of the demo's minute, and their progress shows it.
# The random init has no tokenizer of its own: it is copied into the dense model's folder,
# and from there best-train and best-mask carry it into every model made from it.
$(D)/dense/DONE: $(D)/data/train.bin $(D)/config.json
	if [ -f $(@D)/state/state.safetensors ]; then $(BIN)/best-train --resume $(@D) $(TH); else \
	    $(BIN)/best-train --init random --config $(D)/config.json --data $< --out $(@D) --steps $(PRETRAIN_STEPS) \
	        --batch $(BATCH) --seq $(SEQ) --lr $(PRETRAIN_LR) --warmup 0.05 --seed 0 --save-every 100 $(TH); fi
	cp $(D)/tokenizer/tokenizer.json $(@D)/model/tokenizer.json.tmp.$$$$ && mv $(@D)/model/tokenizer.json.tmp.$$$$ $(@D)/model/tokenizer.json
	tail -n 1 $(@D)/log.jsonl $(SAVE)

# --save-masks: the mask of every prune update, in best/masks/step-N.safetensors.
$(D)/best/DONE: $(D)/data/train.bin $(D)/dense/DONE
	if [ -f $(@D)/state/state.safetensors ]; then $(BIN)/best-train --resume $(@D) --save-masks $(TH); else \
	    $(BIN)/best-train --model $(D)/dense/model --data $< --out $(@D) --steps $(STEPS) --batch $(BATCH) \
	        --seq $(SEQ) --lr $(LR) --sparsity $(SPARSITY) --prune-updates $(PRUNE_UPDATES) --seed 1 \
	        --save-every 100 --save-masks $(TH); fi
	tail -n 1 $(@D)/log.jsonl $(SAVE)

# Where BEST put its sparsity: the run's own last mask (the one in force from the last
# update to the end), its report and its heatmap, titled from the mask's metadata
# ("BEST, cubic schedule, second-order saliency, global, sparsity 0.9, step 100").
$(D)/best/mask-report.json: $(D)/best/DONE
	last=$$(ls -v $(@D)/masks/step-*.safetensors | tail -n 1) && \
	$(BIN)/best-mask --model $(D)/best/model --mask $$last --quiet $(TH) --plot $(@D)/heatmap.svg --report $@

# --- the one-shot baseline: global magnitude, no training ------------------------------------
$(D)/magnitude/model/model.safetensors: $(D)/dense/DONE
	@mkdir -p $(D)/magnitude
	$(BIN)/best-mask --model $(D)/dense/model --sparsity $(SPARSITY) --saliency magnitude --quiet $(TH) \
	    --out $(D)/magnitude/mask.safetensors --report $(D)/magnitude/mask-report.json \
	    --plot $(D)/magnitude/heatmap.svg --apply --out-model $(D)/magnitude/model

# --- evaluation: perplexity on held-out stories ---------------------------------------------
EVAL = $(BIN)/best-eval --data $(D)/data/valid.bin --seq $(SEQ) --json --quiet $(TH)
$(D)/eval/dense.json: $(D)/dense/DONE $(D)/data/valid.bin
	@mkdir -p $(@D)
	$(EVAL) --model $(D)/dense/model $(SAVE)
$(D)/eval/best.json: $(D)/best/DONE $(D)/data/valid.bin
	@mkdir -p $(@D)
	$(EVAL) --model $(D)/best/model $(SAVE)
$(D)/eval/magnitude.json: $(D)/magnitude/model/model.safetensors $(D)/data/valid.bin
	@mkdir -p $(@D)
	$(EVAL) --model $(D)/magnitude/model $(SAVE)

# --- packing, and the packed model's perplexity (lossless: equal to the folder's) -----------
$(D)/pack/best.pack: $(D)/best/DONE
	@mkdir -p $(@D)
	$(BIN)/best-pack --model $(D)/best/model --out $@ --quant none
$(D)/eval/best-packed.json: $(D)/pack/best.pack $(D)/data/valid.bin
	@mkdir -p $(@D)
	$(EVAL) --model $< $(SAVE)

# --- decoding speed: one greedy story per name, tokens/s over all of them ------------------
# Greedy, so that BEST's folder and its pack decode the very same tokens: the folder stores
# the zeros densely and decodes at the dense model's speed; the pack skips them.
GEN = $(BIN)/best-eval --max-new-tokens 200 --json --quiet $(TH)
$(D)/speed/dense.jsonl: $(D)/dense/DONE
	@mkdir -p $(@D)
	for n in $(SPEED_NAMES); do $(GEN) --generate "One day, $$n" --model $(D)/dense/model || exit 1; done $(SAVE)
$(D)/speed/best.jsonl: $(D)/best/DONE
	@mkdir -p $(@D)
	for n in $(SPEED_NAMES); do $(GEN) --generate "One day, $$n" --model $(D)/best/model || exit 1; done $(SAVE)
$(D)/speed/packed.jsonl: $(D)/pack/best.pack
	@mkdir -p $(@D)
	for n in $(SPEED_NAMES); do $(GEN) --generate "One day, $$n" --model $< || exit 1; done $(SAVE)

$(D)/sample.json: $(D)/best/DONE
	$(BIN)/best-eval --model $(D)/best/model --generate '$(PROMPT)' --max-new-tokens 120 --json --quiet $(TH) \
	    $(SAVE)

# --- report ---------------------------------------------------------------------------------
$(D)/report/summary.md: $(D)/eval/dense.json $(D)/eval/best.json $(D)/eval/magnitude.json \
        $(D)/best/mask-report.json $(D)/speed/dense.jsonl $(D)/speed/best.jsonl $(D)/sample.json $(PACK_PRODUCTS) $(PIPELINES)report.py
	python3 $(PIPELINES)report.py --out $(@D) --title 'demo: a tiny LLaMA pruned to $(PCT)%' \
	    --log 'pretraining=$(D)/dense/log.jsonl' --log 'BEST $(PCT)%=$(D)/best/log.jsonl' --after 'BEST $(PCT)%=pretraining' \
	    --heatmap 'BEST $(PCT)%=$(D)/best/heatmap.svg' --heatmap 'magnitude $(PCT)%=$(D)/magnitude/heatmap.svg' \
	    --ppl 'dense:0:valid=$(D)/eval/dense.json' --ppl 'BEST:$(SPARSITY):valid=$(D)/eval/best.json' \
	    --ppl 'magnitude:$(SPARSITY):valid=$(D)/eval/magnitude.json' \
	    $(if $(filter 1,$(PACK)),--ppl 'BEST packed:$(SPARSITY):valid=$(D)/eval/best-packed.json' \
	        --pack 'BEST $(PCT)%=$(D)/pack/best.pack:$(D)/best/model') \
	    --speed 'dense (HF folder)=$(D)/speed/dense.jsonl' --speed 'BEST $(PCT)% (HF folder)=$(D)/speed/best.jsonl' \
	    $(if $(filter 1,$(PACK)),--speed 'BEST $(PCT)% packed=$(D)/speed/packed.jsonl') \
	    --sample 'BEST $(PCT)%=$(D)/sample.json'
