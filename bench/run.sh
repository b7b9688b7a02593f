#!/usr/bin/env bash
# bench/run.sh - lockd next to its peers, in one run on one machine, so that the
# ratios hold although absolute figures drift. `make bench` runs it after
# building build/lockd and build/bench/loadgen. Not a test.
#
# Peers (each started here on a free 127.0.0.1 port in a temp dir, stopped by PID):
#   raw Redis running lockd's own Lua scripts through redis-benchmark (FCALL),
#   nginx `return 200` with a small JSON body (the HTTP ceiling),
#   etcd through its HTTP JSON gateway (lease grant + lock + unlock),
#   Node.js + the npm redlock package behind a tiny HTTP server (bench/node/),
#   lockd on the memory backend and on one Redis.
#
# Environment:
#   BENCH_SECS=10          seconds per measurement
#   BENCH_ROUNDS=3         throughput rounds (nginx, raw Redis, lockd memory, lockd redis, node in turn)
#   BENCH_CLIENTS=64       concurrent keep-alive connections
#   BENCH_CONTENDED=16     clients on one name for the handoff measurement
#   BENCH_LOADGEN_THREADS=1
#   BENCH_NGINX_WORKERS=1  nginx worker processes
#   BENCH_LOCKD_ARGS="--threads $BENCH_NGINX_WORKERS --log_level warn --access_log false"
#                          lockd gets as many HTTP threads as nginx has workers: on
#                          this 2-core machine, where the load generator takes a
#                          core, both serve most with one (nginx 1 worker 96k req/s,
#                          2 workers 78k; lockd memory 1 thread 40k pairs/s, 2: 30k)
#   BENCH_HELD=100000      leases held for the RSS figure
#   BENCH_WAITERS=10000    waiting clients for the RSS figure
#   BENCH_WATCHERS=10000   watchers of one name (memory backend) for the watchers key:
#                          lockd RSS per watcher, CPU over 5 s idle with them parked,
#                          one release -> every watcher answered
#   BENCH_ONLY="nginx redis etcd node memory lockdredis rss watchers shared redlock cluster sentinel fencemem"
#                          subset to run; the last five are issues 22-25's rows (one
#                          pass each, sentinel ROUNDS times; report_issues):
#                          shared: read-mostly and semaphore beside exclusive (fresh
#                          names, and the same waiting loads all exclusive), memory
#                          and Redis (BENCH_IR=0: without Redis instructions per pair,
#                          BENCH_IR_PAIRS=20000 under callgrind); redlock: 3 Redis
#                          against single Redis and Node.js redlock; cluster: 1 and 3
#                          primaries and a reshard (BENCH_RESHARD_SLOTS=500); sentinel:
#                          against single Redis; fencemem: Redis memory after
#                          BENCH_FENCE_NAMES=1000000 unique names (BENCH_FENCE_SECS=180)
#   BENCH_TMP=/tmp         where the temp dir goes (etcd's data dir is in it)
#   BENCH_LOCKD=build/lockd  the lockd binary to measure (copied first: build/ may change meanwhile)
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SECS=${BENCH_SECS:-10}
CLIENTS=${BENCH_CLIENTS:-64}
CONTENDED=${BENCH_CONTENDED:-16}
LG_THREADS=${BENCH_LOADGEN_THREADS:-1}
NGINX_WORKERS=${BENCH_NGINX_WORKERS:-1}
LOCKD_ARGS=${BENCH_LOCKD_ARGS:---threads $NGINX_WORKERS --log_level warn --access_log false}
HELD=${BENCH_HELD:-100000}
WAITERS=${BENCH_WAITERS:-10000}
WATCHERS=${BENCH_WATCHERS:-10000}
ONLY=${BENCH_ONLY:-nginx redis etcd node memory lockdredis rss watchers shared redlock cluster sentinel fencemem}
ROUNDS=${BENCH_ROUNDS:-3}
LOADGEN=$ROOT/build/bench/loadgen
LOCKD=${BENCH_LOCKD:-$ROOT/build/lockd}
SCRIPTS=$ROOT/server/scripts
# shellcheck source=bench/nginx_conf.sh
source "$ROOT/bench/nginx_conf.sh"
TMP=$(mktemp -d "${BENCH_TMP:-/tmp}/lockd-bench.XXXXXX")
RAW=$TMP/results.txt
CLK_TCK=$(getconf CLK_TCK)
declare -A R    # R[label.key]=value from loadgen RESULT lines and our own figures
NOTES=()
PIDS=()

log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
note() { NOTES+=("$*"); log "note: $*"; }
want() { [[ " $ONLY " == *" $1 "* ]]; }

stop_pid() { # stop_pid PID: TERM, up to 5 s, then KILL
    local pid=$1 i
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < 100; i++)); do
        kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; return 0; }
        sleep 0.05
    done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
}
cleanup() {
    local p
    for p in "${PIDS[@]}"; do stop_pid "$p"; done
    [[ -n "${BENCH_KEEP_TMP:-}" ]] || rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

wait_for() { # wait_for TIMEOUT_S CMD...: poll CMD every 50 ms, bounded
    local deadline=$((SECONDS + $1)); shift
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || return 1
        sleep 0.05
    done
}
free_port() { "$LOADGEN" --free_port; }
http_ok() { curl -s -o /dev/null -m 1 "http://127.0.0.1:$1${2:-/}"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
us_per() { # us_per TICKS COUNT
    awk -v t="$1" -v n="$2" -v hz="$CLK_TCK" 'BEGIN { if (n > 0) printf "%.1f", t * 1e6 / hz / n; else print "n/a" }'
}

# run_loadgen LABEL ARGS...: runs loadgen, stores its RESULT fields as R[LABEL.key]
run_loadgen() {
    local label=$1 line kv; shift
    log "loadgen $label: $*"
    line=$("$LOADGEN" --label "$label" --secs "$SECS" --threads "$LG_THREADS" "$@" 2>>"$TMP/loadgen.err" | grep '^RESULT')
    echo "$line" >>"$RAW"
    for kv in $line; do
        [[ $kv == *=* ]] && R[$label.${kv%%=*}]=${kv#*=}
    done
    [[ -n $line ]]
}

start_redis() { # start_redis VAR_PORT VAR_PID (locals are _-prefixed: printf -v targets the caller's)
    local _port _pid
    _port=$(free_port)
    redis-server --port "$_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" \
        --logfile "$TMP/redis-$_port.log" --daemonize no &
    _pid=$!
    PIDS+=("$_pid")
    wait_for 10 redis-cli -p "$_port" ping || { log "redis did not start"; return 1; }
    printf -v "$1" %s "$_port"
    printf -v "$2" %s "$_pid"
}

start_lockd() { # start_lockd VAR_PORT VAR_PID EXTRA_ARGS...
    local _vport=$1 _vpid=$2 _pf _pid; shift 2
    _pf=$TMP/lockd-port.$RANDOM
    # shellcheck disable=SC2086
    "$LOCKD" --listen 127.0.0.1:0 --port_file "$_pf" $LOCKD_ARGS "$@" >>"$TMP/lockd.log" 2>&1 &
    _pid=$!
    PIDS+=("$_pid")
    if ! wait_for 10 test -s "$_pf" || ! wait_for 10 http_ok "$(cat "$_pf")" /healthz; then
        log "lockd did not start: $(tail -3 "$TMP/lockd.log")"
        return 1
    fi
    printf -v "$_vport" %s "$(cat "$_pf")"
    printf -v "$_vpid" %s "$_pid"
}

lockd_serves_locks() { # a real acquire + release on the memory or redis backend
    local port=$1 lease
    lease=$(curl -s -m 2 -D - -o /dev/null -X POST "http://127.0.0.1:$port/locks/bench-probe" \
        -d '{"ttl_ms":1000}' | tr -d '\r' | awk -F': ' 'tolower($1)=="lock-lease" {print $2}')
    [[ -n $lease ]] || return 1
    curl -s -m 2 -o /dev/null -X DELETE -H "Lock-Lease: $lease" "http://127.0.0.1:$port/locks/bench-probe"
}

redis_cmdstats() { # "fcall+evalsha+eval set all" calls from INFO commandstats (commands run by scripts count too)
    redis-cli -p "$1" info commandstats | tr -d '\r' | awk -F'[=,:]' '
        /^cmdstat_/ { all += $3 }
        /^cmdstat_(fcall|eval|evalsha):/ { ev += $3 }
        /^cmdstat_set:/ { st += $3 }
        END { print ev + 0, st + 0, all + 0 }'
}

# ------------------------------------------------------------------ peers

bench_nginx() { # bench_nginx LABEL
    local label=${1:-nginx} port pid conf
    command -v nginx >/dev/null || { note "nginx not installed: skipped"; return; }
    port=$(free_port)
    mkdir -p "$TMP/nginx"
    conf=$TMP/nginx/nginx.conf
    nginx_conf "$TMP/nginx" "$port" "$NGINX_WORKERS" >"$conf"
    nginx -c "$conf" -p "$TMP/nginx" &
    pid=$!
    PIDS+=("$pid")
    wait_for 10 http_ok "$port" || { note "nginx did not start"; return; }
    local w t0=0 t1=0 workers
    workers=$(pgrep -P "$pid")
    for w in $workers; do t0=$((t0 + $(cpu_ticks "$w"))); done
    run_loadgen "$label" --mode http --method POST --path /locks/x --body '{"ttl_ms":30000}' \
        --port "$port" --clients "$CLIENTS"
    for w in $workers; do t1=$((t1 + $(cpu_ticks "$w"))); done
    # CPU of nginx's workers per two requests (one "pair"), to compare with lockd's
    R[$label.cpu_us_per_pair]=$(us_per $((t1 - t0)) $(( ${R[$label.reqs]:-0} / 2 )))
    R[$label.pairs_per_s]=$(awk -v r="${R[$label.reqs_per_s]:-0}" 'BEGIN {printf "%.0f", r / 2}')
    # the same nginx driven like lockd (POST, then DELETE with the Lock-Lease
    # it answered): the HTTP ceiling of a pair's latency at this concurrency
    [[ $label == nginx_r* ]] && run_loadgen "nginxpairs_${label#nginx_}" --mode pairs --port "$port" --clients "$CLIENTS"
    stop_pid "$pid"
}

# The KEYS and ARGV of server/scripts/{acquire,release}.lua, as backend_redis.c
# calls them. Filled in by redis_script_args once the scripts exist.
redis_script_args() {
    local hdr
    [[ -f $SCRIPTS/acquire.lua && -f $SCRIPTS/release.lua ]] || return 1
    hdr=$(head -40 "$SCRIPTS/acquire.lua" "$SCRIPTS/release.lua")
    echo "$hdr" >"$TMP/script-headers.txt"
    return 0
}

# bench_raw_redis: the floor of a Redis-backed lock: the very scripts lockd runs,
# driven by redis-benchmark at the same concurrency. Acquire on fresh random
# names; release on names acquired beforehand with the same lease (hit rate
# measured from DBSIZE), so both scripts take their success path.
bench_raw_redis() { # bench_raw_redis LABEL
    local L=${1:-redis} port pid acq_sha rel_sha n_acq n_rel rate keys before after t0 t1 hits
    command -v redis-benchmark >/dev/null || { note "redis-benchmark not installed: skipped"; return; }
    if ! redis_script_args; then
        note "raw Redis: server/scripts/acquire.lua / release.lua not written yet: skipped"
        return
    fi
    start_redis port pid || return
    # as lockd runs them: Redis Functions, called with FCALL
    acq_sha=$(redis-cli -p "$port" function load "$(sh "$ROOT/tools/lua2c.sh" --function "$SCRIPTS/acquire.lua" lkb_acquire)")
    rel_sha=$(redis-cli -p "$port" function load "$(sh "$ROOT/tools/lua2c.sh" --function "$SCRIPTS/release.lua" lkb_release)")
    export BENCH_CALL=FCALL # bench/redis_args.sh
    # shellcheck source=/dev/null
    source "$ROOT/bench/redis_args.sh"
    # calibrate once for ~SECS seconds each (redis-benchmark counts requests, not time)
    if [[ -z ${RAW_REDIS_RATE:-} ]]; then
        RAW_REDIS_RATE=$(redis-benchmark -p "$port" -c "$CLIENTS" -n 20000 -r 1000000000 --csv \
            "${ACQ_CMD[@]/#SHA/$acq_sha}" 2>/dev/null | awk -F'"' 'NR == 2 {printf "%.0f", $4}')
    fi
    rate=${RAW_REDIS_RATE:-20000}
    n_acq=$(( rate * SECS ))
    log "raw redis acquire: $n_acq requests (calibrated at $rate/s)"
    t0=$(cpu_ticks "$pid")
    R[$L.acq_csv]=$(redis-benchmark -p "$port" -c "$CLIENTS" -n "$n_acq" -r 1000000000 --csv \
        "${ACQ_CMD[@]/#SHA/$acq_sha}" 2>/dev/null | sed -n 2p)
    t1=$(cpu_ticks "$pid")
    R[$L.acq_cpu_us]=$(us_per $((t1 - t0)) "$n_acq")
    # release: KEYSPACE names pre-acquired with lease BENCH_LEASE, then n_rel
    # random releases over them (about 90% hit a held lock)
    redis-cli -p "$port" flushall >/dev/null
    keys=$(( n_acq * 2 / 5 ))
    ((keys > 4000000)) && keys=4000000
    ((keys < 100000)) && keys=100000
    n_rel=$(( keys / 5 ))
    log "raw redis release: preloading $keys held locks"
    redis_preload "$port" "$acq_sha" "$keys" | redis-cli -p "$port" --pipe >/dev/null
    before=$(redis-cli -p "$port" dbsize)
    t0=$(cpu_ticks "$pid")
    R[$L.rel_csv]=$(redis-benchmark -p "$port" -c "$CLIENTS" -n "$n_rel" -r "$keys" --csv \
        "${REL_CMD[@]/#SHA/$rel_sha}" 2>/dev/null | sed -n 2p)
    t1=$(cpu_ticks "$pid")
    after=$(redis-cli -p "$port" dbsize)
    hits=$((before - after))
    R[$L.rel_hit_pct]=$(awk -v h="$hits" -v n="$n_rel" 'BEGIN {printf "%.0f", 100 * h / n}')
    R[$L.rel_cpu_us]=$(us_per $((t1 - t0)) "$n_rel")
    R[$L.acq_rps]=$(echo "${R[$L.acq_csv]}" | awk -F'"' '{printf "%.0f", $4}')
    R[$L.rel_rps]=$(echo "${R[$L.rel_csv]}" | awk -F'"' '{printf "%.0f", $4}')
    R[$L.acq_p50_ms]=$(echo "${R[$L.acq_csv]}" | awk -F'"' '{print $10}')
    R[$L.acq_p99_ms]=$(echo "${R[$L.acq_csv]}" | awk -F'"' '{print $14}')
    R[$L.rel_p50_ms]=$(echo "${R[$L.rel_csv]}" | awk -F'"' '{print $10}')
    R[$L.rel_p99_ms]=$(echo "${R[$L.rel_csv]}" | awk -F'"' '{print $14}')
    R[$L.pairs_per_s]=$(awk -v a="${R[$L.acq_rps]}" -v r="${R[$L.rel_rps]}" \
        'BEGIN { if (a > 0 && r > 0) printf "%.0f", 1 / (1 / a + 1 / r); else print 0 }')
    R[$L.cpu_us_per_pair]=$(awk -v a="${R[$L.acq_cpu_us]}" -v r="${R[$L.rel_cpu_us]}" \
        'BEGIN {printf "%.1f", a + r}')
    echo "RAW_REDIS label=$L acq=${R[$L.acq_csv]} rel=${R[$L.rel_csv]} rel_hit_pct=${R[$L.rel_hit_pct]}" >>"$RAW"
    stop_pid "$pid"
}

bench_etcd() {
    local cport pport pid
    command -v etcd >/dev/null || { note "etcd not installed: skipped"; return; }
    cport=$(free_port)
    pport=$(free_port)
    etcd --name bench --data-dir "$TMP/etcd" \
        --listen-client-urls "http://127.0.0.1:$cport" --advertise-client-urls "http://127.0.0.1:$cport" \
        --listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
        --initial-cluster "bench=http://127.0.0.1:$pport" --log-level error --logger zap \
        >"$TMP/etcd.log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    wait_for 20 curl -sf -m 1 -X POST "http://127.0.0.1:$cport/v3/maintenance/status" -d '{}' ||
        { note "etcd did not start"; return; }
    # a pair = lease grant (the TTL) + lock + unlock, like a lockd acquire with ttl_ms + release
    run_loadgen etcd --mode etcd --port "$cport" --clients "$CLIENTS"
    # one lease per client (like a lockd session): lock + unlock only
    run_loadgen etcd_session --mode etcd --etcd_lease client --port "$cport" --clients "$CLIENTS"
    run_loadgen etcd_contended --mode etcd-contended --etcd_lease client --port "$cport" \
        --clients "$CONTENDED" --name bench-contended
    stop_pid "$pid"
}

# bench_node: the optional peer 4, npm redlock behind node's http module
# node_start: the Node.js + redlock server on a fresh Redis; sets NODE_PORT
# NODE_PID NODE_RPID. Returns 1 (with a note) when node or redlock is missing.
node_start() {
    command -v node >/dev/null || { note "node not installed: Node.js + redlock peer skipped"; return 1; }
    if [[ ! -d $ROOT/bench/node/node_modules/redlock ]]; then
        log "npm install in bench/node"
        (cd "$ROOT/bench/node" && timeout 120 npm install --no-audit --no-fund --silent >/dev/null 2>&1) ||
            { note "npm install of bench/node failed: Node.js + redlock peer skipped"; return 1; }
    fi
    start_redis NODE_RPID_PORT NODE_RPID || return 1
    NODE_PORT=$(free_port)
    PORT=$NODE_PORT REDIS_PORT=$NODE_RPID_PORT node "$ROOT/bench/node/server.js" >"$TMP/node.log" 2>&1 &
    NODE_PID=$!
    PIDS+=("$NODE_PID")
    wait_for 20 http_ok "$NODE_PORT" /healthz || { note "node redlock server did not start"; return 1; }
}

# bench_node_pairs LABEL: uncontended pairs, one of the throughput rounds
bench_node_pairs() {
    node_start || return 0
    run_loadgen "$1" --mode pairs --port "$NODE_PORT" --clients "$CLIENTS"
    stop_pid "$NODE_PID"
    stop_pid "$NODE_RPID"
}

# bench_node: contended handoff and redlock's failed acquires per grant
bench_node() {
    local port s0 s1
    node_start || return 0
    port=$NODE_PORT
    s0=$(curl -s "http://127.0.0.1:$port/stats")
    run_loadgen node_contended --mode contended --port "$port" --clients "$CONTENDED" \
        --name bench-contended --wait_ms 10000
    s1=$(curl -s "http://127.0.0.1:$port/stats")
    R[node.failed_per_grant]=$(printf '%s %s\n' "$s0" "$s1" | tr -c '0-9\n' ' ' |
        awk '{ g = $3 - $1; a = $4 - $2; if (g > 0) printf "%.2f", (a - g) / g; else print "n/a" }')
    stop_pid "$NODE_PID"
    stop_pid "$NODE_RPID"
}

# bench_lockd LABEL BACKEND_ARGS...: pairs, single, contended, CPU per pair
bench_lockd() {
    local label=$1 port pid t0 t1 rt0 rt1 c0 c1 rport=${REDIS_PORT:-} rpid=${REDIS_PID:-}
    shift
    start_lockd port pid "$@" || { note "$label: lockd did not start"; return 1; }
    if ! lockd_serves_locks "$port"; then
        note "$label: lockd does not serve POST/DELETE /locks yet: skipped"
        stop_pid "$pid"
        return 1
    fi
    if [[ -z ${SKIP_PAIRS:-} ]]; then
        t0=$(cpu_ticks "$pid")
        local u0 u1
        u0=$(awk '{print $14}' "/proc/$pid/stat")
        [[ -n $rpid ]] && rt0=$(cpu_ticks "$rpid")
        run_loadgen "$label" --mode pairs --port "$port" --clients "$CLIENTS"
        t1=$(cpu_ticks "$pid")
        u1=$(awk '{print $14}' "/proc/$pid/stat")
        R[$label.cpu_us_per_pair]=$(us_per $((t1 - t0)) "${R[$label.ops]:-0}")
        R[$label.cpu_user_us_per_pair]=$(us_per $((u1 - u0)) "${R[$label.ops]:-0}")
        if [[ -n $rpid ]]; then
            rt1=$(cpu_ticks "$rpid")
            R[$label.redis_cpu_us_per_pair]=$(us_per $((rt1 - rt0)) "${R[$label.ops]:-0}")
        fi
    fi
    [[ -n ${PAIRS_ONLY:-} ]] && { stop_pid "$pid"; return 0; }
    run_loadgen "${label}_single" --mode single --port "$port"
    [[ -n $rport ]] && c0=$(redis_cmdstats "$rport")
    run_loadgen "${label}_contended" --mode contended --port "$port" --clients "$CONTENDED" \
        --name bench-contended --wait_ms 10000
    if [[ -n $rport ]]; then
        c1=$(redis_cmdstats "$rport")
        # each acquire attempt runs one SET, the lock's SET ... NX, and each
        # grant one more, the fence counter's (two more when the counter is
        # ahead of lockd's clock); releases run none (no lock-delay here):
        # attempts <= SET - grants
        read -r R[$label.redis_evals_per_grant] R[$label.redis_acq_attempts_per_grant] \
            R[$label.redis_cmds_per_grant] < <(printf '%s %s\n' "$c0" "$c1" |
            awk -v g="${R[${label}_contended.grants]:-0}" '{ if (g > 0) printf "%.2f %.2f %.2f\n",
                ($4 - $1) / g, ($5 - $2) / g - 1, ($6 - $3) / g; else print "n/a n/a n/a" }')
    fi
    if [[ -n $rport && -n ${SKIP_PAIRS:-} ]]; then
        # handoff across two lockd processes on the same Redis (pub/sub wake-up):
        # even clients on this lockd, odd ones on a second
        local port2 pid2
        if start_lockd port2 pid2 --redis "redis://127.0.0.1:$rport"; then
            run_loadgen "${label}_2lockd" --mode contended --port "$port" --port2 "$port2" \
                --clients "$CONTENDED" --name bench-contended-2 --wait_ms 10000
            stop_pid "$pid2"
        fi
    fi
    stop_pid "$pid"
}

bench_rss() {
    local port pid
    start_lockd port pid || return
    lockd_serves_locks "$port" || { note "rss: lockd does not serve /locks yet: skipped"; stop_pid "$pid"; return; }
    sleep 0.5
    R[rss.idle_kb]=$(rss_kb "$pid")
    # 100,000 held leases, long TTL, then measure; bounded by time and count
    SECS_SAVE=$SECS
    SECS=120 run_loadgen rss_hold --mode hold --port "$port" --clients "$CLIENTS" --max "$HELD" --ttl_ms 600000
    SECS=$SECS_SAVE
    sleep 0.5
    R[rss.held_kb]=$(rss_kb "$pid")
    R[rss.held_n]=${R[rss_hold.ops]:-0}
    # what holding them costs while nobody calls: the janitor's sweep and timers
    local i0 i1
    i0=$(cpu_ticks "$pid")
    sleep 5
    i1=$(cpu_ticks "$pid")
    R[rss.held_idle_cpu]=$(awk -v t=$((i1 - i0)) -v hz="$CLK_TCK" 'BEGIN { printf "%.1f", t * 100 / hz / 5 }')
    # one page of the listing among them (the memory backend walks the whole table)
    R[rss.held_list_ms]=$(curl -s -m 10 -o /dev/null -w '%{time_total}' "http://127.0.0.1:$port/locks?limit=100" |
        awk '{ printf "%.1f", $1 * 1000 }')
    stop_pid "$pid"

    # 10,000 waiting clients on one name (needs the connection limit raised)
    ulimit -n $((WAITERS + 1000)) 2>/dev/null || note "rss: cannot raise the fd limit"
    start_lockd port pid --max_connections $((WAITERS + 100)) || return
    R[rss.idle2_kb]=$(rss_kb "$pid")
    rm -f "$TMP/waiters.ready"
    "$LOADGEN" --label rss_waiters --mode waiters --port "$port" --clients $((WAITERS + 1)) \
        --secs 60 --wait_ms 120000 --ttl_ms 600000 --ready_file "$TMP/waiters.ready" \
        >"$TMP/waiters.out" 2>>"$TMP/loadgen.err" &
    local lg=$!
    PIDS+=("$lg")
    if wait_for 60 test -s "$TMP/waiters.ready"; then
        # every request is sent; wait until lockd has queued them (bounded)
        local w=0 i
        for ((i = 0; i < 100; i++)); do
            w=$(curl -s -m 2 "http://127.0.0.1:$port/locks/bench-contended" |
                sed -n 's/.*"waiters"[: ]*\([0-9]*\).*/\1/p')
            [[ ${w:-0} -ge $WAITERS ]] && break
            sleep 0.1
        done
        R[rss.waiters_n]=${w:-unknown}
        R[rss.waiters_kb]=$(rss_kb "$pid")
    else
        note "rss: waiters did not all connect within 60 s"
    fi
    stop_pid "$lg"
    stop_pid "$pid"
}

# bench_watchers: issue 26's "a watcher is a suspended connection, like a
# waiter; 10,000 watchers cost memory, not CPU", on the memory backend.
# loadgen --mode watchers: one client holds the name and reads its index,
# WATCHERS clients send GET ?index=N&wait_ms=M and stay parked; SIGUSR1 makes
# the holder release, and loadgen times each watcher's answer from the release
# sent (watch_max_us: all of them answered).
bench_watchers() {
    local port pid lg i n fds c0 c1 prev cur
    ulimit -n $((WATCHERS + 1000)) 2>/dev/null || note "watchers: cannot raise the fd limit"
    start_lockd port pid --backend memory --max_connections $((WATCHERS + 100)) || return
    lockd_serves_locks "$port" || { note "watchers: lockd does not serve /locks yet: skipped"; stop_pid "$pid"; return; }
    sleep 0.5
    R[watch.before_kb]=$(rss_kb "$pid")
    # the same 5 s idle without watchers: what the timers cost anyway
    c0=$(cpu_ticks "$pid")
    sleep 5
    c1=$(cpu_ticks "$pid")
    R[watch.base_cpu_ms]=$(awk -v t=$((c1 - c0)) -v hz="$CLK_TCK" 'BEGIN { printf "%.0f", t * 1000 / hz }')
    rm -f "$TMP/watchers.ready"
    "$LOADGEN" --label watchers --mode watchers --port "$port" --clients $((WATCHERS + 1)) \
        --name bench-watched --secs 300 --wait_ms 240000 --ttl_ms 600000 \
        --ready_file "$TMP/watchers.ready" >"$TMP/watchers.out" 2>>"$TMP/loadgen.err" &
    lg=$!
    PIDS+=("$lg")
    if ! wait_for 60 test -s "$TMP/watchers.ready"; then
        note "watchers: the watchers did not all connect within 60 s"
        stop_pid "$lg"; stop_pid "$pid"; return
    fi
    # every request is sent; parked once lockd holds a descriptor for each and
    # its CPU stops moving (no watcher gauge exists; both bounded)
    for ((i = 0; i < 300; i++)); do
        fds=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
        ((fds >= WATCHERS)) && break
        sleep 0.1
    done
    prev=-1
    for ((i = 0; i < 60; i++)); do
        cur=$(cpu_ticks "$pid")
        [[ $cur == "$prev" ]] && break
        prev=$cur
        sleep 0.5
    done
    R[watch.fds]=$fds
    R[watch.with_kb]=$(rss_kb "$pid")
    R[watch.bytes_per]=$(awk -v a="${R[watch.before_kb]}" -v b="${R[watch.with_kb]}" -v n="$WATCHERS" \
        'BEGIN { printf "%.0f", (b - a) * 1024 / n }')
    c0=$(cpu_ticks "$pid")
    sleep 5
    c1=$(cpu_ticks "$pid")
    R[watch.idle_cpu_ms]=$(awk -v t=$((c1 - c0)) -v hz="$CLK_TCK" 'BEGIN { printf "%.0f", t * 1000 / hz }')
    R[watch.idle_cpu_pct]=$(awk -v t=$((c1 - c0)) -v hz="$CLK_TCK" 'BEGIN { printf "%.1f", t * 100 / hz / 5 }')
    # one release: loadgen ends once every watcher has answered (bounded)
    c0=$(cpu_ticks "$pid")
    kill -USR1 "$lg"
    for ((i = 0; i < 600; i++)); do
        kill -0 "$lg" 2>/dev/null || break
        sleep 0.1
    done
    c1=$(cpu_ticks "$pid")
    stop_pid "$lg"
    R[watch.wake_cpu_ms]=$(awk -v t=$((c1 - c0)) -v hz="$CLK_TCK" 'BEGIN { printf "%.0f", t * 1000 / hz }')
    local line kv
    line=$(grep '^RESULT' "$TMP/watchers.out")
    echo "$line" >>"$RAW"
    for kv in $line; do
        [[ $kv == *=* ]] && R[watchers.${kv%%=*}]=${kv#*=}
    done
    n=${R[watchers.watch_n]:-0}
    ((n == WATCHERS)) || note "watchers: $n of $WATCHERS answered after the release (timeouts ${R[watchers.timeouts]:-?}, errors ${R[watchers.errors]:-?}/${R[watchers.conn_errors]:-?})"
    R[watch.all_ms]=$(awk -v u="${R[watchers.watch_max_us]:-}" 'BEGIN { if (u != "") printf "%.1f", u / 1000 }')
    stop_pid "$pid"
}

# ------------------------------------------------------------------ issues 22-25

# measure LABEL LOCKD_PID "REDIS_PIDS" LOADGEN_ARGS...: one loadgen run, with
# lockd's CPU per pair and (when given) the Redis processes' summed; with
# MEASURE_RPORT, that Redis's script calls per pair too
measure() {
    local label=$1 lpid=$2 rpids=$3 t0 t1 r0=0 r1=0 p e0=0 e1=0
    shift 3
    t0=$(cpu_ticks "$lpid")
    for p in $rpids; do r0=$((r0 + $(cpu_ticks "$p"))); done
    [[ -z ${MEASURE_RPORT:-} ]] || e0=$(redis_cmdstats "$MEASURE_RPORT" | awk '{print $1}')
    run_loadgen "$label" "$@"
    t1=$(cpu_ticks "$lpid")
    for p in $rpids; do r1=$((r1 + $(cpu_ticks "$p"))); done
    R[$label.cpu_us_per_pair]=$(us_per $((t1 - t0)) "${R[$label.ops]:-0}")
    [[ -z $rpids ]] || R[$label.redis_cpu_us_per_pair]=$(us_per $((r1 - r0)) "${R[$label.ops]:-0}")
    if [[ -n ${MEASURE_RPORT:-} ]]; then
        e1=$(redis_cmdstats "$MEASURE_RPORT" | awk '{print $1}')
        R[$label.evals_per_pair]=$(awk -v d=$((e1 - e0)) -v n="${R[$label.ops]:-0}" \
            'BEGIN { if (n > 0) printf "%.2f", d / n; else print "n/a" }')
    fi
}

cmds_all() { # cmds_all PORT...: commands run by these Redis (INFO commandstats, scripts' inner calls included)
    local p s=0
    for p in "$@"; do s=$((s + $(redis_cmdstats "$p" | awk '{print $3}'))); done
    echo "$s"
}

# issue 22: read-mostly (95 % shared, 5 % exclusive, 16 names) and a
# semaphore (limit 8, every client on one name) beside exclusive pairs on
# fresh names, on memory and on Redis, one lockd per backend for all three
bench_shared() {
    local b port pid rport="" rpid="" rpids args
    for b in memory redis; do
        rpids="" args=(--backend memory)
        if [[ $b == redis ]]; then
            start_redis rport rpid || continue
            rpids=$rpid args=(--redis "redis://127.0.0.1:$rport")
        fi
        MEASURE_RPORT=$rport
        if start_lockd port pid "${args[@]}"; then
            measure "sh_${b}_excl" "$pid" "$rpids" --mode pairs --port "$port" --clients "$CLIENTS"
            measure "sh_${b}_read" "$pid" "$rpids" --mode pairs --port "$port" --clients "$CLIENTS" \
                --names 16 --shared_pct 95 --name bench-rm --wait_ms 10000
            measure "sh_${b}_sem" "$pid" "$rpids" --mode pairs --port "$port" --clients 64 \
                --names 1 --limit 8 --name bench-sem --wait_ms 10000
            # the same waiting loads with every acquire exclusive: what the
            # contention itself costs, whatever the mode
            measure "sh_${b}_x16" "$pid" "$rpids" --mode pairs --port "$port" --clients "$CLIENTS" \
                --names 16 --name bench-x16 --wait_ms 10000
            measure "sh_${b}_x1" "$pid" "$rpids" --mode pairs --port "$port" --clients 64 \
                --names 1 --name bench-x1 --wait_ms 10000
            # like for like: the same fresh names and no waiting, only the mode differs
            measure "sh_${b}_shfresh" "$pid" "$rpids" --mode pairs --port "$port" --clients "$CLIENTS" \
                --shared_pct 100
            measure "sh_${b}_semfresh" "$pid" "$rpids" --mode pairs --port "$port" --clients "$CLIENTS" \
                --limit 8
            stop_pid "$pid"
        else
            note "shared ($b): lockd did not start"
        fi
        [[ -z $rpids ]] || stop_pid "$rpid"
    done
    MEASURE_RPORT=""

    # Redis instructions per pair, exact (callgrind), each load behind lockd
    if [[ ${BENCH_IR:-1} == 1 ]] && command -v callgrind_control >/dev/null; then
        local load lg out
        for load in excl read sem x16 x1 shfresh semfresh; do
            case $load in
            excl) lg="" ;;
            x16) lg="--names 16 --name bench-x16 --wait_ms 10000" ;;
            x1) lg="--names 1 --name bench-x1 --wait_ms 10000" ;;
            shfresh) lg="--shared_pct 100" ;;
            semfresh) lg="--limit 8" ;;
            read) lg="--names 16 --shared_pct 95 --name bench-rm --wait_ms 10000" ;;
            sem) lg="--names 1 --limit 8 --name bench-sem --wait_ms 10000" ;;
            esac
            log "redis_behind.sh ($load): ${BENCH_IR_PAIRS:-20000} pairs under callgrind"
            out=$(BEHIND_PAIRS=${BENCH_IR_PAIRS:-20000} BEHIND_LOADGEN_ARGS=$lg "$ROOT/bench/redis_behind.sh" "$LOCKD" 2>&1)
            echo "REDIS_BEHIND load=$load $out" >>"$RAW"
            R[sh_redis_$load.redis_ir_per_pair]=$(sed -n 's/.*Redis instructions per pair \([0-9]*\).*/\1/p' <<<"$out")
        done
    else
        note "shared: no callgrind (BENCH_IR=0 or valgrind missing): no Redis instructions per pair"
    fi
}

node_install() { # node_install: node and bench/node's packages, or a note and 1
    command -v node >/dev/null || { note "node not installed: Node.js + redlock peer skipped"; return 1; }
    [[ -d $ROOT/bench/node/node_modules/redlock ]] && return 0
    log "npm install in bench/node"
    (cd "$ROOT/bench/node" && timeout 120 npm install --no-audit --no-fund --silent >/dev/null 2>&1) ||
        { note "npm install of bench/node failed: Node.js + redlock peer skipped"; return 1; }
}

# issue 23: Redlock over 3 Redis processes, against single-Redis lockd and
# the Node.js redlock peer on the same 3 nodes, in turn in this run
bench_redlock() {
    local i p q ports=() pids=() urls="" port pid c0 c1 sp="" spid=""
    for i in 1 2 3; do
        start_redis p q || { note "redlock: redis did not start"; return; }
        ports+=("$p")
        pids+=("$q")
        urls+="${urls:+,}redis://127.0.0.1:$p"
    done
    if start_redis sp spid && start_lockd port pid --redis "redis://127.0.0.1:$sp"; then
        measure rl_single "$pid" "$spid" --mode pairs --port "$port" --clients "$CLIENTS"
        stop_pid "$pid"
        stop_pid "$spid"
    fi
    if start_lockd port pid --backend redlock --redis "$urls"; then
        measure rl_lockd "$pid" "${pids[*]}" --mode pairs --port "$port" --clients "$CLIENTS"
        c0=$(cmds_all "${ports[@]}")
        run_loadgen rl_contended --mode contended --port "$port" --clients "$CONTENDED" \
            --name bench-contended --wait_ms 10000
        c1=$(cmds_all "${ports[@]}")
        R[rl_contended.cmds_per_grant]=$(awk -v d=$((c1 - c0)) -v g="${R[rl_contended.grants]:-0}" \
            'BEGIN { if (g > 0) printf "%.2f", d / g; else print "n/a" }')
        stop_pid "$pid"
    else
        note "redlock: lockd did not start"
    fi
    if node_install; then
        for p in "${ports[@]}"; do redis-cli -p "$p" flushall >/dev/null; done
        local np npid
        np=$(free_port)
        PORT=$np REDIS_PORTS=$(
            IFS=,
            echo "${ports[*]}"
        ) node "$ROOT/bench/node/server.js" >"$TMP/node-redlock.log" 2>&1 &
        npid=$!
        PIDS+=("$npid")
        if wait_for 20 http_ok "$np" /healthz; then
            measure rl_node "$npid" "${pids[*]}" --mode pairs --port "$np" --clients "$CLIENTS"
        else
            note "redlock: the node redlock server did not start"
        fi
        stop_pid "$npid"
    fi
    for q in "${pids[@]}"; do stop_pid "$q"; done
}

# cluster_node VAR_PORT VAR_PID: a cluster-enabled redis-server whose bus
# port (+10000) is free too. No cluster-announce-ip: the 1-primary cluster's
# node, which never met another, gives its address as "" in CLUSTER SHARDS,
# and lockd takes that for the node it asked (as redis-cli does).
cluster_node() {
    local _p _pid i
    for ((i = 0; i < 100; i++)); do
        _p=$(free_port)
        ((_p + 10000 <= 65535)) && ! (exec 3<>"/dev/tcp/127.0.0.1/$((_p + 10000))") 2>/dev/null && break
    done
    redis-server --port "$_p" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" \
        --cluster-enabled yes --cluster-config-file "nodes-$_p.conf" --cluster-node-timeout 1000 \
        --cluster-require-full-coverage no --logfile "$TMP/redis-$_p.log" --daemonize no &
    _pid=$!
    PIDS+=("$_pid")
    wait_for 10 redis-cli -p "$_p" ping || { log "cluster node did not start"; return 1; }
    printf -v "$1" %s "$_p"
    printf -v "$2" %s "$_pid"
}
cluster_ok() { redis-cli -p "$1" cluster info | grep -q 'cluster_state:ok'; }
redirects() { # redirects LOCKD_PORT: MOVED + ASK this lockd followed
    curl -s -m 5 "http://127.0.0.1:$1/metrics" |
        awk '/^lockd_cluster_redirections_total\{/ { s += $2 } END { print s + 0 }'
}

# issue 24: the cluster backend on 1 primary and on 3 (on 2 cores the ratio is
# lockd's routing overhead, not scale), and redirections per 1,000 operations
# while a reshard moves BENCH_RESHARD_SLOTS slots under the load
bench_cluster() {
    local p q ports=() pids=() port pid i m0 m1 src dst rs
    cluster_node p q || return
    redis-cli -p "$p" cluster addslotsrange 0 16383 >/dev/null
    if wait_for 15 cluster_ok "$p" && start_lockd port pid --backend cluster --redis "redis://127.0.0.1:$p"; then
        measure cl_1 "$pid" "$q" --mode pairs --port "$port" --clients "$CLIENTS"
        stop_pid "$pid"
    else
        note "cluster: 1 primary did not come up"
    fi
    stop_pid "$q"
    for i in 1 2 3; do
        cluster_node p q || return
        ports+=("$p")
        pids+=("$q")
    done
    if ! redis-cli --cluster create "${ports[@]/#/127.0.0.1:}" --cluster-replicas 0 --cluster-yes \
        >"$TMP/cluster-create.log" 2>&1 || ! wait_for 15 cluster_ok "${ports[0]}" ||
        ! wait_for 15 cluster_ok "${ports[2]}"; then
        note "cluster: 3 primaries did not come up ($(tail -1 "$TMP/cluster-create.log"))"
        for q in "${pids[@]}"; do stop_pid "$q"; done
        return
    fi
    if start_lockd port pid --backend cluster --redis "redis://127.0.0.1:${ports[0]}"; then
        measure cl_3 "$pid" "${pids[*]}" --mode pairs --port "$port" --clients "$CLIENTS"
        # a reshard under the same load: slots from the first primary to the second
        src=$(redis-cli -p "${ports[0]}" cluster myid)
        dst=$(redis-cli -p "${ports[1]}" cluster myid)
        m0=$(redirects "$port")
        (sleep 0.5 && exec timeout $((SECS + 60)) redis-cli --cluster reshard "127.0.0.1:${ports[0]}" \
            --cluster-from "$src" --cluster-to "$dst" --cluster-slots "${BENCH_RESHARD_SLOTS:-500}" \
            --cluster-yes >"$TMP/reshard.log" 2>&1) &
        rs=$!
        measure cl_reshard "$pid" "${pids[*]}" --mode pairs --port "$port" --clients "$CLIENTS"
        m1=$(redirects "$port")
        R[cl_reshard.moved_slots]=$(grep -c '^Moving slot' "$TMP/reshard.log")
        if kill -0 "$rs" 2>/dev/null; then
            R[cl_reshard.note]="the reshard outlasted the load: the rest of its ${BENCH_RESHARD_SLOTS:-500} slots moved after it"
        fi
        wait "$rs" 2>/dev/null
        R[cl_reshard.redirects]=$((m1 - m0))
        R[cl_reshard.per_1000]=$(awk -v d=$((m1 - m0)) -v n="${R[cl_reshard.ops]:-0}" \
            'BEGIN { if (n > 0) printf "%.2f", 1000 * d / n; else print "n/a" }')
        stop_pid "$pid"
    fi
    for q in "${pids[@]}"; do stop_pid "$q"; done
}

# issue 24: the sentinel backend (discovery in front of one primary) beside
# single Redis, ROUNDS times in turn; the data path is the same
bench_sentinel() {
    local r rp rpid sp spid port pid conf
    for ((r = 1; r <= ROUNDS; r++)); do
        rp="" rpid="" spid=""
        if start_redis rp rpid && start_lockd port pid --redis "redis://127.0.0.1:$rp"; then
            measure "se_single_r$r" "$pid" "$rpid" --mode pairs --port "$port" --clients "$CLIENTS"
            stop_pid "$pid"
        fi
        stop_pid "$rpid"
        start_redis rp rpid || continue
        sp=$(free_port)
        conf=$TMP/sentinel-$sp.conf
        printf 'port %s\nbind 127.0.0.1\ndir %s\nsentinel monitor bench 127.0.0.1 %s 1\nsentinel down-after-milliseconds bench 5000\n' \
            "$sp" "$TMP" "$rp" >"$conf"
        redis-server "$conf" --sentinel >"$TMP/sentinel-$sp.log" 2>&1 &
        spid=$!
        PIDS+=("$spid")
        if wait_for 10 redis-cli -p "$sp" ping &&
            start_lockd port pid --backend sentinel --redis "redis://127.0.0.1:$sp" --redis_master_name bench; then
            measure "se_sentinel_r$r" "$pid" "$rpid" --mode pairs --port "$port" --clients "$CLIENTS"
            stop_pid "$pid"
        else
            note "sentinel: sentinel or lockd did not start (round $r)"
        fi
        stop_pid "$spid"
        stop_pid "$rpid"
    done
    median_round se_single ops_per_s
    median_round se_sentinel ops_per_s
    ratio_rounds sentinel se_sentinel ops_per_s se_single ops_per_s
    ratio_rounds sentinel_cpu se_sentinel cpu_us_per_pair se_single cpu_us_per_pair
}

# issue 25: what unique names leave in Redis: every name keeps its fence
# counter for fence_retention_ms (default 24 h). BENCH_FENCE_NAMES unique
# acquire + release pairs, bounded by BENCH_FENCE_SECS; bytes per name from
# INFO memory (used_memory) before and after
bench_fencemem() {
    local rp="" rpid="" port pid m0 m1 k secs_save key
    start_redis rp rpid || return
    if start_lockd port pid --redis "redis://127.0.0.1:$rp"; then
        m0=$(redis-cli -p "$rp" info memory | tr -d '\r' | sed -n 's/^used_memory://p')
        secs_save=$SECS
        SECS=${BENCH_FENCE_SECS:-180}
        run_loadgen fence --mode pairs --port "$port" --clients "$CLIENTS" --max "${BENCH_FENCE_NAMES:-1000000}"
        SECS=$secs_save
        m1=$(redis-cli -p "$rp" info memory | tr -d '\r' | sed -n 's/^used_memory://p')
        k=$(redis-cli -p "$rp" dbsize)
        key=$(redis-cli -p "$rp" --scan --pattern '*:fence' | head -1)
        R[fence.keys]=$k
        R[fence.ttl_s]=$([[ -n $key ]] && redis-cli -p "$rp" ttl "$key")
        R[fence.used_mb]=$(awk -v m="$m1" 'BEGIN { printf "%.1f", m / 1048576 }')
        R[fence.bytes_per_name]=$(awk -v d=$((m1 - m0)) -v n="${R[fence.ops]:-0}" \
            'BEGIN { if (n > 0) printf "%.0f", d / n; else print "n/a" }')
        R[fence.mb_per_1m]=$(awk -v d=$((m1 - m0)) -v n="${R[fence.ops]:-0}" \
            'BEGIN { if (n > 0) printf "%.0f", d / n * 1e6 / 1048576; else print "n/a" }')
        stop_pid "$pid"
    fi
    stop_pid "$rpid"
}


report_issues() {
    local b l
    want shared || want redlock || want cluster || want sentinel || want fencemem || return 0
    echo
    echo "### Issues 22–25 (one pass each; ratios within this run)"
    echo
    echo "| row | pairs/s | pair p50 µs | pair p99 µs | lockd CPU µs/pair | Redis CPU µs/pair | note |"
    echo "|---|---:|---:|---:|---:|---:|---|"
    irow() { # irow NAME LABEL NOTE
        printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$1" "$(fmt "${R[$2.ops_per_s]:-}")" \
            "$(fmt "${R[$2.pair_p50_us]:-}")" "$(fmt "${R[$2.pair_p99_us]:-}")" \
            "$(fmt "${R[$2.cpu_us_per_pair]:-}")" "$(fmt "${R[$2.redis_cpu_us_per_pair]:-}")" "$3"
    }
    if want shared; then
        for b in memory redis; do
            irow "$b: exclusive, fresh names" "sh_${b}_excl" "${R[sh_${b}_excl.evals_per_pair]:+script calls per pair ${R[sh_${b}_excl.evals_per_pair]}}"
            irow "$b: read-mostly, 16 names, 95 % shared" "sh_${b}_read" \
                "CPU / exclusive: lockd $(ratio "${R[sh_${b}_read.cpu_us_per_pair]:-}" "${R[sh_${b}_excl.cpu_us_per_pair]:-}"), Redis $(ratio "${R[sh_${b}_read.redis_cpu_us_per_pair]:-}" "${R[sh_${b}_excl.redis_cpu_us_per_pair]:-}") (target ≤ 1.2); timeouts ${R[sh_${b}_read.timeouts]:--}${R[sh_${b}_read.evals_per_pair]:+; script calls per pair ${R[sh_${b}_read.evals_per_pair]} (failed attempts of waiters included)}"
            irow "$b: semaphore, limit 8, 64 clients" "sh_${b}_sem" \
                "CPU / exclusive: lockd $(ratio "${R[sh_${b}_sem.cpu_us_per_pair]:-}" "${R[sh_${b}_excl.cpu_us_per_pair]:-}"), Redis $(ratio "${R[sh_${b}_sem.redis_cpu_us_per_pair]:-}" "${R[sh_${b}_excl.redis_cpu_us_per_pair]:-}") (target ≤ 1.2); timeouts ${R[sh_${b}_sem.timeouts]:--}${R[sh_${b}_sem.evals_per_pair]:+; script calls per pair ${R[sh_${b}_sem.evals_per_pair]} (failed attempts of waiters included)}"
            irow "$b: exclusive, 16 names, the read-mostly load's clients, waiting" "sh_${b}_x16" \
                "read-mostly / this: lockd CPU $(ratio "${R[sh_${b}_read.cpu_us_per_pair]:-}" "${R[sh_${b}_x16.cpu_us_per_pair]:-}"), Redis CPU $(ratio "${R[sh_${b}_read.redis_cpu_us_per_pair]:-}" "${R[sh_${b}_x16.redis_cpu_us_per_pair]:-}")${R[sh_${b}_x16.evals_per_pair]:+; script calls per pair ${R[sh_${b}_x16.evals_per_pair]}}"
            irow "$b: exclusive, one name, 64 clients, waiting" "sh_${b}_x1" \
                "semaphore / this: lockd CPU $(ratio "${R[sh_${b}_sem.cpu_us_per_pair]:-}" "${R[sh_${b}_x1.cpu_us_per_pair]:-}"), Redis CPU $(ratio "${R[sh_${b}_sem.redis_cpu_us_per_pair]:-}" "${R[sh_${b}_x1.redis_cpu_us_per_pair]:-}")${R[sh_${b}_x1.evals_per_pair]:+; script calls per pair ${R[sh_${b}_x1.evals_per_pair]}}"
            for l in shfresh semfresh; do
                irow "$b: $([[ $l == shfresh ]] && echo "shared" || echo "semaphore limit 8"), fresh names, no waiting" "sh_${b}_$l" \
                    "like for like with exclusive: CPU / exclusive: lockd $(ratio "${R[sh_${b}_$l.cpu_us_per_pair]:-}" "${R[sh_${b}_excl.cpu_us_per_pair]:-}"), Redis $(ratio "${R[sh_${b}_$l.redis_cpu_us_per_pair]:-}" "${R[sh_${b}_excl.redis_cpu_us_per_pair]:-}")${R[sh_${b}_$l.evals_per_pair]:+; script calls per pair ${R[sh_${b}_$l.evals_per_pair]}}"
            done
        done
    fi
    if want redlock; then
        irow "lockd, single Redis" rl_single ""
        irow "lockd redlock, 3 Redis" rl_lockd "/ single-Redis lockd $(ratio "${R[rl_lockd.ops_per_s]:-}" "${R[rl_single.ops_per_s]:-}"); / Node.js redlock $(ratio "${R[rl_lockd.ops_per_s]:-}" "${R[rl_node.ops_per_s]:-}") (target ≥ 2.5); Redis CPU summed over the 3"
        irow "Node.js + npm redlock, same 3 Redis" rl_node "the lockd CPU column is node's; Redis CPU summed over the 3"
    fi
    if want cluster; then
        irow "lockd cluster, 1 primary" cl_1 ""
        irow "lockd cluster, 3 primaries" cl_3 "/ 1 primary $(ratio "${R[cl_3.ops_per_s]:-}" "${R[cl_1.ops_per_s]:-}"): on $(nproc) cores that is lockd's routing overhead, not scale (the primaries share the cores with lockd and the load generator)"
        irow "lockd cluster, 3 primaries, during a reshard" cl_reshard "${R[cl_reshard.moved_slots]:-?} slots moved while the load ran; ${R[cl_reshard.redirects]:-?} redirections followed = ${R[cl_reshard.per_1000]:-?} per 1,000 pairs (lockd_cluster_redirections_total); ${R[cl_reshard.note]:-}"
    fi
    if want sentinel; then
        irow "lockd, single Redis (median of $ROUNDS)" se_single "rounds ${R[se_single.range]:--}"
        irow "lockd sentinel, same single primary (median of $ROUNDS)" se_sentinel "pairs/s / single Redis ${R[ratio.sentinel]:--} (target within 5 %); CPU ratio ${R[ratio.sentinel_cpu]:--}"
    fi
    echo
    echo "| figure | value | target |"
    echo "|---|---:|---|"
    if want shared; then
        for l in excl read sem x16 x1 shfresh semfresh; do
            echo "| Redis instructions per pair behind lockd, $l (redis_behind.sh, ${BENCH_IR_PAIRS:-20000} pairs) | $(fmt "${R[sh_redis_$l.redis_ir_per_pair]:-}") | shared and semaphore ≤ 1.2 × exclusive ($(ratio "${R[sh_redis_$l.redis_ir_per_pair]:-}" "${R[sh_redis_excl.redis_ir_per_pair]:-}")) |"
        done
        echo "| the same, each waiting load against its exclusive twin (read / x16, sem / x1) | $(ratio "${R[sh_redis_read.redis_ir_per_pair]:-}" "${R[sh_redis_x16.redis_ir_per_pair]:-}"), $(ratio "${R[sh_redis_sem.redis_ir_per_pair]:-}" "${R[sh_redis_x1.redis_ir_per_pair]:-}") | |"
    fi
    if want redlock; then
        echo "| lockd redlock contended handoff p50, release sent → next grant | $(fmt "${R[rl_contended.handoff_send_p50_us]:-}") µs (release answered → grant $(fmt "${R[rl_contended.handoff_p50_us]:-}") µs; p99 $(fmt "${R[rl_contended.handoff_send_p99_us]:-}") µs) | ≤ 1000 µs |"
        echo "| Redis commands per contended grant, over the 3 nodes (INFO commandstats, scripts' inner calls included) | $(fmt "${R[rl_contended.cmds_per_grant]:-}") | |"
    fi
    if want fencemem; then
        echo "| Redis memory after ${R[fence.ops]:-?} unique names acquired and released (fence counters, TTL ${R[fence.ttl_s]:-?} s = fence_retention_ms) | ${R[fence.used_mb]:-?} MB used, ${R[fence.keys]:-?} keys, ${R[fence.bytes_per_name]:-?} B per name | |"
        echo "| the same for 1,000,000 unique names (per-name cost × 1 M) | $(fmt "${R[fence.mb_per_1m]:-}") MB | |"
    fi
}
# ------------------------------------------------------------------ rounds

# median_round BASE KEY: copies every R[BASE_rN.*] of the round whose KEY is the
# median into R[BASE.*], and keeps "min..max" of KEY over the rounds
median_round() {
    local base=$1 key=$2 r vals="" pick k
    for ((r = 1; r <= ROUNDS; r++)); do
        [[ -n ${R[${base}_r$r.$key]:-} ]] && vals+="${R[${base}_r$r.$key]} $r"$'\n'
    done
    [[ -n $vals ]] || return 0
    pick=$(printf '%s' "$vals" | sort -n | awk '{ v[NR] = $1; r[NR] = $2 } END { print r[int((NR + 1) / 2)] }')
    for k in "${!R[@]}"; do
        [[ $k == "${base}_r$pick."* ]] && R[$base.${k#"${base}_r$pick."}]=${R[$k]}
    done
    R[$base.range]=$(printf '%s' "$vals" | sort -n | awk 'NR == 1 { lo = $1 } { hi = $1 } END { print lo ".." hi }')
}

# ratio_rounds NAME NUM_BASE NUM_KEY DEN_BASE DEN_KEY: lockd/peer within each
# round (both measured minutes apart at most), median and range over rounds
ratio_rounds() {
    local name=$1 nb=$2 nk=$3 db=$4 dk=$5 r out=""
    for ((r = 1; r <= ROUNDS; r++)); do
        out+=$(awk -v a="${R[${nb}_r$r.$nk]:-0}" -v b="${R[${db}_r$r.$dk]:-0}" \
            'BEGIN { if (a > 0 && b > 0) printf "%.3f\n", a / b }')$'\n'
    done
    R[ratio.$name]=$(printf '%s' "$out" | grep . | sort -n | awk '{ v[NR] = $1 }
        END { if (NR) printf "%.2f (rounds: %.2f..%.2f, n=%d)", v[int((NR + 1) / 2)], v[1], v[NR], NR; else print "-" }')
}

# scaled_rounds NAME BASE KEY TARGET PEER_BASE PEER_KEY REF: issue 8 set its
# absolute targets on a machine where nginx answered 120,000 POST/s and raw
# Redis ran the scripts at 44,000 pairs/s. On a slower or faster machine a
# target is scaled by the peer's rate in the same round (TARGET x REF / rate);
# the figure kept is measured / scaled target (<= 1 meets it): median and
# range over rounds, and the scaled target of the median round.
scaled_rounds() {
    local name=$1 b=$2 k=$3 target=$4 pb=$5 pk=$6 ref=$7 r out=""
    for ((r = 1; r <= ROUNDS; r++)); do
        out+=$(awk -v m="${R[${b}_r$r.$k]:-0}" -v p="${R[${pb}_r$r.$pk]:-0}" -v t="$target" -v ref="$ref" \
            'BEGIN { if (m > 0 && p > 0) printf "%.3f %.0f\n", m / (t * ref / p), t * ref / p }')$'\n'
    done
    R[scaled.$name]=$(printf '%s' "$out" | grep . | sort -n | awk '{ v[NR] = $1; s[NR] = $2 }
        END { if (NR) printf "%.2f of %s µs (rounds: %.2f..%.2f, n=%d)", v[int((NR + 1) / 2)], s[int((NR + 1) / 2)], v[1], v[NR], NR; else print "-" }')
}

# ------------------------------------------------------------------ report

fmt() { [[ -n ${1:-} ]] && echo "$1" || echo "-"; }
ratio() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else print "-" }'; }
row() { # row NAME LABEL RATE_KEY NOTE
    local l=$2
    printf '| %-34s | %9s | %8s | %8s | %8s | %8s | %s |\n' "$1" "$(fmt "${R[$l.$3]:-}")" \
        "$(fmt "${R[$l.pair_p50_us]:-${R[$l.req_p50_us]:-}}")" "$(fmt "${R[$l.pair_p90_us]:-${R[$l.req_p90_us]:-}}")" \
        "$(fmt "${R[$l.pair_p99_us]:-${R[$l.req_p99_us]:-}}")" "$(fmt "${R[$l.pair_p999_us]:-${R[$l.req_p999_us]:-}}")" "$4"
}

report() {
    echo
    echo "## lockd benchmark: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs ($(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)), kernel $(uname -r)"
    local s1 steal
    s1=$(grep '^cpu ' /proc/stat)
    steal=$(printf '%s\n%s\n' "$STAT0" "$s1" | awk '{ t = 0; for (i = 2; i <= NF; i++) t += $i; T[NR] = t; S[NR] = $9 }
        END { if (T[2] > T[1]) printf "%.1f", 100 * (S[2] - S[1]) / (T[2] - T[1]) }')
    echo "CPU steal during the run ${steal:-?}%, load average at the end $(cut -d' ' -f1-3 /proc/loadavg) (other processes on the machine skew absolute figures; ratios are taken within one round)"
    echo "rounds=$ROUNDS: nginx, raw Redis, lockd memory, lockd redis and Node.js redlock pairs are measured in turn, $ROUNDS times; rows show the median round, ratios are taken within each round"
    echo "clients=$CLIENTS secs=$SECS loadgen_threads=$LG_THREADS nginx_workers=$NGINX_WORKERS lockd_args='$LOCKD_ARGS' lockd='${LOCKD_VERSION:-none}' (tree at report time: $(git -C "$ROOT" describe --always --dirty 2>/dev/null))"
    echo
    echo "| what | pairs/s | p50 µs | p90 µs | p99 µs | p99.9 µs | note |"
    echo "|---|---:|---:|---:|---:|---:|---|"
    row "nginx return 200 (POST)" nginx pairs_per_s "${R[nginx.reqs_per_s]:-?} req/s ÷ 2; latency per request; rounds ${R[nginx.range]:--}"
    row "nginx return 200, POST + DELETE pairs" nginxpairs ops_per_s "driven like lockd: latency per pair; rounds ${R[nginxpairs.range]:--}"
    printf '| %-34s | %9s | %8s | %8s | %8s | %8s | %s |\n' "raw Redis, same Lua (redis-benchmark)" \
        "$(fmt "${R[redis.pairs_per_s]:-}")" "acq $(fmt "${R[redis.acq_p50_ms]:-}")ms" "-" \
        "acq $(fmt "${R[redis.acq_p99_ms]:-}")ms" "-" \
        "acq ${R[redis.acq_rps]:-?}/s, rel ${R[redis.rel_rps]:-?}/s (${R[redis.rel_hit_pct]:-?}% hit), 1/(1/a+1/r); rounds ${R[redis.range]:--}"
    row "etcd grant+lock+unlock" etcd ops_per_s "3 requests per pair"
    row "etcd lock+unlock (lease per client)" etcd_session ops_per_s "2 requests per pair"
    row "Node.js + npm redlock (1 Redis)" node ops_per_s "node http + redlock 4.2, retries on wait; rounds ${R[node.range]:--}"
    row "lockd memory" memory ops_per_s "pair = acquire + release; rounds ${R[memory.range]:--}"
    row "lockd redis" lockdredis ops_per_s "pair = acquire + release; rounds ${R[lockdredis.range]:--}"
    row "lockd memory, 1 client" memory_single ops_per_s "acquire p50 ${R[memory_single.acq_p50_us]:--} µs"
    row "lockd redis, 1 client" lockdredis_single ops_per_s "acquire p50 ${R[lockdredis_single.acq_p50_us]:--} µs"
    echo
    echo "| handoff ($CONTENDED clients on one name) | handoffs/s | p50 µs | p90 µs | p99 µs | p99.9 µs | note |"
    echo "|---|---:|---:|---:|---:|---:|---|"
    local l
    for l in memory_contended lockdredis_contended lockdredis_2lockd etcd_contended node_contended; do
        printf '| %-34s | %9s | %8s | %8s | %8s | %8s | %s |\n' "$l" "$(fmt "${R[$l.ops_per_s]:-}")" \
            "$(fmt "${R[$l.handoff_p50_us]:-}")" "$(fmt "${R[$l.handoff_p90_us]:-}")" \
            "$(fmt "${R[$l.handoff_p99_us]:-}")" "$(fmt "${R[$l.handoff_p999_us]:-}")" \
            "release answered → next grant; from release sent: p50 ${R[$l.handoff_send_p50_us]:--} p99 ${R[$l.handoff_send_p99_us]:--}; timeouts ${R[$l.timeouts]:--}; releaser re-granted ${R[$l.regrants]:--} of ${R[$l.grants]:--}"
    done
    echo
    echo "| figure | value | target |"
    echo "|---|---:|---|"
    echo "| lockd redis / raw Redis pairs/s | ${R[ratio.redis]:-$(ratio "${R[lockdredis.ops_per_s]:-}" "${R[redis.pairs_per_s]:-}")} | ≥ 0.7 |"
    echo "| lockd redis / etcd pairs/s | $(ratio "${R[lockdredis.ops_per_s]:-}" "${R[etcd.ops_per_s]:-}") | ≥ 8 |"
    echo "| lockd redis / Node.js redlock pairs/s | ${R[ratio.node]:-$(ratio "${R[lockdredis.ops_per_s]:-}" "${R[node.ops_per_s]:-}")} | ≥ 2 |"
    echo "| Node.js redlock failed acquires per contended grant | $(fmt "${R[node.failed_per_grant]:-}") | |"
    echo "| lockd memory / nginx pairs/s | ${R[ratio.nginx]:-$(ratio "${R[memory.ops_per_s]:-}" "${R[nginx.pairs_per_s]:-}")} | ≥ 0.8 |"
    echo "| lockd memory / raw Redis pairs/s | ${R[ratio.memredis]:-$(ratio "${R[memory.ops_per_s]:-}" "${R[redis.pairs_per_s]:-}")} | |"
    echo "| etcd / lockd handoff p50, release sent → next grant (memory) | $(ratio "${R[etcd_contended.handoff_send_p50_us]:-}" "${R[memory_contended.handoff_send_p50_us]:-}") | |"
    echo "| lockd redis handoff across 2 lockd (pub/sub), p50 / p99 | $(fmt "${R[lockdredis_2lockd.handoff_cross_p50_us]:-}") / $(fmt "${R[lockdredis_2lockd.handoff_cross_p99_us]:-}") µs (${R[lockdredis_2lockd.handoff_cross_n]:-0} handoffs) | |"
    echo "| etcd / lockd handoff p50 / p99 across 2 lockd (release answered → next grant) | $(ratio "${R[etcd_contended.handoff_p50_us]:-}" "${R[lockdredis_2lockd.handoff_cross_p50_us]:-}") / $(ratio "${R[etcd_contended.handoff_p99_us]:-}" "${R[lockdredis_2lockd.handoff_cross_p99_us]:-}") | |"
    echo "| etcd / lockd handoff p50, release sent → next grant (redis) | $(ratio "${R[etcd_contended.handoff_send_p50_us]:-}" "${R[lockdredis_contended.handoff_send_p50_us]:-}") | lockd p50 ≤ 1000 µs |"
    echo "| etcd / lockd handoff p99, release sent → next grant (redis) | $(ratio "${R[etcd_contended.handoff_send_p99_us]:-}" "${R[lockdredis_contended.handoff_send_p99_us]:-}") | |"
    echo "| lockd redis pair p99 | $(fmt "${R[lockdredis.pair_p99_us]:-}") µs | ≤ 5000 µs |"
    echo "| lockd memory pair p99 | $(fmt "${R[memory.pair_p99_us]:-}") µs | < 2000 µs |"
    echo "| nginx pair p99, driven like lockd (the HTTP ceiling) | $(fmt "${R[nginxpairs.pair_p99_us]:-}") µs | |"
    echo "| lockd memory / nginx, both driven as pairs | ${R[ratio.nginxpairs]:--} | |"
    echo "| lockd redis single-client acquire p50 | $(fmt "${R[lockdredis_single.acq_p50_us]:-}") µs | ≤ 200 µs |"
    echo "| nginx workers' CPU per 2 requests | $(fmt "${R[nginx.cpu_us_per_pair]:-}") µs | |"
    echo "| lockd CPU per pair, memory | $(fmt "${R[memory.cpu_us_per_pair]:-}") µs (user $(fmt "${R[memory.cpu_user_us_per_pair]:-}")) | |"
    echo "| lockd CPU per pair, redis | $(fmt "${R[lockdredis.cpu_us_per_pair]:-}") µs (user $(fmt "${R[lockdredis.cpu_user_us_per_pair]:-}")) | ≤ 30 µs |"
    echo "| Redis CPU per pair behind lockd | $(fmt "${R[lockdredis.redis_cpu_us_per_pair]:-}") µs | ≤ 10 µs |"
    echo "| Redis CPU per pair, raw (redis-benchmark) | $(fmt "${R[redis.cpu_us_per_pair]:-}") µs | |"
    echo "| Redis acquire attempts per grant, contended (SET − grants, an upper bound) | $(fmt "${R[lockdredis.redis_acq_attempts_per_grant]:-}") | ≤ 1.1 |"
    echo "| Redis script calls (FCALL) per grant, contended (acquire + release) | $(fmt "${R[lockdredis.redis_evals_per_grant]:-}") | |"
    echo "| Redis commands per grant, contended (scripts' inner calls included) | $(fmt "${R[lockdredis.redis_cmds_per_grant]:-}") | |"
    echo "| lockd CPU per Redis pair / its target scaled to this machine (30 µs × 120,000 / nginx POST/s, same round) | $(fmt "${R[scaled.lockd_cpu]:-}") | ≤ 1 |"
    echo "| lockd CPU per Redis pair / nginx workers' CPU per 2 requests, same round | ${R[ratio.cpu_nginx]:--} | ≤ 1.8 (30 µs against 2 × 8.33 µs: 120,000 req/s on at most one core) |"
    echo "| Redis CPU per pair behind lockd / its scaled target (10 µs × 44,000 / raw Redis pairs/s, same round) | $(fmt "${R[scaled.redis_cpu]:-}") | ≤ 1 |"
    echo "| lockd redis pair p99 / its scaled target (5 ms × 44,000 / raw Redis pairs/s, same round) | $(fmt "${R[scaled.redis_p99]:-}") | ≤ 1 |"
    echo "| lockd memory pair p99 / its scaled target (2 ms × 120,000 / nginx POST/s, same round) | $(fmt "${R[scaled.memory_p99]:-}") | < 1 |"
    echo "| lockd RSS idle | $(fmt "${R[rss.idle_kb]:-}") kB | < 16384 kB |"
    echo "| lockd RSS with ${R[rss.held_n]:-?} held leases (memory) | $(fmt "${R[rss.held_kb]:-}") kB | < 65536 kB |"
    echo "| lockd CPU while idle with those leases held | ${R[rss.held_idle_cpu]:-?} % of a core | |"
    echo "| GET /locks?limit=100 with those leases held | ${R[rss.held_list_ms]:-?} ms | |"
    echo "| lockd RSS with ${R[rss.waiters_n]:-?} waiting clients | $(fmt "${R[rss.waiters_kb]:-}") kB | < 204800 kB |"
    if want watchers; then
        echo "| lockd RSS before / with $WATCHERS watchers of one name (memory) | $(fmt "${R[watch.before_kb]:-}") / $(fmt "${R[watch.with_kb]:-}") kB, $(fmt "${R[watch.bytes_per]:-}") B per watcher | |"
        echo "| lockd CPU over 5 s idle with those watchers parked (without any: $(fmt "${R[watch.base_cpu_ms]:-}") ms) | $(fmt "${R[watch.idle_cpu_ms]:-}") ms (${R[watch.idle_cpu_pct]:-?} % of a core) | memory, not CPU |"
        echo "| one release → all $WATCHERS watchers answered (from the release sent) | $(fmt "${R[watch.all_ms]:-}") ms (p50 $(fmt "${R[watchers.watch_p50_us]:-}") µs, p99 $(fmt "${R[watchers.watch_p99_us]:-}") µs; ${R[watchers.watch_n]:-0} answered; lockd CPU meanwhile $(fmt "${R[watch.wake_cpu_ms]:-}") ms) | |"
    fi
    if ((${#NOTES[@]})); then
        echo
        for l in "${NOTES[@]}"; do echo "- $l"; done
    fi
    report_issues
    echo
    echo "errors: $(for l in nginx nginxpairs etcd etcd_session memory lockdredis memory_contended lockdredis_contended etcd_contended; do printf '%s=%s/%s ' "$l" "${R[$l.errors]:--}" "${R[$l.conn_errors]:--}"; done)"
}

# ------------------------------------------------------------------ main

[[ -x $LOADGEN ]] || { echo "build/bench/loadgen missing: run make bench" >&2; exit 1; }
# Pin the binaries: others may rebuild build/ while this runs.
cp "$LOADGEN" "$TMP/loadgen" && LOADGEN=$TMP/loadgen
if [[ -x $LOCKD ]]; then
    cp "$LOCKD" "$TMP/lockd" && LOCKD=$TMP/lockd
    LOCKD_VERSION=$("$LOCKD" --version 2>&1 | head -1)
fi
log "temp dir $TMP, $SECS s per measurement, $CLIENTS clients"
STAT0=$(grep '^cpu ' /proc/stat)
if [[ -x $LOCKD ]]; then
    LOCKD_OK=1
else
    LOCKD_OK=""
    note "build/lockd missing: lockd rows skipped"
fi
# throughput, in turns so that a burst of load from elsewhere hits every
# contender alike: nginx, raw Redis, lockd memory, lockd redis, ROUNDS times
for ((round = 1; round <= ROUNDS; round++)); do
    log "round $round of $ROUNDS"
    want nginx && bench_nginx "nginx_r$round"
    want redis && bench_raw_redis "redis_r$round"
    if [[ -n $LOCKD_OK ]]; then
        want memory && PAIRS_ONLY=1 bench_lockd "memory_r$round" --backend memory
        if want lockdredis && start_redis REDIS_PORT REDIS_PID; then
            PAIRS_ONLY=1 bench_lockd "lockdredis_r$round" --redis "redis://127.0.0.1:$REDIS_PORT"
            stop_pid "$REDIS_PID"
            unset REDIS_PORT REDIS_PID
        fi
    fi
    want node && bench_node_pairs "node_r$round"
done
median_round nginx pairs_per_s
median_round nginxpairs ops_per_s
median_round redis pairs_per_s
median_round memory ops_per_s
median_round lockdredis ops_per_s
median_round node ops_per_s
ratio_rounds redis lockdredis ops_per_s redis pairs_per_s
ratio_rounds nginx memory ops_per_s nginx pairs_per_s
ratio_rounds nginxpairs memory ops_per_s nginxpairs ops_per_s
ratio_rounds memredis memory ops_per_s redis pairs_per_s
ratio_rounds node lockdredis ops_per_s node ops_per_s
ratio_rounds cpu_nginx lockdredis cpu_us_per_pair nginx cpu_us_per_pair
scaled_rounds lockd_cpu lockdredis cpu_us_per_pair 30 nginx reqs_per_s 120000
scaled_rounds redis_cpu lockdredis redis_cpu_us_per_pair 10 redis pairs_per_s 44000
scaled_rounds redis_p99 lockdredis pair_p99_us 5000 redis pairs_per_s 44000
scaled_rounds memory_p99 memory pair_p99_us 2000 nginx reqs_per_s 120000
want etcd && bench_etcd
want node && bench_node
if [[ -n $LOCKD_OK ]]; then
    # single client, contended handoff and Redis commands per grant
    want memory && SKIP_PAIRS=1 bench_lockd memory --backend memory
    if want lockdredis && start_redis REDIS_PORT REDIS_PID; then
        SKIP_PAIRS=1 bench_lockd lockdredis --redis "redis://127.0.0.1:$REDIS_PORT"
        stop_pid "$REDIS_PID"
        unset REDIS_PORT REDIS_PID
    fi
    want rss && bench_rss
    want watchers && bench_watchers
    want shared && bench_shared
    want redlock && bench_redlock
    want cluster && bench_cluster
    want sentinel && bench_sentinel
    want fencemem && bench_fencemem
fi
report | tee "$TMP/table.md"
mkdir -p "$ROOT/build/bench"
cp "$TMP/table.md" "$ROOT/build/bench/last-table.md"
cp "$RAW" "$ROOT/build/bench/last-raw.txt" 2>/dev/null
log "table in build/bench/last-table.md, raw RESULT lines in build/bench/last-raw.txt"
