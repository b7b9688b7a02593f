#!/usr/bin/env bash
# bench/redis_floor.sh - what one lock pair (acquire + release) costs inside
# Redis with the commands fully pipelined: lockd's own scripts next to the
# cheapest lock designs, so "Redis CPU per pair" has a floor to be read
# against. Not a test; `make bench` and `make bench-floors` run it.
#
# Each round of each variant gets a fresh redis-server (pinned to the last CPU
# when there are two or more) fed by `redis-cli --pipe` (pinned to CPU 0):
# N acquires of fresh names, then N releases of those names with the lease
# that holds them, so every call takes its success path. Redis CPU is read
# from /proc/PID/stat (utime + stime) around the two pipes. Each round checks
# that all N acquires held a lock and that the releases freed every one, so a
# variant that does not work cannot pass as a cheap one.
#
# Then, unless FLOOR_IR=0, one more run of FLOOR_IR_N=10000 pairs per variant
# under callgrind: Redis's instructions per pair, exact where CPU time drifts
# by ±15 % between runs, so two builds of the scripts compare in one run.
#
# "lockd" is lockd's scripts one call per operation, as lockd sends an
# operation alone; "lockd-group" is acquire_many.lua and release_many.lua in
# calls of 16 operations, as lockd groups those one loop turn makes under load.
#
# Environment: FLOOR_N=200000 pairs per round, FLOOR_ROUNDS=3 (median shown),
# FLOOR_ONLY="ping noop setnx min-fenced lockd lockd-group" (subset),
# FLOOR_SCRIPTS=DIR (the scripts to measure as "lockd" and "lockd-group";
# default server/scripts). FLOOR_N and FLOOR_IR_N must be multiples of 16.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${FLOOR_N:-200000}
ROUNDS=${FLOOR_ROUNDS:-3}
ONLY=${FLOOR_ONLY:-ping noop setnx min-fenced lockd lockd-group}
GROUP=16 # RN_GROUP_MAX in server/redis_node.h
IR=${FLOOR_IR:-1}
IR_N=${FLOOR_IR_N:-10000}
[[ $N =~ ^[1-9][0-9]*$ && $ROUNDS =~ ^[1-9][0-9]*$ && $IR_N =~ ^[1-9][0-9]*$ ]] &&
    ((N % 16 == 0 && IR_N % 16 == 0)) ||
    { echo "FLOOR_N, FLOOR_ROUNDS and FLOOR_IR_N must be positive integers, FLOOR_N and FLOOR_IR_N multiples of 16" >&2; exit 64; }
if [[ $IR == 1 ]] && ! command -v callgrind_control >/dev/null; then
    echo "valgrind not installed: no instruction counts (make deps)" >&2
    IR=0
fi
SCRIPTS=${FLOOR_SCRIPTS:-$ROOT/server/scripts}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/lockd-floor.XXXXXX")
CLK_TCK=$(getconf CLK_TCK)
# shellcheck source=bench/redis_args.sh
source "$ROOT/bench/redis_args.sh" # ACQ_CMD, REL_CMD, resp_stream
NCPU=$(nproc)
PIN_REDIS=() PIN_CLI=()
if ((NCPU >= 2)) && command -v taskset >/dev/null; then
    PIN_REDIS=(taskset -c $((NCPU - 1)))
    PIN_CLI=(taskset -c 0)
fi
RPID=""
cleanup() {
    if [[ -n $RPID ]]; then kill "$RPID" 2>/dev/null || true; wait "$RPID" 2>/dev/null || true; fi
    rm -rf "$TMP"
}
trap cleanup EXIT

log() { printf '[floor %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
sha() { printf '%s' "$1" | sha1sum | cut -d' ' -f1; }

# The least a lock with a fencing token can do: is it free, INCR the counter,
# store the lease with its ttl; release is a compare-and-delete.
MIN_ACQ='if redis.call("EXISTS", KEYS[1]) == 1 then return 0 end
local t = redis.call("INCR", KEYS[2])
redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
return t'
CAD_REL='if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end
return 0'
NOOP='return 1'

lua() { sh "$ROOT/tools/lua2c.sh" --expand "$SCRIPTS/$1.lua"; }
acq_src() {
    case $1 in
    lockd-group) lua acquire_many ;;
    lockd) sh "$ROOT/tools/lua2c.sh" --expand "$SCRIPTS/acquire.lua" ;; min-fenced) printf '%s' "$MIN_ACQ" ;; noop) printf '%s' "$NOOP" ;;
    esac
}
rel_src() {
    case $1 in
    lockd-group) lua release_many ;;
    lockd) sh "$ROOT/tools/lua2c.sh" --expand "$SCRIPTS/release.lua" ;; min-fenced | setnx) printf '%s' "$CAD_REL" ;; noop) printf '%s' "$NOOP" ;;
    esac
}

# gen VARIANT: $TMP/VARIANT.acq and .rel, RESP of N acquires / N releases of
# lockd:{bench-<i>}; lockd's own calls are run.sh's (bench/redis_args.sh)
gen() {
    local v=$1 as rs
    as=$(sha "$(acq_src "$v")")
    rs=$(sha "$(rel_src "$v")")
    if [[ $v == lockd ]]; then
        resp_stream "$N" "$as" "${ACQ_CMD[@]}" >"$TMP/$v.acq"
        resp_stream "$N" "$rs" "${REL_CMD[@]}" >"$TMP/$v.rel"
        return
    fi
    if [[ $v == lockd-group ]]; then # backend_redis.c's group_send() layout
        awk -v n="$N" -v g="$GROUP" -v as="$as" -v rs="$rs" -v lease="$BENCH_LEASE" \
            -v now="$BENCH_NOW_US" -v pre="$BENCH_PREFIX" -v out="$TMP/$v" '
        function bulk(s) { return sprintf("$%d\r\n%s\r\n", length(s), s) }
        BEGIN {
            for (i = 0; i < n; i += g) {
                ak = ""; aa = ""; rk = ""; ra = ""
                for (j = i; j < i + g; j++) {
                    k = sprintf("%s{bench-%012d}", pre, j)
                    ak = ak bulk(k)
                    aa = aa bulk("0" lease) bulk("0 30000 ") bulk("30000")
                    rk = rk bulk(k)
                    ra = ra bulk(lease)
                }
                printf "*%d\r\n%s%s%s%s%s", 4 + 4 * g, bulk("EVALSHA"), bulk(as), bulk(g), ak, bulk(now) aa > (out ".acq")
                printf "*%d\r\n%s%s%s%s%s", 5 + 2 * g, bulk("EVALSHA"), bulk(rs), bulk(g), rk, bulk("bench") bulk(length(pre)) ra > (out ".rel")
            }
        }'
        return
    fi
    awk -v v="$v" -v as="$as" -v rs="$rs" -v n="$N" -v out="$TMP/$v" '
    function bulk(s) { return sprintf("$%d\r\n%s\r\n", length(s), s) }
    BEGIN {
        lease = "0123456789abcdef0123456789abcdef"
        for (i = 0; i < n; i++) {
            k = sprintf("lockd:{bench-%d}", i)
            if (v == "min-fenced")
                a = "*7\r\n" bulk("EVALSHA") bulk(as) bulk("2") bulk(k) bulk(k ":fence") bulk(lease) bulk("30000")
            else if (v == "setnx")
                a = "*6\r\n" bulk("SET") bulk(k) bulk(lease) bulk("NX") bulk("PX") bulk("30000")
            else if (v == "noop")
                a = "*3\r\n" bulk("EVALSHA") bulk(as) bulk("0")
            else
                a = "*1\r\n" bulk("PING")
            if (v == "min-fenced" || v == "setnx")
                r = "*5\r\n" bulk("EVALSHA") bulk(rs) bulk("1") bulk(k) bulk(lease)
            else if (v == "noop")
                r = "*3\r\n" bulk("EVALSHA") bulk(rs) bulk("0")
            else
                r = "*1\r\n" bulk("PING")
            printf "%s", a > (out ".acq")
            printf "%s", r > (out ".rel")
        }
    }'
}

start_redis() { # start_redis [WRAPPER...]: redis-server, under WRAPPER if given
    local wrap=("$@")
    ((${#wrap[@]})) || wrap=("${PIN_REDIS[@]}")
    PORT=$("$ROOT/build/bench/loadgen" --free_port)
    "${wrap[@]}" redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$TMP" --logfile "$TMP/redis.log" --daemonize no </dev/null >/dev/null 2>&1 &
    RPID=$!
    local i
    for ((i = 0; i < 400; i++)); do
        redis-cli -p "$PORT" ping >/dev/null 2>&1 && return 0
        sleep 0.05
    done
    echo "redis-server did not start" >&2
    exit 1
}
stop_redis() {
    kill "$RPID" 2>/dev/null || true
    wait "$RPID" 2>/dev/null || true
    RPID=""
}
locks() { # lock keys (fence counters left out)
    redis-cli -p "$PORT" --scan --pattern 'lockd:{bench-*' | grep -vc ':fence$' || true
}

# round VARIANT: prints Redis CPU µs per pair; exits when the variant misbehaves
round() {
    local v=$1 t0 t1 t2 t3 held left
    start_redis
    [[ $v == ping || $v == setnx ]] || redis-cli -p "$PORT" script load "$(acq_src "$v")" >/dev/null
    [[ $v == ping ]] || redis-cli -p "$PORT" script load "$(rel_src "$v")" >/dev/null
    t0=$(cpu_ticks "$RPID")
    "${PIN_CLI[@]}" redis-cli -p "$PORT" --pipe <"$TMP/$v.acq" >"$TMP/pipe.out" 2>&1 || { cat "$TMP/pipe.out" >&2; exit 1; }
    t1=$(cpu_ticks "$RPID")
    held=$(locks)
    t2=$(cpu_ticks "$RPID")
    "${PIN_CLI[@]}" redis-cli -p "$PORT" --pipe <"$TMP/$v.rel" >>"$TMP/pipe.out" 2>&1 || { cat "$TMP/pipe.out" >&2; exit 1; }
    t3=$(cpu_ticks "$RPID")
    left=$(locks)
    # time spent executing the commands the pipes sent (scripts' inner calls
    # are inside EVALSHA's figure), without the socket reads and writes
    local top=evalsha
    [[ $v == ping ]] && top=ping
    [[ $v == setnx ]] && top="evalsha set"
    exec_us=$(redis-cli -p "$PORT" info commandstats | tr -d '\r' | awk -F'[:=,]' -v top=" $top " -v n="$N" '
        /^cmdstat_/ { c = substr($1, 9); if (index(top, " " c " ")) u += $5 }
        END { printf "%.2f", u / n }')
    stop_redis
    if [[ $v != ping && $v != noop ]] && [[ $held != "$N" || $left != 0 ]]; then
        echo "variant $v: $held of $N acquires held a lock, $left left after the releases" >&2
        exit 1
    fi
    awk -v t=$((t1 - t0 + t3 - t2)) -v n="$N" -v hz="$CLK_TCK" -v e="$exec_us" \
        'BEGIN { printf "%.2f %s\n", t * 1e6 / hz / n, e }'
}

# ir_round VARIANT: prints Redis's instructions per pair (callgrind counts
# only while the two pipes run; $TMP/VARIANT.* must hold IR_N pairs)
ir_round() {
    local v=$1 ir
    start_redis valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$TMP/cg.out"
    [[ $v == ping || $v == setnx ]] || redis-cli -p "$PORT" script load "$(acq_src "$v")" >/dev/null
    [[ $v == ping ]] || redis-cli -p "$PORT" script load "$(rel_src "$v")" >/dev/null
    callgrind_control -i on "$RPID" >/dev/null 2>&1
    redis-cli -p "$PORT" --pipe <"$TMP/$v.acq" >"$TMP/pipe.out" 2>&1 || { cat "$TMP/pipe.out" >&2; exit 1; }
    redis-cli -p "$PORT" --pipe <"$TMP/$v.rel" >>"$TMP/pipe.out" 2>&1 || { cat "$TMP/pipe.out" >&2; exit 1; }
    callgrind_control -i off "$RPID" >/dev/null 2>&1
    stop_redis
    ir=$(cat "$TMP"/cg.out* | awk '/^totals:/ { s += $2 } END { print s + 0 }')
    rm -f "$TMP"/cg.out*
    echo $((ir / IR_N))
}

command -v redis-server >/dev/null || { echo "redis-server not installed (make deps)" >&2; exit 1; }
log "N=$N pairs per round, $ROUNDS rounds; redis pinned: ${PIN_REDIS[*]:-no}; redis-cli pinned: ${PIN_CLI[*]:-no}"
echo "redis-server $(redis-server --version | awk '{print $3}' | cut -d= -f2), $NCPU CPUs ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), N=$N"
echo
printf '| variant | Redis CPU µs per pair | of which executing commands | rounds (CPU / executing) | Redis instructions per pair |\n|---|---:|---:|---|---:|\n'
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
for v in $ONLY; do
    gen "$v"
    cpu=() ex=() all=()
    for ((r = 1; r <= ROUNDS; r++)); do
        round "$v" >"$TMP/round.out"
        read -r c e <"$TMP/round.out"
        cpu+=("$c") ex+=("$e") all+=("$c/$e")
    done
    ir=-
    if [[ $IR == 1 ]]; then
        N=$IR_N gen "$v"
        ir=$(N=$IR_N ir_round "$v")
    fi
    printf '| %s | %s | %s | %s | %s |\n' "$v" "$(median "${cpu[@]}")" "$(median "${ex[@]}")" "${all[*]}" "$ir"
done
