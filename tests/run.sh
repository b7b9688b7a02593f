#!/usr/bin/env bash
# run.sh DIR - runs every test program built under DIR (build or build/san)
# and every tests/shell/*.sh against DIR/lockd. Prints one summary line and
# exits non-zero if anything failed.
set -u
dir=${1:-build}
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
export LOCKD_BIN="$repo/$dir/lockd" LOCKCTL_BIN="$repo/$dir/lockctl" REPO="$repo"
pass=0; fail=0; failed=()
run() {
    local name=$1; shift
    local log
    log=$(mktemp)
    local start=$SECONDS
    if timeout 600 "$@" >"$log" 2>&1; then
        pass=$((pass + 1)); echo "PASS $name ($((SECONDS - start))s)"
    else
        fail=$((fail + 1)); failed+=("$name"); echo "FAIL $name ($((SECONDS - start))s)"; tail -30 "$log" | sed 's/^/    /'
    fi
    rm -f "$log"
}
for t in "$dir"/tests/unit/*; do [ -x "$t" ] && run "unit/$(basename "$t")" "$t"; done
for t in "$dir"/tests/integration/*; do
    [ -x "$t" ] || continue
    run "integration/$(basename "$t")" "$t"
    # api_* and hardening_* suites are backend-neutral (their lockd run on
    # the backend TH_BACKEND names): run them again against a real Redis.
    case $(basename "$t") in api_* | hardening_*) run "integration/$(basename "$t")[redis]" env TH_BACKEND=redis "$t" ;; esac
done
for t in tests/shell/*.sh; do [ -x "$t" ] && run "shell/$(basename "$t")" "$t"; done
echo "tests ($dir):"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] || { printf 'failed: %s\n' "${failed[@]}"; exit 1; }
