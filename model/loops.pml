/*
 * loops.pml - lockd's wake-up protocol for a queue's head ACROSS TWO EVENT
 * LOOPS (server/waiters.c): post_poke / promote posting on_poke to the
 * head's loop, on_poke reading the head THEN (it may have left, the new
 * head may be on the other loop), on_sweep, on_timer, attempt /
 * attempt_done, waiters_kick (slot_freed), engine_cancel, waiters_fail and
 * the queue's ask bit (wqueue.ask, d0af9b2). A fifth root beside lockd.pml,
 * redlock.pml, shared.pml and handoff.pml (standalone: it includes
 * nothing). README.md ("Two loops") says what stands for what;
 * `model/check.sh safety loops` runs it.
 *
 * One lockd with two loops (proctype loop: each drains its own FIFO of
 * posted events, loop_post: pokes and sweeps, and runs its waiters'
 * replies, timers and cancels), one name, a semaphore of LIMIT (2) slots
 * held at the start by two holders (another lockd's clients or this
 * one's: each releases once, at any time), NW (3) waiters of this lockd
 * that arrive in order 0, 1, 2 at any time, each pinned to a loop (loop of
 * waiter 0 is 0, the others' chosen at the start: every assignment up to
 * the loops' symmetry). A waiter granted holds its slot and releases it
 * once, at any time. Every release is a step at Redis (the slot freed)
 * and a later waiters_kick (release_done, release_bg_done or the pub/sub
 * message of another lockd: the same call). Redis runs one script at a
 * time: an attempt's acquire is one atomic grant-or-refuse of a slot,
 * answering room (bk_res.room) when a slot is still free after a grant.
 * Whatever runs under e->wmu is one atomic step; C functions that unlock
 * and call on (on_poke, then attempt(); attempt() of a failed waiter, then
 * attempt_done()) are two steps of the loop, between which the loop does
 * nothing else and every other thread may act (todo).
 *
 * One waiter, any, may leave once (LEAVES, 1; 2 in configuration loops-2:
 * two waiters, or one twice) while it is in the queue (queued or
 * attempting), in one of three ways: its client goes (engine_cancel, on
 * its loop: unlinked at once when queued, promote(h, false); attempting:
 * cancelled, handled by attempt_done, a grant given back by
 * waiters_release_bg); its session ends (session_alive false at once,
 * which attempt() reads; later the reaper's waiters_fail marks it failed
 * and posts on_sweep to its loop; a grant is given back because
 * session_add_lock fails); its deadline passes (on_timer fires: unlinked,
 * promote(h, false); attempting, attempt_done's refusal fails it).
 *
 * With -DDOWN (both configurations) one attempt, any, is answered 503
 * (LK_BACKEND_DOWN: lockd's deadline on the call, its connection
 * dropped): its acquire ran at Redis (granted or refused) or never did;
 * attempt_done unlinks it and tells the next at once (promote(h, true):
 * code != LK_LOCKED) and engine_acquire_in_doubt gives its lease back
 * (release.lua: a slot freed and a kick only when the acquire had been
 * granted, else NOT_HELD and no kick).
 *
 * Time is abstract. A refused head arms a retry at its holder's expiry
 * (retry: holder_expiry_ms + 1, attempt_done, on_poke): it may fire at any
 * time later (on_timer), which covers every length of lease; on_poke reads
 * a holder_expiry_ms that is not 0 as still to come (the case in which the
 * timer has to do the work; the other is on_poke asking, which the timer
 * firing at once does too). holder_expiry_ms is a bit: 0 (a release was
 * seen, or the queue is new) or set. Slots never expire at Redis (holders
 * renew): every slot is freed by a release, whose kick must reach a head.
 *
 * Property, (L) no lost wake-up, checked in every state (proctype nolost,
 * an always-enabled guarded assertion, as handoff.pml's orphans): never a
 * state where a slot is free at Redis, a live waiter (queued, not left) is
 * in the queue, and nothing is on its way that will make a head ask: no
 * poke or sweep posted to either loop, no attempt in flight (from on_poke's
 * decision to attempt_done), no kick (release_done) or give-back to run,
 * no waiters_fail to run, no due deadline of a queued leaver. A retry timer
 * armed at a holder's expiry does not count: it is what lockd must not
 * rely on (a lost wake-up costs up to a ttl). Holders that have not yet
 * released do not count either: their release is not a wake-up owed for
 * the free slot. The ask bit does not count by itself: with no poke
 * posted, nobody reads it (so this is stricter than "no ask bit set").
 * (H) a waiting head has its retry (proctype headretry): never a live head
 * queued with no retry armed while nothing is on its way, free slot or not.
 * Checked in every state rather than at the end (pan's invalid end state):
 * the retry timers keep the system live, so a lost wake-up never ends in a
 * deadlock; it is a state, reached and left by the retry.
 *
 * Not modelled (README.md "Two loops"): riders (waiters_ride: handoff.pml),
 * grouped grants (shared readers), multi-locks, watchers, Redis expiry,
 * a release or give-back answered 503, the backend's recovery
 * (LK_BACKEND_RECOVERING), lockd's drain, max_waiters, renewals.
 *
 * Mutants (make model-mutants):
 *   MUT_LP_ASK_LOST        main before d0af9b2 (also -DMUT_ASK_LOST): no
 *                          wqueue.ask; on_poke asks only when its poke says
 *                          so or the holder's expiry passed: (L) fails
 *   MUT_LP_PROMOTE_OLD     promote() posts to the loop of the waiter that
 *                          left the head (granted, failed, cancelled, timed
 *                          out) instead of the new head's loop: (L) fails
 *   MUT_LP_SWEEP_NO_PROMOTE on_sweep unlinks a failed head without telling
 *                          the new head: (L) fails
 *   MUT_LP_POKE_NO_ARM     on_poke's look-only branch arms no retry (a head
 *                          promoted while its holder's lease runs): (H)
 *                          fails
 * With -DONE_LOOP every waiter is on loop 0 (the mutants' contrast with
 * one loop, by hand); with -DLEAVE_CANCEL a leaver only cancels.
 */

#ifndef NW
#define NW 3
#endif
#define LIMIT 2
#define NONE 255
#ifndef QCAP
#define QCAP 9  /* a loop's posts at most: 5 kicks, 3 promotes, 1 sweep (asserted) */
#endif

#if defined(MUT_ASK_LOST) && !defined(MUT_LP_ASK_LOST)
#define MUT_LP_ASK_LOST
#endif

/* a waiter's state (enum wstate, split where a step of its own follows) */
#define W_NEW    0  /* not arrived yet */
#define W_QUEUED 1  /* W_QUEUED */
#define W_ATT    2  /* W_ATTEMPTING, its loop about to call attempt() (todo) */
#define W_SENT   3  /* W_ATTEMPTING, its BK_ACQUIRE on its way to Redis */
#define W_RAN    4  /* W_ATTEMPTING, answered (res), attempt_done to run */
#define W_HOLD   5  /* granted: holds a slot, will release it once */
#define W_GONE   6  /* answered and freed (released, failed, cancelled) */

/* the answer an attempt_done gets */
#define R_LOCKED 0  /* LK_LOCKED: refused, the set full */
#define R_OK     1  /* granted, no slot left (room false) */
#define R_ROOM   2  /* granted, a slot still free (bk_res.room) */
#define R_FAIL   3  /* attempt() found it failed: its fail_code (not LOCKED) */
#define R_DOWN   4  /* LK_BACKEND_DOWN (503): run at Redis or not, unknown (-DDOWN) */

#define EV_POKE  1  /* on_poke (struct poke .attempt = now) */
#define EV_SWEEP 2  /* on_sweep */

chan ev[2] = [QCAP] of { byte, bit };  /* loop_post: each loop's FIFO */

byte ws[NW];        /* w->state, split (above) */
bit  lp[NW];        /* w->lp: its loop */
byte res[NW];       /* its attempt's answer (W_RAN) */
bit  kp[NW];        /* w->kick_pending */
bit  retry[NW];     /* w->retry_at_ms > 0: a retry at the holder's expiry armed */
bit  fl[NW];        /* w->failed (waiters_fail, or attempt's session_alive) */
bit  cn[NW];        /* w->cancelled (engine_cancel while attempting) */
bit  late[NW];      /* its deadline has passed (deadline_ms <= now) */
bit  sdead[NW];     /* its session ended (session_alive false) */
bit  gb[NW];        /* its grant's give-back on its way (waiters_release_bg) */

byte q[NW];         /* wqueue.list, FIFO, q[0] the head */
byte qn;            /* wqueue.n */
bit  ask;           /* wqueue.ask */
bit  exp0 = 1;      /* wqueue.holder_expiry_ms == 0 (release seen, or a new queue) */
bit  unknown;       /* wqueue.unknown */
byte freed;         /* wqueue.freed */

byte held = LIMIT;  /* slots held at Redis */
bit  ih[LIMIT];     /* the two first holders, not released yet */
byte kicks;         /* releases run at Redis whose waiters_kick has not run */
#ifndef LEAVES
#define LEAVES 1
#endif
byte nleft;         /* waiters that left (at most LEAVES) */
bit  fpend[NW];     /* its session ended, waiters_fail has not run yet */
#ifdef DOWN
bit  dn;            /* an attempt was answered 503 (once) */
bit  dheld;         /* its acquire ran at Redis and holds a slot (lockd cannot know) */
bit  dgb;           /* its in-doubt give-back on its way (engine_acquire_in_doubt) */
#endif

/* scratch, only inside atomic steps (not part of the state) */
hidden byte x_nh, x_t, x_k, x_cur, x_kind, x_sw;
hidden byte x_pn, x_more;

#define INQ(i)  (ws[i] >= W_QUEUED && ws[i] <= W_RAN)
#define ATTEMPTING(i) (ws[i] >= W_ATT && ws[i] <= W_RAN)

/* loop_post(lp, fn, p) */
inline post(L, what, n)
{
  assert(nfull(ev[L]));
  ev[L]!what,n
}

/* post_poke(e, q, h, now) (under wmu); MUT_LP_ASK_LOST: no q->ask.
 * MUT_LP_PROMOTE_OLD: promote() posts to L, the loop of the waiter that
 * left the head, instead of h's */
inline post_poke_to(h, n, L)
{
#ifndef MUT_LP_ASK_LOST
  if :: n -> ask = 1 :: else fi;
#endif
  post(L, EV_POKE, n)
}
inline post_poke(h, n)
{
  post_poke_to(h, n, lp[h])
}

/* promote(e, h, attempt_now): after old left the head (under wmu) */
inline promote(h, n, old)
{
  if
  :: h != NONE ->
#ifdef MUT_LP_PROMOTE_OLD
     post_poke_to(h, n, lp[old])
#else
     post_poke(h, n)
#endif
  :: else
  fi
}

/* unlink_waiter(e, w, &new_head) (under wmu): x_nh = the head that replaced
 * i, or NONE; an empty queue is freed (the next is calloc'ed: no ask,
 * holder_expiry_ms 0, no count) */
inline unlink(i)
{
  x_nh = NONE;
  x_t = (q[0] == i);
  x_k = 0;
  do :: q[x_k] == i -> break :: else -> x_k++ od;
  do :: x_k + 1 < qn -> q[x_k] = q[x_k + 1]; x_k++ :: else -> break od;
  qn--;
  q[qn] = NONE;
  if :: x_t && qn > 0 -> x_nh = q[0] :: else fi;
  if :: qn == 0 -> ask = 0; exp0 = 1; freed = 0; unknown = 0 :: else fi;
  x_t = 0; x_k = 0
}

/* a waiter answered and freed (finish, fail, or freed unanswered) */
inline gone(i)
{
  ws[i] = W_GONE; res[i] = 0; kp[i] = 0; retry[i] = 0;
  fl[i] = 0; cn[i] = 0; late[i] = 0; sdead[i] = 0
}

/* waiters_acquire(): appended; the head asks at once (attempt, todo),
 * another arms its deadline only */
inline waiters_acquire(i)
{
  q[qn] = i;
  qn++;
  if
  :: qn == 1 -> ws[i] = W_ATT; todo = i
  :: else -> ws[i] = W_QUEUED
  fi
}

/* attempt(w), on w's loop, w W_ATTEMPTING: the session's check, the ask
 * paid (q->ask = false when w heads the queue), unknown when no release is
 * counted; failed: attempt_done with its fail_code (next step, todo kept);
 * else its BK_ACQUIRE is submitted */
inline attempt(i)
{
  if :: sdead[i] -> fl[i] = 1 :: else fi;
  if :: q[0] == i -> ask = 0 :: else fi;
  if :: !fl[i] && freed == 0 -> unknown = 1 :: else fi;
  if
  :: fl[i] -> res[i] = R_FAIL; ws[i] = W_RAN
  :: else -> ws[i] = W_SENT
  fi
}

/* attempt_done(w, br), on w's loop (no riders or groups: w is the head) */
inline attempt_done(i)
{
  if
  :: res[i] == R_OK || res[i] == R_ROOM ->
     /* a semaphore's next waiter asks now only if more slots were freed
      * than this grant took, or their number is unknown, or room */
     x_more = 1;
     if
     :: freed == 0 -> unknown = 1
     :: freed > 0 && !unknown -> freed--; x_more = (freed > 0)
     :: else
     fi;
     if :: res[i] == R_ROOM -> x_more = 1 :: else fi;
     unlink(i);
     if :: x_nh != NONE -> exp0 = 0 :: else fi;  /* holder_expiry_ms = now + ttl */
     promote(x_nh, x_nh != NONE && x_more, i);
     if
     :: cn[i] || sdead[i] ->
        /* cancelled: nobody knows this lease; or session_add_lock fails
         * (its session ended): given back (waiters_release_bg) */
        gb[i] = 1; gone(i)
     :: else -> ws[i] = W_HOLD; kp[i] = 0; retry[i] = 0; fl[i] = 0; late[i] = 0; res[i] = 0
     fi
  :: res[i] == R_LOCKED && !cn[i] && !fl[i] && !late[i] ->
     /* the head's refusal: the holder's expiry learned, the count reset */
     exp0 = 0;
     if :: !kp[i] -> freed = 0 :: else fi;
     unknown = 0;
     if
     :: kp[i] -> kp[i] = 0; ws[i] = W_ATT; todo = i  /* a release came meanwhile: again */
     :: else -> ws[i] = W_QUEUED; retry[i] = 1; res[i] = 0  /* arm(): retry at the expiry */
     fi
  :: else ->
     /* timed out, cancelled, failed or 503: unlinked, the next told (asks
      * at once when code != LK_LOCKED: a failed one's fail_code, 503);
      * a 503's acquire may have run: given back (engine_acquire_in_doubt,
      * waiters_release_bg) */
     unlink(i);
     promote(x_nh, fl[i] || res[i] == R_DOWN, i);
#ifdef DOWN
     if :: res[i] == R_DOWN -> dgb = 1 :: else fi;
#endif
     gone(i)
  fi
}

/* on_poke(p), on loop L: the head THEN; only this loop's, queued, not
 * failed; asks when the poke says so, an ask is owed (q->ask) or
 * holder_expiry_ms has passed (0: a release seen); else arms its retry */
inline on_poke(L, n)
{
  if
  :: qn > 0 && lp[q[0]] == L && ws[q[0]] == W_QUEUED && !fl[q[0]] ->
     if
#ifndef MUT_LP_ASK_LOST
     :: n || ask || exp0 -> ws[q[0]] = W_ATT; retry[q[0]] = 0; todo = q[0]
#else
     :: n || exp0 -> ws[q[0]] = W_ATT; retry[q[0]] = 0; todo = q[0]
#endif
#ifndef MUT_LP_POKE_NO_ARM
     :: else -> retry[q[0]] = 1
#else
     :: else
#endif
     fi
  :: else
  fi
}

/* on_sweep(p), on loop L: unlinks this loop's failed, queued waiters and
 * answers them; a new head is told (look only) */
inline on_sweep(L)
{
  if
  :: qn > 0 ->
     x_cur = q[0];
     x_pn = 0;  /* the queue freed */
     x_k = 0;
     do
     :: x_k < qn && lp[q[x_k]] == L && fl[q[x_k]] && ws[q[x_k]] == W_QUEUED ->
        x_sw = q[x_k];
        unlink(x_sw);  /* resets x_k: start the walk again (at most one fails) */
        gone(x_sw);
        if :: qn == 0 -> x_pn = 1; break :: else fi
     :: x_k < qn && !(lp[q[x_k]] == L && fl[q[x_k]] && ws[q[x_k]] == W_QUEUED) -> x_k++
     :: x_k >= qn -> break
     od;
#ifndef MUT_LP_SWEEP_NO_PROMOTE
     if :: !x_pn && q[0] != x_cur -> promote(q[0], 0, x_cur) :: else fi;
#endif
     x_cur = NONE; x_pn = 0; x_k = 0; x_sw = 0
  :: else
  fi
}

/* on_timer(w), on w's loop, w queued: its deadline (or failed: leaves,
 * the next told, look only), or its retry at the holder's expiry (the
 * head asks) */
inline on_timer(i)
{
  if
  :: late[i] || fl[i] ->
     unlink(i);
     promote(x_nh, 0, i);
     gone(i)
  :: else ->
     retry[i] = 0;
     if :: q[0] == i -> ws[i] = W_ATT; todo = i :: else fi
  fi
}

/* engine_cancel(e, w), on w's loop: attempting, marked cancelled
 * (attempt_done frees it); queued, unlinked, the next told (look only) */
inline engine_cancel(i)
{
  if
  :: ATTEMPTING(i) -> cn[i] = 1
  :: else ->
     unlink(i);
     promote(x_nh, 0, i);
     gone(i)
  fi
}

/* waiters_kick(e, name): holder_expiry_ms 0, slot_freed: counted; the
 * head asking gets kick_pending, a queued head an ask-now poke */
inline waiters_kick()
{
  if
  :: qn > 0 ->
     exp0 = 1;
     freed++;
     if
     :: ATTEMPTING(q[0]) -> kp[q[0]] = 1
     :: ws[q[0]] == W_QUEUED -> post_poke(q[0], 1)
     fi
  :: else
  fi
}

/* waiters_fail(e, session): the leaver, in a queue, marked failed and
 * on_sweep posted to its loop */
inline waiters_fail(i)
{
  if
  :: INQ(i) -> fl[i] = 1; post(lp[i], EV_SWEEP, 0)
  :: else
  fi
}

/* one of this loop's waiters: its arrival, its reply, its timer, its
 * client leaving */
#define WAITER_STEPS(i) \
  :: atomic { todo == NONE && ws[i] == W_NEW && lp[i] == L && (i == 0 || ws[(i) - 1] != W_NEW) -> waiters_acquire(i) } \
  :: atomic { todo == NONE && ws[i] == W_RAN && lp[i] == L -> attempt_done(i) } \
  :: atomic { todo == NONE && ws[i] == W_QUEUED && lp[i] == L && (retry[i] || late[i]) -> on_timer(i) } \
  :: atomic { todo == NONE && nleft < LEAVES && INQ(i) && lp[i] == L -> nleft++; engine_cancel(i) }

proctype loop(bit L)
{
  byte todo = NONE;  /* the waiter this loop calls attempt() / attempt_done() for next */
end:
  do
  :: atomic { todo == NONE && len(ev[L]) > 0 ->
       ev[L]?x_kind,x_pn;
       if :: x_kind == EV_POKE -> on_poke(L, x_pn) :: else -> on_sweep(L) fi;
       x_kind = 0; x_pn = 0 }
  /* attempt() after on_poke, on_timer, waiters_acquire or a refusal with
   * kick_pending (wmu let go between: other threads act) */
  :: atomic { todo != NONE && ws[todo] == W_ATT ->
       attempt(todo);
       if :: ws[todo] == W_SENT -> todo = NONE :: else fi }
  /* attempt_done() of a failed one, right after its attempt() */
  :: atomic { todo != NONE && ws[todo] == W_RAN ->
       x_cur = todo; todo = NONE; attempt_done(x_cur); x_cur = NONE }
  WAITER_STEPS(0)
  WAITER_STEPS(1)
  WAITER_STEPS(2)
  od
}

/* a waiter's leave by session end or deadline (any thread: the reaper,
 * the clock) */
#ifdef LEAVE_CANCEL
#define LEAVE_STEPS(i)
#else
#define LEAVE_STEPS(i) \
  :: atomic { nleft < LEAVES && INQ(i) -> nleft++; sdead[i] = 1; fpend[i] = 1 } \
  :: atomic { nleft < LEAVES && INQ(i) -> nleft++; late[i] = 1 }
#endif

/* one attempt answered 503 (lockd's deadline on the call, the connection
 * dropped): its acquire ran at Redis (granted or refused) or never did */
#ifdef DOWN
#define DOWN_STEPS(i) \
  :: atomic { ws[i] == W_SENT && !dn -> dn = 1; \
       if \
       :: held < LIMIT -> held++; dheld = 1 \
       :: true \
       fi; \
       res[i] = R_DOWN; ws[i] = W_RAN }
#else
#define DOWN_STEPS(i)
#endif

/* a waiter's acquire run at Redis (one script at a time), its release
 * at Redis, its give-back at Redis */
#define REDIS_STEPS(i) \
  :: atomic { ws[i] == W_SENT -> \
       if \
       :: held < LIMIT -> held++; res[i] = (held < LIMIT -> R_ROOM : R_OK) \
       :: else -> res[i] = R_LOCKED \
       fi; \
       ws[i] = W_RAN } \
  DOWN_STEPS(i) \
  :: atomic { ws[i] == W_HOLD -> held--; kicks++; ws[i] = W_GONE } \
  :: atomic { gb[i] -> gb[i] = 0; held--; kicks++ } \
  LEAVE_STEPS(i)

proctype world()
{
end:
  do
  REDIS_STEPS(0)
  REDIS_STEPS(1)
  REDIS_STEPS(2)
  /* the first holders' releases at Redis */
  :: atomic { ih[0] -> ih[0] = 0; held--; kicks++ }
  :: atomic { ih[1] -> ih[1] = 0; held--; kicks++ }
  /* release_done / release_bg_done / a pub/sub message: waiters_kick */
  :: atomic { kicks > 0 -> kicks--; waiters_kick() }
#ifdef DOWN
  /* the in-doubt give-back at Redis (compare-and-delete of the lease):
   * released, release_bg_done kicks; not held (never ran, or refused),
   * NOT_HELD: no kick */
  :: atomic { dgb -> dgb = 0; if :: dheld -> dheld = 0; held--; kicks++ :: else fi }
#endif
  /* the reaper: waiters_fail(e, session) */
  :: atomic { fpend[0] -> fpend[0] = 0; waiters_fail(0) }
  :: atomic { fpend[1] -> fpend[1] = 0; waiters_fail(1) }
  :: atomic { fpend[2] -> fpend[2] = 0; waiters_fail(2) }
  od
}

/* (L) no lost wake-up (header) */
#define LIVEQ(i) (ws[i] == W_QUEUED && !fl[i] && !cn[i] && !late[i] && !sdead[i])
#define DUE(i)   (ATTEMPTING(i) || gb[i] || (ws[i] == W_QUEUED && late[i]))
#ifdef DOWN
#define DGB dgb
#else
#define DGB 0
#endif
#define PENDING  (len(ev[0]) > 0 || len(ev[1]) > 0 || kicks > 0 || fpend[0] || fpend[1] || fpend[2] || DGB || \
                  DUE(0) || DUE(1) || DUE(2))
bit lost;
proctype nolost()
{
end:
  atomic {
    (held < LIMIT && (LIVEQ(0) || LIVEQ(1) || LIVEQ(2)) && !PENDING) ->
    lost = 1;
    assert(!lost)
  }
}

/* (H) a head that waits has its retry: never a live head queued with no
 * retry armed at its holder's expiry while nothing is on its way (free
 * slot or not): a holder whose slot then lapses at Redis (no message)
 * would leave it waiting for a release that may never come (handoff.pml's
 * (5w), here without the free slot, since this model has no expiry) */
#define HEADLIVE (qn > 0 && LIVEQ(q[0]) && !retry[q[0]])
bit noretry;
proctype headretry()
{
end:
  atomic {
    (HEADLIVE && !PENDING) ->
    noretry = 1;
    assert(!noretry)
  }
}

init {
  atomic {
    q[0] = NONE; q[1] = NONE; q[2] = NONE;
    ih[0] = 1; ih[1] = 1;
    /* waiter 0 on loop 0 (the loops are symmetric), the others anywhere */
    lp[0] = 0;
#ifndef ONE_LOOP
    if :: lp[1] = 0 :: lp[1] = 1 fi;
    if :: lp[2] = 0 :: lp[2] = 1 fi;
#endif
    run nolost();
    run headretry();
    run world();
    run loop(0);
    run loop(1)
  }
}
