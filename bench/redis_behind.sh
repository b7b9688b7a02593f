#!/usr/bin/env bash
# bench/redis_behind.sh - Redis's instructions per acquire + release pair
# behind lockd, exact: redis-server runs under callgrind (counting only while
# the measured load runs), lockd (--threads 1) in front of it, loadgen's 64
# clients doing BEHIND_PAIRS pairs after a 2 s warm-up. Also prints the
# operations per script call and script calls per pair (INFO commandstats of
# the measured pairs). Not a
# test; compare two lockd builds in one go:
#
#   bench/redis_behind.sh OLD_LOCKD NEW_LOCKD...     (BEHIND_PAIRS=20000)
#   BEHIND_LOADGEN_ARGS="--names 16 --shared_pct 95"  another load (loadgen pairs options)
#   BEHIND_CMDSTATS=1                                 also every command per pair
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PAIRS=${BEHIND_PAIRS:-20000}
read -r -a LG_ARGS <<<"${BEHIND_LOADGEN_ARGS:-}"
LG=$ROOT/build/bench/loadgen
(($# >= 1)) || { echo "usage: $0 LOCKD..." >&2; exit 64; }
[[ -x $LG ]] || { echo "$LG missing: make build/bench/loadgen" >&2; exit 1; }
command -v callgrind_control >/dev/null || { echo "valgrind not installed (make deps)" >&2; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/lockd-behind.XXXXXX")
RPID="" LPID=""
cleanup() {
    [[ -n $LPID ]] && { kill "$LPID" 2>/dev/null; wait "$LPID" 2>/dev/null; }
    [[ -n $RPID ]] && { kill "$RPID" 2>/dev/null; wait "$RPID" 2>/dev/null; }
    rm -rf "$TMP"
}
trap cleanup EXIT
for lockd in "$@"; do
    rport=$("$LG" --free_port)
    lport=$("$LG" --free_port)
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$TMP/cg.out" \
        redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP" \
        --daemonize no >/dev/null 2>&1 &
    RPID=$!
    for ((i = 0; i < 200; i++)); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done
    "$lockd" --listen "127.0.0.1:$lport" --redis "redis://127.0.0.1:$rport" --threads 1 \
        --log_level warn --access_log false >/dev/null 2>&1 &
    LPID=$!
    sleep 0.5
    "$LG" --mode pairs --port "$lport" --clients 64 --secs 2 "${LG_ARGS[@]}" >/dev/null 2>&1
    redis-cli -p "$rport" config resetstat >/dev/null 2>&1 # commandstats: the measured pairs alone
    callgrind_control -i on "$RPID" >/dev/null 2>&1
    out=$("$LG" --mode pairs --port "$lport" --clients 64 --secs 120 --max "$PAIRS" "${LG_ARGS[@]}" 2>&1 | grep RESULT)
    callgrind_control -i off "$RPID" >/dev/null 2>&1
    pairs=$(sed 's/.* ops=\([0-9]*\).*/\1/' <<<"$out")
    stats=$(redis-cli -p "$rport" info commandstats | tr -d '\r')
    kill "$LPID"; wait "$LPID" 2>/dev/null; LPID=""
    kill "$RPID"; wait "$RPID" 2>/dev/null; RPID=""
    ir=$(cat "$TMP"/cg.out* | awk '/^totals:/ { s += $2 } END { print s + 0 }')
    rm -f "$TMP"/cg.out*
    awk -F'[:=,]' -v l="$lockd" -v p="$pairs" -v ir="$ir" '
        # script calls: EVALSHA / EVAL (lockd before its scripts were
        # Functions, and its EVAL fallback) or FCALL
        /^cmdstat_(get|evalsha|eval|fcall):/ { c[$1] = $3 }
        # the commands the scripts ran (what a script call costs Redis most)
        /^cmdstat_/ && $1 !~ /^cmdstat_(evalsha|eval|fcall|function\|.*|info|config|ping|subscribe|ssubscribe|psubscribe|client|hello|auth|select|script)$/ { k += $3 }
        # one GET per release (acquires take the lock with SET ... NX GET):
        # operations are twice the releases
        # (script calls per pair says it best for shared pairs: their
        # scripts make GETs of their own)
        END { printf "%s: %d pairs, Redis instructions per pair %d, operations per script call %.1f, script calls per pair %.2f, commands per pair %.2f\n",
              l, p, ir / p, 2 * c["cmdstat_get"] / (c["cmdstat_evalsha"] + c["cmdstat_eval"] + c["cmdstat_fcall"]),
              (c["cmdstat_evalsha"] + c["cmdstat_eval"] + c["cmdstat_fcall"]) / p, k / p }' <<<"$stats"
    if [[ ${BEHIND_CMDSTATS:-0} == 1 ]]; then # every command, scripts' inner calls included
        awk -F'[:=,]' -v p="$pairs" '/^cmdstat_/ { sub(/^cmdstat_/, "", $1); printf "  %s %.2f per pair\n", $1, $3 / p }' <<<"$stats" | sort -k2 -rn
    fi
done
