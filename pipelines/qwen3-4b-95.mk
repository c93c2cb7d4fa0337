# qwen3-4b-95.mk: BEST on Qwen3-4B-Base to 95% sparsity, the paper's setting (lr 5e-4; 4000 steps x 64 x 2048, pipelines/paper.mk).
#   make -f pipelines/qwen3-4b-95.mk [MODEL=models/Qwen3-4B-Base] [DATA='data/slimpajama-6b/train-*.parquet']
NAME     ?= qwen3-4b-95
MODEL    ?= models/Qwen3-4B-Base
SPARSITY ?= 0.95
LR       ?= 5e-4
include $(dir $(lastword $(MAKEFILE_LIST)))paper.mk
