#!/bin/sh
# t_hf_grad.sh: libbest's training gradients against PyTorch autograd through Hugging
# Face transformers, on LLaMA and Qwen3 models that transformers builds itself
# (from_config, random init, save_pretrained): the loss within 1e-5 and every
# parameter's gradient at cosine >= 0.99999, fp32 on both sides; a control with one
# weight negated must fail (tests/hf_grad_check.py compares; tests/hf_grads.c gives
# libbest's gradients). tests/gpu/run.sh runs the same check with --device cuda.
# torch and transformers come from the venv of tests/hf_env.sh, as for t_hf_load.sh.
. tests/lib.sh
. tests/hf_env.sh
BLAS_TORCH=$HF_PY # (a failed line names torch's BLAS beside ours: tests/lib.sh)
: "${TBIN:=$(pwd)/build/tests}"
if [ "$SAN" = 1 ]; then skip "PyTorch gradients: in the plain pass (the CPU gradients run under ASan in test_model)"; finish; fi
if [ ! -f "$HF_VENV/.complete" ] || ! "$HF_PY" -c 'import torch, transformers' 2>/dev/null; then
    if [ -f "$HF_LOG" ]; then why="make deps could not install it: $(tail -n 1 "$HF_LOG") (log: $HF_LOG)"
    else why="run make deps to install it"; fi
    skip "transformers gradient test: no torch + transformers environment at $HF_VENV; $why"; finish
fi
if [ ! -x "$TBIN/hf_grads" ]; then fail "no $TBIN/hf_grads: run make"; finish; fi
"$HF_PY" tests/hf_grad_check.py --bin "$TBIN/hf_grads" --tmp "$TMP" 2>"$TMP/py.err" || FAILED=1
if [ "$FAILED" = 1 ]; then sed 's/^/# /' "$TMP/py.err" | tail -n 20; fi
finish
