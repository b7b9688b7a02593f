#!/bin/sh
# manpage.sh - cli/lockctl.1 renders with `man -l` without groff warnings,
# has the usual sections, and documents every command and option that
# `lockctl --help` lists.
set -eu
. "$(dirname "$0")/lib/common.sh"

page=$REPO/cli/lockctl.1
out=$T_TMP/lockctl.txt
t_check "man -l renders cli/lockctl.1" \
    sh -c 'LC_ALL=C.UTF-8 MANWIDTH=100 MANPAGER=cat man -l "$0" 2>"$1.err" | col -b >"$1"' "$page" "$out"
t_check "rendering printed no warnings" sh -c '! [ -s "$0.err" ]' "$out"
t_check "groff -ww finds nothing to warn about" \
    sh -c '[ -z "$(groff -man -Tutf8 -ww -z "$0" 2>&1)" ]' "$page"
for section in NAME SYNOPSIS DESCRIPTION OPTIONS "EXIT STATUS" ENVIRONMENT EXAMPLES "SEE ALSO"; do
    t_check "section $section present" grep -q "^$section" "$out"
done
"$LOCKCTL_BIN" --help >"$T_TMP/help.txt"
for word in $(grep -oE -- '--[a-z][a-z-]+' "$T_TMP/help.txt" | sort -u); do
    t_check "option $word documented" grep -qF -- "$word" "$out"
done
for cmd in acquire renew release status list "session create" "session heartbeat" run health elect observe; do
    t_check "command '$cmd' documented" grep -qF -- "lockctl $cmd" "$out"
done
for code in 64 69 75; do
    t_check "exit status $code documented" grep -qE "^ +$code +[[:alpha:]]" "$out"
done
t_done
