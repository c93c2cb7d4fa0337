# llama2-7b-90.mk: BEST on LLaMA-2-7B to 90% sparsity, the paper's setting (lr 1e-4; 4000 steps x 64 x 2048, pipelines/paper.mk).
#   make -f pipelines/llama2-7b-90.mk [MODEL=models/Llama-2-7b-hf] [DATA='data/slimpajama-6b/train-*.parquet']
NAME     ?= llama2-7b-90
MODEL    ?= models/Llama-2-7b-hf
SPARSITY ?= 0.90
LR       ?= 1e-4
include $(dir $(lastword $(MAKEFILE_LIST)))paper.mk
