#!/bin/sh
# man.sh: the man page (roff, section 1) of one tool, made from its --help and
# pointing to its page of this manual. `make install` runs it for every tool.
#
#   sh docs/man.sh bin/best-train /usr/local/share/doc/best > best-train.1
#
# --help's layout (args.c prints it): "usage: ..." lines, a blank line, paragraphs of
# description, "options:" and one "  --name ARG   text" line per option, then
# "exit status: ...". Each part becomes a section: SYNOPSIS, DESCRIPTION, OPTIONS,
# EXIT STATUS; SEE ALSO names DOCDIR/TOOL.md.
set -e
[ $# = 2 ] || { echo "usage: sh docs/man.sh TOOL DOCDIR" >&2; exit 2; }
tool=$1 docdir=$2
name=$(basename "$tool")
version=$("$tool" --version | awk '{print $2}') # (not the BLAS kernels after it: the machine's)
"$tool" --help | awk -v name="$name" -v version="$version" -v docdir="$docdir" '
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
    print ".SH SEE ALSO"
    printf "%s/%s.md (options, examples, exit codes), %s/formats.md (the files it reads and writes)\n",
           esc(docdir), esc(name), esc(docdir)
}'
