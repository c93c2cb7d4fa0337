#!/bin/sh
# t_install.sh: `make install PREFIX=...` (and DESTDIR=) into scratch folders. The tools
# land in PREFIX/bin and run from anywhere (a one-shot mask made from another folder);
# every tool has a man page that groff renders without a warning, with every option of
# its --help and a SEE ALSO naming the installed manual; docs/*.md are all installed;
# the installed recipes run the installed tools (make -n). DESTDIR stages the same tree
# under another root, with PREFIX (not the stage) written into what is installed.
. tests/lib.sh
REPO=$(pwd)
MAKE_SAN=""; [ "${SAN:-0}" = 1 ] && MAKE_SAN="SAN=1"
command -v groff >/dev/null || { fail "install: groff is not installed (make deps installs groff-base)"; finish; }
P=$TMP/prefix
if make --no-print-directory -s install $MAKE_SAN PREFIX="$P" >"$TMP/install.out" 2>&1; then ok "make install PREFIX=$P"
else fail "make install PREFIX=$P ($(tail -n 3 "$TMP/install.out"))"; finish; fi

for t in best-tokenize best-train best-mask best-eval best-pack; do
    check "$t: installed and executable, --version as the build's" \
        sh -c "[ -x '$P/bin/$t' ] && [ \"\$('$P/bin/$t' --version)\" = \"\$('$BIN/$t' --version)\" ]"
    page=$P/share/man/man1/$t.1
    if groff -man -Tutf8 -P-cbu -ww "$page" >"$TMP/$t.txt" 2>"$TMP/$t.warn" && [ ! -s "$TMP/$t.warn" ]; then
        ok "$t.1: groff renders it without a warning"
    else fail "$t.1: groff ($(head -c 300 "$TMP/$t.warn"))"; fi
    # every option of --help is an entry of OPTIONS (".B --name ARG"), in the same order
    "$BIN/$t" --help | sed -n 's/^  \(--[a-z0-9-]*\).*/\1/p' >"$TMP/$t.opts"
    sed -n 's/^\.B \(\\-\\-[a-z0-9\\-]*\).*/\1/p' "$page" | sed 's/\\-/-/g' >"$TMP/$t.manopts"
    check "$t.1: the $(wc -l <"$TMP/$t.opts") options of --help, in order" \
        sh -c "[ -s '$TMP/$t.opts' ] && cmp '$TMP/$t.opts' '$TMP/$t.manopts'"
    check "$t.1: NAME, SYNOPSIS, DESCRIPTION, OPTIONS, EXIT STATUS, EXAMPLES, SEE ALSO" sh -c \
        "for s in NAME SYNOPSIS DESCRIPTION OPTIONS 'EXIT STATUS' EXAMPLES 'SEE ALSO'; do grep -q \"^\$s\" '$TMP/$t.txt' || exit 1; done"
    # (issue 36: best-mask's NAME was a formula, "Keeps exactly round((1 - S) * n) ...")
    check "$t.1: NAME says what $t is for in words, SEE ALSO names the other tools and $P/share/doc/best/$t.md" sh -c \
        "grep -A1 '^NAME' '$TMP/$t.txt' | tr -s ' ' | grep -q '$t - [a-z][a-z]*,* [a-z]' && ! grep -A1 '^NAME' '$TMP/$t.txt' | grep -q '[=*]' &&
         for o in best-tokenize best-train best-mask best-eval best-pack; do [ \$o = $t ] || grep -A2 '^SEE ALSO' '$TMP/$t.txt' | grep -q \"\$o(1)\" || exit 1; done &&
         tr -d '\n' <'$TMP/$t.txt' | tr -s ' ' | sed 's|/ |/|g' | grep -q '$P/share/doc/best/$t.md'"
    check "$t.1: EXAMPLES are the manual's (its first command among them)" sh -c \
        "first=\$(awk '/^## Examples/ { e = 1 } e && /^\\\`\\\`\\\`sh/ { c = 1; next } c && /^$t / { print; exit }' docs/$t.md | cut -c1-40);
         [ -n \"\$first\" ] && sed -n '/^EXAMPLES/,/^SEE ALSO/p' '$TMP/$t.txt' | sed 's/^ *//' | grep -qF \"\$first\""
done
check "every page of docs/ installed in share/doc/best" sh -c \
    "for f in docs/*.md; do cmp \"\$f\" '$P/share/doc/best/'\$(basename \"\$f\") || exit 1; done"

# the installed tools from another folder: nothing is looked up next to the repository
mkdir -p "$TMP/elsewhere"
if (cd "$TMP/elsewhere" && "$P/bin/best-mask" --model "$REPO/tests/fixtures/model/llama" --sparsity 0.5 \
        --saliency magnitude --out m.safetensors --quiet && "$REPO/bin/best-mask" --model "$REPO/tests/fixtures/model/llama" \
        --sparsity 0.5 --saliency magnitude --out ref.safetensors --quiet && cmp m.safetensors ref.safetensors); then
    ok "the installed best-mask, run from another folder, writes the build's mask"
else fail "the installed best-mask, run from another folder"; fi

# the installed recipes call the installed tools
env -u BIN make -n -f "$P/share/best/pipelines/llama2-7b-90.mk" OUT="$TMP/run" >"$TMP/recipe.txt" 2>&1
check "installed recipe (make -n llama2-7b-90.mk): runs $P/bin/best-tokenize and best-train" sh -c \
    "grep -q '^$P/bin/best-tokenize ' '$TMP/recipe.txt' && grep -q '$P/bin/best-train ' '$TMP/recipe.txt'"
check "installed recipe: report.py from the installed pipelines folder" grep -q "$P/share/best/pipelines/report.py" "$TMP/recipe.txt"

# DESTDIR: staged under another root, PREFIX written into the files
S=$TMP/stage
make --no-print-directory -s install $MAKE_SAN DESTDIR="$S" PREFIX=/opt/best >"$TMP/stage.out" 2>&1
check "make install DESTDIR=STAGE PREFIX=/opt/best: the tree under STAGE/opt/best, PREFIX in the recipes and man pages" sh -c \
    "[ -x '$S/opt/best/bin/best-train' ] && [ ! -e /opt/best/bin/best-train ] &&
     grep -q '^BIN *?= /opt/best/bin\$' '$S/opt/best/share/best/pipelines/best.mk' &&
     sed 's/[\\\\]://g' '$S/opt/best/share/man/man1/best-train.1' | grep -q '/opt/best/share/doc/best/best\\\\-train.md' &&
     ! grep -rq '$S' '$S/opt/best/share'"
finish
