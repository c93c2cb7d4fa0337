# qwen3-8b-99.mk: BEST on Qwen3-8B-Base to 99% sparsity, the paper's setting (lr 1e-3; 4000 steps x 64 x 2048, pipelines/paper.mk).
#   make -f pipelines/qwen3-8b-99.mk [MODEL=models/Qwen3-8B-Base] [DATA='data/slimpajama-6b/train-*.parquet']
NAME     ?= qwen3-8b-99
MODEL    ?= models/Qwen3-8B-Base
SPARSITY ?= 0.99
LR       ?= 1e-3
include $(dir $(lastword $(MAKEFILE_LIST)))paper.mk
