#!/bin/sh
# t_unicode_tables.sh: lib/tok/unicode_tables.c is what lib/tok/gen_unicode_tables.py
# writes: the generator, run again from the pinned HF tokenizers and the linked utf8proc,
# gives the committed file byte for byte. Skips where the generator's sources are not
# the versions the file was made from (it says which); about 15 seconds.
. tests/lib.sh
if [ "$SAN" = 1 ]; then skip "unicode tables: in the plain pass (nothing here is compiled)"; finish; fi
if ! have_py tokenizers; then
    skip "unicode tables: python3 tokenizers not installed (make deps installs it)"; finish
fi
python3 lib/tok/gen_unicode_tables.py "$TMP/unicode_tables.c" 2>"$TMP/err"; rc=$?
if [ "$rc" = 2 ]; then
    skip "unicode tables: $(cat "$TMP/err")"; finish
fi
check "gen_unicode_tables.py runs" [ "$rc" = 0 ]
if cmp -s "$TMP/unicode_tables.c" lib/tok/unicode_tables.c; then
    ok "gen_unicode_tables.py reproduces lib/tok/unicode_tables.c exactly"
else
    fail "gen_unicode_tables.py does not reproduce lib/tok/unicode_tables.c: $(diff "$TMP/unicode_tables.c" lib/tok/unicode_tables.c | head -5 | tr '\n' ' ')"
fi
# the check itself can fail: one table entry changed must be seen
sed 's/{0x30,0x39,UN}/{0x30,0x38,UN}/' lib/tok/unicode_tables.c >"$TMP/planted.c"
check "planted: a changed entry is a difference" sh -c "! cmp -s '$TMP/unicode_tables.c' '$TMP/planted.c'"
finish
