#!/bin/sh
# lockctl.sh - lockctl against a real lockd: plain commands, exit codes
# (64 usage, 66 token file, 69 unreachable or TLS not verified, 75 not
# obtained, 77 unauthorized), --token-file, LOCKD_TOKEN_FILE and --cacert
# (HTTPS with a throwaway CA), --shared and --limit on acquire and run
# (readers together, a writer refused, a semaphore's slots and its
# limit_mismatch), and `run`: environment, exit status
# pass-through, mutual exclusion of runs started together, COMMAND signalled
# when lockd dies (--on-lost term, kill, ignore), `observe` (a line per
# change, --count), `elect` (one leader at a time, hand-over on SIGTERM within
# 1 s and on SIGKILL within the session ttl + 1 s; a leader whose lock an
# operator force-unlocks stops COMMAND and campaigns again, and the other
# takes over with a larger token; release --force without an admin token
# exits 77; a COMMAND deaf to SIGTERM is SIGKILLed after --kill-after), and,
# with two lockd on one redis-server, COMMAND (of run, and of elect's leader) stopped before a
# lease ttl shorter than the session ttl lets another client in.
set -eu
. "$(dirname "$0")/lib/common.sh"

t_start_lockd main
export LOCKD_URL="$T_LOCKD_URL"
L=$LOCKCTL_BIN
d=$T_TMP

# ---- usage and help
t_check "--help prints usage and exits 0" sh -c '"$0" --help | grep -q "usage: lockctl"' "$L"
t_check "--help lists for acquire, renew and session create only fields lockd takes (openapi.yaml)" \
    sh -c '"$0" --help | python3 -c "$1" "$2"' "$L" '
import re, sys, yaml
spec = yaml.safe_load(open(sys.argv[1]))["components"]["schemas"]
text = sys.stdin.read()
field = {"ttl": "ttl_ms", "wait": "wait_ms", "max-hold": "max_hold_ms", "shared": "mode",
         "lock-delay": "lock_delay_ms", "lease": None}
def flags(start):
    block = re.search(r"^  " + start + r"(.*?)(?=^  [a-z])", text, re.S | re.M).group(1)
    return set(re.findall(r"--([a-z-]+)", block))
bad = []
for cmd, schema in (("acquire", "AcquireRequest"), ("renew", "RenewRequest"),
                    ("session create", "SessionCreateRequest")):
    props = spec[schema]["properties"]
    for f in flags(cmd):
        name = field.get(f, f)
        if name is not None and name not in props:
            bad.append(cmd + " --" + f)
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
' "$REPO/openapi.yaml"
t_status 64 "no command is a usage error" "$L"
t_status 64 "unknown command is a usage error" "$L" frobnicate x
t_status 64 "bad duration is a usage error" "$L" acquire sh.a --ttl 5parsecs
t_status 64 "a bare small number to a duration flag is a usage error" "$L" acquire sh.a --ttl 30
# strtoull skips leading whitespace; a duration must not: tab, newline or
# space around it is refused like any bad duration (exit 64, same message).
tab=$(printf '\t')
nl=$(printf '\nx'); nl=${nl%x}
ws_duration() { # LABEL VALUE
    t_status 64 "duration $1 is a usage error" "$L" acquire sh.ws --ttl "$2"
    t_check "... that says invalid duration ($1)" \
        sh -c '"$0" acquire sh.ws --ttl "$1" 2>&1 | grep -q "^lockctl: --ttl: invalid duration"' "$L" "$2"
}
ws_duration '<tab>5s' "${tab}5s"
ws_duration '<tab>500' "${tab}500"
ws_duration '<newline>5s' "${nl}5s"
ws_duration '<space>5s' " 5s"
ws_duration '5s<tab>' "5s${tab}"
ws_duration '5s<space>' "5s "
t_status 64 "a number (--limit) after a tab is a usage error too" "$L" list --limit "${tab}5"
t_status 64 "... and after a plus sign" "$L" list --limit +5
t_check "... and acquired nothing: sh.ws is free" sh -c '"$0" status sh.ws | grep -qx "held=false"' "$L"
t_check "... that suggests seconds" sh -c '"$0" acquire sh.a --ttl 30 2>&1 | grep -q "did you mean 30s?"' "$L"
t_status 64 "... for --wait and --session-ttl too" "$L" run sh.a --wait 5 -- true
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
# status: key=value lines with no JSON in them, or with --json lockd's JSON
"$L" acquire sh.st --shared --ttl 30s >/dev/null
"$L" acquire sh.st --shared --ttl 30s --owner two >/dev/null
"$L" status sh.st >"$d/st.out"
t_check "status prints no JSON inside its lines" sh -c '! grep -q "[[{]" "$0"' "$d/st.out"
t_check "status lists each holder's fields as lines" \
    sh -c 'grep -qx "holder_list.0.owner=two" "$0" && grep -qx "holder_list.1.mode=shared" "$0"' "$d/st.out"
t_check "status --json prints lockd's JSON" \
    sh -c '"$0" --json status sh.st | python3 -c "import json,sys; d=json.load(sys.stdin); assert d[\"holders\"]==2 and d[\"holder_list\"][0][\"owner\"]==\"two\""' "$L"
t_check "--json acquire prints a JSON object" \
    sh -c '"$0" --json acquire sh.j | python3 -c "import json,sys; d=json.load(sys.stdin); assert d[\"name\"]==\"sh.j\" and d[\"lease\"]"' "$L"

# ---- sessions
sess=$("$L" session create --ttl 5s | sed -n 's/^session=//p')
t_check "session create prints session=" test -n "$sess"
t_check "session heartbeat answers" sh -c '"$0" session heartbeat "$1" | grep -q "^expires_at="' "$L" "$sess"
t_check "acquire under the session" sh -c '"$0" acquire sh.s --session "$1" >/dev/null' "$L" "$sess"
t_check "session end releases its locks" sh -c '"$0" session end "$1" | grep -qx "released=sh.s"' "$L" "$sess"
t_status 1 "heartbeat of an ended session exits 1" "$L" session heartbeat "$sess"

# ---- --shared and --limit: reader-writer locks and semaphores
"$L" acquire sh.rw --shared --ttl 30s >"$d/r1.out"
"$L" acquire sh.rw --shared --ttl 30s >"$d/r2.out"
t_check "acquire --shared twice: two readers hold" \
    sh -c '"$0" status sh.rw | grep -qx "holders=2" && "$0" status sh.rw | grep -qx "mode=shared"' "$L"
t_status 75 "an exclusive acquire while readers hold exits 75" "$L" acquire sh.rw --wait 0
t_check "run --shared runs beside the readers" \
    "$L" run sh.rw --shared --wait 0 -- sh -c '"$0" status sh.rw | grep -qx "holders=3"' "$L"
for f in r1 r2; do "$L" release sh.rw --lease "$(sed -n 's/^lease=//p' "$d/$f.out")" >/dev/null; done
t_check "the readers' releases free it" sh -c '"$0" status sh.rw | grep -qx "held=false"' "$L"
"$L" acquire sh.sem --limit 2 >"$d/s1.out"
t_check "run --limit 2 takes the second slot" \
    "$L" run sh.sem --limit 2 --wait 0 -- sh -c '"$0" status sh.sem | grep -qx "holders=2"' "$L"
"$L" acquire sh.sem --limit 2 >/dev/null
t_status 75 "a third holder of a semaphore of 2 exits 75" "$L" acquire sh.sem --limit 2 --wait 0
t_status 1 "another --limit than the one in force exits 1 (limit_mismatch)" \
    "$L" acquire sh.sem --limit 3

# ---- run: environment, release, exit status
t_check "run gives COMMAND LOCKD_LOCK, LOCKD_LEASE, LOCKD_FENCING_TOKEN" \
    "$L" run sh.r -- sh -c 'test "$LOCKD_LOCK" = sh.r && test -n "$LOCKD_LEASE" && test "$LOCKD_FENCING_TOKEN" -gt 0 && "$0" status sh.r | grep -qx held=true' "$L"
t_check "run released the lock when COMMAND exited" sh -c '"$0" status sh.r | grep -qx "held=false"' "$L"
t_status 7 "run exits with COMMAND's status" "$L" run sh.r -- sh -c 'exit 7'
t_status 143 "run exits 128+N when COMMAND dies of signal N" "$L" run sh.r -- sh -c 'kill -TERM $$'
t_status 127 "run exits 127 when COMMAND does not exist" "$L" run sh.r -- /nonexistent/command
t_check "run names a missing COMMAND's path and the reason" \
    sh -c '"$0" run sh.r -- /nonexistent/command 2>&1 | grep -qx "lockctl: /nonexistent/command: No such file or directory"' "$L"
printf 'echo hi\n' >"$d/not-executable"
t_status 126 "run exits 126 when COMMAND is not executable" "$L" run sh.r -- "$d/not-executable"
t_check "run names a non-executable COMMAND and the reason" \
    sh -c '"$0" run sh.r -- "$1" 2>&1 | grep -qx "lockctl: $1: Permission denied"' "$L" "$d/not-executable"
t_check "run names a COMMAND not on PATH" \
    sh -c '"$0" run sh.r -- no-such-command-zz 2>&1 | grep -qx "lockctl: no-such-command-zz: command not found"' "$L"
"$L" acquire sh.held --ttl 30s >/dev/null
t_status 75 "run --wait 0 on a held lock exits 75 without running COMMAND" \
    "$L" run sh.held --wait 0 -- touch "$d/should-not-exist"
t_check "COMMAND did not run" test ! -e "$d/should-not-exist"
# SIGTERM or SIGINT during run --wait ends the session run created (not left to its ttl)
sessions_now() { curl -s "$LOCKD_URL/metrics" | awk '$1 == "lockd_sessions" { print $2 }'; }
sessions_are() { [ "$(sessions_now)" = "$1" ]; }
for sig_rc in TERM:143 INT:130; do
    sig=${sig_rc%:*}
    s0=$(sessions_now)
    "$L" run sh.held --wait 60s --session-ttl 60s -- touch "$d/should-not-exist" 2>"$d/sig.err" &
    rp=$!
    t_wait_for 100 sessions_are $((s0 + 1)) || true
    sleep 0.3
    kill -"$sig" "$rp"
    set +e
    wait "$rp"
    rrc=$?
    set -e
    t_check "SIG$sig during run --wait exits 128+N ($rrc)" test "$rrc" -eq "${sig_rc#*:}"
    t_check "SIG$sig during run --wait ended its session at once" sessions_are "$s0"
    t_check "SIG$sig during run --wait is reported" grep -q "SIG$sig before COMMAND started" "$d/sig.err"
done
t_check "COMMAND did not run after the signal" test ! -e "$d/should-not-exist"

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

# ---- run --on-lost kill: lockd dies, COMMAND gets SIGKILL, run exits 128+9
t_start_lockd onlost-kill
"$L" --url "$T_LOCKD_URL" run sh.onlost.kill --session-ttl 1500ms --on-lost kill -- \
    sh -c 'touch "$0"; exec sleep 20' "$d/kill.started" 2>"$d/kill.err" &
run_pid=$!
T_PIDS="$T_PIDS $run_pid"
t_check "--on-lost kill: COMMAND started" t_wait_for 50 test -e "$d/kill.started"
kill -9 "$T_LOCKD_PID"
run_rc=0
t_wait_for 80 sh -c '! kill -0 "$0" 2>/dev/null' "$run_pid" || true
wait "$run_pid" || run_rc=$?
t_check "--on-lost kill: run exits 137 (128 + SIGKILL) when the lock is lost ($run_rc)" test "$run_rc" -eq 137
t_check "--on-lost kill: run said it sent SIGKILL" grep -q "sending SIGKILL" "$d/kill.err"

# ---- run --on-lost ignore: lockd dies, COMMAND is told nothing and finishes
# normally (once run has reported the loss), run exits with COMMAND's status
t_start_lockd onlost-ignore
"$L" --url "$T_LOCKD_URL" run sh.onlost.ignore --session-ttl 1500ms --on-lost ignore -- sh -c '
    trap "echo got-term >\"\$0\"" TERM
    touch "$1"
    i=0
    until grep -q "keeps running" "$2" 2>/dev/null; do
        i=$((i + 1)); [ $i -lt 100 ] || exit 98; sleep 0.1
    done
    exit 5' "$d/ignore.term" "$d/ignore.started" "$d/ignore.err" 2>"$d/ignore.err" &
run_pid=$!
T_PIDS="$T_PIDS $run_pid"
t_check "--on-lost ignore: COMMAND started" t_wait_for 50 test -e "$d/ignore.started"
kill -9 "$T_LOCKD_PID"
run_rc=0
t_wait_for 150 sh -c '! kill -0 "$0" 2>/dev/null' "$run_pid" || true
wait "$run_pid" || run_rc=$?
t_check "--on-lost ignore: COMMAND finished normally, run exits with its status ($run_rc)" \
    test "$run_rc" -eq 5
t_check "--on-lost ignore: run reported the loss and left COMMAND running" \
    grep -q "lost: .*; COMMAND (pid [0-9]*) keeps running (--on-lost ignore)" "$d/ignore.err"
t_check "--on-lost ignore: COMMAND got no signal" test ! -e "$d/ignore.term"

# ---- run: lockd shows the lock no longer held by this run (here COMMAND
# released it itself, through LOCKD_LEASE): that is a loss too
sr_rc=0
"$L" run sh.selfrelease --session-ttl 1500ms -- sh -c '
    trap "echo got-term >\"\$0\"; kill \$s; exit 0" TERM
    "$1" release "$LOCKD_LOCK" >/dev/null || exit 99
    sleep 5 & s=$!
    wait; exit 97' "$d/selfrelease.term" "$L" 2>"$d/selfrelease.err" || sr_rc=$?
t_check "a lock no longer held by the run's lease counts as lost: COMMAND got SIGTERM ($sr_rc)" \
    test -s "$d/selfrelease.term" -a "$sr_rc" -eq 0
t_check "run said lockd shows it no longer held" grep -q "no longer held by this run" "$d/selfrelease.err"

# ---- bearer tokens: --token-file and LOCKD_TOKEN_FILE
printf '# lockd tokens\nsecret-one\nsecret-two\n' >"$d/tokens"
printf '# ours\n\n  secret-two  \n' >"$d/token.right"
printf 'not-a-token\n' >"$d/token.wrong"
printf '# nothing but a comment\n\n' >"$d/token.empty"
t_start_lockd auth --auth_token_file "$d/tokens"
auth_url=$T_LOCKD_URL
t_check "--token-file with a valid token works" \
    sh -c '"$0" --url "$1" --token-file "$2" status sh.auth | grep -qx held=false' "$L" "$auth_url" "$d/token.right"
t_check "LOCKD_TOKEN_FILE is used" \
    sh -c 'LOCKD_TOKEN_FILE="$2" "$0" --url "$1" status sh.auth | grep -qx held=false' "$L" "$auth_url" "$d/token.right"
t_check "run sends the token for every request (session, acquire, heartbeat, release)" \
    sh -c 'LOCKD_TOKEN_FILE="$2" "$0" --url "$1" run sh.auth --session-ttl 1500ms -- sleep 2 &&
        LOCKD_TOKEN_FILE="$2" "$0" --url "$1" status sh.auth | grep -qx held=false' "$L" "$auth_url" "$d/token.right"
t_check "LOCKD_TOKEN (the token itself, as examples/ use it) is used" \
    sh -c 'LOCKD_TOKEN=secret-one "$0" --url "$1" status sh.auth | grep -qx held=false' "$L" "$auth_url"
t_status 77 "a wrong LOCKD_TOKEN exits 77" env LOCKD_TOKEN=nope "$L" --url "$auth_url" status sh.auth
t_check "--token-file wins over LOCKD_TOKEN" \
    sh -c 'LOCKD_TOKEN=nope "$0" --url "$1" --token-file "$2" status sh.auth | grep -qx held=false' "$L" "$auth_url" "$d/token.right"
t_check "lockctl --version and lockd --version name their version" \
    sh -c '"$0" --version | grep -q "^lockctl ." && "$1" --version | grep -q "^lockd ."' "$L" "${LOCKD_BIN:-$REPO/build/lockd}"
t_status 77 "no token against an authenticating lockd exits 77" "$L" --url "$auth_url" status sh.auth
t_status 77 "a wrong token exits 77" "$L" --url "$auth_url" --token-file "$d/token.wrong" status sh.auth
t_status 77 "run with a wrong token exits 77 without running COMMAND" \
    "$L" --url "$auth_url" --token-file "$d/token.wrong" run sh.auth -- touch "$d/auth-ran"
t_check "COMMAND did not run" test ! -e "$d/auth-ran"
t_status 66 "a missing token file exits 66" "$L" --url "$auth_url" --token-file "$d/no-such-file" status sh.auth
t_status 66 "a missing LOCKD_TOKEN_FILE exits 66" env LOCKD_TOKEN_FILE="$d/no-such-file" "$L" --url "$auth_url" status sh.auth
t_status 66 "a token file without a token exits 66" "$L" --url "$auth_url" --token-file "$d/token.empty" status sh.auth

# ---- TLS: --cacert against lockd serving HTTPS with a throwaway CA
tls_certs() (
    cd "$d" &&
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key \
            -out ca.pem -days 2 -subj '/CN=lockctl test CA' \
            -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign &&
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout key.pem \
            -out srv.csr -subj '/CN=127.0.0.1' &&
        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >ext.cnf &&
        openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
            -extfile ext.cnf -out cert.pem &&
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout other.key \
            -out other-ca.pem -days 2 -subj '/CN=some other CA'
) >"$d/openssl.log" 2>&1
t_check "openssl made a CA and a certificate for 127.0.0.1" tls_certs
t_start_lockd tls --tls_cert "$d/cert.pem" --tls_key "$d/key.pem"
tls_url=$(echo "$T_LOCKD_URL" | sed 's|^http:|https:|')
t_check "--cacert with the right CA works over https" \
    sh -c '"$0" --url "$1" --cacert "$2" status sh.tls | grep -qx held=false' "$L" "$tls_url" "$d/ca.pem"
t_check "run works over https (--cacert for every request)" \
    "$L" --url "$tls_url" --cacert "$d/ca.pem" run sh.tls --session-ttl 1500ms -- \
    sh -c '"$0" --url "$1" --cacert "$2" status sh.tls | grep -qx held=true && sleep 2' "$L" "$tls_url" "$d/ca.pem"
t_status 69 "--cacert with another CA exits 69 (certificate not verified)" \
    "$L" --url "$tls_url" --cacert "$d/other-ca.pem" status sh.tls
t_status 69 "without --cacert the throwaway CA is not trusted: exits 69" "$L" --url "$tls_url" status sh.tls

# ---- elect and observe
t_status 64 "elect without COMMAND is a usage error" "$L" elect sh.e --
t_status 64 "elect with a bad --kill-after is a usage error" "$L" elect sh.e --kill-after soon -- true
t_status 64 "observe --count 0 is a usage error" "$L" observe sh.o --count 0
t_status 69 "observe of an unreachable lockd exits 69" "$L" --url http://127.0.0.1:1 observe sh.o
t_status 3 "elect exits with COMMAND's status when it ends by itself" "$L" elect sh.e0 -- sh -c 'exit 3'
t_check "elect resigned when COMMAND ended" sh -c '"$0" status sh.e0 | grep -qx "held=false"' "$L"

# observe: the first line at once, then one per change, stops after --count
"$L" observe sh.obs --count 3 >"$d/obs.out" 2>"$d/obs.err" &
obs_pid=$!
T_PIDS="$T_PIDS $obs_pid"
t_check "observe prints the first line at once" t_wait_for 20 test -s "$d/obs.out"
"$L" acquire sh.obs --owner obs-test >"$d/obs.acq"
obs_tok=$(sed -n 's/^fencing_token=//p' "$d/obs.acq")
obs_lease=$(sed -n 's/^lease=//p' "$d/obs.acq")
t_check "observe prints a line when the lock is taken" \
    t_wait_for 20 sh -c '[ "$(wc -l <"$0")" -ge 2 ]' "$d/obs.out"
"$L" renew sh.obs --lease "$obs_lease" >/dev/null # a renewal: no line
"$L" release sh.obs --lease "$obs_lease" >/dev/null
obs_rc=0
t_wait_for 30 sh -c '! kill -0 "$0" 2>/dev/null' "$obs_pid" || true
wait "$obs_pid" || obs_rc=$?
t_check "observe stops after --count 3 lines and exits 0 ($obs_rc)" \
    test "$obs_rc" -eq 0 -a "$(wc -l <"$d/obs.out")" -eq 3
t_check "observe's lines: free, held by obs-test with its token, free again" python3 -c '
import json, sys
ls = [json.loads(l) for l in open(sys.argv[1])]
assert [l["held"] for l in ls] == [False, True, False], ls
assert ls[0]["owner"] is None and ls[0]["fencing_token"] is None, ls
assert ls[1]["owner"] == "obs-test" and ls[1]["fencing_token"] == int(sys.argv[2]), ls
assert all(l["name"] == "sh.obs" for l in ls) and ls[1]["index"] != ls[2]["index"], ls
' "$d/obs.out" "$obs_tok"

# elect: three candidates in turn on one lockd. COMMAND logs "S time token"
# when it starts and "E time token" when SIGTERM stops it; the log sorted by
# time must alternate S and E (never two leaders) with growing tokens.
lead='trap "echo E \$(date +%s%N) \$LOCKD_FENCING_TOKEN >>\"\$0\"; exit 0" TERM
echo S $(date +%s%N) $LOCKD_FENCING_TOKEN >>"$0"; while :; do sleep 0.05; done'
n_starts() { cat "$d/elect.log" 2>/dev/null | grep -c '^S' || true; }
starts_ge() { [ "$(n_starts)" -ge "$1" ]; }
"$L" elect sh.elect --session-ttl 1s -- sh -c "$lead" "$d/elect.log" 2>"$d/e1.err" &
e1=$!
T_PIDS="$T_PIDS $e1"
t_check "elect: the first candidate leads" t_wait_for 30 starts_ge 1
"$L" elect sh.elect --session-ttl 1s -- sh -c "$lead" "$d/elect.log" 2>"$d/e2.err" &
e2=$!
T_PIDS="$T_PIDS $e2"
sleep 0.5
t_check "elect: the second candidate waits while the first leads" test "$(n_starts)" -eq 1
t_kill=$(date +%s%N)
kill -TERM "$e1"
e1_rc=0
wait "$e1" || e1_rc=$?
t_check "elect: SIGTERM stops COMMAND, resigns, exits 143 ($e1_rc)" test "$e1_rc" -eq 143
t_check "elect: the second candidate leads after the SIGTERM" t_wait_for 30 starts_ge 2
s2=$(grep '^S' "$d/elect.log" | sed -n 2p | cut -d' ' -f2)
t_check "elect: SIGTERM handed over within 1 s ($(((s2 - t_kill) / 1000000)) ms)" \
    test $((s2 - t_kill)) -lt 1000000000
"$L" elect sh.elect --session-ttl 1s -- sh -c "$lead" "$d/elect.log" 2>"$d/e3.err" &
e3=$!
T_PIDS="$T_PIDS $e3"
sleep 0.3
t_kill=$(date +%s%N)
kill -9 "$e2"
t_check "elect: the third candidate leads after the leader's lockctl got SIGKILL" t_wait_for 40 starts_ge 3
s3=$(grep '^S' "$d/elect.log" | sed -n 3p | cut -d' ' -f2)
t_check "elect: SIGKILL handed over within session ttl + 1 s ($(((s3 - t_kill) / 1000000)) ms)" \
    test $((s3 - t_kill)) -lt 2000000000
kill -TERM "$e3"
e3_rc=0
wait "$e3" || e3_rc=$?
t_check "elect: the third candidate exits 143 on SIGTERM ($e3_rc)" test "$e3_rc" -eq 143
t_wait_for 20 sh -c '[ "$(grep -c "^E" "$0")" -ge "$(grep -c "^S" "$0")" ]' "$d/elect.log" || true
# Three leaderships at least: a candidate whose heartbeat came late on a
# loaded machine may have lost the lead and led again, which is no fault.
t_check "elect: one leader at a time, each with a larger token" sh -c '
    n=$(wc -l <"$0") && [ "$n" -ge 6 ] && [ $((n % 2)) -eq 0 ] &&
    sort -k2,2n "$0" | awk "BEGIN { w = \"S\" }
        \$1 != w { bad = 1 }
        \$1 == \"S\" { if (\$3 <= pt) bad = 1; pt = \$3; w = \"E\"; next }
        { if (\$3 != pt) bad = 1; w = \"S\" }
        END { exit bad }"' "$d/elect.log"
[ "$T_FAIL" -eq 0 ] || for f in elect.log e1.err e2.err e3.err; do echo "#! $f:"; sed 's/^/#!   /' "$d/$f"; done
t_check "elect: the lock is free after the last leader resigned" \
    sh -c '"$0" status sh.elect | grep -qx "held=false"' "$L"

# elect: a leader that loses its lock through lockd (an operator's
# force-unlock) stops COMMAND and campaigns again; the other candidate takes
# over with a larger token, and the first leads again once that one resigns.
printf 'admin-secret\n' >"$d/admin.tok"
t_start_lockd admin --admin_token_file "$d/admin.tok"
adm_url=$T_LOCKD_URL
fl="$d/force.log"
f_starts() { cat "$fl" 2>/dev/null | grep -c '^S' || true; }
f_ends() { cat "$fl" 2>/dev/null | grep -c '^E' || true; }
f_starts_ge() { [ "$(f_starts)" -ge "$1" ]; }
f_ends_ge() { [ "$(f_ends)" -ge "$1" ]; }
"$L" --url "$adm_url" elect sh.force --session-ttl 3s -- sh -c "$lead" "$fl" 2>"$d/f1.err" &
f1=$!
T_PIDS="$T_PIDS $f1"
t_check "elect/force: the first candidate leads" t_wait_for 30 f_starts_ge 1
"$L" --url "$adm_url" elect sh.force --session-ttl 3s -- sh -c "$lead" "$fl" 2>"$d/f2.err" &
f2=$!
T_PIDS="$T_PIDS $f2"
sleep 0.5
t_check "elect/force: the second candidate waits" test "$(f_starts)" -eq 1
tok1=$(grep '^S' "$fl" | sed -n 1p | cut -d' ' -f3)
t_status 77 "elect/force: release --force without an admin token exits 77 (403 forbidden)" \
    "$L" --url "$adm_url" release --force sh.force
t_check "elect/force: ... and the leader still leads" test "$(f_ends)" -eq 0
t_force=$(date +%s%N)
t_check "elect/force: the operator force-unlocks the leader's lock" \
    sh -c '"$0" --url "$1" --token-file "$2" release --force sh.force >/dev/null' "$L" "$adm_url" "$d/admin.tok"
t_check "elect/force: the former leader's COMMAND is stopped" t_wait_for 60 f_ends_ge 1
e1=$(grep '^E' "$fl" | sed -n 1p)
t_check "elect/force: ... the one with the first token ($e1)" test "$(echo "$e1" | cut -d' ' -f3)" = "$tok1"
t_check "elect/force: ... within 3 s of the force-unlock ($((($(echo "$e1" | cut -d' ' -f2) - t_force) / 1000000)) ms)" \
    test $(($(echo "$e1" | cut -d' ' -f2) - t_force)) -lt 3000000000
t_check "elect/force: the other candidate leads" t_wait_for 60 f_starts_ge 2
t_check "elect/force: ... with a larger token" \
    test "$(grep '^S' "$fl" | sed -n 2p | cut -d' ' -f3)" -gt "$tok1"
t_check "elect/force: the former leader says it lost the lead and campaigns again" \
    t_wait_for 30 grep -q "leadership of 'sh.force' lost" "$d/f1.err"
t_check "elect/force: ... and is still running" kill -0 "$f1"
sleep 1
t_check "elect/force: ... without leading while the other leads" test "$(f_starts)" -eq 2
kill -TERM "$f2"
f2_rc=0
wait "$f2" || f2_rc=$?
t_check "elect/force: the second leader exits 143 on SIGTERM ($f2_rc)" test "$f2_rc" -eq 143
t_check "elect/force: the first candidate leads again" t_wait_for 30 f_starts_ge 3
t_check "elect/force: ... with a larger token still" \
    test "$(grep '^S' "$fl" | sed -n 3p | cut -d' ' -f3)" -gt "$(grep '^S' "$fl" | sed -n 2p | cut -d' ' -f3)"
kill -TERM "$f1"
wait "$f1" || true

# elect: a COMMAND that ignores SIGTERM gets SIGKILL after --kill-after
"$L" elect sh.ka --kill-after 500ms -- sh -c 'trap "" TERM; echo S >>"$0"; while :; do sleep 0.05; done' \
    "$d/ka.log" 2>"$d/ka.err" &
ka=$!
T_PIDS="$T_PIDS $ka"
t_check "elect/kill-after: the candidate leads" t_wait_for 30 test -s "$d/ka.log"
t_kill=$(date +%s%N)
kill -TERM "$ka"
ka_rc=0
wait "$ka" || ka_rc=$?
ka_ms=$((($(date +%s%N) - t_kill) / 1000000))
t_check "elect/kill-after: exits 143 once COMMAND, deaf to SIGTERM, was SIGKILLed ($ka_rc)" test "$ka_rc" -eq 143
t_check "elect/kill-after: ... no sooner than --kill-after 500ms, nor much later ($ka_ms ms)" \
    test "$ka_ms" -ge 450 -a "$ka_ms" -lt 5000
t_check "elect/kill-after: ... and says so" grep -q "still runs 500 ms after SIGTERM: sending SIGKILL" "$d/ka.err"
t_check "elect/kill-after: the lock is free after it resigned" \
    sh -c '"$0" status sh.ka | grep -qx "held=false"' "$L"

# ---- run: a lease ttl shorter than the session ttl bounds how long COMMAND
# may outlive its lockd. Two lockd share one redis-server; `run --ttl 1s
# --session-ttl 10s` through lockd A, another client waits through lockd B,
# then A dies (SIGKILL) or hangs (SIGSTOP). The lease expires in redis about
# 1 s later and B grants it: COMMAND must have been stopped by then. Each side
# records the time after the fact (COMMAND when its SIGTERM trap runs, the
# other client when its acquire has returned), so a slow machine delays both.
if t_start_redis redis; then
    # safety_case TAG SIGNAL
    safety_case() {
        t_start_lockd "lockd-a-$1" --redis "$T_REDIS_URL"
        a_url=$T_LOCKD_URL a_pid=$T_LOCKD_PID
        t_start_lockd "lockd-b-$1" --redis "$T_REDIS_URL"
        b_url=$T_LOCKD_URL
        "$L" --url "$a_url" run "sh.safety.$1" --ttl 1s --session-ttl 10s -- sh -c '
            trap "date +%s%N >\"\$0\"; kill \$s 2>/dev/null; exit 0" TERM
            sleep 20 & s=$!
            touch "$1"
            wait' "$d/safety.$1.stopped" "$d/safety.$1.started" 2>"$d/safety.$1.err" &
        s_run=$!
        T_PIDS="$T_PIDS $s_run"
        t_check "safety/$1: COMMAND runs under lockd A" t_wait_for 50 test -e "$d/safety.$1.started"
        # B's client queues for the lock while A still holds it
        sh -c '"$0" --url "$1" acquire "$2" --wait 20s --ttl 30s >/dev/null 2>"$3.err"; rc=$?
            date +%s%N >"$3"; exit $rc' "$L" "$b_url" "sh.safety.$1" "$d/safety.$1.granted" &
        s_acq=$!
        T_PIDS="$T_PIDS $s_acq"
        sleep 0.3
        kill "-$2" "$a_pid"
        s_rc=0
        t_wait_for 150 test -s "$d/safety.$1.granted" || true
        wait "$s_acq" || s_rc=$?
        t_check "safety/$1: the other client got the lock through lockd B ($s_rc)" test "$s_rc" -eq 0
        t_check "safety/$1: COMMAND was stopped" t_wait_for 150 test -s "$d/safety.$1.stopped"
        stopped=$(cat "$d/safety.$1.stopped" 2>/dev/null || echo 0)
        granted=$(cat "$d/safety.$1.granted" 2>/dev/null || echo 0)
        t_check "safety/$1: COMMAND stopped before the lock was granted again ($(((granted - stopped) / 1000000)) ms before)" \
            test "$stopped" -gt 0 -a "$stopped" -le "$granted"
        [ "$2" = STOP ] && kill -CONT "$a_pid" 2>/dev/null
        t_wait_for 50 sh -c '! kill -0 "$0" 2>/dev/null' "$s_run" || true
        wait "$s_run" 2>/dev/null || true
    }
    safety_case killed KILL
    safety_case hung STOP

    # elect: the leader's lockd hangs (SIGSTOP), so its session can no longer
    # be kept; the lease (1 s, shorter than the 10 s session ttl) expires in
    # redis and the candidate on the other lockd leads. The hung side's
    # COMMAND must have stopped before the other's started, with a larger
    # token after; once its lockd answers again it campaigns again.
    t_start_lockd lockd-ea --redis "$T_REDIS_URL"
    ea_url=$T_LOCKD_URL ea_pid=$T_LOCKD_PID
    t_start_lockd lockd-eb --redis "$T_REDIS_URL"
    eb_url=$T_LOCKD_URL
    el="$d/elect-hung.log"
    eh_starts() { cat "$el" 2>/dev/null | grep -c '^S' || true; }
    eh_starts_ge() { [ "$(eh_starts)" -ge "$1" ]; }
    "$L" --url "$ea_url" elect sh.elect.hung --ttl 1s --session-ttl 10s -- sh -c "$lead" "$el" 2>"$d/eha.err" &
    eha=$!
    T_PIDS="$T_PIDS $eha"
    t_check "elect/hung: the candidate on lockd A leads" t_wait_for 50 eh_starts_ge 1
    "$L" --url "$eb_url" elect sh.elect.hung --ttl 1s --session-ttl 10s -- sh -c "$lead" "$el" 2>"$d/ehb.err" &
    ehb=$!
    T_PIDS="$T_PIDS $ehb"
    sleep 0.5
    t_check "elect/hung: the candidate on lockd B waits" test "$(eh_starts)" -eq 1
    kill -STOP "$ea_pid"
    t_check "elect/hung: B's candidate leads once A's lease expired" t_wait_for 150 eh_starts_ge 2
    t_check "elect/hung: A's COMMAND stopped before B's started, B's token larger" sh -c '
        sort -k2,2n "$0" | awk "BEGIN { w = \"S\" }
            \$1 != w { bad = 1 }
            \$1 == \"S\" { if (\$3 <= pt) bad = 1; pt = \$3; w = \"E\"; next }
            { if (\$3 != pt) bad = 1; w = \"S\" }
            END { exit bad }"' "$el"
    kill -CONT "$ea_pid"
    t_check "elect/hung: A's lockctl campaigns again when its lockd answers" \
        t_wait_for 150 grep -q "campaigning again" "$d/eha.err"
    kill -TERM "$ehb"
    wait "$ehb" || true
    t_check "elect/hung: A's candidate leads again after B resigned" t_wait_for 150 eh_starts_ge 3
    kill -TERM "$eha"
    wait "$eha" || true
else
    echo "# redis-server not installed: the two-lockd lease-ttl test is skipped"
fi

t_done
