# qwen3-4b-wandaplus.mk: the wanda+ baseline on Qwen3-4B-Base:
# one-shot Wanda (C4 calibration, per layer) to SPARSITY, then training under that fixed mask
# with BEST's budget, at the paper's one-shot+ learning rate (pipelines/oneshot-plus.mk).
#   make -f pipelines/qwen3-4b-wandaplus.mk SPARSITY=0.95 [MODEL=models/Qwen3-4B-Base] [LR=X]
KEY      ?= qwen3-4b
MODEL    ?= models/Qwen3-4B-Base
METHOD   ?= wanda+
include $(dir $(lastword $(MAKEFILE_LIST)))oneshot-plus.mk
