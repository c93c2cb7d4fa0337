# oneshot-plus.mk: the paper's one-shot+ baselines (Magnitude+, Wanda+, SparseGPT+): a
# one-shot mask of the pretrained model, per-layer uniform sparsity (best.mk's
# ONESHOT_GROUP), then training under that fixed mask with BEST's budget (paper.mk: 4000
# steps x 64 x 2048, warmup 0.1, linear decay), at the learning rate of the paper's
# appendix table for the one-shot+ baselines (tab:lr_oneshot).
# The thin files (llama2-7b-magplus.mk, qwen3-8b-wandaplus.mk, ...) set KEY, MODEL and
# METHOD, then include this file; SPARSITY (0.7, 0.9, 0.95, 0.99) picks the table's row:
#   make -f pipelines/llama2-7b-magplus.mk SPARSITY=0.95
SPARSITY ?= 0.9
PCT_0.7  := 70
PCT_0.70 := 70
PCT_0.9  := 90
PCT_0.90 := 90
PCT_0.95 := 95
PCT_0.99 := 99
# The learning rates of tab:lr_oneshot that this repository has (docs/pipelines.md).
# A cell that is not here stops the run with one line asking for LR=X, rather than a
# guess: only Magnitude+ on LLaMA-2-7B is recorded so far.
LR_magnitude+_llama2-7b_70 := 1e-4
LR_magnitude+_llama2-7b_90 := 1e-4
LR_magnitude+_llama2-7b_95 := 5e-4
LR_magnitude+_llama2-7b_99 := 5e-4
LR       ?= $(LR_$(METHOD)_$(KEY)_$(PCT_$(SPARSITY)))
ifeq ($(strip $(LR)),)
$(error LR: the paper's $(METHOD) learning rate for $(KEY) at sparsity $(SPARSITY) is not recorded in this repository (docs/pipelines.md, "Learning rates"); pass LR=X)
endif
NAME     ?= $(KEY)-$(patsubst magnitude%,mag%,$(subst +,plus,$(METHOD)))-$(SPARSITY)
include $(dir $(lastword $(MAKEFILE_LIST)))paper.mk
