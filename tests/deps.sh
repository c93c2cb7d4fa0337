#!/bin/sh
# deps.sh PKG...: installs the Debian packages among PKG that are missing, then the
# Python oracles the tests compare against (sentencepiece, HF tokenizers, numpy).
# Does nothing when everything is present. Run by `make deps`.
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
if ! python3 -c 'import sentencepiece, tokenizers, numpy, safetensors' 2>/dev/null; then
    echo "deps: installing Python test oracles (sentencepiece, tokenizers, numpy, safetensors)"
    python3 -m pip install -q sentencepiece tokenizers numpy safetensors 2>/dev/null \
        || python3 -m pip install -q --break-system-packages sentencepiece tokenizers numpy safetensors \
        || echo "deps: could not install the Python oracles; tests that need them will skip"
fi
exit 0
