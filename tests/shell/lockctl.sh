#!/bin/sh
# lockctl.sh - lockctl against a real lockd: plain commands, exit codes
# (64 usage, 69 unreachable, 75 not obtained), and `run`: environment,
# exit status pass-through, mutual exclusion of two runs started together,
# and COMMAND signalled when lockd dies.
set -eu
. "$(dirname "$0")/lib/common.sh"

t_start_lockd main
export LOCKD_URL="$T_LOCKD_URL"
L=$LOCKCTL_BIN
d=$T_TMP

# ---- usage and help
t_check "--help prints usage and exits 0" sh -c '"$0" --help | grep -q "usage: lockctl"' "$L"
t_status 64 "no command is a usage error" "$L"
t_status 64 "unknown command is a usage error" "$L" frobnicate x
t_status 64 "bad duration is a usage error" "$L" acquire sh.a --ttl 5parsecs
t_status 64 "unknown option is a usage error" "$L" status sh.a --bogus
t_status 64 "run without COMMAND is a usage error" "$L" run sh.a --
t_status 64 "--on-lost with a bad value is a usage error" "$L" run sh.a --on-lost maybe -- true
t_status 64 "invalid lock name (400 invalid_name) exits 64" "$L" acquire 'bad/name'

# ---- unreachable
t_status 69 "unreachable lockd exits 69" "$L" --url http://127.0.0.1:1 status sh.a
t_status 69 "LOCKD_URL is used" env LOCKD_URL=http://127.0.0.1:1 "$L" status sh.a

# ---- acquire / status / renew / release
"$L" acquire sh.a --ttl 30s --owner shell-test >"$d/acq.out"
lease=$(sed -n 's/^lease=//p' "$d/acq.out")
token=$(sed -n 's/^fencing_token=//p' "$d/acq.out")
t_check "acquire prints lease= and fencing_token=" test -n "$lease" -a -n "$token"
t_check "status shows the lock held by its owner" \
    sh -c '"$0" status sh.a | grep -qx "held=true" && "$0" status sh.a | grep -qx "owner=shell-test"' "$L"
t_check "renew with --lease succeeds, token unchanged" \
    sh -c '"$0" renew sh.a --lease "$1" --ttl 20s | grep -qx "fencing_token=$2"' "$L" "$lease" "$token"
start=$(date +%s%N)
t_status 75 "--wait 0 on a held lock exits 75" "$L" acquire sh.a --wait 0
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
t_check "--wait 0 answers at once (${elapsed_ms} ms)" test "$elapsed_ms" -lt 2000
start=$(date +%s%N)
t_status 75 "--wait 300ms on a held lock exits 75" "$L" acquire sh.a --wait 300ms
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
t_check "--wait 300ms waits about that long (${elapsed_ms} ms)" test "$elapsed_ms" -ge 250 -a "$elapsed_ms" -lt 3000
t_check "list --prefix shows the lock" sh -c '"$0" list --prefix sh. | cut -f1 | grep -qx sh.a' "$L"
t_check "release via LOCKD_LEASE succeeds" sh -c 'LOCKD_LEASE="$1" "$0" release sh.a >/dev/null' "$L" "$lease"
t_status 1 "release of a lease no longer held exits 1" "$L" release sh.a --lease "$lease"
t_check "status shows the lock free" sh -c '"$0" status sh.a | grep -qx "held=false"' "$L"
t_check "--json acquire prints a JSON object" \
    sh -c '"$0" --json acquire sh.j | python3 -c "import json,sys; d=json.load(sys.stdin); assert d[\"name\"]==\"sh.j\" and d[\"lease\"]"' "$L"

# ---- sessions
sess=$("$L" session create --ttl 5s | sed -n 's/^session=//p')
t_check "session create prints session=" test -n "$sess"
t_check "session heartbeat answers" sh -c '"$0" session heartbeat "$1" | grep -q "^expires_at="' "$L" "$sess"
t_check "acquire under the session" sh -c '"$0" acquire sh.s --session "$1" >/dev/null' "$L" "$sess"
t_check "session end releases its locks" sh -c '"$0" session end "$1" | grep -qx "released=sh.s"' "$L" "$sess"
t_status 1 "heartbeat of an ended session exits 1" "$L" session heartbeat "$sess"

# ---- run: environment, release, exit status
t_check "run gives COMMAND LOCKD_LOCK, LOCKD_LEASE, LOCKD_FENCING_TOKEN" \
    "$L" run sh.r -- sh -c 'test "$LOCKD_LOCK" = sh.r && test -n "$LOCKD_LEASE" && test "$LOCKD_FENCING_TOKEN" -gt 0 && "$0" status sh.r | grep -qx held=true' "$L"
t_check "run released the lock when COMMAND exited" sh -c '"$0" status sh.r | grep -qx "held=false"' "$L"
t_status 7 "run exits with COMMAND's status" "$L" run sh.r -- sh -c 'exit 7'
t_status 143 "run exits 128+N when COMMAND dies of signal N" "$L" run sh.r -- sh -c 'kill -TERM $$'
t_status 127 "run exits 127 when COMMAND does not exist" "$L" run sh.r -- /nonexistent/command
"$L" acquire sh.held --ttl 30s >/dev/null
t_status 75 "run --wait 0 on a held lock exits 75 without running COMMAND" \
    "$L" run sh.held --wait 0 -- touch "$d/should-not-exist"
t_check "COMMAND did not run" test ! -e "$d/should-not-exist"

# ---- run: two runs started together never overlap
work='s=$(date +%s%N); sleep 0.4; e=$(date +%s%N); echo "$s $e $LOCKD_FENCING_TOKEN" > "$0"'
"$L" run sh.mutex --wait 20s -- sh -c "$work" "$d/run1" &
p1=$!
"$L" run sh.mutex --wait 20s -- sh -c "$work" "$d/run2" &
p2=$!
"$L" run sh.mutex --wait 20s -- sh -c "$work" "$d/run3" &
p3=$!
rc1=0 rc2=0 rc3=0
wait $p1 || rc1=$?
wait $p2 || rc2=$?
wait $p3 || rc3=$?
t_check "three concurrent runs all succeed ($rc1 $rc2 $rc3)" test "$rc1$rc2$rc3" = 000
no_overlap() {
    sort -n "$d/run1" "$d/run2" "$d/run3" >"$d/runs" || return 1
    [ "$(wc -l <"$d/runs")" -eq 3 ] || return 1
    # sorted by start: each must start after the previous ended, with a larger token
    awk 'NR > 1 && ($1 < pe || $3 <= pt) { bad = 1 } { pe = $2; pt = $3 } END { exit bad }' "$d/runs"
}
t_check "their critical sections never overlap and tokens increase" no_overlap

# ---- run: lockd killed -> COMMAND signalled
t_start_lockd victim
victim_url=$T_LOCKD_URL
victim_pid=$T_LOCKD_PID
"$L" --url "$victim_url" run sh.victim --session-ttl 1500ms -- \
    sh -c 'trap "echo got-term > \"$0\"; exit 0" TERM; touch "$1"; while :; do sleep 0.1; done' \
    "$d/victim.term" "$d/victim.started" 2>"$d/victim.err" &
run_pid=$!
T_PIDS="$T_PIDS $run_pid"
t_check "run under the doomed lockd started COMMAND" t_wait_for 50 test -e "$d/victim.started"
kill -9 "$victim_pid"
t_check "COMMAND gets SIGTERM after lockd is killed" t_wait_for 80 test -s "$d/victim.term"
run_rc=0
t_wait_for 50 sh -c '! kill -0 "$0" 2>/dev/null' "$run_pid" || true
wait "$run_pid" || run_rc=$?
t_check "run exited with COMMAND's status after the loss ($run_rc)" test "$run_rc" -eq 0
t_check "run said why it signalled COMMAND" grep -q "lost" "$d/victim.err"

t_done
