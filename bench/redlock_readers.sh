#!/usr/bin/env bash
# bench/redlock_readers.sh - Redlock readers against writers, lockd builds
# side by side: three redis-server nodes on free loopback ports, each lockd
# (--threads 1) in turn in front of them, loadgen pairs on fresh names for
# 4 s each: 100 % shared and exclusive, 1 client (latency: one round trip
# or two) and 32. Prints loadgen's RESULT lines. Not a test:
#
#   bench/redlock_readers.sh OLD_LOCKD NEW_LOCKD...
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LG=$ROOT/build/bench/loadgen
(($# >= 1)) || { echo "usage: $0 LOCKD..." >&2; exit 64; }
[[ -x $LG ]] || { echo "$LG missing: make build/bench/loadgen" >&2; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/lockd-rlr.XXXXXX")
PIDS=() LPID=""
cleanup() {
    [[ -n $LPID ]] && { kill "$LPID" 2>/dev/null; wait "$LPID" 2>/dev/null; }
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT
URLS=""
for _ in 0 1 2; do
    port=$("$LG" --free_port)
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" \
        --daemonize no >/dev/null 2>&1 &
    PIDS+=($!)
    for ((t = 0; t < 100; t++)); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
    URLS+="${URLS:+,}redis://127.0.0.1:$port"
done
for lockd in "$@"; do
    lport=$("$LG" --free_port)
    "$lockd" --listen "127.0.0.1:$lport" --redis "$URLS" --threads 1 --log_level warn \
        --access_log false >/dev/null 2>&1 &
    LPID=$!
    sleep 0.5
    for c in 1 32; do
        echo "$lockd clients=$c shared: $("$LG" --mode pairs --port "$lport" --clients "$c" --secs 4 --shared_pct 100 2>&1 | grep RESULT)"
        echo "$lockd clients=$c exclusive: $("$LG" --mode pairs --port "$lport" --clients "$c" --secs 4 2>&1 | grep RESULT)"
    done
    kill "$LPID"; wait "$LPID" 2>/dev/null; LPID=""
done
