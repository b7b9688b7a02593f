#!/usr/bin/env bash
# run.sh DIR - runs every test program built under DIR (build or build/san),
# the backend conformance suite once per backend (one line each:
# "PASS conformance[NAME]" or "FAIL conformance[NAME]") and every
# tests/shell/*.sh against DIR/lockd. Prints one summary line and exits
# non-zero if anything failed.
set -u
dir=${1:-build}
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
export LOCKD_BIN="$repo/$dir/lockd" LOCKCTL_BIN="$repo/$dir/lockctl" REPO="$repo"
pass=0; fail=0; failed=()
# run NAME CMD...: one line, "PASS NAME (Ns)" or "FAIL NAME (Ns)" and the log's
# tail. With UNTIMED=1 the line is "PASS NAME" alone.
run() {
    local name=$1; shift
    local log status=PASS took start=$SECONDS
    log=$(mktemp)
    timeout 600 "$@" >"$log" 2>&1 || status=FAIL
    took=" ($((SECONDS - start))s)"
    [ -z "${UNTIMED:-}" ] || took=""
    echo "$status $name$took"
    if [ "$status" = PASS ]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1)); failed+=("$name")
        # what failed first (a load's output may push it out of the tail), then the tail
        # ("#!" lines: what a test printed to explain a failure)
        grep -E '^(not ok|FAIL |#!)' "$log" | head -40 | sed 's/^/  ! /'
        tail -30 "$log" | sed 's/^/    /'
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
# One set of cases through struct backend, once per backend the program's
# table names (tests/conformance/backends.c: a new backend joins there).
conf="$dir/tests/conformance/conformance"
backends=$([ -x "$conf" ] && "$conf" --list)
[ -n "$backends" ] || UNTIMED=1 run "conformance[?]" sh -c "echo '$conf: not built or lists no backend'; exit 1"
for b in $backends; do UNTIMED=1 run "conformance[$b]" "$conf" "$b"; done
for t in tests/shell/*.sh; do [ -x "$t" ] && run "shell/$(basename "$t")" "$t"; done
echo "tests ($dir):"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] || { printf 'failed: %s\n' "${failed[@]}"; exit 1; }
