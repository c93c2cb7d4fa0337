# qwen3-8b-70.mk: BEST on Qwen3-8B-Base to 70% sparsity, the paper's setting (lr 1e-4; 4000 steps x 64 x 2048, pipelines/paper.mk).
#   make -f pipelines/qwen3-8b-70.mk [MODEL=models/Qwen3-8B-Base] [DATA='data/slimpajama-6b/train-*.parquet']
NAME     ?= qwen3-8b-70
MODEL    ?= models/Qwen3-8B-Base
SPARSITY ?= 0.70
LR       ?= 1e-4
include $(dir $(lastword $(MAKEFILE_LIST)))paper.mk
