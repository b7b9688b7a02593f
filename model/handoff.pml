/*
 * handoff.pml - a semaphore's hand-off chain: releases that carry a waiter
 * of lockd's queue ("riders", server/waiters.c waiters_ride) into
 * release_handoff.lua, the rider's `after` (bk_handoff.after: the waiter
 * right before it, which must hold the name for the rider to be asked),
 * ride_back, waiters_ride_done and the queue's `freed` / `unknown` counts
 * that decide whether a grant lets the next waiter ask (attempt_done). A
 * fourth root beside lockd.pml, redlock.pml and shared.pml (it shares
 * params.pml); README.md ("Hand-off chain") says what stands for what.
 * `model/check.sh safety handoff` runs it.
 *
 * One lockd, one name, a semaphore of LIMIT (2) slots, NC (3 or 4) clients
 * of this lockd, each acquiring once (waiting, no deadline), then releasing
 * through lockd (engine_release: its release may carry a rider); the last
 * client may instead try once (TRYONCE: engine_acquire, refused while
 * anyone is queued here) or go through another lockd (REMOTE: straight to
 * Redis, its release publishes a message that kicks this queue). Every
 * request is one message to Redis on its own connection: the head's acquire
 * and every release reach Redis in any order, and their replies reach lockd
 * in any order. Every lockd callback and Redis script is one d_step.
 * No lease expires (holders renew) and no retry timer fires: a waiter is
 * granted through releases' kicks and riders only, so a waiter left
 * waiting with every holder gone (a slot free for ever) is a deadlock,
 * which pan reports as an invalid end state (5).
 *
 * Properties:
 *   (1) never more than LIMIT holders (asserted at every grant, on ghosts);
 *   (2) FIFO: no waiter of this lockd is granted by Redis while one queued
 *       before it (here) is not granted yet (asserted at every grant);
 *   (5) no slot lost: no state where a waiter is queued, fewer than LIMIT
 *       slots are held and lockd has nothing left to do (idle_slot), and
 *       no waiter left waiting at the end (pan's invalid end state).
 *
 * Mutants (make model-mutants):
 *   MUT_RIDE_NO_AFTER      release_handoff.lua grants a rider whatever its
 *                          `after` holds: (2) fails
 *   MUT_RIDE_COUNTS_FREED  main's counting before the fix: a release that
 *                          carried a rider counts a freed slot (and wakes the
 *                          head) in waiters_kick_rider whether or not the
 *                          rider took it, a grant with no release counted
 *                          sets no `unknown`: (5) fails (a slot stays free
 *                          while a waiter waits)
 */
#ifndef NC
#define NC 3
#endif
#ifndef LIMIT
#define LIMIT 2
#endif
#include "params.pml"

#define NONE NC         /* no rider, no after */

/* ---- Redis: the name's holders (the set <lock>:z, or the lone slot) */
bit  h[NC];

/* ---- lockd: the name's wqueue and its waiters (struct eng_waiter) */
byte q[NC];             /* the FIFO, q[0] the head */
byte qn;
byte w_st[NC];          /* W_NONE, W_QUEUED, W_ATTEMPTING */
bit  w_kick[NC];        /* kick_pending */
bit  w_rode[NC];        /* rode: asked with a release (waiters_ride) */
bit  w_retry[NC];       /* retry_at_ms > 0 (armed; never fires here) */
bit  w_rrel[NC];        /* ride_released */
bit  q_hexp;            /* holder_expiry_ms in the future (0: a release was seen) */
byte q_freed;           /* wqueue.freed */
bit  q_unknown;         /* wqueue.unknown */
bit  poke_a;            /* an on_poke(attempt) posted */
bit  remote_rel;        /* another lockd's release message, not yet here */
bit  poke_n;            /* an on_poke(no attempt) posted (promote(h, false)) */

/* ---- in flight */
bit  att[NC];           /* c's acquire (acquire_shared.lua) on its way to Redis */
byte att_rep[NC];       /* its reply, not yet read by lockd: OK+1, LOCKED+1 */
bit  rel[NC];           /* c's release (release_handoff.lua) on its way to Redis */
byte rel_rider[NC];     /* the waiter it carries (NONE: none) */
byte rel_after[NC];     /* the rider's after (NONE: none) */
bit  rel_done[NC];      /* its reply, not yet read by lockd (release_done) */
byte rel_g[NC];         /* the rider's part: 0 not asked, OK+1, LOCKED+1 */
byte follow[NC];        /* on_follower(c) posted, with the rider's result (OK+1, LOCKED+1) */
bit  back[NC];          /* ride_back(c) posted */

/* ---- the clients */
byte cl_st[NC];         /* C_IDLE, C_WAITING, C_HOLD, C_DONE */

/* ---- ghosts: what happened, never what lockd computed */
byte g_seq[NC];         /* order of joining the queue (1, 2, ...; 0: not yet) */
byte g_next = 1;
bit  g_granted[NC];     /* Redis granted it */
bit  g_hold[NC];        /* it holds a slot (granted, not released) */
bit  idle_free_slot;    /* (5) a slot free, a waiter queued, lockd idle */

byte n, j, r, a, hd, bf, cd;
bit more, rode, again;

/* a grant by Redis to c: (1) and (2) */
inline granted_g(c) {
  g_hold[c] = 1; g_granted[c] = 1;
  n = 0; j = 0;
  do
  :: j < NC ->
     if :: g_hold[j] -> n++ :: else fi;
     /* (2) nobody queued here before c is still waiting */
     assert(!(g_seq[j] > 0 && g_seq[j] < g_seq[c] && !g_granted[j]));
     j++
  :: else -> break
  od;
  assert(n <= LIMIT)                           /* (1) */
}

/* admits(): the live holders of the semaphore, fewer than LIMIT */
inline count_holders() {
  n = 0; j = 0;
  do
  :: j < NC -> if :: h[j] -> n++ :: else fi; j++
  :: else -> break
  od
}

/* ---- Redis' scripts, one step each */

/* acquire_shared.lua: a slot for the head's own attempt */
inline acquire_shared(c) {
  count_holders();
  if
  :: n < LIMIT -> h[c] = 1; granted_g(c); att_rep[c] = OK + 1
  :: else -> att_rep[c] = LOCKED + 1
  fi;
  att[c] = 0
}

/* release_handoff.lua: release c's slot; then its rider, asked only when
 * its after holds the name (granted earlier in this call or in the set:
 * holds()), else not asked (0) */
inline release_handoff(c) {
  h[c] = 0; g_hold[c] = 0;
  r = rel_rider[c]; a = rel_after[c]; rel_g[c] = 0;
  if
  :: r != NONE ->
     if
#ifndef MUT_RIDE_NO_AFTER
     :: a != NONE && !h[a]                    /* not asked */
#endif
     :: else ->                               /* ho_grant / acquire_shared */
        count_holders();
        if
        :: n < LIMIT -> h[r] = 1; granted_g(r); rel_g[c] = OK + 1
        :: else -> rel_g[c] = LOCKED + 1
        fi
     fi
  :: else
  fi;
  rel[c] = 0; rel_done[c] = 1
}

/* ---- lockd: waiters.c, engine.c */

inline unlink_waiter(c) {
  j = 0;
  do
  :: j < qn && q[j] != c -> j++
  :: else -> break
  od;
  assert(j < qn);
  do
  :: j + 1 < qn -> q[j] = q[j + 1]; j++
  :: else -> break
  od;
  qn--; q[qn] = 0;
  w_st[c] = W_NONE; w_kick[c] = 0; w_retry[c] = 0; w_rode[c] = 0
}

/* attempt(): c (attempting) asks; with no release counted the free slots
 * are unknown */
inline attempt(c) {
#ifndef MUT_RIDE_COUNTS_FREED
  if :: q_freed == 0 -> q_unknown = 1 :: else fi;
#endif
  att[c] = 1
}

/* slot_freed(): a release freed a slot for the queue: counted, the head
 * asks (again), unless it is sk, which asks itself */
inline slot_freed(sk) {
  assert(q_freed < 255);
  q_freed++;
  hd = q[0];
  if
  :: hd == sk
  :: hd != sk && w_st[hd] == W_ATTEMPTING -> w_kick[hd] = 1
  :: hd != sk && w_st[hd] == W_QUEUED -> poke_a = 1
  :: else
  fi
}

/* promote(h, now): the new head is told (an on_poke posted) */
inline promote(now) {
  if :: now -> poke_a = 1 :: else -> poke_n = 1 fi
}

/* waiters_acquire: c joins the queue; as the head it asks at once */
inline waiters_acquire(c) {
  q[qn] = c; qn++;
  g_seq[c] = g_next; g_next++;
  cl_st[c] = C_WAITING;
  if
  :: qn == 1 -> w_st[c] = W_ATTEMPTING; attempt(c)
  :: else -> w_st[c] = W_QUEUED
  fi
}

/* attempt_done: the answer (code: OK+1 or LOCKED+1) of c's attempt, its own
 * or (rode) the one its release carried */
inline attempt_done(c, code) {
  rode = w_rode[c]; w_rode[c] = 0;
  if
  :: code == OK + 1 ->
     /* the next waiter asks now only if more slots were freed than this
      * grant took (or their number is unknown); a rider took the slot its
      * release freed, which was not counted */
     more = 1;
#ifdef MUT_RIDE_COUNTS_FREED
     if
     :: q_freed > 0 -> q_freed--; more = (q_freed > 0)
     :: else
     fi;
#else
     if
     :: rode -> more = (q_unknown || q_freed > 0)
     :: !rode && q_freed == 0 -> q_unknown = 1
     :: !rode && q_freed > 0 && !q_unknown -> q_freed--; more = (q_freed > 0)
     :: else
     fi;
#endif
     hd = (q[0] == c);
     unlink_waiter(c);
     if
     :: hd && qn > 0 -> q_hexp = 1; promote(more)
     :: else
     fi;
     cl_st[c] = C_HOLD
  :: else ->                                   /* LOCKED (no deadline here) */
     if :: !w_kick[c] -> q_freed = 0 :: else fi;
     q_unknown = 0;
     q_hexp = 1;
     if
     :: w_kick[c] -> w_kick[c] = 0; attempt(c)
     :: else -> w_st[c] = W_QUEUED; w_retry[c] = 1
     fi
  fi
}

/* on_poke(now) */
inline on_poke(now) {
  if
  :: qn > 0 && w_st[q[0]] == W_QUEUED ->
     if
     :: now || !q_hexp -> w_st[q[0]] = W_ATTEMPTING; attempt(q[0])
     :: else -> w_retry[q[0]] = 1
     fi
  :: else
  fi
}

/* ride_back: c's release asked nothing for it. A head asks itself (the
 * release released; a kick came; it never asked as the head); a waiter
 * behind the head waits on */
inline ride_back(c) {
  w_rode[c] = 0;
  hd = (q[0] == c);
  again = hd && (w_kick[c] || w_rrel[c] || !w_retry[c]);
  w_kick[c] = 0;
  if
  :: again -> attempt(c)
  :: else -> w_st[c] = W_QUEUED
  fi
}

/* engine_release with waiters_ride: c's release carries the first queued
 * waiter behind the waiters that ask already, naming the one right before it */
inline engine_release(c) {
  j = 0; bf = NONE;
  do
  :: j < qn && w_st[q[j]] == W_ATTEMPTING -> bf = q[j]; j++
  :: else -> break
  od;
  if
  :: j < qn && w_st[q[j]] == W_QUEUED ->
     r = q[j]; w_st[r] = W_ATTEMPTING; w_rode[r] = 1;
     rel_rider[c] = r; rel_after[c] = bf
  :: else -> rel_rider[c] = NONE; rel_after[c] = NONE
  fi;
  rel[c] = 1
}

/* release_done: waiters_kick_rider, then waiters_ride_done */
inline release_done(c) {
  r = rel_rider[c];
  if
  :: qn > 0 ->
     q_hexp = 0;
#ifdef MUT_RIDE_COUNTS_FREED
     /* main before the fix: every release counted, the head woken unless
      * it is the rider */
     q_freed++;
     hd = q[0];
     if
     :: w_st[hd] == W_ATTEMPTING && hd != r -> w_kick[hd] = 1
     :: w_st[hd] == W_QUEUED -> poke_a = 1
     :: else
     fi
#else
     if :: r == NONE -> slot_freed(NONE) :: else fi
#endif
  :: else
  fi;
  if
  :: r != NONE && rel_g[c] == 0 ->           /* not asked */
#ifndef MUT_RIDE_COUNTS_FREED
     slot_freed(r);
#endif
     w_rrel[r] = 1; back[r] = 1
  :: r != NONE && rel_g[c] != 0 -> follow[r] = rel_g[c]
  :: else
  fi;
  rel_done[c] = 0; rel_rider[c] = NONE; rel_after[c] = NONE; rel_g[c] = 0;
  cl_st[c] = C_DONE
}

/* every event of lockd's loops and every script Redis runs, one d_step each */
#define EVENTS(c) \
  :: d_step { att[c] -> acquire_shared(c) } \
  :: d_step { rel[c] -> release_handoff(c) } \
  :: d_step { att_rep[c] != 0 -> cd = att_rep[c]; att_rep[c] = 0; attempt_done(c, cd) } \
  :: d_step { follow[c] != 0 -> cd = follow[c]; follow[c] = 0; attempt_done(c, cd) } \
  :: d_step { back[c] -> back[c] = 0; ride_back(c) } \
  :: d_step { rel_done[c] -> release_done(c) }

proctype events()
{
end:
  do
  EVENTS(0)
  EVENTS(1)
  EVENTS(2)
#if NC > 3
  EVENTS(3)
#endif
  :: d_step { poke_a -> poke_a = 0; on_poke(1) }
  :: d_step { remote_rel -> remote_rel = 0;    /* on_backend_release: waiters_kick */
       if :: qn > 0 -> q_hexp = 0; slot_freed(NONE) :: else fi }
  :: d_step { poke_n -> poke_n = 0; on_poke(0) }
  od
}

/* (5) no slot idle while a waiter waits: lockd has nothing left to do (no
 * callback posted, no call in flight) while a waiter is queued here and
 * fewer than LIMIT slots are held. Only a holder's release would then move
 * it: the busy semaphore of main before the fix kept 1 of 8 slots in use so. */
#define IDLE(c) (!att[c] && att_rep[c] == 0 && !rel[c] && !rel_done[c] && follow[c] == 0 && !back[c])
proctype idle_slot()
{
end:
  atomic {
    (qn > 0 && !poke_a && !poke_n && !remote_rel && IDLE(0) && IDLE(1) && IDLE(2)
#if NC > 3
     && IDLE(3)
#endif
     && g_hold[0] + g_hold[1] + g_hold[2]
#if NC > 3
        + g_hold[3]
#endif
        < LIMIT) ->
    idle_free_slot = 1;
    assert(!idle_free_slot)
  }
}

/* a client: waits in the queue, holds, releases through lockd */
proctype client(byte c)
{
  if
  :: d_step { waiters_acquire(c) }
#ifdef TRYONCE
  :: c == NC - 1 ->                            /* try once: never ahead of the queue */
     d_step {
       if
       :: qn > 0 -> cl_st[c] = C_DONE          /* engine_acquire: waiters_queued */
       :: else ->
          count_holders();
          if
          :: n < LIMIT -> h[c] = 1; g_seq[c] = g_next; g_next++; granted_g(c); cl_st[c] = C_HOLD
          :: else -> cl_st[c] = C_DONE
          fi
       fi }
     if :: cl_st[c] == C_DONE -> goto done :: else fi
#endif
#ifdef REMOTE
  :: c == NC - 1 ->                            /* through another lockd: straight to Redis */
     d_step {
       count_holders();
       if
       :: n < LIMIT -> h[c] = 1; g_hold[c] = 1; cl_st[c] = C_HOLD
       :: else -> cl_st[c] = C_DONE
       fi }
     if
     :: cl_st[c] == C_HOLD ->                  /* release.lua: the release and its PUBLISH, one script */
        d_step { h[c] = 0; g_hold[c] = 0; remote_rel = 1; cl_st[c] = C_DONE }
     :: else
     fi;
     goto done
#endif
  fi;
  cl_st[c] == C_HOLD;                          /* (5): blocked here for ever is an invalid end state */
  d_step { engine_release(c) }
  cl_st[c] == C_DONE;
done:
  skip
}

init {
  atomic {
    j = 0;
    do
    :: j < NC -> rel_rider[j] = NONE; rel_after[j] = NONE; j++
    :: else -> break
    od;
    j = 0;
    run events();
    run idle_slot();
    run client(0);
    run client(1);
    run client(2)
#if NC > 3
    ; run client(3)
#endif
  }
}
