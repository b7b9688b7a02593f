# bench/redis_args.sh - sourced by run.sh: the KEYS and ARGV that lockd's
# server/scripts/acquire.lua and release.lua take (see their header comments),
# as redis-benchmark arguments. "SHA" is replaced by the loaded script's sha1
# (or, with BENCH_CALL=FCALL, the loaded function's name).
# redis-benchmark replaces every __rand_int__ by its own 12-digit random
# number, so the two keys of one acquire name different locks; each still takes
# the same path through the script as lockd's calls do (fresh name: granted).
BENCH_LEASE=0123456789abcdef0123456789abcdef
BENCH_NOW_US=$(date +%s%6N)
BENCH_PREFIX=lockd:
# acquire: KEYS lock, fence counter; ARGV '<w><lease>', '<sb> <ttl_ms> <owner>',
#          ttl_ms, now_us (w 0: a try-once caller, as loadgen's pairs are;
#          sb 0, owner empty)
ACQ_CMD=("${BENCH_CALL:-EVALSHA}" SHA 2 "${BENCH_PREFIX}{bench-__rand_int__}" "${BENCH_PREFIX}{bench-__rand_int__}:fence"
    "0$BENCH_LEASE" "0 30000 " 30000 "$BENCH_NOW_US")
# release: KEYS lock; ARGV lease, delay_ms, '<channel> <publisher>'
REL_CMD=("${BENCH_CALL:-EVALSHA}" SHA 1 "${BENCH_PREFIX}{bench-__rand_int__}"
    "$BENCH_LEASE" 0 "${BENCH_PREFIX}released:{bench-__rand_int__} bench-__rand_int__")

resp_stream() {
    local n=$1 sha=$2
    shift 2
    awk -v n="$n" -v sha="$sha" -v args="$(printf '%s\037' "$@")" '
    BEGIN {
        m = split(args, a, "\037") - 1
        for (j = 1; j <= m; j++) {
            if (a[j] == "SHA") a[j] = sha
            parts[j] = split(a[j], t, "__rand_int__")
            for (k = 1; k <= parts[j]; k++) part[j, k] = t[k]
            if (parts[j] == 0) { parts[j] = 1; part[j, 1] = "" }
        }
        for (i = 0; i < n; i++) {
            id = sprintf("%012d", i)
            printf "*%d\r\n", m
            for (j = 1; j <= m; j++) {
                s = part[j, 1]
                for (k = 2; k <= parts[j]; k++) s = s id part[j, k]
                printf "$%d\r\n%s\r\n", length(s), s
            }
        }
    }'
}

# redis_preload PORT SHA N: RESP for N acquires of names bench-000000000000 ..
# with BENCH_LEASE and a 600 s ttl (they outlive the release run), for
# `redis-cli --pipe`.
redis_preload() {
    local -a cmd=()
    local e
    for e in "${ACQ_CMD[@]}"; do
        [[ $e == 30000 ]] && e=600000
        cmd+=("$e")
    done
    resp_stream "$3" "$2" "${cmd[@]}"
}
