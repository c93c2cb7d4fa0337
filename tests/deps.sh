#!/bin/sh
# deps.sh PKG...: installs the Debian packages among PKG that are missing, then the
# Python oracles the tests compare against: sentencepiece, HF tokenizers, numpy and
# safetensors for python3, and torch + transformers in their own venv (tests/hf_env.sh
# says where and why). Does nothing when everything is present. Run by `make deps`.
missing=""
for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "deps: installing Debian packages:$missing"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null \
        || { echo "deps: apt-get install failed"; exit 1; }
fi
# Oracles for the tests only (the product never imports Python). A failure here is
# not fatal: the tests that need an oracle then say that they skip.
if ! python3 -c 'import sentencepiece, tokenizers, numpy, safetensors, pyarrow' 2>/dev/null; then
    echo "deps: installing Python test oracles (sentencepiece, tokenizers, numpy, safetensors, pyarrow)"
    python3 -m pip install -q sentencepiece tokenizers numpy safetensors pyarrow 2>/dev/null \
        || python3 -m pip install -q --break-system-packages sentencepiece tokenizers numpy safetensors pyarrow \
        || echo "deps: could not install the Python oracles; tests that need them will skip"
fi
# torch + transformers for tests/t_hf_load.sh, at the versions of tests/hf_requirements.txt.
# 2.9 GB of wheels (torch's CUDA libraries included: PyPI has no CPU-only torch), 5.6 GB
# installed; download and install took 70 to 85 s on the 2-core development machine,
# once per machine (the venv stays in ~/.cache/best). --no-cache-dir: pip's cache would
# hold the 2.9 GB again. Made in place under a lock (two checkouts may run `make deps`
# at once) and marked complete only after torch and transformers import, so that an
# interrupted install is redone. A failure is not fatal either: t_hf_load.sh then skips
# and names the log, $HF_LOG.
. tests/hf_env.sh
# (A subshell: a cache folder that cannot be written ends it, not `make deps`.)
[ -f "$HF_VENV/.complete" ] || (
    { mkdir -p "$(dirname "$HF_VENV")" && touch "$HF_VENV.lock"; } 2>/dev/null || exit 1
    exec 9>"$HF_VENV.lock"
    command -v flock >/dev/null && flock 9
    [ -f "$HF_VENV/.complete" ] && exit 0 # made by another checkout while we waited
    echo "deps: installing torch + transformers for tests/t_hf_load.sh into $HF_VENV (about 3 GB to download)"
    start=$(date +%s)
    rm -rf "$HF_VENV"
    if { python3 -m venv "$HF_VENV" &&
         "$HF_PY" -m pip install -q --no-cache-dir --disable-pip-version-check --only-binary=:all: -r "$HF_REQS" &&
         "$HF_PY" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
       } >"$HF_LOG" 2>&1; then
        tail -n 1 "$HF_LOG" >"$HF_VENV/.complete"
        echo "deps: $(cat "$HF_VENV/.complete") installed in $(( $(date +%s) - start ))s"
        rm -f "$HF_LOG"
    else
        echo "deps: could not install torch + transformers (see $HF_LOG): $(tail -n 1 "$HF_LOG")"
        rm -rf "$HF_VENV"
    fi
) || echo "deps: cannot write $HF_VENV; tests/t_hf_load.sh will skip"
exit 0
