# llama2-13b-magplus.mk: the magnitude+ baseline on LLaMA-2-13B:
# one-shot magnitude pruning (per layer) to SPARSITY, then training under that fixed mask
# with BEST's budget, at the paper's one-shot+ learning rate (pipelines/oneshot-plus.mk).
#   make -f pipelines/llama2-13b-magplus.mk SPARSITY=0.95 [MODEL=models/Llama-2-13b-hf] [LR=X]
KEY      ?= llama2-13b
MODEL    ?= models/Llama-2-13b-hf
METHOD   ?= magnitude+
include $(dir $(lastword $(MAKEFILE_LIST)))oneshot-plus.mk
