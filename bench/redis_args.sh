# bench/redis_args.sh - sourced by run.sh: the KEYS and ARGV that lockd's
# server/scripts/acquire.lua and release.lua take (see their header comments),
# as redis-benchmark arguments. "SHA" is replaced by the loaded script's sha1.
# redis-benchmark replaces every __rand_int__ by its own 12-digit random
# number, so the two keys of one acquire name different locks; each still takes
# the same path through the script as lockd's calls do (fresh name: granted).
BENCH_LEASE=0123456789abcdef0123456789abcdef
BENCH_NOW_US=$(date +%s%6N)
BENCH_PREFIX=lockd:
# acquire: KEYS lock, fence counter; ARGV lease, owner, ttl_ms, session_bound,
#          now_us, wait (0: a try-once caller, as loadgen's pairs are)
ACQ_CMD=(EVALSHA SHA 2 "${BENCH_PREFIX}{bench-__rand_int__}" "${BENCH_PREFIX}{bench-__rand_int__}:fence"
    "$BENCH_LEASE" "" 30000 0 "$BENCH_NOW_US" 0)
# release: KEYS lock; ARGV lease, delay_ms, channel, publisher
REL_CMD=(EVALSHA SHA 1 "${BENCH_PREFIX}{bench-__rand_int__}"
    "$BENCH_LEASE" 0 "${BENCH_PREFIX}released:{bench-__rand_int__}" "bench-__rand_int__")

# redis_preload PORT SHA N: RESP for N acquires of names bench-000000000000 ..
# (redis-benchmark's 12-digit form) with BENCH_LEASE, for `redis-cli --pipe`.
redis_preload() {
    awk -v sha="$2" -v n="$3" -v lease="$BENCH_LEASE" -v now="$BENCH_NOW_US" -v pre="$BENCH_PREFIX" '
    function bulk(s) { printf "$%d\r\n%s\r\n", length(s), s }
    BEGIN {
        for (i = 0; i < n; i++) {
            name = sprintf("bench-%012d", i)
            printf "*11\r\n"
            bulk("EVALSHA"); bulk(sha); bulk("2")
            bulk(pre "{" name "}"); bulk(pre "{" name "}:fence")
            bulk(lease); bulk(""); bulk("600000"); bulk("0"); bulk(now); bulk("0")
        }
    }'
}
