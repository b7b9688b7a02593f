#!/bin/sh
# lua2c.sh - turns server/scripts/NAME.lua into `const char lk_lua_NAME[]`.
# A line '--#include PART.lua' stands for that file (same directory); files
# named _*.lua are such parts, not scripts of their own.
#   lua2c.sh FILE...        the C source
#   lua2c.sh --expand FILE  one script as an EVAL script (bench/redis_floor.sh)
#   lua2c.sh --library FILE one script as a Function library's code (the C source's)
#   lua2c.sh --function FILE NAME  the whole library FUNCTION LOAD takes, its
#                           function NAME (bench/run.sh's raw Redis peer)
# --expand and --function fill FENCE_RETENTION_MS (lockd puts its
# fence_retention_ms there when it loads a script) with lockd's default,
# 86400000 (a day), or $LUA2C_FENCE_RETENTION_MS.
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
# The lines of script $1 (or, with $2 = pre / call, those before / after its
# '--#call' line), parts included.
lines() {
    want=${2:-all} at=pre
    while IFS= read -r line; do
        case $line in
        '--#call') at=call; continue ;;
        esac
        if [ "$want" = all ] || [ "$want" = "$at" ]; then
            case $line in
            '--#include '*) cat "$(dirname "$1")/${line#--#include }" ;;
            *) printf '%s\n' "$line" ;;
            esac
        fi
    done <"$1"
}
# An EVAL script (bench/redis_floor.sh): the '--#call' line is a comment.
expand() { lines "$1" | strip; }
# A Function library's code (server/redis_node.c adds its '#!lua name=' line
# and registers lk_call with lk_api): the lines before '--#call' run once, at
# FUNCTION LOAD (helpers made once, not per call); those after it are the
# body of lk_call, run per FCALL, which first resets the per-call state of
# _shared.lua (sh_begin) when the script includes it.
# A library's globals are a table whose __index reaches the real ones, two
# lookups per use (redis.call, string.match, ...: ~1,300 Redis instructions
# per read-mostly pair): the globals the scripts use are locals of the
# library instead, filled by the first call (at FUNCTION LOAD they are not
# there yet: the load's `redis` is the registration API alone).
globals='redis, string, math, table, tonumber, tostring, type, pcall, unpack, ipairs'
library() {
    grep -q '^--#call$' "$1" || { echo "lua2c.sh: $1 has no '--#call' line" >&2; exit 1; }
    if sed -n '/^--#call$/,$p' "$1" | grep -q '^--#include _shared.lua$'; then
        echo "lua2c.sh: $1 includes _shared.lua after '--#call' (its helpers belong to the library)" >&2
        exit 1
    fi
    {
        echo 'local lk_api = redis'
        echo "local function lk_globals() return $globals end"
        echo "local $globals"
        lines "$1" pre
        echo 'local function lk_call(KEYS, ARGV)'
        echo "if not redis then $globals = lk_globals() end"
        grep -q '^--#include _shared.lua$' "$1" && echo 'sh_begin()'
        lines "$1" call
        echo 'end'
    } | strip
}
fill() { sed "s/FENCE_RETENTION_MS/${LUA2C_FENCE_RETENTION_MS:-86400000}/g"; }
if [ "$1" = --expand ]; then
    expand "$2" | fill
    exit 0
fi
# as server/redis_node.c's rn_script_init makes it (its flags aside)
if [ "$1" = --function ]; then
    printf '#!lua name=%s\n' "$3"
    library "$2" | fill
    printf "lk_api.register_function{function_name='%s',callback=lk_call,flags={'allow-cross-slot-keys'}}\n" "$3"
    exit 0
fi
if [ "$1" = --library ]; then
    library "$2"
    exit 0
fi
echo '/* generated from the Lua files in server/scripts by tools/lua2c.sh; do not edit */'
for f in "$@"; do
    name=$(basename "$f" .lua)
    case $name in _*) continue ;; esac
    # the build fails before a script reaches that 16 KB (16,384 bytes): its
    # library's code, plus < 300 bytes of FUNCTION LOAD command, name and
    # registration (redis_node.c's rn_script_init)
    size=$(library "$f" | wc -c)
    if [ "$size" -gt 15700 ]; then
        echo "lua2c.sh: $f is $size bytes as Redis gets it, over 15700 (see above)" >&2
        exit 1
    fi
    printf 'const char lk_lua_%s[] =\n' "$name"
    library "$f" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/    "/' -e 's/$/\\n"/'
    printf '    ;\n'
done
printf 'const int lk_lua_generated = 1;\n'
