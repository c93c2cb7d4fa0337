# llama2-13b-99.mk: BEST on LLaMA-2-13B to 99% sparsity, the paper's setting (lr 1e-4; 4000 steps x 64 x 2048, pipelines/paper.mk).
#   make -f pipelines/llama2-13b-99.mk [MODEL=models/Llama-2-13b-hf] [DATA='data/slimpajama-6b/train-*.parquet']
NAME     ?= llama2-13b-99
MODEL    ?= models/Llama-2-13b-hf
SPARSITY ?= 0.99
LR       ?= 1e-4
include $(dir $(lastword $(MAKEFILE_LIST)))paper.mk
