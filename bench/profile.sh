#!/usr/bin/env bash
# bench/profile.sh - where lockd's time per request goes: callgrind (exact
# instruction counts; perf has no hardware counters on these VMs) and
# strace -c (system calls per request), on the memory and the Redis backend.
# Not a test; bounded by request count and time. Output in build/bench/profile/.
#
#   PROFILE_PAIRS=20000   acquire+release pairs under callgrind / strace
#   PROFILE_CLIENTS=64
#   BENCH_LOCKD_ARGS="--threads 1 --log_level warn --access_log false"  (as bench/run.sh)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PAIRS=${PROFILE_PAIRS:-20000}
CLIENTS=${PROFILE_CLIENTS:-64}
LOCKD_ARGS=${BENCH_LOCKD_ARGS:---threads 1 --log_level warn --access_log false}
LOADGEN=$ROOT/build/bench/loadgen
LOCKD=${BENCH_LOCKD:-$ROOT/build/lockd}
OUT=$ROOT/build/bench/profile
TMP=$(mktemp -d /tmp/lockd-profile.XXXXXX)
mkdir -p "$OUT"
PIDS=()

log() { printf '[profile %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
stop_pid() {
    local pid=$1 i
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < 400; i++)); do # callgrind needs a while to write its file
        kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; return 0; }
        sleep 0.05
    done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
}
cleanup() {
    local p
    for p in "${PIDS[@]}"; do stop_pid "$p"; done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
wait_for() {
    local deadline=$((SECONDS + $1)); shift
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || return 1
        sleep 0.1
    done
}
http_ok() { curl -s -o /dev/null -m 1 "http://127.0.0.1:$1/healthz"; }

start_redis() {
    RPORT=$("$LOADGEN" --free_port)
    redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" --daemonize no \
        >"$TMP/redis.log" 2>&1 &
    RPID=$!
    PIDS+=("$RPID")
    wait_for 10 redis-cli -p "$RPORT" ping
}

# start_lockd WRAPPER... -- ARGS...: sets LPORT LPID
start_lockd() {
    local wrap=() pf=$TMP/port.$RANDOM
    while [[ $1 != -- ]]; do wrap+=("$1"); shift; done
    shift
    # shellcheck disable=SC2086
    "${wrap[@]}" "$LOCKD" --listen 127.0.0.1:0 --port_file "$pf" $LOCKD_ARGS "$@" >>"$TMP/lockd.log" 2>&1 &
    LPID=$!
    PIDS+=("$LPID")
    wait_for 60 test -s "$pf" && LPORT=$(cat "$pf") && wait_for 60 http_ok "$LPORT"
}

# callgrind NAME ARGS...
profile_callgrind() {
    local name=$1; shift
    local cg=$OUT/callgrind.$name.out
    rm -f "$cg"
    start_lockd valgrind --tool=callgrind --callgrind-out-file="$cg" --instr-atstart=no -- "$@" ||
        { log "$name: lockd under callgrind did not start"; return; }
    # warm up, then collect only while the measured pairs run
    "$LOADGEN" --mode pairs --port "$LPORT" --clients "$CLIENTS" --secs 30 --max 500 >/dev/null
    callgrind_control -i on "$LPID" >/dev/null 2>&1
    "$LOADGEN" --mode pairs --port "$LPORT" --clients "$CLIENTS" --secs 120 --max "$PAIRS" \
        --label "callgrind_$name" | tee "$OUT/callgrind.$name.result"
    callgrind_control -i off "$LPID" >/dev/null 2>&1
    stop_pid "$LPID"
    local dump=$cg
    [[ -n $dump ]] || { log "$name: no callgrind output"; return; }
    local pairs
    pairs=$(sed -n 's/.* ops=\([0-9]*\).*/\1/p' "$OUT/callgrind.$name.result")
    callgrind_annotate --inclusive=yes --auto=no "$dump" 2>/dev/null | head -90 >"$OUT/callgrind.$name.inclusive.txt"
    callgrind_annotate --inclusive=no --auto=no "$dump" 2>/dev/null | head -70 >"$OUT/callgrind.$name.self.txt"
    callgrind_annotate --tree=caller --threshold=100 --auto=no "$dump" 2>/dev/null >"$OUT/callgrind.$name.callers.txt"
    local total
    total=$(callgrind_annotate --auto=no "$dump" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1; exit}')
    # inclusive instructions per pair of the functions that matter (names as
    # callgrind prints them; ??? entries are libmicrohttpd internals)
    callgrind_annotate --inclusive=yes --auto=no --threshold=100 "$dump" 2>/dev/null |
        awk -v p="${pairs:-0}" 'p > 0 && /^ *[0-9,]+ \(/ {
            v = $1; gsub(",", "", v); f = $0; sub(/^ *[0-9,]+ \([ 0-9.]+%\) +/, "", f); sub(/ \[.*/, "", f)
            if (f ~ /(memset|json_dumps|json_in_parse|grant_json|release_cb|acquire_cb|http_respond_json|MHD_add_response_header|lk_rfc3339|lk_random_hex|router_match|on_request|on_completed|on_reply|redisFormatSdsCommandArgv|redisAsyncCommandArgv|cmd_submit|redisProcessCallbacks|engine_acquire|engine_release|mem_acquire|mem_release|rb_acquire|rb_release|:malloc$|:free$|:calloc$|vsnprintf_internal|MHD_run$)/ && !seen[f]++)
                printf "  %-60s %8.0f Ir per pair\n", f, v / p }' | sed 's|/work/main/||' >"$OUT/callgrind.$name.per_pair.txt"
    echo "callgrind $name: pairs=$pairs total_Ir=$total Ir_per_pair=$(awk -v t="${total:-0}" -v p="${pairs:-0}" 'BEGIN { if (p > 0) printf "%.0f", t / p }')" |
        tee -a "$OUT/summary.txt"
    cat "$OUT/callgrind.$name.per_pair.txt" | tee -a "$OUT/summary.txt"
}

# strace NAME ARGS...: system calls per pair (strace slows lockd down; counts stay exact)
profile_strace() {
    local name=$1; shift
    start_lockd -- "$@" || { log "$name: lockd did not start"; return; }
    "$LOADGEN" --mode pairs --port "$LPORT" --clients "$CLIENTS" --secs 10 --max 500 >/dev/null
    strace -c -f -o "$OUT/strace.$name.txt" -p "$LPID" &
    local sp=$!
    sleep 1
    "$LOADGEN" --mode pairs --port "$LPORT" --clients "$CLIENTS" --secs 60 --max "$PAIRS" \
        --label "strace_$name" | tee "$OUT/strace.$name.result"
    sleep 0.5
    kill -INT "$sp"
    wait "$sp" 2>/dev/null
    stop_pid "$LPID"
    local pairs
    pairs=$(sed -n 's/.* ops=\([0-9]*\).*/\1/p' "$OUT/strace.$name.result")
    awk -v p="${pairs:-0}" 'NR > 2 && $NF != "total" && $4 ~ /^[0-9]+$/ && p > 0 {
        printf "  %-16s %8.2f per pair\n", $NF, $4 / p }' "$OUT/strace.$name.txt" | sort -k2 -rn |
        (echo "strace $name: pairs=$pairs"; cat) | tee -a "$OUT/summary.txt"
    awk -v p="${pairs:-0}" '$NF == "total" && p > 0 {printf "  total %.2f syscalls per pair\n", $4 / p}' \
        "$OUT/strace.$name.txt" | tee -a "$OUT/summary.txt"
}

[[ -x $LOCKD && -x $LOADGEN ]] || { echo "build lockd and build/bench/loadgen first (make bench)" >&2; exit 1; }
# Pin the binaries: others may rebuild build/ while this runs.
cp "$LOCKD" "$TMP/lockd" && LOCKD=$TMP/lockd
cp "$LOADGEN" "$TMP/loadgen" && LOADGEN=$TMP/loadgen
echo "profiled: $("$LOCKD" --version 2>&1 | head -1)" >"$OUT/version.txt"
cp "$OUT/version.txt" "$OUT/summary.txt"
WHAT=${PROFILE_ONLY:-callgrind strace}
[[ $WHAT == *callgrind* ]] && profile_callgrind memory --backend memory
[[ $WHAT == *strace* ]] && profile_strace memory --backend memory
if start_redis; then
    [[ $WHAT == *callgrind* ]] && profile_callgrind redis --redis "redis://127.0.0.1:$RPORT"
    [[ $WHAT == *strace* ]] && profile_strace redis --redis "redis://127.0.0.1:$RPORT"
    stop_pid "$RPID"
fi
log "summary in $OUT/summary.txt, callgrind tables in $OUT/callgrind.*.txt"
cat "$OUT/summary.txt"
