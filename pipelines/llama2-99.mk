# llama2-99.mk: the issue's name for llama2-7b-99.mk (BEST, LLaMA-2-7B, 99%, lr 5e-4,
# 4000 steps x 64 x 2048). CI runs it on stories260K as a smoke test (tests/t_pipeline.sh).
NAME ?= llama2-99
include $(dir $(lastword $(MAKEFILE_LIST)))llama2-7b-99.mk
