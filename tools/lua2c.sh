#!/bin/sh
# lua2c.sh - turns server/scripts/NAME.lua into `const char lk_lua_NAME[]`.
set -eu
echo '/* generated from the Lua files in server/scripts by tools/lua2c.sh; do not edit */'
for f in "$@"; do
    name=$(basename "$f" .lua)
    printf 'const char lk_lua_%s[] =\n' "$name"
    sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/    "/' -e 's/$/\\n"/' "$f"
    printf '    ;\n'
done
printf 'const int lk_lua_generated = 1;\n'
