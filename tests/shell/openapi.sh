#!/bin/sh
# openapi.sh - openapi.yaml describes what lockd really answers: drives every
# route (success and error cases) with curl and validates each JSON answer
# against the schema openapi.yaml gives for that route, method and status.
set -eu
. "$(dirname "$0")/lib/common.sh"

if [ ! -d "$REPO/node_modules/ajv" ] || [ ! -d "$REPO/node_modules/yaml" ]; then
    (cd "$REPO" && npm install --no-audit --no-fund --silent) >/dev/null 2>&1 || true
fi
t_start_lockd main
u=$T_LOCKD_URL
cases=$T_TMP/cases.jsonl
hdr=$T_TMP/headers

# rec TEMPLATE METHOD CURL-ARGS...: one request; appends {path, method, status, body}.
rec() {
    tpl=$1 m=$2
    shift 2
    code=$(curl -sS -o "$T_TMP/body" -D "$hdr" -w '%{http_code}' -X "$m" "$@")
    node -e '
        const fs = require("fs");
        const [tpl, m, code, file] = process.argv.slice(1);
        const raw = fs.readFileSync(file, "utf8");
        let body;
        try { body = JSON.parse(raw); } catch (e) { body = { unparsable: raw }; }
        process.stdout.write(JSON.stringify({ path: tpl, method: m.toLowerCase(), status: +code, body }) + "\n");' \
        "$tpl" "$m" "$code" "$T_TMP/body" >>"$cases"
}
lease_of() { sed -n 's/^[Ll]ock-[Ll]ease: *//p' "$hdr" | tr -d '\r'; }

L='/locks/{name}'
S='/sessions/{id}'
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
rec /sessions POST "$u/sessions" -d '{"ttl_ms":5000,"owner":"openapi"}'
sess=$(node -e 'process.stdout.write(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).session)' "$T_TMP/body")
rec "$L" POST "$u/locks/oa.s" -d "{\"session\":\"$sess\"}"
rec "$S" PUT "$u/sessions/$sess"
rec "$S" GET "$u/sessions/$sess"
rec "$S" DELETE "$u/sessions/$sess"
rec "$S" PUT "$u/sessions/$sess"                                    # 404 session_not_found
rec /healthz GET "$u/healthz"
rec /readyz GET "$u/readyz"

t_check "every answer conforms to openapi.yaml" \
    sh -c 'node "$0/tests/shell/lib/openapi_check.js" "$0" <"$1" >"$1.out"; rc=$?; cat "$1.out"; exit $rc' "$REPO" "$cases"
t_check "all $(wc -l <"$cases") requests were checked" test "$(grep -c '^conforms' "$cases.out")" -eq "$(wc -l <"$cases")"
code=$(curl -sS -o /dev/null -D "$hdr" -w '%{http_code}' -X PATCH "$u/locks/oa.a")
t_check "405 carries an Allow header" sh -c '[ "$0" = 405 ] && grep -qi "^allow: " "$1"' "$code" "$hdr"
curl -sS -o "$T_TMP/metrics" "$u/metrics"
t_check "/metrics is Prometheus text" grep -q "^# TYPE lockd_" "$T_TMP/metrics"
t_done
