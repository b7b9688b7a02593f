#!/usr/bin/env bash
# bench/semaphore_mode.sh - which mode a semaphore load on Redis runs in:
# one lockd (--threads 1, pinned to CPU 1 as bench/ab.sh pins it), a fresh
# redis-server, loadgen's 64 clients on one name with limit 8 for 4 s (CPU
# 0); prints loadgen's RESULT and Redis' commands per pair. The fast mode
# keeps the holders in the set (ZADD 1.00 per pair, FCALL ~0.15); the slow
# one (bench/RESULTS.md, 2026-11-27 23:10) hands one lone holder's slot from
# release to release (SET 2, GET 1, DEL 1, FCALL 1.00 per pair, no ZADD):
# the semaphore runs as a mutex. That came when load met a lockd at its
# start (fixed in a0f0229, bench/RESULTS.md 2026-11-28); this script waits
# 0.5 s before its load, so it seldom showed it. Not a test; run it a few
# times:
#
#   bench/semaphore_mode.sh LOCKD [RUNS]
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LG=$ROOT/build/bench/loadgen
LOCKD=${1:?usage: $0 LOCKD [RUNS]}
RUNS=${2:-3}
[[ -x $LG ]] || { echo "$LG missing: make build/bench/loadgen" >&2; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/lockd-semmode.XXXXXX")
RP="" LP=""
cleanup() {
    [[ -n $LP ]] && { kill "$LP" 2>/dev/null; wait "$LP" 2>/dev/null; }
    [[ -n $RP ]] && { kill "$RP" 2>/dev/null; wait "$RP" 2>/dev/null; }
    rm -rf "$TMP"
}
trap cleanup EXIT
for ((run = 1; run <= RUNS; run++)); do
    rport=$("$LG" --free_port)
    lport=$("$LG" --free_port)
    redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" \
        --daemonize no >/dev/null 2>&1 &
    RP=$!
    for ((i = 0; i < 50; i++)); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done
    taskset -c 1 "$LOCKD" --threads 1 --listen "127.0.0.1:$lport" --redis "redis://127.0.0.1:$rport" \
        --log_level warn --access_log false >/dev/null 2>&1 &
    LP=$!
    sleep 0.5
    out=$(taskset -c 0 "$LG" --mode pairs --port "$lport" --clients 64 --secs 4 --names 1 --limit 8 \
        --name ab-sem --wait_ms 10000 2>&1 | grep RESULT)
    ops=$(sed 's/.* ops=\([0-9]*\).*/\1/' <<<"$out")
    echo "run $run: $(grep -o 'ops_per_s=[0-9]*' <<<"$out")"
    redis-cli -p "$rport" info commandstats | tr -d '\r' |
        awk -F'[:=,]' -v p="$ops" '/^cmdstat_/ && p > 0 { printf "  %s %.2f\n", substr($1, 9), $3 / p }' |
        sort -k2 -nr | head -8
    kill "$LP"; wait "$LP" 2>/dev/null; LP=""
    kill "$RP"; wait "$RP" 2>/dev/null; RP=""
done
