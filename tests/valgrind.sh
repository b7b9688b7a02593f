#!/usr/bin/env bash
# valgrind.sh - runs integration programs against lockd under valgrind
# memcheck (make test-valgrind). Each lockd writes its own report; the run
# fails on any memcheck error (invalid read/write, uninitialised use, bad free)
# or definite/indirect leak in a lockd that exited by itself (SIGTERM), or
# when an integration program fails. tests/valgrind.supp silences only known
# issues inside libraries. Every integration program that starts lockd runs
# (TH_TIME_SCALE stretches their deadlines); VALGRIND_REDIS_PROGS run again
# with TH_BACKEND=redis, so the Redis backend's code (async hiredis
# connection, replies, scripts) is under memcheck too. VALGRIND_SELF_PROGS
# drive the backend in-process (no lockd): the program itself runs under
# memcheck. About 3 minutes in all on 2 cores.
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
progs=${VALGRIND_PROGS-"api_locks hardening_ops hardening_auth_tls hardening_limits redis_lockd sessions waiting multilock"}
redis_progs=${VALGRIND_REDIS_PROGS-"hardening_ops hardening_auth_tls"}
self_progs=${VALGRIND_SELF_PROGS-"redis_backend"}
out=$repo/build/valgrind
rm -rf "$out" && mkdir -p "$out"
cat >"$out/lockd" <<WRAP
#!/bin/sh
exec valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite,indirect \\
  --errors-for-leak-kinds=definite,indirect --error-exitcode=99 --num-callers=30 \\
  --suppressions=$repo/tests/valgrind.supp --log-file=$out/vg.%p.log \\
  $repo/build/lockd "\$@"
WRAP
chmod +x "$out/lockd"
fail=0; pass=0
for spec in $(for p in $progs; do echo "$p:memory"; done) $(for p in $redis_progs; do echo "$p:redis"; done); do
    p=${spec%:*} b=${spec##*:}
    name=$p; [ "$b" = memory ] || name="$p[$b]"
    start=$SECONDS
    if TH_BACKEND=$b TH_TIME_SCALE=20 LOCKD_BIN=$out/lockd timeout 900 "build/tests/integration/$p" >"$out/$p-$b.log" 2>&1; then
        echo "PASS valgrind/$name ($((SECONDS - start))s)"; pass=$((pass + 1))
    else
        echo "FAIL valgrind/$name ($((SECONDS - start))s)"; tail -20 "$out/$p-$b.log" | sed 's/^/    /'; fail=$((fail + 1))
    fi
done
for p in $self_progs; do
    start=$SECONDS
    if TH_TIME_SCALE=20 timeout 900 valgrind --tool=memcheck --leak-check=full \
        --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect \
        --error-exitcode=99 --num-callers=30 --suppressions="$repo/tests/valgrind.supp" \
        --log-file="$out/vg.self-$p.log" "build/tests/integration/$p" >"$out/$p-self.log" 2>&1; then
        echo "PASS valgrind/$p (in-process) ($((SECONDS - start))s)"; pass=$((pass + 1))
    else
        echo "FAIL valgrind/$p (in-process) ($((SECONDS - start))s)"; tail -20 "$out/$p-self.log" | sed 's/^/    /'; fail=$((fail + 1))
    fi
done
# Every report: no errors; exited ones must say so (ERROR SUMMARY: 0).
bad=0
for f in "$out"/vg.*.log; do
    [ -e "$f" ] || continue
    if grep -qE 'ERROR SUMMARY: [1-9]|Invalid (read|write|free)|uninitialised|Mismatched free' "$f"; then
        echo "valgrind: errors in $f:"; grep -A25 -m3 -E 'Invalid|uninitialised|definitely lost in|indirectly lost in|Mismatched' "$f" | head -80 | sed 's/^/    /'
        bad=$((bad + 1))
    fi
done
n=$(ls "$out"/vg.*.log 2>/dev/null | wc -l)
clean=$(grep -l 'ERROR SUMMARY: 0 errors' "$out"/vg.*.log 2>/dev/null | wc -l)
echo "valgrind: $n lockd runs, $clean checked to exit, $bad with errors"
[ "$n" -gt 0 ] && [ "$clean" -gt 0 ] || { echo "valgrind: no lockd ran to completion under memcheck"; fail=$((fail + 1)); }
[ "$bad" -eq 0 ] || fail=$((fail + 1))
echo "valgrind: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
