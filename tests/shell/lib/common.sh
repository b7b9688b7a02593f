# common.sh - sourced by tests/shell/*.sh: paths, a private lockd on a free
# loopback port, bounded waits, TAP-ish "ok"/"not ok" lines and the closing
# "N passed, N failed" line. Not a test itself (tests/run.sh runs *.sh only
# directly under tests/shell/).
#
# Environment: REPO (repo root), LOCKD_BIN, LOCKCTL_BIN (defaults: build/).

REPO=${REPO:-$(cd "$(dirname "$0")/../.." && pwd)}
LOCKD_BIN=${LOCKD_BIN:-$REPO/build/lockd}
LOCKCTL_BIN=${LOCKCTL_BIN:-$REPO/build/lockctl}
case $LOCKD_BIN in /*) ;; *) LOCKD_BIN=$REPO/$LOCKD_BIN ;; esac
case $LOCKCTL_BIN in /*) ;; *) LOCKCTL_BIN=$REPO/$LOCKCTL_BIN ;; esac
export REPO LOCKD_BIN LOCKCTL_BIN

T_TMP=$(mktemp -d "${TMPDIR:-/tmp}/lockd-shell.XXXXXX")
T_PASS=0
T_FAIL=0
T_PIDS=""

t_cleanup() {
    for p in $T_PIDS; do
        kill "$p" 2>/dev/null || true
    done
    for p in $T_PIDS; do
        # bounded: wait only for our own children, they got SIGTERM above
        i=0
        while kill -0 "$p" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
        kill -9 "$p" 2>/dev/null || true
    done
    rm -rf "$T_TMP"
}
trap t_cleanup EXIT
trap 'exit 130' INT TERM

t_ok() { T_PASS=$((T_PASS + 1)); echo "ok - $1"; }
t_not_ok() { T_FAIL=$((T_FAIL + 1)); echo "not ok - $1"; }

# t_check DESCRIPTION COMMAND...: passes when COMMAND exits 0.
t_check() {
    t_desc=$1
    shift
    if "$@"; then t_ok "$t_desc"; else t_not_ok "$t_desc"; fi
}

# t_status EXPECTED DESCRIPTION COMMAND...: passes when COMMAND exits EXPECTED.
t_status() {
    t_want=$1 t_desc=$2
    shift 2
    set +e
    "$@"
    t_got=$?
    set -e
    if [ "$t_got" = "$t_want" ]; then t_ok "$t_desc"; else t_not_ok "$t_desc (exit $t_got, want $t_want)"; fi
}

# t_wait_for TIMEOUT_TENTHS COMMAND...: polls COMMAND every 0.1 s; 0 once it succeeds.
t_wait_for() {
    t_n=$1
    shift
    while [ "$t_n" -gt 0 ]; do
        if "$@"; then return 0; fi
        sleep 0.1
        t_n=$((t_n - 1))
    done
    return 1
}

t_port_ready() { [ -s "$1" ] && grep -qE '^[0-9]+$' "$1"; }

# t_start_lockd NAME [lockd args...]: starts lockd on 127.0.0.1:0; sets
# T_LOCKD_PID and T_LOCKD_URL; log in $T_TMP/NAME.log.
t_start_lockd() {
    t_name=$1
    shift
    rm -f "$T_TMP/$t_name.port"
    # lockd reads LOCKD_<KEY> variables and rejects unknown keys: hide the test
    # runner's and lockctl's own LOCKD_* variables from it.
    env -u LOCKD_BIN -u LOCKD_URL -u LOCKD_TOKEN -u LOCKD_TOKEN_FILE -u LOCKD_LEASE \
        -u LOCKD_LOCK -u LOCKD_FENCING_TOKEN \
        "$LOCKD_BIN" --listen 127.0.0.1:0 --port_file "$T_TMP/$t_name.port" "$@" \
        >"$T_TMP/$t_name.log" 2>&1 &
    T_LOCKD_PID=$!
    T_PIDS="$T_PIDS $T_LOCKD_PID"
    if ! t_wait_for 100 t_port_ready "$T_TMP/$t_name.port"; then
        echo "lockd did not start within 10 s; its log:" >&2
        cat "$T_TMP/$t_name.log" >&2
        exit 1
    fi
    T_LOCKD_URL="http://127.0.0.1:$(cat "$T_TMP/$t_name.port")"
}

# t_free_port: prints a loopback port that was free a moment ago.
t_free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# t_start_redis NAME: starts a throwaway redis-server (no persistence) on a
# free loopback port; sets T_REDIS_PID and T_REDIS_URL. Returns 1 when
# redis-server is not installed; exits when it does not start in 10 s.
t_start_redis() {
    command -v redis-server >/dev/null 2>&1 || return 1
    t_name=$1
    mkdir -p "$T_TMP/$t_name"
    for _ in 1 2 3; do
        T_REDIS_PORT=$(t_free_port)
        redis-server --port "$T_REDIS_PORT" --bind 127.0.0.1 --dir "$T_TMP/$t_name" \
            --save '' --appendonly no --daemonize no >"$T_TMP/$t_name.log" 2>&1 &
        T_REDIS_PID=$!
        T_PIDS="$T_PIDS $T_REDIS_PID"
        # ours, not another redis that won the port: its process_id is our pid
        if t_wait_for 100 sh -c 'redis-cli -p "$0" info server 2>/dev/null | tr -d "\r" |
                grep -qx "process_id:$1" || ! kill -0 "$1" 2>/dev/null' "$T_REDIS_PORT" "$T_REDIS_PID" &&
            kill -0 "$T_REDIS_PID" 2>/dev/null; then
            T_REDIS_URL="redis://127.0.0.1:$T_REDIS_PORT"
            return 0
        fi
        kill -9 "$T_REDIS_PID" 2>/dev/null || true # lost the port to someone else: again
    done
    echo "redis-server did not start; its log:" >&2
    cat "$T_TMP/$t_name.log" >&2
    exit 1
}

# t_done: prints the closing line; exit status says whether all passed.
t_done() {
    echo "$T_PASS passed, $T_FAIL failed"
    [ "$T_FAIL" -eq 0 ]
}
