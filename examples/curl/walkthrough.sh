#!/bin/sh
# walkthrough.sh - lockd's lock API with nothing but curl: acquire, inspect,
# renew, release. The lease and fencing token come back as headers too, so no
# JSON parser is needed.
#
#   LOCKD_URL=http://127.0.0.1:8080 examples/curl/walkthrough.sh [NAME]
#   (with authentication: LOCKD_TOKEN=... as well)
set -eu
url=${LOCKD_URL:-http://127.0.0.1:8080}
name=${1:-examples.curl}
# c ARGS...: curl that fails on HTTP errors (printing lockd's JSON error) and
# sends the bearer token when there is one.
c() {
    if [ -n "${LOCKD_TOKEN:-}" ]; then
        curl -sS --fail-with-body -H "Authorization: Bearer $LOCKD_TOKEN" "$@"
    else
        curl -sS --fail-with-body "$@"
    fi
}

echo "== acquire $name (ttl 10 s, wait up to 5 s)"
hdrs=$(mktemp)
trap 'rm -f "$hdrs"' EXIT
c -D "$hdrs" -X POST "$url/locks/$name" -d '{"ttl_ms": 10000, "wait_ms": 5000, "owner": "curl-example"}'
echo
# Header names are case-insensitive; values end in CR.
lease=$(sed -n 's/^[Ll]ock-[Ll]ease: *//p' "$hdrs" | tr -d '\r')
token=$(sed -n 's/^[Ll]ock-[Ff]encing-[Tt]oken: *//p' "$hdrs" | tr -d '\r')
echo "lease=$lease fencing_token=$token"

echo "== inspect (never shows the lease)"
c "$url/locks/$name"
echo

echo "== renew for 20 s (lease in a header)"
c -H "Lock-Lease: $lease" -X PUT "$url/locks/$name" -d '{"ttl_ms": 20000}'
echo

echo "== release (lease as a query parameter works too)"
c -X DELETE "$url/locks/$name?lease=$lease"
echo
