#!/usr/bin/env bash
# bench/ab.sh - A/B of lockd binaries: each round runs every binary in turn
# under the same acquire+release load and reports lockd's CPU per pair (from
# /proc) and pairs/s; the summary gives each binary's median and its median
# within-round ratio to the first binary. Host speed drifts by ±15 % within
# an hour here, so only alternated runs compare two builds. With
# AB_BACKEND=redis each run starts on an emptied Redis (builds may lay keys
# out differently) and the rounds also show Redis's CPU per pair. Not a test.
#
#   bench/ab.sh OLD_LOCKD NEW_LOCKD [MORE...]
#   bench/ab.sh nginx LOCKD...   the word nginx stands for nginx `return 200`
#                                (run.sh's config, one process, pinned alike):
#                                ratios to the HTTP ceiling
#   AB_NGINX=post   nginx driven as run.sh's headline and issue 8's target: POST
#                   only, a pair = 2 requests; AB_NGINX=pairs: POST + DELETE
#                   pairs, exactly as lockd is driven
#   AB_ROUNDS=6 AB_SECS=5 AB_CLIENTS=64 AB_BACKEND=memory|redis
#   AB_PIN=1   lockd on CPU 1 and the load generator on CPU 0 (2+ cores)
#   AB_LOADGEN_ARGS="--names 1 --limit 8 --name ab-sem --wait_ms 10000"
#              another load for the lockd runs (loadgen's pairs options)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${AB_ROUNDS:-6}
SECS=${AB_SECS:-5}
CLIENTS=${AB_CLIENTS:-64}
BACKEND=${AB_BACKEND:-memory}
PIN=${AB_PIN:-1}
NGINX_MODE=${AB_NGINX:-post}
read -r -a LG_EXTRA <<<"${AB_LOADGEN_ARGS:-}"
[[ $ROUNDS =~ ^[1-9][0-9]*$ && $SECS =~ ^[1-9][0-9]*$ && $CLIENTS =~ ^[1-9][0-9]*$ ]] ||
    { echo "AB_ROUNDS, AB_SECS and AB_CLIENTS must be positive integers" >&2; exit 64; }
[[ $BACKEND == memory || $BACKEND == redis ]] || { echo "AB_BACKEND: memory or redis" >&2; exit 64; }
[[ $NGINX_MODE == post || $NGINX_MODE == pairs ]] || { echo "AB_NGINX: post or pairs" >&2; exit 64; }
(($# >= 2)) || { echo "usage: $0 LOCKD_A LOCKD_B [...]" >&2; exit 64; }
LOADGEN=$ROOT/build/bench/loadgen
[[ -x $LOADGEN ]] || { echo "$LOADGEN missing: make build/bench/loadgen" >&2; exit 1; }
for b in "$@"; do
    [[ $b == nginx ]] && { command -v nginx >/dev/null || { echo "nginx not installed" >&2; exit 1; }; continue; }
    [[ -x $b ]] || { echo "$b is not executable" >&2; exit 64; }
done
CLK_TCK=$(getconf CLK_TCK)
# shellcheck source=bench/nginx_conf.sh
source "$ROOT/bench/nginx_conf.sh"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/lockd-ab.XXXXXX")
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
pin() { # pin CPU CMD...: runs CMD on CPU when pinning is on and possible
    local cpu=$1; shift
    if [[ $PIN == 1 ]] && (($(nproc) >= 2)) && command -v taskset >/dev/null; then
        exec taskset -c "$cpu" "$@"
    else
        exec "$@"
    fi
}
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
field() { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p"; }

BACKEND_ARGS=(--backend memory)
if [[ $BACKEND == redis ]]; then
    RPORT=$("$LOADGEN" --free_port)
    redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" \
        --daemonize no >"$TMP/redis.log" 2>&1 &
    PIDS+=($!)
    RPID=$!
    for ((i = 0; i < 100; i++)); do redis-cli -p "$RPORT" ping >/dev/null 2>&1 && break; sleep 0.05; done
    BACKEND_ARGS=(--backend redis --redis "redis://127.0.0.1:$RPORT")
fi

# start_nginx: nginx as bench/run.sh configures it, but one process (no
# master), so its CPU is one /proc entry; writes its port to $TMP/port
start_nginx() {
    local port
    port=$("$LOADGEN" --free_port)
    mkdir -p "$TMP/nginx"
    nginx_conf "$TMP/nginx" "$port" 0 >"$TMP/nginx/nginx.conf"
    pin 1 nginx -c "$TMP/nginx/nginx.conf" -p "$TMP/nginx" >"$TMP/nginx.log" 2>&1 &
    echo $! >"$TMP/pid"
    for ((i = 0; i < 100; i++)); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && { echo "$port" >"$TMP/port"; return; }
        sleep 0.05
    done
}

# run BIN: prints "pairs_per_s cpu_us_per_pair pair_p99_us redis_cpu_us_per_pair"
run() {
    local bin=$1 port pid t0 t1 r0=0 r1=0 line ops
    rm -f "$TMP/port"
    if [[ $bin == nginx ]]; then
        start_nginx
        pid=$(cat "$TMP/pid")
    else
        pin 1 "$bin" --listen 127.0.0.1:0 --port_file "$TMP/port" "${BACKEND_ARGS[@]}" --threads 1 \
            --log_level warn --access_log false >"$TMP/lockd.log" 2>&1 &
        pid=$!
    fi
    PIDS+=("$pid")
    for ((i = 0; i < 100; i++)); do [[ -s $TMP/port ]] && break; sleep 0.05; done
    port=$(cat "$TMP/port" 2>/dev/null)
    [[ -n $port ]] || { echo "0 n/a n/a"; kill "$pid"; wait "$pid" 2>/dev/null; return; }
    local mode=(--mode pairs "${LG_EXTRA[@]}") per=1 p99=pair_p99_us
    if [[ $bin == nginx && $NGINX_MODE == post ]]; then
        mode=(--mode http --method POST --path /locks/x --body '{"ttl_ms":30000}')
        per=2 p99=req_p99_us # a pair is two requests; p99 is per request
    fi
    [[ $BACKEND == redis ]] && redis-cli -p "$RPORT" flushall >/dev/null && r0=$(ticks "$RPID")
    t0=$(ticks "$pid")
    line=$(pin 0 "$LOADGEN" "${mode[@]}" --port "$port" --clients "$CLIENTS" --secs "$SECS" 2>/dev/null |
        grep '^RESULT')
    t1=$(ticks "$pid")
    [[ $BACKEND == redis ]] && r1=$(ticks "$RPID")
    kill "$pid"
    wait "$pid" 2>/dev/null
    ops=$(field ops "$line")
    # a binary whose answers failed has no CPU per pair to compare
    [[ $(field errors "$line") == 0 ]] || { echo "0 n/a errors n/a"; return; }
    awk -v t=$((t1 - t0)) -v rt=$((r1 - r0)) -v n="${ops:-0}" -v r="$(field ops_per_s "$line")" \
        -v hz="$CLK_TCK" -v p="$(field "$p99" "$line")" -v per="$per" -v backend="$BACKEND" '
        BEGIN {
            if (n == 0) { print "0 n/a n/a n/a"; exit }
            rc = "-"
            if (backend == "redis") rc = sprintf("%.2f", rt * 1e6 / hz / (n / per))
            printf "%.0f %.2f %s %s\n", r / per, t * 1e6 / hz / (n / per), p, rc
        }'
}

echo "# $ROUNDS rounds × $# binaries × ${SECS} s, $CLIENTS clients, backend $BACKEND, pinned=$PIN"
for ((r = 1; r <= ROUNDS; r++)); do
    i=0
    for b in "$@"; do
        read -r pps cpu p99 rcpu < <(run "$b")
        printf 'round %d  %-28s pairs/s %7s  cpu/pair %6s us  pair p99 %8s us  redis cpu/pair %6s us\n' \
            "$r" "$b" "$pps" "$cpu" "$p99" "$rcpu"
        echo "$r $i $pps $cpu $rcpu" >>"$TMP/rows"
        i=$((i + 1))
    done
done
echo "# median per binary; ratios are taken within each round against the first binary"
i=0
for b in "$@"; do
    awk -v i="$i" -v name="$b" '
        function median(a, n,   k, j, t) {
            for (k = 1; k <= n; k++) for (j = k + 1; j <= n; j++) if (a[j] < a[k]) { t = a[k]; a[k] = a[j]; a[j] = t }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        { pps[$1, $2] = $3; cpu[$1, $2] = $4; rcpu[$1, $2] = $5; rounds[$1] = 1 }
        END {
            n = 0
            for (r in rounds) {
                if (cpu[r, i] == "n/a" || cpu[r, 0] == "n/a" || pps[r, 0] == 0) continue
                n++; c[n] = cpu[r, i]; p[n] = pps[r, i]; cr[n] = cpu[r, i] / cpu[r, 0]; pr[n] = pps[r, i] / pps[r, 0]
                if (rcpu[r, i] != "-" && rcpu[r, i] != "n/a") { m++; rc[m] = rcpu[r, i]; rr[m] = rcpu[r, i] / rcpu[r, 0] }
            }
            if (n == 0) { printf "%-30s no valid round\n", name; exit }
            printf "%-30s pairs/s %7.0f  cpu/pair %6.2f us  cpu ratio %.3f  pairs/s ratio %.3f  (%d rounds)\n",
                name, median(p, n), median(c, n), median(cr, n), median(pr, n), n
            if (m > 0)
                printf "%-30s redis cpu/pair %6.2f us  redis cpu ratio %.3f\n", "", median(rc, m), median(rr, m)
        }' "$TMP/rows"
    i=$((i + 1))
done
