#!/usr/bin/env bash
# model.sh - keeps model/README.md true: every C function and Lua script its
# mapping table names must still exist in the tree (a function as a
# definition in server/*.c, a script as server/scripts/NAME). Table rows:
#   | Promela step | `c_function()` ... | `script.lua` ... |
set -eu
repo=${REPO:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$repo"
table=$(sed -n '/^<!-- map:begin -->/,/^<!-- map:end -->/p' model/README.md)
[ -n "$table" ] || { echo "FAIL model/README.md has no mapping table"; exit 1; }
pass=0 fail=0
fns=$(printf '%s\n' "$table" | grep -o '`[a-z_][a-z0-9_]*()`' | tr -d '`()' | sort -u)
scripts=$(printf '%s\n' "$table" | grep -o '`[a-z_]*\.lua`' | tr -d '`' | sort -u)
[ -n "$fns" ] && [ -n "$scripts" ] || { echo "FAIL the table names no function or no script"; exit 1; }
for f in $fns; do
    if grep -Eq "^[a-z].*[ *]$f\(" server/*.c; then pass=$((pass + 1)); else
        echo "FAIL model/README.md names $f(), which no server/*.c defines"; fail=$((fail + 1)); fi
done
for s in $scripts; do
    if [ -f "server/scripts/$s" ]; then pass=$((pass + 1)); else
        echo "FAIL model/README.md names $s, which server/scripts/ lacks"; fail=$((fail + 1)); fi
done
# and every Promela step the table names is in the model
for p in $(printf '%s\n' "$table" | grep -o '^| `[a-z_0-9]*`' | tr -d '|` '); do
    if grep -Eq "(inline|proctype) $p\(" model/*.pml; then pass=$((pass + 1)); else
        echo "FAIL model/README.md names Promela $p, which model/*.pml lacks"; fail=$((fail + 1)); fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
