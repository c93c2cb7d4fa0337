# llama2-13b-sparsegptplus.mk: the sparsegpt+ baseline on LLaMA-2-13B:
# one-shot SparseGPT (C4 calibration, per layer) to SPARSITY, then training under that fixed mask
# with BEST's budget, at the paper's one-shot+ learning rate (pipelines/oneshot-plus.mk).
#   make -f pipelines/llama2-13b-sparsegptplus.mk SPARSITY=0.95 [MODEL=models/Llama-2-13b-hf] [LR=X]
KEY      ?= llama2-13b
MODEL    ?= models/Llama-2-13b-hf
METHOD   ?= sparsegpt+
include $(dir $(lastword $(MAKEFILE_LIST)))oneshot-plus.mk
