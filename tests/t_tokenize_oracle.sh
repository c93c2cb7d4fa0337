#!/bin/sh
# t_tokenize_oracle.sh: best-tokenize ids equal sentencepiece's and HF tokenizers' on
# every document of ../shared's C4 sample and WikiText-2, for the LLaMA-2, Qwen2 and
# GPT-2 tokenizers, and decoding gives the text back. Skips without ../shared or
# without the Python reference libraries (tests/deps.sh installs them).
. tests/lib.sh
if [ "$SAN" = 1 ]; then skip "tokenizer oracles: in the plain pass (t_tokenize_cli runs the tool under ASan)"; finish; fi
if ! have_shared; then skip "tokenizer oracle: $SHARED not found"; finish; fi
if ! have_py sentencepiece || ! have_py tokenizers; then
    skip "tokenizer oracle: python3 sentencepiece/tokenizers not installed (make deps installs them)"; finish
fi
python3 tests/tok_oracle.py "$BIN" "$SHARED" || FAILED=1
finish
