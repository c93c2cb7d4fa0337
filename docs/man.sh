#!/bin/sh
# man.sh: the man page (roff, section 1) of one tool, made from its --help and
# pointing to its page of this manual. `make install` runs it for every tool.
#
#   sh docs/man.sh bin/best-train /usr/local/share/doc/best > best-train.1
#
# --help's layout (args.c prints it): "usage: ..." lines, a blank line, paragraphs of
# description, "options:" and one "  --name ARG   text" line per option, then
# "exit status: ...". Each part becomes a section: SYNOPSIS, DESCRIPTION, OPTIONS,
# EXIT STATUS. NAME says what the tool is for (a line per tool below); EXAMPLES are the
# manual's (docs/TOOL.md, "## Examples"); SEE ALSO names the other tools and DOCDIR/TOOL.md.
set -e
[ $# = 2 ] || { echo "usage: sh docs/man.sh TOOL DOCDIR" >&2; exit 2; }
tool=$1 docdir=$2
name=$(basename "$tool")
src=$(dirname "$0")/$name.md # the manual page the EXAMPLES come from
version=$("$tool" --version | awk '{print $2}') # (not the BLAS kernels after it: the machine's)
# NAME's line: what the tool is for, in the words of whatis(1)
case $name in
best-tokenize) what="turn documents into token shards with a model's tokenizer" ;;
best-train) what="continue training a language model while pruning it progressively (BEST)" ;;
best-mask) what="make, report and apply pruning masks; one-shot baselines (magnitude, Wanda, SparseGPT)" ;;
best-eval) what="perplexity, zero-shot accuracy and text generation of a model or a pack" ;;
best-pack) what="write, inspect, verify and unpack packed sparse checkpoints" ;;
*) what="" ;;
esac
"$tool" --help | awk -v name="$name" -v version="$version" -v docdir="$docdir" -v what="$what" '
# roff: a backslash doubled, "-" as \-, a line that starts with . or '"'"' escaped
function esc(s) {
    gsub(/\\/, "\\e", s); gsub(/-/, "\\-", s)
    if (s ~ /^[.'"'"']/) s = "\\&" s
    return s
}
BEGIN {
    up = toupper(name)
    printf ".TH %s 1 \"%s\" \"best %s\" \"User Commands\"\n", up, version, version
    print ".nh"
    part = "usage"
}
/^usage: / { sub(/^usage: +/, ""); syn[++ns] = $0; next }
part == "usage" && /^ +[^ ]/ { sub(/^ +/, ""); syn[++ns] = $0; next }
part == "usage" && /^$/ { part = "desc"; next }
/^options:$/ { part = "opts"; next }
/^exit status: / { sub(/^exit status: +/, ""); exitst = $0; next }
part == "desc" { desc[++nd] = $0; next }
part == "opts" && /^  -/ {
    line = substr($0, 3)
    # the option and its argument, then two or more spaces, then the text
    if (match(line, /  +/)) { opt[++no] = substr(line, 1, RSTART - 1); text[no] = substr(line, RSTART + RLENGTH) }
    else { opt[++no] = line; text[no] = "" }
    next
}
part == "opts" && /^ +[^ ]/ { sub(/^ +/, ""); text[no] = text[no] " " $0; next }
END {
    # the first sentence of the description
    summary = ""
    for (i = 1; i <= nd && desc[i] != ""; i++) summary = summary (i > 1 ? " " : "") desc[i]
    if (match(summary, /\. /)) summary = substr(summary, 1, RSTART)
    if (what != "") summary = what
    print ".SH NAME"
    printf "%s \\- %s\n", esc(name), esc(summary)
    print ".SH SYNOPSIS"
    for (i = 1; i <= ns; i++) { print ".nf"; print esc(syn[i]); print ".fi" }
    print ".SH DESCRIPTION"
    for (i = 1; i <= nd; i++) print (desc[i] == "" ? ".PP" : esc(desc[i]))
    print ".SH OPTIONS"
    for (i = 1; i <= no; i++) { print ".TP"; printf ".B %s\n", esc(opt[i]); print esc(text[i]) }
    print ".SH EXIT STATUS"
    print esc(exitst)
}'
# EXAMPLES: the ```sh blocks of the manual's "## Examples" section, as written (they run
# in tests/t_examples.sh), their comments included
if [ -f "$src" ]; then
    echo ".SH EXAMPLES"
    awk '/^## / { inex = ($0 ~ /^## Examples/) } inex && /^```sh/ { code = 1; print ".PP"; print ".nf"; next }
         code && /^```/ { code = 0; print ".fi"; next }
         code { gsub(/\\/, "\\e"); gsub(/-/, "\\-"); if ($0 ~ /^[.'"'"']/) $0 = "\\&" $0; print }' "$src"
fi
echo ".SH SEE ALSO"
others=""
for t in best-tokenize best-train best-mask best-eval best-pack; do
    [ "$t" = "$name" ] || others="$others${others:+, }.BR $(printf "%s" "$t" | sed "s/-/\\\\-/") (1)"
done
printf '%s\n' "$others" | tr ',' '\n' | sed 's/^ //'
# (a long PREFIX makes a path wider than the page: \: after each / lets groff break it
# there, and a ragged right edge spares it from stretching the line)
echo ".ad l"
doc=$(printf '%s' "$docdir" | sed 's/-/\\-/g; s|/|/\\:|g')
printf '%s/%s.md (options, examples, exit codes), %s/formats.md (the files it reads and writes)\n' \
    "$doc" "$(printf '%s' "$name" | sed 's/-/\\-/g')" "$doc"
