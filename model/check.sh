#!/bin/sh
# check.sh - runs spin on the lockd model (make model, make model-mutants).
#   model/check.sh safety [CONFIG...]   each configuration, exhaustively: must find nothing
#   model/check.sh mutants              each mutant must yield a counterexample
# CONFIG is one of leases, sessions, contention, liveness (exhaustive),
# mixed, wide, live-sessions, redlock, redlock-drift (bitstate: too big to
# search exhaustively here); all by default. README.md says what each
# covers. Output and trails go to build/model/<run>/. An exhaustive search
# runs with -DCOLLAPSE, pan's memory capped at 3000 MB (-DMEMLIM) and the
# process at 4 GB (ulimit -v); a search that hits either, or the depth
# bound, fails. Mutants run exhaustively and stop at the first violation. PAN_FLAGS / PAN_RUN add
# compile / run options for pan; MODEL_TIMEOUT caps each run (default 300 s);
# MODEL_CFLAGS replaces the optimisation flags (gcc spends ~20 s on pan.c at
# plain -O2; without gcse/tree-pre ~9 s, and pan runs as fast).
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/build/model
mkdir -p "$out"
command -v spin >/dev/null || { echo "spin missing: make deps"; exit 1; }

SAFE="-DSAFETY -DNOFAIR -DCOLLAPSE -DMEMLIM=3000"
LIVE="-DCOLLAPSE -DMEMLIM=3000 -DNFAIR=3"

# the configurations: spin flags (see README.md, "Configurations")
flags_of() {
    case $1 in
    leases)     echo "-DNOSESS -DTRYONCE -DDRAIN -DGROUPED" ;;
    sessions)   echo "-DSOLO -DHUNG -DSESS_RENEW" ;;
    contention) echo "-DPLAIN_TRYONCE -DDRIFT=0" ;;
    liveness)   echo "-DNOSESS -DLIVE" ;;
    # bitstate searches (too big to search exhaustively here; README.md
    # gives their coverage)
    mixed)      echo "-DHUNG" ;;
    wide)       echo "-DNC=3 -DNN=2 -DPLAIN_TRYONCE -DDRIFT=0" ;;
    live-sessions) echo "-DLIVE -DDRIFT=0" ;;
    redlock)    echo "-DRL" ;;
    redlock-drift) echo "-DRL -DRDRIFT=1" ;;
    *) echo "check.sh: unknown configuration $1" >&2; exit 2 ;;
    esac
}
# bitstate table (pan -w) of a configuration, empty: exhaustive
bits_of() {
    case $1 in
    mixed|wide|live-sessions|redlock|redlock-drift) echo 23 ;;
    *) echo "" ;;
    esac
}

# run TAG CCFLAGS RUNFLAGS SPINFLAGS...: builds and runs one verifier; prints
# spin's summary; sets $errors (99: did not complete)
run() {
    tag=$1 cc=$2 rf=$3; shift 3
    d=$out/$tag
    rm -rf "$d"; mkdir -p "$d"; cp "$repo"/model/*.pml "$d"/
    root=lockd.pml
    case " $* " in *" -DRL "*) root=redlock.pml ;; esac
    (cd "$d" && spin -a "$@" $root >spin.log 2>&1) || { cat "$d/spin.log"; errors=99; return; }
    (cd "$d" && ${CC:-cc} ${MODEL_CFLAGS:--O2 -fno-gcse -fno-tree-pre} -w $cc ${PAN_FLAGS:-} -o pan pan.c) || { errors=99; return; }
    (cd "$d" && ulimit -v 4000000 && timeout "${MODEL_TIMEOUT:-300}" ./pan $rf ${PAN_RUN:-} >pan.out 2>&1)
    errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$d/pan.out" | tail -1)
    [ -n "$errors" ] || { echo "  $tag: pan did not finish"; tail -3 "$d/pan.out"; errors=99; return; }
    states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$d/pan.out")
    mem=$(sed -n 's/^ *\([0-9.]*\).*total actual memory usage.*/\1/p' "$d/pan.out")
    took=$(sed -n 's/^pan: elapsed time \([0-9.e+]*\).*/\1/p' "$d/pan.out")
    hf=$(sed -n 's/^hash factor: \([0-9.e+]*\).*/, hash factor \1/p' "$d/pan.out")
    echo "  $tag ($*): errors $errors, $states states stored, depth $(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' "$d/pan.out"), ${mem} MB, ${took} s$hf"
    if [ "$errors" = 0 ] && grep -Eq 'reached -DMEMLIM|out of memory|max search depth too small|Search not completed' "$d/pan.out"; then
        echo "  $tag: search not complete:"; grep -E 'MEMLIM|memory|depth too small|not completed' "$d/pan.out"; errors=99
    fi
}

case ${1:-safety} in
safety)
    shift 2>/dev/null
    configs=${*:-leases sessions contention liveness mixed wide live-sessions redlock redlock-drift}
    for c in $configs; do
        f=$(flags_of "$c") || exit 2
        w=$(bits_of "$c")
        safe=$SAFE live=$LIVE wf=""
        if [ -n "$w" ]; then
            # bitstate: not exhaustive; the depth bound is generous (a
            # search that reaches it fails, as in the exhaustive runs)
            safe="-DSAFETY -DNOFAIR -DBITSTATE" live="-DBITSTATE -DNFAIR=3" wf="-w$w -k3"
        fi
        case $c in
        liveness|live-sessions)
            # LTL `live` (lockd.pml) under weak fairness: acceptance cycles
            run "$c" "$live" "-a -f -m400000 $wf" $f ;;
        *) run "$c" "$safe" "-m400000 $wf" $f ;;
        esac
        if [ "$errors" != 0 ]; then
            echo "model: $c: violation or incomplete search (trail, if any: build/model/$c/lockd.pml.trail;"
            echo "  replay with: cd build/model/$c && spin -t -p $f lockd.pml)"; tail -20 "$out/$c/pan.out"; exit 1
        fi
    done
    echo "model: no violation (leases, sessions, contention, liveness exhaustive; the rest bitstate, see README.md)"
    ;;
mutants)
    shift
    bad=""
    # each mutant in the configuration that exercises what it breaks; the
    # search is exhaustive and stops at the first violation
    for m in ${MUTANTS:-MUT_RENEW_NO_OWNER MUT_RELEASE_NO_CAD MUT_NO_MAX_HOLD MUT_NO_LOCK_DELAY MUT_NO_RETRY MUT_RL_NO_WRITEBACK MUT_RL_RENEW_MAX}; do
        case $m in
        MUT_RENEW_NO_OWNER|MUT_RELEASE_NO_CAD) c=leases ;;
        MUT_NO_MAX_HOLD) c=sessions ;;
        MUT_NO_LOCK_DELAY) c=contention ;;
        MUT_NO_RETRY) c=liveness ;;
        MUT_RL_*) c=redlock ;;
        esac
        if [ "$c" = liveness ]; then
            run "$m" "$LIVE" "-a -f -m400000" -D$m $(flags_of $c) "$@"
        else
            run "$m" "$SAFE" "-m400000" -D$m $(flags_of $c) "$@"
        fi
        if [ "$errors" = 0 ] || [ "$errors" = 99 ] || ! ls "$out/$m"/*.pml.trail >/dev/null 2>&1; then
            echo "  $m: NOT caught"; bad="$bad $m"
        else
            why=$(grep -m1 -E 'assertion violated|invalid end state|acceptance cycle' "$out/$m/pan.out")
            echo "  $m ($c): caught: $why"
        fi
    done
    [ -z "$bad" ] || { echo "model-mutants: not caught:$bad"; exit 1; }
    echo "model-mutants: every mutant produced a counterexample trail"
    ;;
*) echo "usage: model/check.sh safety [CONFIG...] | mutants"; exit 2 ;;
esac
