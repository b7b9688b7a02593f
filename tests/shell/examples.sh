#!/bin/sh
# examples.sh - runs the client examples of examples/ against a real lockd:
# curl, shell, Python (standard library) and Node (fetch) always; Go when a
# Go toolchain is installed (it is not one of the project's Debian packages);
# and the Python leader election with two candidates and a hand-over.
set -eu
. "$(dirname "$0")/lib/common.sh"

t_start_lockd main
export LOCKD_URL="$T_LOCKD_URL"
ex=$REPO/examples
d=$T_TMP

held_false() { "$LOCKCTL_BIN" status "$1" | grep -qx "held=false"; }

# curl walk-through: acquire, inspect, renew, release, all 2xx
t_check "curl walk-through runs" sh -c 'sh "$0/curl/walkthrough.sh" ex.curl >"$1/curl.out" 2>&1' "$ex" "$d"
t_check "curl walk-through saw a lease and a fencing token" \
    grep -qE '^lease=[0-9a-f]+ fencing_token=[0-9]+$' "$d/curl.out"
t_check "curl walk-through released the lock" held_false ex.curl

# shell: with-lock.sh runs the command under the lock, passes its status
t_status 3 "shell with-lock.sh passes the command's exit status" \
    "$ex/shell/with-lock.sh" ex.shell sh -c 'test -n "$LOCKD_LEASE" && test "$LOCKD_FENCING_TOKEN" -gt 0 && exit 3'
t_check "shell with-lock.sh released the lock" held_false ex.shell
"$LOCKCTL_BIN" acquire ex.shell.held --ttl 30s >/dev/null
t_status 75 "shell with-lock.sh exits 75 on a held lock" \
    env WAIT_MS=0 "$ex/shell/with-lock.sh" ex.shell.held true

# python (stdlib only)
t_check "python example runs" sh -c 'python3 "$0/python/lockd_client.py" ex.py >"$1/py.out" 2>&1' "$ex" "$d"
t_check "python example acquired, renewed and saw the second acquire refused" \
    sh -c 'grep -q "^acquired ex.py: fencing_token=" "$0" && grep -q "^renewed:" "$0" && grep -q "refused: locked" "$0"' "$d/py.out"
t_check "python example released the lock" held_false ex.py

# node (fetch)
t_check "node example runs" sh -c 'node "$0/node/lock.mjs" ex.node >"$1/node.out" 2>&1' "$ex" "$d"
t_check "node example saw the second acquire refused" grep -q "refused: locked" "$d/node.out"
t_check "node example released the lock" held_false ex.node

# python leader election: two candidates, exactly one leads, the other
# watches it; it takes over (larger token) when the leader is SIGKILLed
# (within the 2 s session ttl + 1 s) and when the next one resigns on
# SIGTERM (within 1 s).
le=$ex/python/leader_election.py
n_leaders() { cat "$d"/le-*.out 2>/dev/null | grep -c '^leader' || true; }
leaders_ge() { [ "$(n_leaders)" -ge "$1" ]; }
token_of() { grep '^leader' "$d/le-$1.out" | sed 's/.*token=//'; }
le_start() { # le_start ID: a candidate in the background, its pid in le_pid
    python3 "$le" ex.leader "$1" 2000 >"$d/le-$1.out" 2>"$d/le-$1.err" &
    le_pid=$!
    T_PIDS="$T_PIDS $le_pid"
}
le_start a
pa=$le_pid
le_start b
pb=$le_pid
t_check "python leader election: a candidate leads" t_wait_for 100 leaders_ge 1
sleep 1
t_check "python leader election: exactly one leads ($(n_leaders))" test "$(n_leaders)" -eq 1
if grep -q '^leader' "$d/le-a.out"; then lead=a lpid=$pa other=b opid=$pb; else lead=b lpid=$pb other=a opid=$pa; fi
t_check "python leader election: the other watches it lead" \
    t_wait_for 50 grep -q "^watch $other held=true owner=$lead " "$d/le-$other.out"
t_kill=$(date +%s%N)
kill -9 "$lpid"
t_check "python leader election: the other takes over when the leader is SIGKILLed" \
    t_wait_for 100 grep -q '^leader' "$d/le-$other.out"
t_took=$((($(date +%s%N) - t_kill) / 1000000))
t_check "python leader election: ... within the session ttl + 1 s ($t_took ms)" test "$t_took" -lt 3000
t_check "python leader election: ... with a larger token" test "$(token_of "$other")" -gt "$(token_of "$lead")"
le_start c
pc=$le_pid
t_check "python leader election: a new candidate watches the leader" \
    t_wait_for 50 grep -q "^watch c held=true owner=$other " "$d/le-c.out"
t_kill=$(date +%s%N)
kill -TERM "$opid"
t_check "python leader election: the new candidate leads once the leader resigns (SIGTERM)" \
    t_wait_for 100 grep -q '^leader' "$d/le-c.out"
t_took=$((($(date +%s%N) - t_kill) / 1000000))
t_check "python leader election: ... within 1 s ($t_took ms)" test "$t_took" -lt 1000
le_rc=0
wait "$opid" || le_rc=$?
t_check "python leader election: the resigned leader exits 0 ($le_rc) saying so" \
    sh -c '[ "$0" -eq 0 ] && grep -q "^resigned $1" "$2"' "$le_rc" "$other" "$d/le-$other.out"
t_check "python leader election: ... with a larger token still" test "$(token_of c)" -gt "$(token_of "$other")"
t_check "python leader election: each led once, nobody else ($(n_leaders))" test "$(n_leaders)" -eq 3
kill -TERM "$pc"
wait "$pc" || true
t_check "python leader election: the lock is free after the last resigned" held_false ex.leader

# go (net/http), only when a toolchain is here
if command -v go >/dev/null 2>&1; then
    t_check "go example builds" sh -c 'cd "$0/go" && GOTOOLCHAIN=local GOFLAGS=-mod=mod go build -o "$1/go-example" . 2>"$1/go.err"' "$ex" "$d"
    t_check "go example runs" sh -c '"$0/go-example" ex.go >"$0/go.out" 2>&1 && grep -q "refused: locked" "$0/go.out"' "$d"
    t_check "go example released the lock" held_false ex.go
else
    echo "# go not installed: examples/go not built (apt-get install golang-go to include it)"
fi

# ---- the same examples against a lockd that requires a bearer token: each
# reads it from LOCKD_TOKEN (the README says so)
printf 'ex-token-1\n' >"$d/tokens"
printf 'ex-token-1\n' >"$d/token"
t_start_lockd auth --auth_token_file "$d/tokens"
auth_url=$T_LOCKD_URL
held_false_auth() { "$LOCKCTL_BIN" --url "$auth_url" --token-file "$d/token" status "$1" | grep -qx "held=false"; }
t_status 1 "auth: without LOCKD_TOKEN, shell with-lock.sh is refused (401)" \
    env LOCKD_URL="$auth_url" "$ex/shell/with-lock.sh" ex.auth.shell true
t_status 3 "auth: shell with-lock.sh sends LOCKD_TOKEN with its acquire" \
    env LOCKD_URL="$auth_url" LOCKD_TOKEN=ex-token-1 "$ex/shell/with-lock.sh" ex.auth.shell \
    sh -c '"$0" --url "$1" --token-file "$2" status ex.auth.shell | grep -qx held=true && exit 3' \
    "$LOCKCTL_BIN" "$auth_url" "$d/token"
t_check "auth: ... and with its release (its 15 s lease is gone at once)" held_false_auth ex.auth.shell
t_check "auth: shell with-lock.sh sends LOCKD_TOKEN with its renewals (a 900 ms lease held for 1.5 s)" \
    env LOCKD_URL="$auth_url" LOCKD_TOKEN=ex-token-1 TTL_MS=900 "$ex/shell/with-lock.sh" ex.auth.renew \
    sh -c 'sleep 1.5; "$0" --url "$1" --token-file "$2" status ex.auth.renew | grep -qx held=true' \
    "$LOCKCTL_BIN" "$auth_url" "$d/token"
t_check "auth: curl walk-through sends LOCKD_TOKEN" \
    sh -c 'LOCKD_URL="$2" LOCKD_TOKEN=ex-token-1 sh "$0/curl/walkthrough.sh" ex.auth.curl >"$1/auth-curl.out" 2>&1' "$ex" "$d" "$auth_url"
t_check "auth: curl walk-through released the lock" held_false_auth ex.auth.curl
t_check "auth: python example sends LOCKD_TOKEN" \
    sh -c 'LOCKD_URL="$2" LOCKD_TOKEN=ex-token-1 python3 "$0/python/lockd_client.py" ex.auth.py >"$1/auth-py.out" 2>&1 &&
        grep -q "refused: locked" "$1/auth-py.out"' "$ex" "$d" "$auth_url"
t_check "auth: python example released the lock" held_false_auth ex.auth.py
t_check "auth: node example sends LOCKD_TOKEN" \
    sh -c 'LOCKD_URL="$2" LOCKD_TOKEN=ex-token-1 node "$0/node/lock.mjs" ex.auth.node >"$1/auth-node.out" 2>&1 &&
        grep -q "refused: locked" "$1/auth-node.out"' "$ex" "$d" "$auth_url"
t_check "auth: node example released the lock" held_false_auth ex.auth.node
if [ -x "$d/go-example" ]; then
    t_check "auth: go example sends LOCKD_TOKEN" \
        sh -c 'LOCKD_URL="$1" LOCKD_TOKEN=ex-token-1 "$0/go-example" ex.auth.go >"$0/auth-go.out" 2>&1 &&
            grep -q "refused: locked" "$0/auth-go.out"' "$d" "$auth_url"
    t_check "auth: go example released the lock" held_false_auth ex.auth.go
fi

for f in "$d"/*.out; do
    [ -s "$f" ] || continue
    if [ "$T_FAIL" -gt 0 ]; then echo "--- $f"; cat "$f"; fi
done
t_done
