# shellcheck shell=bash
# The docs' walkthroughs as tests 35, 108 and 165 run them: the blocks of
# a page, taken from the page itself, so it cannot drift from what works.

# sh_blocks FILE FROM TO: the ```sh blocks between the headings FROM and TO
# (their list indent taken off), one after another, each ended by a line
# "#--- block".
sh_blocks() {
  awk -v from="$2" -v to="$3" '
    $0 == from { in_s = 1; next } in_s && $0 == to { exit } !in_s { next }
    !on { t = $0; sub(/^ +/, "", t); if (t == "```sh") { ind = length($0) - length(t); on = 1 }; next }
    { l = $0; if (substr(l, 1, ind) ~ /^ *$/) l = substr(l, ind + 1) }
    l ~ /^```/ { print "#--- block"; on = 0; next } { print l }' "$1"
}

# doc_file FILE MARKER: the fenced block after "<!-- MARKER: FILE -->" in
# the page $DOC (in a list item too: the marker's indent is taken off).
doc_file() {
  awk -v m="<!-- $2: $1 -->" '
    on == 0 { t = $0; sub(/^ +/, "", t); if (t == m) { ind = length($0) - length(t); on = 1 }; next }
    { l = $0; if (substr(l, 1, ind) ~ /^ *$/) l = substr(l, ind + 1) }
    on == 1 && l ~ /^```/ { on = 2; next } on == 2 && l ~ /^```/ { exit } on == 2 { print l }' \
    "$DOC"
}
