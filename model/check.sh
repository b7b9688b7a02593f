#!/bin/sh
# check.sh - runs spin on the lockd model (make model, make model-mutants).
#   model/check.sh safety [CONFIG...]   each configuration: must find nothing
#   model/check.sh full                 safety on every configuration (make model-full)
#   model/check.sh mutants              each mutant must yield a counterexample
# CONFIG is one of leases, sessions, contention, liveness, rwlock,
# semaphore, shared-live, sem-live, handoff, handoff-faults, handoff-renew,
# loops (exhaustive), mixed,
# live-sessions, redlock, redlock-shared (bitstate: too big to search
# exhaustively here),
# wide, redlock-drift, redlock-shared-drift, redlock-shared-3,
# redlock-w24 (bitstate), handoff-l3, handoff-faults-2, loops-2 (exhaustive;
# these eight make model-full only), redlock-index-late (bitstate, in make
# model), redlock-index, redlock-index-still (bitstate; by hand only: the
# watch index can read lower once, README.md); `safety` alone runs the
# `make model` set. README.md says what each covers. Runs go two at a time
# (MODEL_JOBS, default 2: CI has 2 cores), longest first, each as
# `check.sh one CONFIG` (a mutant: `check.sh mutant MUT_...`).
# Output and trails go to build/model/<run>/. An exhaustive search
# runs with -DCOLLAPSE, pan's memory capped at 3000 MB (-DMEMLIM) and the
# process at 4 GB (ulimit -v); a search that hits either, or the depth
# bound, fails. Mutants run exhaustively (MUT_RL_RENEW_MAX by bitstate) and
# stop at the first violation. PAN_FLAGS / PAN_RUN add
# compile / run options for pan; MODEL_TIMEOUT caps each run (default 300 s);
# MODEL_CFLAGS replaces the optimisation flags (gcc spends ~20 s on pan.c at
# plain -O2; without gcse/tree-pre ~9 s, and pan runs as fast).
set -u
jobs=${MODEL_JOBS:-2}
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/build/model
mkdir -p "$out"
command -v spin >/dev/null || { echo "spin missing: make deps"; exit 1; }

SAFE="-DSAFETY -DNOFAIR -DCOLLAPSE -DMEMLIM=3000"
LIVE="-DCOLLAPSE -DMEMLIM=3000 -DNFAIR=3"
LIVE_SH="-DCOLLAPSE -DMEMLIM=3000 -DNFAIR=4" # shared.pml runs 9 processes

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
    redlock-w24) echo "-DRL" ;;
    redlock-shared) echo "-DRL -DRLSH -DRL_UNIQUE" ;;
    redlock-shared-drift) echo "-DRL -DRLSH -DRL_UNIQUE -DRDRIFT=1" ;;
    redlock-shared-3) echo "-DRL -DRLSH -DRL_UNIQUE -DNC=3" ;;
    # the watch index of Redlock's shared mode: a watcher's inspects
    # (levelling), no node restart (README.md, "Redlock's watch index"):
    # redlock-index checks (P1) and (P2) and finds (P1) broken (by hand
    # only: an inspect's node reads straddling a grant can read the index
    # lower once, README.md); redlock-index-late (P2 alone, a directed
    # search) found (P2) broken by a lone reader's end ('t': no sh_bump),
    # fixed (every reader of a Redlock node in the set): in make model,
    # MUT_RLIDX_LONE_NOBUMP puts the flaw back.
    redlock-index) echo "-DRL -DRLSH -DRLIDX -DRESTARTS=0" ;;
    redlock-index-late) echo "-DRL -DRLSH -DRLIDX -DRESTARTS=0 -DRLIDX_NO_P1 -DRLIDX_LATE -DK=1 -DRENEWS=0" ;;
    # (P1) alone is reached, since the fix, by a directed search: one
    # acquire each, no renewal, time stands still (by hand only, as
    # redlock-index)
    redlock-index-still) echo "-DRL -DRLSH -DRLIDX -DRESTARTS=0 -DRLIDX_STILL -DK=1 -DRENEWS=0" ;;
    # shared.pml: shared locks (limit 1) and a semaphore (limit 2)
    rwlock)     echo "-DSH -DREMOTE" ;;
    semaphore)  echo "-DSH -DREMOTE -DLIMIT=2" ;;
    shared-live) echo "-DSH -DREMOTE -DLIVE" ;;
    sem-live)   echo "-DSH -DREMOTE -DLIVE -DLIMIT=2" ;;
    # handoff.pml: a semaphore's releases carrying riders (4 clients)
    handoff)    echo "-DHO -DNC=4 -DTRYONCE -DREMOTE -DSUBKICK" ;;
    handoff-l3) echo "-DHO -DNC=4 -DLIMIT=3 -DTRYONCE -DREMOTE -DSUBKICK" ;;
    # with lost requests and replies (lockd's deadline, the connection
    # dropped), holder expiry, crashes and the head's retry timer (3 clients)
    # and (-DHOL) client 2 leaving once while it waits (cancelled or failed)
    handoff-faults) echo "-DHO -DHOF -DHOL -DNC=3" ;;
    handoff-faults-2) echo "-DHO -DHOF -DNC=3 -DFAULTS=2" ;;
    # with faults, a holder that renews (client 1, once) and a second
    # release after a release answered 503 (any client)
    handoff-renew) echo "-DHO -DHOF -DHOR -DNC=3 -DRERELEASER=3 -DNODOUBT" ;;
    # the same with a release's 503 as the code has it (a kick, the
    # rider's reclaim): 7.1e7 states, 5.9 GB, past the caps here; by hand
    # with a larger MEMLIM (README.md)
    handoff-renew-doubt) echo "-DHO -DHOF -DHOR -DNC=3 -DRERELEASER=3" ;;
    # loops.pml: the wake-up protocol across two loops (3 waiters, a
    # semaphore of 2, one waiter leaving once, one attempt answered 503;
    # README.md, "Two loops"); loops-2: two leaves (make model-full)
    loops) echo "-DLP -DDOWN" ;;
    loops-2) echo "-DLP -DDOWN -DLEAVES=2" ;;
    *) echo "check.sh: unknown configuration $1" >&2; exit 2 ;;
    esac
}
# bitstate table (pan -w) of a configuration, empty: exhaustive
bits_of() {
    case $1 in
    mixed|live-sessions|redlock|redlock-shared|redlock-index) echo 22 ;;
    redlock-index-late|redlock-index-still) echo 24 ;;
    wide|redlock-drift|redlock-shared-drift|redlock-shared-3) echo 23 ;;
    redlock-w24) echo 24 ;;
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
    case " $* " in *" -DRL "*) root=redlock.pml ;; *" -DSH "*) root=shared.pml ;; *" -DHO "*) root=handoff.pml ;; *" -DLP "*) root=loops.pml ;; esac
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

# the `make model` set, longest first (two run at a time); `make
# model-full` adds the costly bitstate searches
MODEL_SET="contention redlock redlock-shared leases live-sessions mixed sessions semaphore handoff rwlock liveness sem-live shared-live"
FULL_SET="redlock-w24 wide redlock-drift redlock-shared-3 redlock-shared-drift handoff-l3 $MODEL_SET"
MUTANT_SET="MUT_RL_RENEW_MAX MUT_NO_LOCK_DELAY MUT_RL_NO_WRITEBACK MUT_RLSH_X_IGNORES_S MUT_RLSH_MINORITY MUT_RLSH_NO_RESIDUE MUT_RENEW_NO_OWNER MUT_RELEASE_NO_CAD MUT_NO_MAX_HOLD MUT_NO_RETRY MUT_SH_IGNORE_X MUT_SEM_NO_LIMIT MUT_SH_NO_WRITER_PREF MUT_SH_RELEASE_ANY MUT_RIDE_NO_AFTER MUT_RIDE_COUNTS_FREED MUT_NO_ROOM"
# handoff.pml with faults (README.md, "Hand-off chain"): handoff-faults
# (with a client that leaves, -DHOL, and its give-back after a 503: 2.9e7
# states, 1.9 GB; 90 s against 74 s before that give-back, each alone on a
# loaded machine; ~35 s before it idle) fourth;
# handoff-faults-2 (~18 s, without -DHOL: with it past 3000 MB) in model-full
MODEL_SET="contention handoff-faults ${MODEL_SET#contention }"
FULL_SET="handoff-faults-2 handoff-faults $FULL_SET"
MUTANT_SET="$MUTANT_SET MUT_RIDE_DOWN_FORGETS MUT_SEM_NO_RETRY MUT_DOWN_NO_PROMOTE MUT_DOUBT_NO_KICK MUT_DOUBT_NO_RECLAIM MUT_LEAVE_NO_GIVEBACK MUT_NO_ACQ_GIVEBACK MUT_ASK_LOST"
# handoff.pml with renewals and a second release after a 503 (README.md,
# "Renewals and a second release"): handoff-renew (~60 s alone, 2.1 GB)
# second, beside contention
MODEL_SET="contention handoff-renew ${MODEL_SET#contention }"
FULL_SET="handoff-renew $FULL_SET"
MUTANT_SET="$MUTANT_SET MUT_HO_RERELEASE_FREES MUT_HO_RENEW_READDS MUT_RLIDX_NO_LEVEL MUT_RLIDX_LONE_NOBUMP"
# redlock.pml's watch index, P2 (README.md, "Redlock's watch index"):
# redlock-index-late (~45 s, bitstate)
MODEL_SET="contention handoff-renew redlock-index-late ${MODEL_SET#contention handoff-renew }"
FULL_SET="redlock-index-late $FULL_SET"

# loops.pml across two loops (README.md, "Two loops"): loops ~4 s,
# loops-2 ~50-60 s, 951 MB (model-full only)
MODEL_SET="$MODEL_SET loops"
FULL_SET="loops-2 $FULL_SET loops"
MUTANT_SET="$MUTANT_SET MUT_LP_ASK_LOST MUT_LP_PROMOTE_OLD MUT_LP_SWEEP_NO_PROMOTE MUT_LP_POKE_NO_ARM"

# several runs of this script, $jobs at a time; fails when any failed
par() {
    sub=$1; shift
    printf '%s\n' "$@" | xargs -P "$jobs" -n 1 "$0" "$sub"
}

case ${1:-safety} in
safety|full)
    what=$1; shift 2>/dev/null
    if [ "$what" = full ]; then configs=${*:-$FULL_SET}; else configs=${*:-$MODEL_SET}; fi
    for c in $configs; do flags_of "$c" >/dev/null || exit 2; done
    # shellcheck disable=SC2086
    par one $configs || { echo "model: a violation or an incomplete search (above)"; exit 1; }
    echo "model: no violation ($configs; see README.md for which are exhaustive)"
    ;;
one)
    c=$2
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
    shared-live|sem-live) run "$c" "$LIVE_SH" "-a -f -m400000" $f ;;
    *) run "$c" "$safe" "-m400000 $wf" $f ;;
    esac
    if [ "$errors" != 0 ]; then
        echo "model: $c: violation or incomplete search (trail, if any: build/model/$c/$root.trail;"
        echo "  replay with: cd build/model/$c && spin -t -p $f $root)"; tail -20 "$out/$c/pan.out"; exit 1
    fi
    ;;
mutants)
    shift
    # shellcheck disable=SC2086
    par mutant ${MUTANTS:-$MUTANT_SET} || { echo "model-mutants: not caught (above)"; exit 1; }
    echo "model-mutants: every mutant produced a counterexample trail"
    ;;
mutant)
    # each mutant in the configuration that exercises what it breaks; the
    # search is exhaustive (but MUT_RL_RENEW_MAX's) and stops at the first
    # violation
    m=$2
    # unoptimised (-O0): a mutant's search stops at its first trail, mostly
    # within a second, while -O2 spends 10-25 s compiling pan.c (handoff.pml,
    # redlock.pml); -O0 compiles in ~4 s and searches ~1.8 times slower
    # (MUT_ASK_LOST: 25 + 11 s at -O2, 4 + 20 s at -O0). MUT_RL_RENEW_MAX's
    # longer search (36 s at -O2) keeps -O2.
    [ "$m" = MUT_RL_RENEW_MAX ] || : "${MODEL_CFLAGS:=-O0}"
    case $m in
    MUT_RENEW_NO_OWNER|MUT_RELEASE_NO_CAD) c=leases ;;
    MUT_NO_MAX_HOLD) c=sessions ;;
    MUT_NO_LOCK_DELAY) c=contention ;;
    MUT_NO_RETRY) c=liveness ;;
    MUT_RLIDX_*) c=redlock-index-late ;;
    MUT_RL_*) c=redlock ;;
    MUT_RLSH_*) c=redlock-shared ;;
    MUT_SH_IGNORE_X|MUT_SH_RELEASE_ANY) c=rwlock ;;
    MUT_SEM_NO_LIMIT) c=semaphore ;;
    MUT_SH_NO_WRITER_PREF) c=shared-live ;;
    MUT_RIDE_DOWN_FORGETS|MUT_SEM_NO_RETRY|MUT_DOWN_NO_PROMOTE|MUT_DOUBT_NO_KICK|MUT_DOUBT_NO_RECLAIM|MUT_LEAVE_NO_GIVEBACK|MUT_NO_ACQ_GIVEBACK|MUT_ASK_LOST) c=handoff-faults ;;
    MUT_HO_*) c=handoff-renew ;;
    MUT_LP_*) c=loops ;;
    MUT_RIDE_*|MUT_NO_ROOM) c=handoff ;;
    *) echo "check.sh: unknown mutant $m" >&2; exit 2 ;;
    esac
    case $m in
    MUT_RL_RENEW_MAX)
        # a bitstate search finds its trail at 4.2e6 states in a third of
        # the exhaustive search's time (6.3e6 states): a trail found is a
        # real counterexample either way
        run "$m" "-DSAFETY -DNOFAIR -DBITSTATE" "-m400000 -w24 -k3" -D"$m" $(flags_of $c) ;;
    MUT_RLSH_*)
        # breadth-first (the shortest trail) in a smaller redlock-shared (no
        # fault, no restart, one acquire per client, no renewal): each
        # within 2.3e6 states, in seconds; depth-first there (before the
        # readers' rounded floor) MUT_RLSH_X_IGNORES_S took 2.9e6 states
        # (31 s, 0.8 GB) and MUT_RLSH_NO_RESIDUE 4.8e6 (45 s, 1.2 GB); in
        # redlock-shared itself the search fills the -w22 table first
        run "$m" "$SAFE -DBFS" "-m400000" -D"$m" $(flags_of $c) -DFAULTS=0 -DRESTARTS=0 -DK=1 -DRENEWS=0 ;;
    MUT_LP_ASK_LOST)
        # leavers that only cancel: the ask-now poke is then lost only on
        # its way to a loop the new head is not on (with one loop,
        # -DONE_LOOP, this search finds nothing: README.md, "Two loops")
        run "$m" "$SAFE" "-m400000" -D"$m" $(flags_of $c) -DLEAVE_CANCEL ;;
    *) case $c in
    liveness) run "$m" "$LIVE" "-a -f -m400000" -D"$m" $(flags_of $c) ;;
    shared-live) run "$m" "$LIVE_SH" "-a -f -m400000" -D"$m" $(flags_of $c) ;;
    *) run "$m" "$SAFE" "-m400000" -D"$m" $(flags_of $c) ;;
    esac ;;
    esac
    if [ "$errors" = 0 ] || [ "$errors" = 99 ] || ! ls "$out/$m"/*.pml.trail >/dev/null 2>&1; then
        echo "  $m: NOT caught"; exit 1
    fi
    why=$(grep -m1 -E 'assertion violated|invalid end state|acceptance cycle' "$out/$m/pan.out")
    echo "  $m ($c): caught: $why"
    ;;
*) echo "usage: model/check.sh safety [CONFIG...] | full [CONFIG...] | mutants"; exit 2 ;;
esac
