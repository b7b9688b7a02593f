#!/bin/sh
# openapi.sh - openapi.yaml describes what lockd really answers: drives every
# route (success and error cases) with curl and validates each JSON answer
# against the schema openapi.yaml gives for that route, method and status.
# The same requests run on the memory backend and, when redis-server is
# installed, on Redis, where a burst of concurrent acquires and releases is
# answered from grouped script calls and a stopped Redis answers 503. An
# answer's field that the schema does not declare is an error too.
set -eu
. "$(dirname "$0")/lib/common.sh"

if [ ! -d "$REPO/node_modules/ajv" ] || [ ! -d "$REPO/node_modules/yaml" ]; then
    (cd "$REPO" && npm install --no-audit --no-fund --silent) >/dev/null 2>&1 || true
fi
cases=$T_TMP/cases.jsonl
hdr=$T_TMP/headers

# rec TEMPLATE METHOD CURL-ARGS...: one request; appends {path, method, status,
# body} to $out (default $cases), through the files named by $k (default "").
rec() {
    tpl=$1 m=$2 k=${k:-} out=${out:-$cases}
    shift 2
    code=$(curl -sS -o "$T_TMP/body$k" -D "$hdr$k" -w '%{http_code}' -X "$m" "$@")
    node -e '
        const fs = require("fs");
        const [tpl, m, code, file] = process.argv.slice(1);
        const raw = fs.readFileSync(file, "utf8");
        let body;
        try { body = JSON.parse(raw); } catch (e) { body = { unparsable: raw }; }
        process.stdout.write(JSON.stringify({ path: tpl, method: m.toLowerCase(), status: +code, body }) + "\n");' \
        "$tpl" "$m" "$code" "$T_TMP/body$k" >>"$out"
}
lease_of() { sed -n 's/^[Ll]ock-[Ll]ease: *//p' "$hdr" | tr -d '\r'; }

L='/locks/{name}'
S='/sessions/{id}'

# drive URL: every route, its success and its error answers.
drive() {
u=$1
rec "$L" POST "$u/locks/oa.a" -d '{"ttl_ms":5000,"owner":"openapi"}'
lease=$(lease_of)
rec "$L" POST "$u/locks/oa.a" -d '{"wait_ms":50}'                  # 409 locked
rec "$L" GET "$u/locks/oa.a"
rec "$L" GET "$u/locks/oa.free"
rec /locks GET "$u/locks?limit=10&prefix=oa."
rec "$L" PUT "$u/locks/oa.a" -H "Lock-Lease: $lease" -d '{"ttl_ms":6000}'
rec "$L" PUT "$u/locks/oa.a" -H "Lock-Lease: 00000000000000000000000000000000"   # 409 held_by_other
rec "$L" DELETE "$u/locks/oa.a?lease=$lease"
rec "$L" DELETE "$u/locks/oa.a?lease=$lease"                       # 404 not_held
rec "$L" POST "$u/locks/oa.b" -d '{"ttl_ms":5}'                     # 400 invalid_field
rec "$L" POST "$u/locks/oa.b" -d '{"bogus":1}'                      # 400 unknown_field
rec "$L" POST "$u/locks/oa.b" -d '{not json'                        # 400 invalid_json
rec "$L" POST "$u/locks/oa%2Fb"                                     # 400 invalid_name
rec "$L" PUT "$u/locks/oa.b?lease=aa" -H "Lock-Lease: bb"           # 400 conflicting_lease
rec "$L" POST "$u/locks/oa.b" -d '{"session":"nosuchsession"}'      # 404 session_not_found
rec "$L" POST "$u/locks/oa.b" -d "{\"owner\":\"$(head -c 20000 /dev/zero | tr '\0' x)\"}"  # 413
rec /locks POST "$u/locks" -d '{"names":["oa.m1","oa.m2"],"ttl_ms":5000,"owner":"openapi"}'
mlease=$(lease_of)
rec /locks POST "$u/locks" -d '{"names":["oa.m2","oa.m3"],"wait_ms":50}'       # 409 locked
rec /locks POST "$u/locks" -d '{"names":["oa.m3","oa.m3"]}'                    # 400 invalid_field
rec /locks POST "$u/locks" -d '{"names":["oa.m3","oa/m4"]}'                    # 400 invalid_name
rec /locks PUT "$u/locks" -H "Lock-Lease: $mlease" -d '{"names":["oa.m1","oa.m2","oa.m3"],"ttl_ms":6000}'
rec /locks PUT "$u/locks" -H "Lock-Lease: 00000000000000000000000000000000" -d '{"names":["oa.m1"]}'  # 409 held_by_other
rec /locks DELETE "$u/locks?lease=$mlease" -d '{"names":["oa.m1","oa.m2"]}'
rec /locks DELETE "$u/locks" -H "Lock-Lease: $mlease" -d '{"names":["oa.m1","oa.m2"]}'  # 404 not_held
rec "$L" POST "$u/locks/oa.r" -d '{"mode":"shared","ttl_ms":5000,"owner":"r1"}'
rec "$L" POST "$u/locks/oa.r" -d '{"mode":"shared","ttl_ms":5000,"owner":"r2"}'
rec "$L" POST "$u/locks/oa.r" -d '{"ttl_ms":5000}'                  # 409 locked, holder.mode shared
rec "$L" GET "$u/locks/oa.r"                                        # holders 2, holder_list
rec "$L" POST "$u/locks/oa.sem" -d '{"limit":2,"ttl_ms":5000}'
rec "$L" POST "$u/locks/oa.sem" -d '{"limit":3}'                    # 409 limit_mismatch
rec "$L" GET "$u/locks/oa.sem"
rec /locks GET "$u/locks?limit=10&prefix=oa."                        # mode, limit, holders
rec /sessions POST "$u/sessions" -d '{"ttl_ms":5000,"owner":"openapi"}'
sess=$(node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).session)' "$T_TMP/body")
rec "$L" POST "$u/locks/oa.s" -d "{\"session\":\"$sess\"}"
rec "$S" PUT "$u/sessions/$sess"
rec "$S" GET "$u/sessions/$sess"
rec "$S" DELETE "$u/sessions/$sess"
rec "$S" PUT "$u/sessions/$sess"                                    # 404 session_not_found
rec "$L" POST "$u/locks/oa.f" -d '{"ttl_ms":5000,"owner":"stuck"}'
rec "$L" GET "$u/locks/oa.f?index=1&wait_ms=100"                   # a watch, answered at once
rec "$L" DELETE "$u/locks/oa.f?force=true"                         # 403 forbidden
rec "$L" DELETE "$u/locks/oa.f?force=true" -H "Authorization: Bearer oa-admin"
# a lock-delay: the session expires, its lock stays unacquirable a while
rec /sessions POST "$u/sessions" -d '{"ttl_ms":1000,"lock_delay_ms":60000}'
sess=$(node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).session)' "$T_TMP/body")
rec "$L" POST "$u/locks/oa.d" -d "{\"session\":\"$sess\"}"
t_wait_for 100 sh -c 'curl -s "$0/locks/oa.d" | grep -q "\"lock_delay\":true"' "$u" ||
    t_not_ok "the expired session's lock is under its lock-delay"
rec "$L" GET "$u/locks/oa.d"                                        # lock_delay, lock_delay_ms
rec "$L" POST "$u/locks/oa.d" -d '{}'                               # 409 locked, holder.lock_delay
rec /healthz GET "$u/healthz"
rec /readyz GET "$u/readyz"
}

# burst URL: 16 acquires at once on 8 names, then the releases of those
# granted, at once; each answer through its own files. Exactly one acquire
# of each name is granted and the other refused 409; every release is 200.
burst() {
    i=0 pids=
    while [ $i -lt 16 ]; do
        k=.b$i out=$T_TMP/burst.a$i rec "$L" POST "$1/locks/oa.burst$((i % 8))" -d '{"ttl_ms":5000}' &
        pids="$pids $!"
        i=$((i + 1))
    done
    for p in $pids; do wait "$p"; done # not a bare wait: lockd and redis are children too
    pids=
    i=0
    while [ $i -lt 16 ]; do
        lease=$(sed -n 's/^[Ll]ock-[Ll]ease: *//p' "$hdr.b$i" | tr -d '\r')
        if [ -n "$lease" ]; then
            k=.r$i out=$T_TMP/burst.r$i rec "$L" DELETE "$1/locks/oa.burst$((i % 8))" -H "Lock-Lease: $lease" &
            pids="$pids $!"
        fi
        i=$((i + 1))
    done
    for p in $pids; do wait "$p"; done
    t_check "a burst of 16 acquires on 8 names: 8 granted, one per name, 8 refused 409" \
        sh -c '[ "$(cat "$0"/burst.a* | grep -c "\"status\":200")" -eq 8 ] &&
            [ "$(cat "$0"/burst.a* | grep -c "\"status\":409")" -eq 8 ] &&
            [ "$(cat "$0"/burst.a* | grep "\"status\":200" | grep -o "\"name\":\"oa.burst[0-7]\"" | sort -u | wc -l)" -eq 8 ] ||
            { grep -hv "\"status\":\(200\|409\)" "$0"/burst.a* >&2; false; }' "$T_TMP"
    t_check "their 8 releases answer 200" \
        sh -c '[ "$(cat "$0"/burst.r* | grep -c "\"status\":200")" -eq 8 ] ||
            { grep -hv "\"status\":200" "$0"/burst.r* >&2; false; }' "$T_TMP"
    cat "$T_TMP"/burst.* >>"$cases"
    rm -f "$T_TMP"/burst.*
}

printf 'oa-admin\n' >"$T_TMP/admin.tok"
t_start_lockd main --admin_token_file "$T_TMP/admin.tok"
mem_url=$T_LOCKD_URL
drive "$mem_url"
burst "$mem_url"
if t_start_redis redis; then
    t_start_lockd onredis --redis "$T_REDIS_URL" --backend_timeout_ms 2000 \
        --admin_token_file "$T_TMP/admin.tok"
    drive "$T_LOCKD_URL"
    burst "$T_LOCKD_URL"
    kill "$T_REDIS_PID"
    wait "$T_REDIS_PID" 2>/dev/null || true
    rec "$L" POST "$T_LOCKD_URL/locks/oa.down" -d '{}'             # 503 backend_unavailable
    rec "$L" GET "$T_LOCKD_URL/locks/oa.down"                       # 503
    rec /readyz GET "$T_LOCKD_URL/readyz"                           # 503, the node's reason
    t_check "with Redis stopped, acquire, inspect and /readyz answer 503" \
        sh -c '[ "$(tail -n 3 "$0" | grep -c "\"status\":503")" -eq 3 ]' "$cases"
else
    echo "redis-server not installed: the Redis backend's answers are not checked"
fi
u=$mem_url

t_check "every example in openapi.yaml conforms to its schema, and every error example's message is one lockd sends" \
    sh -c 'node "$0/tests/shell/lib/openapi_examples.js" "$0" >"$1.examples"; rc=$?; grep -v "^example ok" "$1.examples"; exit $rc' "$REPO" "$cases"
t_check "every answer conforms to openapi.yaml" \
    sh -c 'node "$0/tests/shell/lib/openapi_check.js" "$0" <"$1" >"$1.out"; rc=$?; cat "$1.out"; exit $rc' "$REPO" "$cases"
t_check "all $(wc -l <"$cases") requests were checked" test "$(grep -c '^conforms' "$cases.out")" -eq "$(wc -l <"$cases")"
t_check "every file openapi.yaml refers to is in the repository (no design document elsewhere)" sh -c '
    for f in $(grep -o "[A-Za-z0-9_/.-]*\.\(md\|c\|h\|lua\|sh\|yaml\|js\)\>" "$0/openapi.yaml" | sort -u); do
        [ -e "$0/$f" ] || { echo "openapi.yaml refers to $f, not in the repository" >&2; exit 1; }
    done
    ! grep -qi "design\.md\|design document" "$0/openapi.yaml"' "$REPO"
code=$(curl -sS -o /dev/null -D "$hdr" -w '%{http_code}' -X PATCH "$u/locks/oa.a")
t_check "405 carries an Allow header" sh -c '[ "$0" = 405 ] && grep -qi "^allow: " "$1"' "$code" "$hdr"
curl -sS -o "$T_TMP/metrics" "$u/metrics"
t_check "/metrics is Prometheus text" grep -q "^# TYPE lockd_" "$T_TMP/metrics"
t_done
