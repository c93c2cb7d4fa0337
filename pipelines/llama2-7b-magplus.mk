# llama2-7b-magplus.mk: the magnitude+ baseline on LLaMA-2-7B: one-shot global magnitude
# pruning to SPARSITY, then training under that fixed mask with the paper's budget, at the
# paper's one-shot+retrain learning rates (1e-4 at 70% and 90%, 5e-4 at 95% and 99%).
#   make -f pipelines/llama2-7b-magplus.mk SPARSITY=0.95
SPARSITY ?= 0.9
NAME     ?= llama2-7b-magplus-$(SPARSITY)
MODEL    ?= models/Llama-2-7b-hf
METHOD   ?= magnitude+
LR       ?= $(if $(filter 0.7 0.70 0.9 0.90,$(SPARSITY)),1e-4,5e-4)
include $(dir $(lastword $(MAKEFILE_LIST)))paper.mk
