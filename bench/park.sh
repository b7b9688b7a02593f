#!/usr/bin/env bash
# bench/park.sh - CPU per request of libmicrohttpd answering at once against
# parking the request (suspend, resume on the next loop iteration: lockd's
# Redis path before 62097ac, its waiters since) and against holding it
# without suspending it (lockd's Redis path since 62097ac), as in
# bench/mhd_park.c. The differences are what each way of waiting costs lockd
# per request before any Redis work. Not a test; `make bench` and
# `make bench-floors` run it.
#
# Environment: PARK_SECS=5 per measurement, PARK_ROUNDS=3 (modes alternate,
# median shown), PARK_CLIENTS=64.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SECS=${PARK_SECS:-5}
ROUNDS=${PARK_ROUNDS:-3}
CLIENTS=${PARK_CLIENTS:-64}
[[ $SECS =~ ^[1-9][0-9]*$ && $ROUNDS =~ ^[1-9][0-9]*$ && $CLIENTS =~ ^[1-9][0-9]*$ ]] ||
    { echo "PARK_SECS, PARK_ROUNDS and PARK_CLIENTS must be positive integers" >&2; exit 64; }
LOADGEN=$ROOT/build/bench/loadgen
PARK=$ROOT/build/bench/mhd_park
CLK_TCK=$(getconf CLK_TCK)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/lockd-park.XXXXXX")
PID=""
cleanup() {
    [[ -n $PID ]] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
for b in "$LOADGEN" "$PARK"; do
    [[ -x $b ]] || { echo "$b missing: make build/bench/loadgen build/bench/mhd_park" >&2; exit 1; }
done
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# measure MODE: "req_per_s cpu_us_per_req"
measure() {
    local mode=$1 t0 t1 line reqs rps
    rm -f "$TMP/port"
    "$PARK" --mode "$mode" --port_file "$TMP/port" &
    PID=$!
    for ((i = 0; i < 100; i++)); do [[ -s $TMP/port ]] && break; sleep 0.05; done
    t0=$(ticks "$PID")
    line=$("$LOADGEN" --mode http --method POST --path /locks/x --body '{"ttl_ms":30000}' \
        --port "$(cat "$TMP/port")" --clients "$CLIENTS" --secs "$SECS" 2>/dev/null | grep '^RESULT')
    t1=$(ticks "$PID")
    kill "$PID"; wait "$PID" 2>/dev/null; PID=""
    reqs=$(tr ' ' '\n' <<<"$line" | sed -n 's/^reqs=//p')
    rps=$(tr ' ' '\n' <<<"$line" | sed -n 's/^reqs_per_s=//p')
    awk -v t=$((t1 - t0)) -v n="${reqs:-0}" -v r="${rps:-0}" -v hz="$CLK_TCK" \
        'BEGIN { if (n > 0) printf "%.0f %.2f\n", r, t * 1e6 / hz / n; else print "0 n/a" }'
}

# syscalls MODE: system calls per request from strace -c over 2 s of load
syscalls() {
    local mode=$1 lg
    command -v strace >/dev/null || { echo "-"; return; }
    rm -f "$TMP/port"
    "$PARK" --mode "$mode" --port_file "$TMP/port" &
    PID=$!
    for ((i = 0; i < 100; i++)); do [[ -s $TMP/port ]] && break; sleep 0.05; done
    "$LOADGEN" --mode http --method POST --path /locks/x --body '{"ttl_ms":30000}' \
        --port "$(cat "$TMP/port")" --clients "$CLIENTS" --secs 4 >"$TMP/lg.out" 2>/dev/null &
    lg=$!
    sleep 1
    timeout 2 strace -c -p "$PID" -o "$TMP/strace.txt" >/dev/null 2>&1
    wait "$lg"
    kill "$PID"; wait "$PID" 2>/dev/null; PID=""
    # requests answered while strace watched = sendmsg calls (one per response)
    awk '$NF ~ /^(recvfrom|sendmsg|epoll_ctl|epoll_wait)$/ { c[$NF] = $4 }
        END { n = c["sendmsg"]; if (n > 0) printf "recvfrom %.2f, sendmsg %.2f, epoll_ctl %.2f, epoll_wait %.2f",
            c["recvfrom"] / n, 1, c["epoll_ctl"] / n, c["epoll_wait"] / n; else print "-" }' "$TMP/strace.txt"
}

median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

declare -A CPU RPS
for ((r = 1; r <= ROUNDS; r++)); do
    for m in now park park-peek hold; do
        read -r rps cpu < <(measure "$m")
        CPU[$m]+="$cpu " RPS[$m]+="$rps "
        printf '[park] round %d %-9s %8s req/s %6s µs CPU per request\n' "$r" "$m" "$rps" "$cpu" >&2
    done
done
echo "libmicrohttpd $(dpkg-query -W -f '${Version}' libmicrohttpd12 2>/dev/null), $(nproc) CPUs, $CLIENTS clients, ${SECS} s x $ROUNDS rounds"
echo
echo "| mode | req/s | CPU µs per request | rounds (µs) | system calls per request |"
echo "|---|---:|---:|---|---|"
for m in now park park-peek hold; do
    # shellcheck disable=SC2086
    printf '| %s | %s | %s | %s | %s |\n' "$m" "$(median ${RPS[$m]})" "$(median ${CPU[$m]})" \
        "${CPU[$m]% }" "$(syscalls "$m")"
done
# shellcheck disable=SC2086
awk -v a="$(median ${CPU[now]})" -v b="$(median ${CPU[park]})" -v c="$(median ${CPU[park-peek]})" \
    -v h="$(median ${CPU[hold]})" \
    'BEGIN { printf "\nparking costs %.2f µs per request (%.2f with the peek), %.2f (%.2f) per acquire + release pair\n",
        b - a, c - a, 2 * (b - a), (b - a) + (c - a)
        printf "holding costs %.2f µs per request, %.2f per pair (plus the peek: %.2f per pair)\n",
        h - a, 2 * (h - a), 2 * (h - a) + (c - b) }'
echo "one system call on this machine, alone in a loop: $("$PARK" --syscalls)"
