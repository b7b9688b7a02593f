#!/usr/bin/env bash
# bench/redlock_readers.sh - Redlock readers against writers, lockd builds
# side by side: three redis-server nodes on free loopback ports, each lockd
# (--threads 1) in turn in front of them, loadgen pairs on fresh names for
# 4 s each: 100 % shared and exclusive, 1 client (latency: one round trip
# or two) and 32. Prints loadgen's RESULT lines, each with calls_per_pair:
# the FCALLs a node served in that run (INFO commandstats, the nodes'
# mean: acquires, releases, write-backs, grouped or not) per pair. Not a
# test:
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
URLS="" PORTS=()
for _ in 0 1 2; do
    port=$("$LG" --free_port)
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" \
        --daemonize no >/dev/null 2>&1 &
    PIDS+=($!)
    for ((t = 0; t < 100; t++)); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
    URLS+="${URLS:+,}redis://127.0.0.1:$port"
    PORTS+=("$port")
done
fcalls() { # every node's FCALLs so far, summed
    for p in "${PORTS[@]}"; do redis-cli -p "$p" info commandstats; done |
        awk -F'[=,]' '/^cmdstat_fcall:/ { n += $2 } END { print n + 0 }'
}
run() { # lockd, label, loadgen's args
    local lockd=$1 label=$2 before out ops
    shift 2
    before=$(fcalls)
    out=$("$LG" --mode pairs --port "$lport" --secs 4 "$@" 2>&1 | grep RESULT)
    ops=$(sed -n 's/.* ops=\([0-9]*\) .*/\1/p' <<<"$out")
    echo "$lockd $label: $out calls_per_pair=$(awk -v d=$(($(fcalls) - before)) -v o="${ops:-0}" \
        -v n=${#PORTS[@]} 'BEGIN { printf "%.2f", (o > 0 ? d / n / o : 0) }')"
}
for lockd in "$@"; do
    lport=$("$LG" --free_port)
    "$lockd" --listen "127.0.0.1:$lport" --redis "$URLS" --threads 1 --log_level warn \
        --access_log false >/dev/null 2>&1 &
    LPID=$!
    sleep 0.5
    for c in 1 32; do
        run "$lockd" "clients=$c shared" --clients "$c" --shared_pct 100
        run "$lockd" "clients=$c exclusive" --clients "$c"
    done
    kill "$LPID"; wait "$LPID" 2>/dev/null; LPID=""
done
