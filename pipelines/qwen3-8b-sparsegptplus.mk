# qwen3-8b-sparsegptplus.mk: the sparsegpt+ baseline on Qwen3-8B-Base:
# one-shot SparseGPT (C4 calibration, per layer) to SPARSITY, then training under that fixed mask
# with BEST's budget, at the paper's one-shot+ learning rate (pipelines/oneshot-plus.mk).
#   make -f pipelines/qwen3-8b-sparsegptplus.mk SPARSITY=0.95 [MODEL=models/Qwen3-8B-Base] [LR=X]
KEY      ?= qwen3-8b
MODEL    ?= models/Qwen3-8B-Base
METHOD   ?= sparsegpt+
include $(dir $(lastword $(MAKEFILE_LIST)))oneshot-plus.mk
