# llama2-7b-wandaplus.mk: the wanda+ baseline on LLaMA-2-7B:
# one-shot Wanda (C4 calibration, per layer) to SPARSITY, then training under that fixed mask
# with BEST's budget, at the paper's one-shot+ learning rate (pipelines/oneshot-plus.mk).
#   make -f pipelines/llama2-7b-wandaplus.mk SPARSITY=0.95 [MODEL=models/Llama-2-7b-hf] [LR=X]
KEY      ?= llama2-7b
MODEL    ?= models/Llama-2-7b-hf
METHOD   ?= wanda+
include $(dir $(lastword $(MAKEFILE_LIST)))oneshot-plus.mk
