#!/usr/bin/env bash
# config.sh - lockd's command line: --help, --version, --check-config, and
# that a bad key or value from any source stops startup with exit code 2 and
# one line naming the key and where it came from.
set -eu
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
lockd() { env -u LOCKD_BIN -u LOCKCTL_BIN "$LOCKD_BIN" "$@"; }
pass=0
ok() { pass=$((pass + 1)); echo "ok $1"; }
fail() { echo "FAIL $1"; echo "$pass passed, 1 failed"; exit 1; }

out=$(lockd --help) || fail help-exit
for k in listen backend redis key_prefix default_ttl_ms max_ttl_ms max_wait_ms max_hold_ms \
    session_ttl_ms threads max_connections max_body_bytes backend_timeout_ms auth_token_file \
    tls_cert tls_key log_level log_format shutdown_timeout_ms release_on_shutdown; do
    printf '%s\n' "$out" | grep -q "^  $k " || fail "help lists $k"
done
ok help
lockd --version | grep -q '^lockd ' || fail version
ok version

# Precedence: flag > environment > file > default; secrets masked.
printf '# comment\nlisten 127.0.0.1:9001\ndefault_ttl_ms 5s\nmax_wait_ms 1000\n' >"$tmp/lockd.conf"
out=$(LOCKD_MAX_WAIT_MS=2000 LOCKD_DEFAULT_TTL_MS=7000 lockd --config "$tmp/lockd.conf" \
    --default-ttl-ms 9000 --redis 'redis://u:hunter2@127.0.0.1:6379/1' --check-config)
printf '%s\n' "$out" | grep -qx 'listen 127.0.0.1:9001' || fail "file value"
printf '%s\n' "$out" | grep -qx 'max_wait_ms 2000' || fail "env beats file"
printf '%s\n' "$out" | grep -qx 'default_ttl_ms 9000' || fail "flag beats env"
printf '%s\n' "$out" | grep -qx 'backend redis' || fail "backend derived from redis"
printf '%s\n' "$out" | grep -q hunter2 && fail "password masked"
printf '%s\n' "$out" | grep -qx 'redis redis://u:\*\*\*\*@127.0.0.1:6379/1' || fail "masked url shown"
ok check-config

expect_exit2() { # NAME PATTERN -- command...
    local name=$1 pat=$2; shift 3
    local err rc=0
    err=$("$@" 2>&1 >/dev/null) || rc=$?
    [ "$rc" -eq 2 ] || fail "$name: exit $rc, want 2 ($err)"
    [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "$name: want one line, got: $err"
    printf '%s\n' "$err" | grep -q -- "$pat" || fail "$name: '$err' lacks '$pat'"
    ok "$name"
}
expect_exit2 unknown-flag "unknown flag '--bogus'" -- lockd --bogus 1
expect_exit2 bad-flag-value "flag --threads" -- lockd --threads 0
expect_exit2 unknown-env "environment LOCKD_NOPE" -- env LOCKD_NOPE=1 "$LOCKD_BIN" --check-config
expect_exit2 bad-env-value "environment LOCKD_MAX_TTL_MS" -- env LOCKD_MAX_TTL_MS=soon "$LOCKD_BIN"
printf 'listen 127.0.0.1:9001\nnot_a_key 5\n' >"$tmp/bad.conf"
expect_exit2 unknown-file-key "$tmp/bad.conf:2" -- lockd --config "$tmp/bad.conf"
printf 'log_format xml\n' >"$tmp/bad2.conf"
expect_exit2 bad-file-value "$tmp/bad2.conf:1" -- lockd --config "$tmp/bad2.conf"
expect_exit2 missing-file "cannot open config file" -- lockd --config "$tmp/none.conf"
expect_exit2 bad-listen "for 'listen' (flag --listen)" -- lockd --listen nonsense
expect_exit2 bad-listen-check "for 'listen' (flag --listen)" -- lockd --listen 127.0.0.1:70000 --check-config
printf 'listen 10.0.0.1\n' >"$tmp/bad3.conf"
expect_exit2 bad-listen-file "$tmp/bad3.conf:1" -- lockd --config "$tmp/bad3.conf" --check-config
expect_exit2 fence-retention-below-max-ttl "'fence_retention_ms': smaller than max_ttl_ms" -- \
    lockd --fence_retention_ms 1000 --max_ttl_ms 60000 --check-config
expect_exit2 redlock-even "needs an odd number of URLs" -- lockd --redis redis://a:1,redis://b:1,redis://c:1,redis://d:1 --check-config

# A raw control byte is refused in every setting but redis_master_password,
# from a flag, the environment or a file, with one line showing it escaped
# (a URL's not at all): --check-config never prints one raw (an escape
# sequence, a line reading as another key).
esc=$(printf '\033')
expect_exit2 ctl-key-prefix-flag "'a\\\\x1b\[31mb' for 'key_prefix' (flag --key_prefix): control byte 0x1b" -- \
    lockd --key_prefix "a${esc}[31mb" --check-config
expect_exit2 ctl-key-prefix-env "for 'key_prefix' (environment LOCKD_KEY_PREFIX): control byte 0x0a" -- \
    env LOCKD_KEY_PREFIX="$(printf 'app:\nlisten 0.0.0.0:80')" "$LOCKD_BIN" --check-config
printf 'key_prefix app%s:\n' "$esc" >"$tmp/ctl.conf"
expect_exit2 ctl-key-prefix-file "$tmp/ctl.conf:1): control byte 0x1b" -- lockd --config "$tmp/ctl.conf" --check-config
expect_exit2 ctl-master-user "for 'redis_master_user' (flag --redis_master_user): control byte 0x09" -- \
    lockd --redis_master_user "$(printf 'u\tv')" --check-config
expect_exit2 ctl-port-file "for 'port_file' (flag --port_file): control byte 0x1b" -- \
    lockd --port_file "$tmp/p${esc}" --check-config
expect_exit2 ctl-listen "for 'listen' (flag --listen): control byte 0x09" -- \
    lockd --listen "$(printf '127.0.0.1:\t8080')" --check-config
expect_exit2 ctl-redis-url "for 'redis' (flag --redis): control byte 0x0a" -- \
    lockd --redis "$(printf 'redis://u:hunter2\n@127.0.0.1:6379')" --check-config
lockd --redis "$(printf 'redis://u:hunter2\n@127.0.0.1:6379')" --check-config 2>&1 | grep -q hunter2 &&
    fail "ctl-redis-url: the refusal shows the password"
expect_exit2 ctl-startup "control byte 0x1b" -- lockd --key_prefix "a${esc}" --listen 127.0.0.1:0
expect_exit2 int-leading-tab "invalid value '\\\\t2' for 'threads'" -- lockd --threads "$(printf '\t2')" --check-config
out=$(lockd --key_prefix 'app\x1b:' --redis_master_password "$(printf 'p\tw')" --check-config) ||
    fail "ctl-secret: exit $?"
printf '%s\n' "$out" | grep -qx 'key_prefix app\\x1b:' || fail "ctl-secret: a backslash prints as it is"
printf '%s\n' "$out" | grep -qx 'redis_master_password \*\*\*\*' || fail "ctl-secret: a secret may hold one, masked"
printf '%s\n' "$out" | LC_ALL=C grep -q '[[:cntrl:]]' && fail "ctl-secret: --check-config printed a control byte"
ok "ctl-secret"

# --check-config checks exactly what startup checks (short of binding the
# listener and reaching the backend): each of these fails both, with one
# and the same line.
printf 'not a pem\n' >"$tmp/bad.pem"
same_as_startup() { # NAME PATTERN -- lockd arguments...
    local name=$1 pat=$2; shift 3
    expect_exit2 "check-config: $name" "$pat" -- lockd "$@" --check-config
    local e1 e2
    e1=$(lockd "$@" --check-config 2>&1 >/dev/null) || true
    e2=$(timeout 10 env -u LOCKD_BIN -u LOCKCTL_BIN "$LOCKD_BIN" "$@" --listen 127.0.0.1:0 2>&1 >/dev/null) || true
    [ "$e1" = "$e2" ] || fail "check-config: $name: check said '$e1', startup said '$e2'"
    ok "check-config: $name: startup says the same"
}
same_as_startup redis-http "must start with redis://" -- --redis http://x
same_as_startup redlock-http "must start with redis://" -- --redis redis://a:1,redis://b:1,http://c
same_as_startup cluster-db "database 0 only" -- --backend cluster --redis redis://127.0.0.1:1/3
same_as_startup auth-file "auth_token_file '$tmp/none'" -- --auth_token_file "$tmp/none"
same_as_startup admin-file "admin_token_file '$tmp/none'" -- --admin_token_file "$tmp/none"
same_as_startup tls-missing "invalid value for 'tls_cert': cannot open" -- \
    --tls_cert "$tmp/none.pem" --tls_key "$tmp/none.pem"
same_as_startup tls-not-pem "are not a PEM certificate and its private key" -- \
    --tls_cert "$tmp/bad.pem" --tls_key "$tmp/bad.pem"
echo "$pass passed, 0 failed"
