#!/bin/sh
# lua2c.sh - turns server/scripts/NAME.lua into `const char lk_lua_NAME[]`.
# A line '--#include PART.lua' stands for that file (same directory); files
# named _*.lua are such parts, not scripts of their own.
#   lua2c.sh FILE...        the C source
#   lua2c.sh --expand FILE  one script as Redis gets it (bench/redis_floor.sh)
set -eu
# Whole-line comments are left out: Redis answers a command longer than
# 16 KB from a client that has not authenticated with a protocol error, not
# NOAUTH, and lockd loads its scripts first thing (an acquire script with
# its parts' comments passed 16 KB). Indentation and blank lines too
# (release_handoff.lua, which holds both acquire parts, passed it again).
# And (issue 22: the holders kept in the value took release_handoff.lua
# past it again) every comment that ends a line, and each space next to
# punctuation outside a string, unless dropping it joins '-' '-' (a
# comment), a digit and '.' (a number), '[' and '[' or '=' (a long string),
# or '.' and a digit or '.'.
strip() { grep -v '^[[:space:]]*--' | sed -e 's/^[[:space:]]*//' | grep -v '^$' | awk "$minify" || true; }
minify='function punct(c) { return index("=~<>+-*/%^#(),{}[];:.\"'\''", c) > 0 }
{
    out = ""; q = ""; n = length($0)
    for (i = 1; i <= n; i++) {
        c = substr($0, i, 1)
        if (q != "") {
            out = out c
            if (c == "\\") { i++; out = out substr($0, i, 1) }
            else if (c == q) q = ""
            continue
        }
        if (c == "'\''" || c == "\"") { q = c; out = out c; continue }
        if (c == "-" && substr($0, i + 1, 1) == "-") break
        if (c == " ") {
            p = substr(out, length(out), 1); nx = substr($0, i + 1, 1)
            if (nx == " " || nx == "") continue
            if ((punct(p) || punct(nx)) && !(p == "-" && nx == "-") && !(p ~ /[0-9]/ && nx == ".") && !(p == "[" && (nx == "[" || nx == "=")) && !(p == "." && nx ~ /[0-9.]/))
                continue
        }
        out = out c
    }
    sub(/ +$/, "", out)
    if (out != "") print out
}'
expand() {
    while IFS= read -r line; do
        case $line in
        '--#include '*) cat "$(dirname "$1")/${line#--#include }" ;;
        *) printf '%s\n' "$line" ;;
        esac
    done <"$1" | strip
}
if [ "$1" = --expand ]; then
    expand "$2"
    exit 0
fi
echo '/* generated from the Lua files in server/scripts by tools/lua2c.sh; do not edit */'
for f in "$@"; do
    name=$(basename "$f" .lua)
    case $name in _*) continue ;; esac
    # the build fails before a script reaches that 16 KB (16,384 bytes)
    size=$(expand "$f" | wc -c)
    if [ "$size" -gt 16000 ]; then
        echo "lua2c.sh: $f is $size bytes as Redis gets it, over 16000 (see above)" >&2
        exit 1
    fi
    printf 'const char lk_lua_%s[] =\n' "$name"
    expand "$f" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/    "/' -e 's/$/\\n"/'
    printf '    ;\n'
done
printf 'const int lk_lua_generated = 1;\n'
