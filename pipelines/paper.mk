# paper.mk: the settings shared by the paper's runs (BEST, Table 1 and the baselines):
# 4000 steps x 64 sequences x 2048 tokens (524M tokens) of SlimPajama, LR warmup over
# the first 10% then linear decay, 50 cubic mask updates over the first half, evaluation
# on WikiText-2 and C4. The thin recipe files (llama2-7b-90.mk, qwen3-8b-99.mk, ...) set
# NAME, MODEL, SPARSITY and LR, then include this file. Every variable can be overridden
# on the command line: `make -f pipelines/llama2-99.mk MODEL=... STEPS=20 BATCH=4 SEQ=128`.
STEPS         ?= 4000
BATCH         ?= 64
SEQ           ?= 2048
WARMUP        ?= 0.1
PRUNE_END     ?= 0.5
PRUNE_UPDATES ?= 50
DATA          ?= data/slimpajama-6b/train-*.parquet
OUT           ?= out/$(NAME)
include $(dir $(lastword $(MAKEFILE_LIST)))best.mk
