#!/usr/bin/env bash
# bench/lua_cost.sh - what a command costs Redis inside a script, exact:
# redis-server under callgrind (counting only while each EVAL runs), one EVAL
# per row looping N times over a row's commands on one name, printed as
# instructions per iteration with the empty loop's (making the lease
# string) taken off. Not a test; for weighing a data layout for the Lua
# scripts before building it (bench/RESULTS.md).
#
#   bench/lua_cost.sh            (LUA_COST_N=20000 iterations per row)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${LUA_COST_N:-20000}
LG=$ROOT/build/bench/loadgen
[[ -x $LG ]] || { echo "$LG missing: make build/bench/loadgen" >&2; exit 1; }
command -v callgrind_control >/dev/null || { echo "valgrind not installed (make deps)" >&2; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/lockd-luacost.XXXXXX")
port=$("$LG" --free_port)
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$TMP/cg.out" \
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" \
    --daemonize no >/dev/null 2>&1 &
RPID=$!
trap 'kill $RPID 2>/dev/null; wait $RPID 2>/dev/null; rm -rf "$TMP"' EXIT
for ((i = 0; i < 200; i++)); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
VAL="'1800000000000123 1 30000 1 an owner'" # a holder's record: token sb ttl mode owner
base=0
row() { # row NAME LUA: instructions per iteration of LUA (lock, lease set)
    redis-cli -p "$port" flushall >/dev/null
    rm -f "$TMP"/cg.out*
    callgrind_control -z "$RPID" >/dev/null 2>&1
    callgrind_control -i on "$RPID" >/dev/null 2>&1
    redis-cli -p "$port" eval "local lock = 'lockd:{n}' for i = 1, $N do local lease = string.format('%032x', i) $2 end return 1" 0 >/dev/null
    callgrind_control -i off "$RPID" >/dev/null 2>&1
    callgrind_control -d "$RPID" >/dev/null 2>&1
    local ir
    ir=$(cat "$TMP"/cg.out* | awk '/^totals:/ { s += $2 } END { print s + 0 }')
    [[ $1 == empty ]] && base=$((ir / N))
    printf '%-58s %7d\n' "$1" $((ir / N - base))
}
printf '%-58s %7s\n' "per iteration, the empty loop's taken off" "instr"
row empty ""
row "HSET + HGET + HDEL (a holder's record in the hash)" \
    "redis.call('HSET', lock .. ':h', lease, $VAL) redis.call('HGET', lock .. ':h', lease) redis.call('HDEL', lock .. ':h', lease)"
row "SET PX + GETDEL (a key of its own per holder)" \
    "redis.call('SET', lock .. ':l:' .. lease, $VAL, 'PX', '30000') redis.call('GETDEL', lock .. ':l:' .. lease)"
row "ZADD + ZREM (the holder in the sorted set)" \
    "redis.call('ZADD', lock .. ':z', '1800000000000', lease) redis.call('ZREM', lock .. ':z', lease)"
row "ZCOUNT -inf now (the trim's check)" "redis.call('ZCOUNT', lock .. ':z', '-inf', '1700000000000')"
row "ZCARD" "redis.call('ZCARD', lock .. ':z')"
row "INCR (the index's move)" "redis.call('INCR', lock .. ':fence')"
row "GET" "redis.call('GET', lock)"
