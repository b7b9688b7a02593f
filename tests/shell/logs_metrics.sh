#!/usr/bin/env bash
# logs_metrics.sh - issue 27's log and metrics details, as an operator meets
# them: nothing on stdout (the startup line is a stderr log line in
# log_format); error lines carry the error code and the client address;
# POST /sessions lines the new session id, cut; a traceparent's trace id as
# trace_id; a session's expiry names its locks; backend latency by op; the
# process_* metrics; a plain multi-lock counted per name in lockd_locks_held
# and lockd_lock_hold_seconds; and an exposition promtool accepts (when
# installed).
set -eu
. "$(dirname "$0")/lib/common.sh"

lockd_env() {
    env -u LOCKD_BIN -u LOCKD_URL -u LOCKD_TOKEN -u LOCKD_TOKEN_FILE -u LOCKD_LEASE \
        -u LOCKD_LOCK -u LOCKD_FENCING_TOKEN "$LOCKD_BIN" "$@"
}

# start_split NAME FORMAT: a lockd whose stdout and stderr go to separate files.
start_split() {
    rm -f "$T_TMP/$1.port"
    # not through lockd_env: $! must be lockd itself, for the kills below
    env -u LOCKD_BIN -u LOCKD_URL -u LOCKD_TOKEN -u LOCKD_TOKEN_FILE -u LOCKD_LEASE \
        -u LOCKD_LOCK -u LOCKD_FENCING_TOKEN "$LOCKD_BIN" --listen 127.0.0.1:0 \
        --port_file "$T_TMP/$1.port" --log_format "$2" --session_ttl_ms 60000 \
        >"$T_TMP/$1.out" 2>"$T_TMP/$1.err" &
    T_LOCKD_PID=$!
    T_PIDS="$T_PIDS $T_LOCKD_PID"
    t_wait_for 100 t_port_ready "$T_TMP/$1.port" || { cat "$T_TMP/$1.err" >&2; exit 1; }
    T_LOCKD_URL="http://127.0.0.1:$(cat "$T_TMP/$1.port")"
}

# json_line FILE PYTHON-CONDITION: some line of FILE is a JSON object j for
# which the condition holds.
json_line() {
    python3 - "$1" "$2" <<'EOF'
import json, sys
ok = False
for line in open(sys.argv[1]):
    try:
        j = json.loads(line)
    except ValueError:
        continue
    if eval(sys.argv[2], {"j": j}):
        ok = True
sys.exit(0 if ok else 1)
EOF
}

# ---- stdout stays empty; the startup line is on stderr in log_format ----
start_split text text
t_check "text: nothing on stdout" test ! -s "$T_TMP/text.out"
t_check "text: startup line on stderr as text" \
    grep -qE '^[0-9-]+T[0-9:.]+Z info lockd listening listen=127\.0\.0\.1:0 port=[0-9]+ ' \
    "$T_TMP/text.err"
kill "$T_LOCKD_PID"

start_split json json
u=$T_LOCKD_URL
log=$T_TMP/json.err
t_check "json: startup line on stderr as JSON" \
    json_line "$log" 'j["msg"] == "lockd listening" and j["port"] > 0 and j["backend"] == "memory"'

# ---- access log ----
tp=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
# (a 3 s session: on a loaded machine a 1 s one expired before the 409 below)
sid=$(curl -s -XPOST "$u/sessions" -H "traceparent: $tp" -d '{"ttl_ms":3000}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["session"])')
curl -s -XPOST "$u/locks/lm.a" -d "{\"session\":\"$sid\"}" >/dev/null
curl -s -XPOST "$u/locks/lm.b" -d "{\"session\":\"$sid\"}" >/dev/null
curl -s -XPOST "$u/locks/lm.b" -d '{}' >/dev/null                                 # 409 locked
curl -s "$u/nowhere" -H 'traceparent: 00-00000000000000000000000000000000-00f067aa0ba902b7-01' \
    >/dev/null                                                                     # 404, bad trace id
curl -s -XPOST "$u/locks/lm.c" -H 'traceparent: 00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01' \
    >/dev/null                                                                     # upper case: not one
curl -s "$u/healthz" >/dev/null
t_wait_for 50 grep -q '"path":"/healthz"' "$log" || true
t_check "POST /sessions logs the new session id, cut" \
    json_line "$log" "j.get('path') == '/sessions' and j['status'] == 201 and j.get('session') == '${sid:0:6}'"
t_check "a traceparent's trace id is logged as trace_id" \
    json_line "$log" "j.get('path') == '/sessions' and j.get('trace_id') == '${tp:3:32}'"
t_status 1 "no trace_id from an all-zero or upper-case trace id" \
    json_line "$log" "j.get('path') in ('/nowhere', '/locks/lm.c') and 'trace_id' in j"
t_check "a 409 logs its error code and client address" \
    json_line "$log" "j.get('status') == 409 and j.get('error') == 'locked' and j.get('client', '').startswith('127.0.0.1:')"
t_check "a 404 logs its error code and client address" \
    json_line "$log" "j.get('status') == 404 and j.get('error') == 'not_found' and j.get('client', '').startswith('127.0.0.1:')"
t_check "a 2xx carries neither error nor client" \
    json_line "$log" "j.get('path') == '/healthz' and 'error' not in j and 'client' not in j"

# ---- a session's expiry names the locks it freed ----
t_wait_for 100 grep -q '"session expired"' "$log" || true
t_check "session expiry names its locks" \
    json_line "$log" "j['msg'] == 'session expired' and j.get('session') == '${sid:0:6}' and j.get('locks') == 2 and sorted(j.get('names', '').split(',')) == ['lm.a', 'lm.b']"

# ---- metrics ----
curl -s "$u/readyz" >/dev/null
curl -s "$u/locks/lm.a" >/dev/null
curl -s "$u/locks" >/dev/null
curl -s "$u/metrics" >"$T_TMP/metrics.txt"
for op in acquire renew release inspect list renew_many ping force_release acquire_multi; do
    grep -q "^lockd_backend_request_duration_seconds_count{op=\"$op\"} " "$T_TMP/metrics.txt" ||
        t_not_ok "backend latency series for op $op"
done
t_check "backend latency by op: acquire, inspect, list and ping counted" python3 - "$T_TMP/metrics.txt" <<'EOF'
import sys
v = {}
for line in open(sys.argv[1]):
    if line.startswith("lockd_backend_request_duration_seconds_count{op="):
        k, n = line.rsplit(" ", 1)
        v[k.split('"')[1]] = float(n)
sys.exit(0 if len(v) == 9 and v["acquire"] >= 4 and v["inspect"] >= 1 and v["list"] >= 1
         and v["ping"] >= 1 and v["release"] >= 2 else 1)
EOF
t_check "process_* metrics, with sane values" python3 - "$T_TMP/metrics.txt" <<'EOF'
import sys, time
v = {}
for line in open(sys.argv[1]):
    if line.startswith("process_"):
        k, n = line.split()
        v[k] = float(n)
ok = (set(v) == {"process_cpu_seconds_total", "process_resident_memory_bytes",
                 "process_virtual_memory_bytes", "process_open_fds", "process_max_fds",
                 "process_start_time_seconds"}
      and v["process_resident_memory_bytes"] > 0
      and v["process_virtual_memory_bytes"] >= v["process_resident_memory_bytes"]
      and 3 <= v["process_open_fds"] <= v["process_max_fds"]
      and abs(v["process_start_time_seconds"] - time.time()) < 600)
sys.exit(0 if ok else 1)
EOF
# ---- lockd_locks_held counts plain leases too; hold, wait and long-poll times ----
# m SERIES: the value of one series of a fresh scrape (empty when absent).
m() {
    curl -s "$u/metrics" | awk -v s="$1" 'index($0, s " ") == 1 { print $NF }'
}
# m_is SERIES VALUE: the series has that value now.
m_is() { [ "$(m "$1")" = "$2" ]; }
# lease_of JSON: the lease of a grant.
lease_of() { python3 -c 'import json,sys; print(json.load(sys.stdin)["lease"])'; }
plain='lockd_locks_held{session_bound="false"}'
sb='lockd_locks_held{session_bound="true"}'
p0=$(m "$plain")
s0=$(m "$sb")
h0=$(m lockd_lock_hold_seconds_count)
for i in 1 2 3 4 5; do
    curl -s -XPOST "$u/locks/lh.$i" -d '{"ttl_ms":60000}' >"$T_TMP/lh.$i"
done
sid2=$(curl -s -XPOST "$u/sessions" -d '{"ttl_ms":60000}' |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["session"])')
curl -s -XPOST "$u/locks/lh.s1" -d "{\"session\":\"$sid2\"}" >/dev/null
curl -s -XPOST "$u/locks/lh.s2" -d "{\"session\":\"$sid2\"}" >/dev/null
t_check "five plain leases: lockd_locks_held{session_bound=\"false\"} up by 5" \
    m_is "$plain" $((p0 + 5))
t_check "two session locks: lockd_locks_held{session_bound=\"true\"} up by 2" \
    m_is "$sb" $((s0 + 2))
curl -s -XDELETE "$u/locks/lh.1" -H "Lock-Lease: $(lease_of <"$T_TMP/lh.1")" >/dev/null
curl -s -XDELETE "$u/locks/lh.2" -H "Lock-Lease: $(lease_of <"$T_TMP/lh.2")" >/dev/null
t_check "two released: the plain gauge down by 2" m_is "$plain" $((p0 + 3))
t_check "two released: lockd_lock_hold_seconds counted them" \
    m_is lockd_lock_hold_seconds_count $((h0 + 2))
curl -s -XDELETE "$u/sessions/$sid2" >/dev/null
t_check "the session ended: the session gauge back, its locks' holds counted" \
    sh -c '[ "$1" = "$2" ] && [ "$3" = "$4" ]' - "$(m "$sb")" "$s0" \
    "$(m lockd_lock_hold_seconds_count)" $((h0 + 4))
curl -s -XPOST "$u/locks/lh.short" -d '{"ttl_ms":200}' >/dev/null
t_check "a plain lease counted while it lives" m_is "$plain" $((p0 + 4))
t_check "a plain lease that expired is no longer counted (within 10 s)" \
    t_wait_for 100 m_is "$plain" $((p0 + 3))
t_check "an expiry is not a release: no hold time observed" \
    m_is lockd_lock_hold_seconds_count $((h0 + 4))
# A plain multi-lock of 5 names is 5 plain locks; releasing the set, 5 holds.
pm=$(m "$plain")
hm=$(m lockd_lock_hold_seconds_count)
set5='"names":["lm.1","lm.2","lm.3","lm.4","lm.5"]'
curl -s -XPOST "$u/locks" -d "{$set5,\"ttl_ms\":60000}" >"$T_TMP/lm"
t_check "a plain multi-lock of 5 names: the plain gauge up by 5" m_is "$plain" $((pm + 5))
curl -s -XDELETE "$u/locks" -H "Lock-Lease: $(lease_of <"$T_TMP/lm")" -d "{$set5}" >/dev/null
t_check "the set released: the plain gauge back, 5 holds counted" \
    sh -c '[ "$1" = "$2" ] && [ "$3" = "$4" ]' - "$(m "$plain")" "$pm" \
    "$(m lockd_lock_hold_seconds_count)" $((hm + 5))
grep -q '^lockd_lock_hold_seconds_bucket{le="3600"} ' "$T_TMP/metrics.txt" ||
    curl -s "$u/metrics" | grep -q '^lockd_lock_hold_seconds_bucket{le="3600"} ' ||
    t_not_ok "lockd_lock_hold_seconds has buckets up to an hour"
# A granted blocking acquire's wait is in lockd_acquire_wait_seconds; a long
# poll's wait is not in lockd_http_request_duration_seconds.
w0=$(m lockd_acquire_wait_seconds_count)
route='route="/locks/{name}"'
curl -s -XPOST "$u/locks/lh.3" -d '{"wait_ms":1500}' >/dev/null # 409 after 1.5 s
curl -s -XPOST "$u/locks/lh.4" -d '{"wait_ms":20000}' >"$T_TMP/lh.w" &
wpid=$!
t_wait_for 50 m_is lockd_waiters 1 || true
sleep 0.5
curl -s -XDELETE "$u/locks/lh.4" -H "Lock-Lease: $(lease_of <"$T_TMP/lh.4")" >/dev/null
wait "$wpid" || true
t_check "the waiter was granted" grep -q '"lease"' "$T_TMP/lh.w"
t_check "lockd_acquire_wait_seconds counted the granted wait (>= 0.4 s)" \
    sh -c '[ "$1" = "$2" ] && python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= 0.4 else 1)" "$3"' \
    - "$(m lockd_acquire_wait_seconds_count)" $((w0 + 1)) "$(m lockd_acquire_wait_seconds_sum)"
t_check "long polls' waits are not request latency: every /locks/{name} request under 1 s" \
    sh -c '[ -n "$1" ] && [ "$1" = "$2" ]' - \
    "$(m "lockd_http_request_duration_seconds_bucket{${route},le=\"1\"}")" \
    "$(m "lockd_http_request_duration_seconds_count{${route}}")"
curl -s "$u/metrics" >"$T_TMP/metrics.txt"

if command -v promtool >/dev/null 2>&1; then
    t_check "promtool check metrics accepts the exposition" \
        sh -c 'promtool check metrics <"$0" >"$0.lint" 2>&1' "$T_TMP/metrics.txt"
    [ ! -s "$T_TMP/metrics.txt.lint" ] || cat "$T_TMP/metrics.txt.lint"
else
    echo "# skip: promtool not on PATH (Debian package prometheus)"
fi

t_done
