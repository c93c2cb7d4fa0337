# best-elsa.mk: BEST‡, BEST at ELSA's budget (the paper's comparison with ELSA, Lee et al.
# 2025): training documents from C4, 4096 steps x 8 sequences x 2048 tokens (67M tokens;
# ELSA's --admm_steps 4096, batch 2 x 4 accumulation steps, --seqlen 2048, --dataset c4).
# Everything else is a BEST recipe's: RECIPE names one (llama2-7b-90.mk, ...), which gives
# the model, the sparsity and the learning rate; warmup, the 50 cubic updates over the first
# half and the evaluation are paper.mk's.
#   make -f pipelines/best-elsa.mk RECIPE=llama2-7b-90 [DATA='data/c4/c4-train.0000*-of-01024.json.gz']
RECIPE   ?= llama2-7b-90
NAME     ?= $(RECIPE)-elsa
STEPS    ?= 4096
BATCH    ?= 8
SEQ      ?= 2048
DATA     ?= data/c4/c4-train.00000-of-01024.json.gz
ifeq ($(wildcard $(dir $(lastword $(MAKEFILE_LIST)))$(RECIPE).mk),)
$(error RECIPE=$(RECIPE): no pipelines/$(RECIPE).mk. Name a BEST recipe: llama2-7b-90, qwen3-8b-99, ...)
endif
include $(dir $(lastword $(MAKEFILE_LIST)))$(RECIPE).mk
