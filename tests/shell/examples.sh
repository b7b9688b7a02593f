#!/bin/sh
# examples.sh - runs the client examples of examples/ against a real lockd:
# curl, shell, Python (standard library) and Node (fetch) always; Go when a
# Go toolchain is installed (it is not one of the project's Debian packages).
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

# go (net/http), only when a toolchain is here
if command -v go >/dev/null 2>&1; then
    t_check "go example builds" sh -c 'cd "$0/go" && GOTOOLCHAIN=local GOFLAGS=-mod=mod go build -o "$1/go-example" . 2>"$1/go.err"' "$ex" "$d"
    t_check "go example runs" sh -c '"$0/go-example" ex.go >"$0/go.out" 2>&1 && grep -q "refused: locked" "$0/go.out"' "$d"
    t_check "go example released the lock" held_false ex.go
else
    echo "# go not installed: examples/go not built (apt-get install golang-go to include it)"
fi

for f in "$d"/*.out; do
    [ -s "$f" ] || continue
    if [ "$T_FAIL" -gt 0 ]; then echo "--- $f"; cat "$f"; fi
done
t_done
