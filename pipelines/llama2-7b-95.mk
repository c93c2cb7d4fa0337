# llama2-7b-95.mk: BEST on LLaMA-2-7B to 95% sparsity, the paper's setting (lr 5e-4; 4000 steps x 64 x 2048, pipelines/paper.mk).
#   make -f pipelines/llama2-7b-95.mk [MODEL=models/Llama-2-7b-hf] [DATA='data/slimpajama-6b/train-*.parquet']
NAME     ?= llama2-7b-95
MODEL    ?= models/Llama-2-7b-hf
SPARSITY ?= 0.95
LR       ?= 5e-4
include $(dir $(lastword $(MAKEFILE_LIST)))paper.mk
