# hf_env.sh: where the Python environment with torch and transformers lives, that
# tests/t_hf_load.sh compares our model folders against. Sourced (from the checkout's
# root) by tests/deps.sh, which makes it, and by tests/t_hf_load.sh, which uses it.
# Sets HF_REQS (the pinned versions), HF_VENV (the venv's folder), HF_PY (its python)
# and HF_LOG (the last install's output, kept when it failed).
#
# A venv, not the system's python: Debian 12's python3 refuses pip installs
# (externally managed) and its own python3-torch is 1.13, too old for a transformers
# that has Qwen3 (>= 4.51 needs torch >= 2.0; the pinned 5.24.0 needs >= 2.6). The venv
# is made from `python3` on PATH (Debian's, or pyenv's where it shadows it); Debian's
# needs python3-venv, which `make deps` installs.
#
# Outside the checkout, in the user's cache folder (~/.cache/best/hf-PYVER-HASH), not in
# a git-ignored folder of it: it is 5.6 GB (torch's CUDA libraries come with PyPI's
# wheel even where no GPU is), which every clone and worktree would otherwise hold
# again, `make clean` or a fresh clone (as CI makes) would throw away and download
# again, and no build product depends on it. HASH is that of hf_requirements.txt and
# PYVER the interpreter's version, so a change of pins or of python makes a new venv
# beside the old one instead of changing one that another checkout may be using;
# `rm -rf ~/.cache/best` frees them all. BEST_HF_VENV=DIR puts it elsewhere.
HF_REQS=tests/hf_requirements.txt
_hf_pyver=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo none)
_hf_hash=$(sha256sum "$HF_REQS" | cut -c1-12)
HF_VENV=${BEST_HF_VENV:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/best/hf-py$_hf_pyver-$_hf_hash}
HF_PY=$HF_VENV/bin/python
HF_LOG=$HF_VENV.log
