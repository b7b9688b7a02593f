#!/bin/sh
# with-lock.sh - run a command while holding a lockd lock, in plain POSIX sh
# with curl (no jq, no lockctl). A background loop renews the lease every
# ttl/3; the lock is released when the command ends, however it ends.
# For real use prefer `lockctl run`, which also signals the command if the
# lock is lost.
#
#   LOCKD_URL=http://127.0.0.1:8080 examples/shell/with-lock.sh NAME COMMAND [ARG...]
#   (with authentication: LOCKD_TOKEN=... as well)
#
# The command gets LOCKD_LEASE and LOCKD_FENCING_TOKEN in its environment.
# Exit status: the command's; 75 if the lock was not obtained within
# WAIT_MS (default 10000); 69 if lockd cannot be reached.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 NAME COMMAND [ARG...]" >&2; exit 64; }
url=${LOCKD_URL:-http://127.0.0.1:8080}
name=$1
shift
ttl_ms=${TTL_MS:-15000}
wait_ms=${WAIT_MS:-10000}

# lk ARGS...: curl, sending the bearer token when there is one. The header
# goes in on stdin (printf is a shell builtin), so the token never shows in
# the process list.
lk() {
    if [ -n "${LOCKD_TOKEN:-}" ]; then
        printf 'Authorization: Bearer %s\n' "$LOCKD_TOKEN" | curl -H @- "$@"
    else
        curl "$@"
    fi
}

hdrs=$(mktemp)
body=$(mktemp)
renewer=""
cleanup() {
    [ -n "$renewer" ] && kill "$renewer" 2>/dev/null
    if [ -n "${LOCKD_LEASE:-}" ]; then
        lk -sS -o /dev/null -X DELETE -H "Lock-Lease: $LOCKD_LEASE" "$url/locks/$name" || true
    fi
    rm -f "$hdrs" "$body"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

status=$(lk -sS -o "$body" -D "$hdrs" -w '%{http_code}' -X POST "$url/locks/$name" \
    -d "{\"ttl_ms\": $ttl_ms, \"wait_ms\": $wait_ms, \"owner\": \"$(hostname) pid $$\"}") || exit 69
case $status in
200) ;;
409) echo "with-lock: '$name' is held by someone else: $(cat "$body")" >&2; exit 75 ;;
*) echo "with-lock: lockd answered $status: $(cat "$body")" >&2; exit 1 ;;
esac
LOCKD_LEASE=$(sed -n 's/^[Ll]ock-[Ll]ease: *//p' "$hdrs" | tr -d '\r')
LOCKD_FENCING_TOKEN=$(sed -n 's/^[Ll]ock-[Ff]encing-[Tt]oken: *//p' "$hdrs" | tr -d '\r')
export LOCKD_LEASE LOCKD_FENCING_TOKEN

# Renew every ttl/3 while the command runs; stop if the lease is gone.
(
    trap - EXIT
    while sleep "$((ttl_ms / 3000)).$(((ttl_ms / 3) % 1000 / 100))"; do
        code=$(lk -sS -o /dev/null -w '%{http_code}' -X PUT -H "Lock-Lease: $LOCKD_LEASE" \
            "$url/locks/$name") || continue
        if [ "$code" = 404 ] || [ "$code" = 409 ]; then
            echo "with-lock: lost '$name' ($code)" >&2
            exit 1
        fi
    done
) &
renewer=$!

set +e
"$@"
rc=$?
set -e
exit $rc
