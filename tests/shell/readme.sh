#!/usr/bin/env bash
# readme.sh - runs README.md's curl walk-through against a real lockd and
# checks every answer's shape and status (values such as leases differ).
set -eu
tmp=$(mktemp -d)
env -u LOCKD_BIN -u LOCKCTL_BIN "$LOCKD_BIN" --listen 127.0.0.1:0 --port_file "$tmp/port" --log_level warn 2>"$tmp/log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 1 200); do [ -s "$tmp/port" ] && break; sleep 0.02; done
u="http://127.0.0.1:$(cat "$tmp/port")"
pass=0
check() { # check NAME EXPECTED-STATUS REGEX -- curl args...
    local name=$1 want=$2 re=$3; shift 4
    local out status
    out=$(curl -s -w '\n%{http_code}' "$@")
    status=${out##*$'\n'}; out=${out%$'\n'*}
    if [ "$status" != "$want" ] || ! printf '%s' "$out" | grep -Eq "$re"; then
        echo "FAIL $name: status $status body $out"; echo "0 passed, 1 failed"; exit 1
    fi
    pass=$((pass + 1)); echo "ok $name"
    last=$out
}
check acquire 200 '^\{"name":"nightly-report","lease":"[0-9a-f]{32}","fencing_token":[0-9]+,"ttl_ms":30000,"expires_at":"[0-9T:.-]+Z","session":null,"owner":"host-a","count":1,"mode":"exclusive"\}$' -- \
    -X POST "$u/locks/nightly-report" -d '{"ttl_ms":30000,"owner":"host-a"}'
lease=$(printf '%s' "$last" | sed 's/.*"lease":"\([0-9a-f]*\)".*/\1/')
token=$(printf '%s' "$last" | sed 's/.*"fencing_token":\([0-9]*\).*/\1/')
check inspect 200 "^\{\"name\":\"nightly-report\",\"index\":[0-9]+,\"held\":true,.*\"owner\":\"host-a\",\"fencing_token\":$token,.*\"waiters\":0\}$" -- "$u/locks/nightly-report"
printf '%s' "$last" | grep -q "$lease" && { echo "FAIL inspect shows the lease"; exit 1; }
check locked 409 '^\{"error":"locked","message":"[^"]+","holder":\{"owner":"host-a","fencing_token":'"$token"',"session_bound":false,"mode":"exclusive","expires_in_ms":[0-9]+\},"waited_ms":0\}$' -- \
    -X POST "$u/locks/nightly-report"
check renew 200 "\"fencing_token\":$token,\"ttl_ms\":60000,.*\"owner\":\"host-a\"" -- \
    -X PUT "$u/locks/nightly-report" -H "Lock-Lease: $lease" -d '{"ttl_ms":60000}'
check release 200 "^\{\"name\":\"nightly-report\",\"released\":true,\"fencing_token\":$token,\"count\":0\}$" -- \
    -X DELETE "$u/locks/nightly-report" -H "Lock-Lease: $lease"
check release-again 404 '^\{"error":"not_held","message":"nobody holds this lock now; your lease is gone"\}$' -- \
    -X DELETE "$u/locks/nightly-report" -H "Lock-Lease: $lease"
hdrs=$(curl -si -X POST "$u/locks/nightly-report" -d '{"owner":"host-b"}')
printf '%s' "$hdrs" | grep -q '^Lock-Lease: [0-9a-f]\{32\}' && printf '%s' "$hdrs" | grep -q '^Lock-Fencing-Token: [0-9]*' \
    || { echo "FAIL headers: $hdrs"; exit 1; }
pass=$((pass + 1)); echo "ok headers"
S=$(curl -s -X POST "$u/sessions" -d '{"ttl_ms":10000}' | sed 's/.*"session":"\([0-9a-f]*\)".*/\1/')
check session-acquire 200 "\"session\":\"$S\"" -- -X POST "$u/locks/report-2" -d "{\"session\":\"$S\",\"ttl_ms\":5000}"
check heartbeat 200 '"locks":\["report-2"\],"lost":\[\]' -- -X PUT "$u/sessions/$S"
check session-end 200 '"released":\["report-2"\]' -- -X DELETE "$u/sessions/$S"

# "Several locks as one": all or none, then renew and release of the set
check multi 200 '^\{"lease":"[0-9a-f]{32}","ttl_ms":10000,"expires_at":"[0-9T:.-]+Z","session":null,"owner":null,"locks":\[\{"name":"account.17","fencing_token":[0-9]+\},\{"name":"account.42","fencing_token":[0-9]+\}\]\}$' -- \
    -X POST "$u/locks" -d '{"names":["account.17","account.42"],"ttl_ms":10000,"wait_ms":5000}'
LEASE=$(printf '%s' "$last" | sed 's/.*"lease":"\([0-9a-f]*\)".*/\1/')
check multi-locked 409 '^\{"error":"locked","message":"'"'"'account.42'"'"' is held; none of the names was granted","name":"account.42","holder":\{.*\},"waited_ms":0\}$' -- \
    -X POST "$u/locks" -d '{"names":["account.42","account.99"]}'
check multi-renew 200 '^\{"locks":\["account.17","account.42"\],"lost":\[\],"ttl_ms":10000,"expires_at":"[0-9T:.-]+Z"\}$' -- \
    -X PUT "$u/locks" -H "Lock-Lease: $LEASE" -d '{"names":["account.17","account.42"]}'
check multi-release 200 '^\{"locks":\["account.17","account.42"\],"lost":\[\]\}$' -- \
    -X DELETE "$u/locks" -H "Lock-Lease: $LEASE" -d '{"names":["account.17","account.42"]}'

# "Running it on Redis": the README's one command, pointed at a throwaway
# redis-server on a free port instead of 6379.
rport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" >"$tmp/redis.log" 2>&1 &
rpid=$!
trap 'kill $pid $rpid $lpid 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 1 200); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.05; done
cmd=$(sed -n '/^  build\/lockd --redis redis:\/\/127.0.0.1:6379$/p' "$REPO/README.md")
[ -n "$cmd" ] || { echo "FAIL README lost its one-command Redis line"; exit 1; }
# shellcheck disable=SC2086
env -u LOCKD_BIN -u LOCKCTL_BIN $(printf '%s' "$cmd" | sed "s|build/lockd|$LOCKD_BIN|; s|:6379|:$rport|") \
    --listen 127.0.0.1:0 --port_file "$tmp/rport" --log_level warn 2>"$tmp/rlog" &
lpid=$!
for _ in $(seq 1 200); do [ -s "$tmp/rport" ] && break; sleep 0.02; done
ru="http://127.0.0.1:$(cat "$tmp/rport")"
check redis-acquire 200 '"name":"on-redis"' -- -X POST "$ru/locks/on-redis" -d '{"ttl_ms":30000}'
[ "$(redis-cli -p "$rport" exists 'lockd:{on-redis}')" = 1 ] || { echo "FAIL the lock is not in Redis"; exit 1; }
pass=$((pass + 1)); echo "ok redis-key"

# Every error code lockd sends (the one table, api/errors.c) is in README's
# table with its status; and the HTTP details the README promises are true.
grep -o '{[0-9]*, "[a-z_]*",' "$REPO/api/errors.c" | sed 's/[{",]//g' | sort -u | while read -r st code; do
    [ "$code" = ok ] && continue
    grep -q "^| $st | \`$code\` |" "$REPO/README.md" || { echo "FAIL README lacks error $st $code"; exit 1; }
done
pass=$((pass + 1)); echo "ok every error code in README's table"
loc=$(curl -si -X POST "$u/sessions" | tr -d '\r' | sed -n 's/^Location: //p')
[ -n "$loc" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' "$u$loc")" = 200 ] ||
    { echo "FAIL POST /sessions Location '$loc'"; exit 1; }
pass=$((pass + 1)); echo "ok Location"
opt=$(curl -si -X OPTIONS "$u/locks/x" | tr -d '\r')
printf '%s' "$opt" | grep -q '^HTTP/1.1 204' && printf '%s' "$opt" | grep -q '^Allow: .*HEAD, OPTIONS$' ||
    { echo "FAIL OPTIONS: $opt"; exit 1; }
pass=$((pass + 1)); echo "ok OPTIONS"
echo "$pass passed, 0 failed"
