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
 * With -DHOF (configuration handoff-faults): lockd's deadline fires on a
 * call in flight (FAULTS of them) and drops its connection with any other
 * call pending on it (rn cmd_on_deadline, conn_drop): each is answered 503
 * (attempt_done: the waiter leaves the queue, the next one is told;
 * release_done: in doubt, a kick as for a release (the head asks once),
 * the rider goes back, ride_released and ride_doubt set, and first renews
 * its own lease, which the hand-off may have granted: held, that is its
 * grant (ride_back, reclaim_done); a release answered 404: no kick, the
 * rider goes back, ride_released false), its
 * reply is never read, its request still runs at Redis or never does; a
 * holder's slot expires at Redis at any time (the set's trim; untimed), a
 * release of it answers 404 (its rider goes back too); a holder may crash
 * (never release); a queued head's retry timer fires at any time once
 * armed; on_poke(no attempt) may find holder_expiry_ms passed. Properties
 * then: (1) counts a slot held at Redis or a lease answered OK that its
 * client relies on (not released, crashed or expired); (2) FIFO among the
 * waiters still queued (one answered 503 left), a waiter that Redis granted
 * once counting as granted; (3) tokens strictly increase per grant; (5)
 * idle_slot only while no fault and no expiry happened (a slot freed by an
 * expiry, or by a release whose answer was lost, is found by the head's
 * retry alone), and (5w) idle_retry: never a free slot, a queued waiter,
 * lockd idle and the head with no retry armed; a waiter left waiting at
 * the end is an invalid end state, as before.
 *
 * With -DHOL as well (in configuration handoff-faults): client LEAVER (NC -
 * 1) may leave once, at any moment while it waits (queued, asking, riding,
 * reclaiming): its HTTP client goes (engine_cancel: queued, unlinked at
 * once, the next head told with promote(h, false); attempting, marked
 * cancelled) or its session ends (waiters_fail: marked failed, on_sweep
 * posted, which unlinks it if queued; on_poke and on_timer skip or answer a
 * failed head). An attempting one is handled when its answer comes:
 * attempt_done (granted: the grant goes back, waiters_release_bg, as for a
 * cancelled one or a session waiter whose session_add_lock fails; refused
 * or 503: unlinked, promote(h, true) when failed, false when cancelled),
 * ride_back (cancelled: unlinked, a release in doubt's possible grant goes
 * back; failed: no reclaim, that grant goes back, then attempt() finds it
 * failed: unlinked, promote(h, true)); waiters_ride carries no failed or
 * cancelled waiter, nor any past one that asks. An attempt or a reclaim
 * answered 503 (attempt_done's failure branch with LK_BACKEND_DOWN) gives
 * its lease back as well (engine_acquire_in_doubt, c157a0f: the acquire,
 * or the hand-off the reclaim looks for, may have run), whether the
 * waiter left or not: modelled for the leaver (gb[LEAVER]), for every
 * client with -DGB_ALL (by hand: 3.2 GB, past the cap; README.md). The
 * give-back is a request of its own (release.lua: removes the slot only if
 * that lease holds one), one per client (gb[c]), run at Redis at any
 * moment, its answer a kick (release_bg_done); with FAULTS 1 it is never
 * answered 503 (neither by its own deadline nor by a drop of its
 * connection). Property added: (6) no orphan (proctype orphans): never a
 * slot held at Redis by the leaver's lease once it left, lockd has
 * unlinked it and no give-back is on its way. A grant whose reply was lost
 * to a 503, or that a reclaim answered 503 may have found, counts; the one
 * exclusion (l_stale) is a request answered 503 (sent on the dropped
 * connection) that Redis runs after a request lockd sent later for the
 * leaver (its reclaim or its give-back, on a new connection) already ran:
 * nothing in lockd orders the two (README.md; -DSTALE_STRICT drops the
 * exclusion and (6) fails so). Checked in every state, so a slot that would
 * expire later is caught all the same. (5) is checked after a leave as
 * before it: an ask-now poke whose head left before it ran is kept on the
 * queue (q_ask, wqueue.ask since d0af9b2) and paid by the next head's own
 * poke (MUT_ASK_LOST takes it out).
 *
 * With -DNODOUBT (configuration handoff-renew): a release answered 503 is
 * what it was on main before engine_release_in_doubt (no kick, the rider
 * back with ride_released false, no reclaim): with the doubt path that
 * search takes 70,527,221 states and 5.9 GB, past CI's bound; it is
 * configuration handoff-renew-doubt, by hand (README.md).
 *
 * With -DHOR as well (configuration handoff-renew): client RENEWER (1)
 * renews its slot once while it holds (renew.lua, sh_renew: OK while its
 * lease holds a live slot, else not held), which may race its own expiry,
 * other holders' hand-offs and the fault (a renewal answered 503 leaves the
 * client the validity it had); client RERELEASER (0; NC: any client, as
 * in handoff-renew), answered 503 on its release, releases again (release slot c + NC, with a rider of its own:
 * engine_release), racing its first release's request, which may still
 * run at Redis; the renewer may also release while its renewal is in
 * flight (a session's watchdog renews on its own). Properties added: (1h) never more than LIMIT slots at
 * Redis at any moment (relied); (4h) a client relies on its lease (a grant
 * or renewal answered OK, until its release, crash or the slot's expiry
 * after the renewal ran) only while Redis holds its slot (relied), and a
 * rider is asked only by a release that removed its own lease's slot
 * (asserted in release_handoff: no slot handed on twice).
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
 *   MUT_NO_ROOM            attempt_done ignores the backend's room
 *                          (bk_res.room): with the subscription's kick
 *                          (SUBKICK) (5) fails
 *   MUT_RIDE_DOWN_FORGETS  (HOF) a release answered 503 or 404 leaves its
 *                          rider attempting: (5w) fails
 *   MUT_DOUBT_NO_RECLAIM   (HOF) a rider of a release answered 503 asks
 *                          (acquire) without renewing its lease first:
 *                          the hand-off's grant, unknown to it, is refused
 *                          as full while it waits: (5) fails
 *   MUT_DOUBT_NO_KICK      (HOF) main before: a release answered 503 kicks
 *                          nobody and its rider goes back with
 *                          ride_released false: (5) fails
 *   MUT_SEM_NO_RETRY       (HOF) a refused head arms no retry: after an
 *                          expiry (no message) it waits for ever: (5w) fails
 *   MUT_DOWN_NO_PROMOTE    (HOF) a head answered 503 leaves the queue without
 *                          telling the next waiter: (5w) fails
 *   MUT_LEAVE_NO_GIVEBACK  (HOL) main before 85a02bc: ride_back's failed
 *                          branch gives nothing back (a rider whose session
 *                          ended after its release was answered 503): the
 *                          hand-off's grant stays held by a lease nobody
 *                          knows: (6) fails
 *   MUT_NO_ACQ_GIVEBACK    (HOL) main before c157a0f: an attempt answered 503
 *                          gives nothing back (engine_acquire_in_doubt left
 *                          out): a cancelled head granted at Redis, its reply
 *                          lost to the deadline, holds a slot nobody knows:
 *                          (6) fails
 *   MUT_ASK_LOST           (HOL) main before d0af9b2: no q->ask, on_poke
 *                          reads only the poke and the holder's expiry: a
 *                          grant's ask-now poke for a head whose session
 *                          ended is dropped, the next head, poked by
 *                          on_sweep to look only, arms its retry for the
 *                          holder's expiry with a slot free: (5) fails
 *   MUT_HO_RERELEASE_FREES (HOR) a release whose lease holds no slot frees the
 *                          first holder's and hands it on: (4h) fails
 *   MUT_HO_RENEW_READDS    (HOR) a renewal re-adds a lease whose slot expired
 *                          (and was trimmed): (1h) fails
 */
#ifndef NC
#define NC 3
#endif
#ifndef LIMIT
#define LIMIT 2
#endif
#include "params.pml"

#define NONE NC         /* no rider, no after */
#define CL(i) ((i) % NC)  /* the client of release slot i */
#ifdef HOR
#define NREL (2*NC)     /* release slots: c's release, c + NC its second one (after a 503) */
#define C_RELEASING 4   /* its release is in lockd or at Redis */
#define C_RENEWING 5    /* its renewal is in lockd or at Redis */
#define C_REREL 6       /* answered 503 on its release: it releases again */
#ifndef RENEWER
#define RENEWER 1       /* the client that renews (once); NC: every client */
#endif
#ifndef RERELEASER
#define RERELEASER 0    /* the client that releases again after a 503; NC: every client */
#endif
#define RENEW_OF(c) (RENEWER == NC || (c) == RENEWER)
#define REREL_OF(c) (RERELEASER == NC || (c) == RERELEASER)
#else
#define NREL NC
#endif

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
bit  q_ask;             /* wqueue.ask: an ask-now poke is owed to whoever heads the queue
                         * (post_poke with now); cleared when the head asks (attempt) */
bit  poke_a;            /* an on_poke(attempt) posted */
bit  remote_rel;        /* another lockd's release message, not yet here */
#ifdef SUBKICK
bit  sub_conf = 1;      /* the name's subscription's confirmation, not yet here */
bit  w_pend[NC];        /* marked attempting by waiters_acquire, attempt() not yet run */
#define PEND(c) w_pend[c]
#else
#define PEND(c) 0
#endif
bit  w_room[NC];        /* c's grant at Redis left a slot free (bk_res.room), not yet read */
bit  poke_n;            /* an on_poke(no attempt) posted (promote(h, false)) */

/* ---- in flight */
bit  att[NC];           /* c's acquire (acquire_shared.lua) on its way to Redis */
byte att_rep[NC];       /* its reply, not yet read by lockd: OK+1, LOCKED+1 */
bit  rel[NREL];         /* release slot i's release (release_handoff.lua) on its way to Redis */
byte rel_rider[NREL];   /* the waiter it carries (NONE: none) */
byte rel_after[NREL];   /* the rider's after (NONE: none) */
bit  rel_done[NREL];    /* its reply, not yet read by lockd (release_done) */
byte rel_g[NREL];       /* the rider's part: 0 not asked, OK+1, LOCKED+1 */
byte follow[NC];        /* on_follower(c) posted, with the rider's result (OK+1, LOCKED+1) */
bit  back[NC];          /* ride_back(c) posted */
bit  w_doubt[NC];       /* ride_doubt: its release was answered 503 (HOF) */
bit  rc[NC];            /* c's reclaim (renew.lua of its own lease) on its way to Redis */
byte rc_rep[NC];        /* its reply, not yet read by lockd: OK+1, NOT_HELD+1 */

/* ---- the clients */
byte cl_st[NC];         /* C_IDLE, C_WAITING, C_HOLD, C_DONE */

/* ---- ghosts: what happened, never what lockd computed */
byte g_seq[NC];         /* order of joining the queue (1, 2, ...; 0: not yet) */
byte g_next = 1;
bit  g_granted[NC];     /* Redis granted it */
bit  g_hold[NC];        /* it holds a slot (granted, not released) */
bit  idle_free_slot;    /* (5) a slot free, a waiter queued, lockd idle */

hidden byte n, j, r, a, hd, bf, cd;   /* scratch of one step: not in the state vector */
hidden byte more, rode, again;

#ifdef HOF
/* ---- faults and expiry (HOF): lockd's deadline (rn cmd_on_deadline)
 * answers a call 503 and drops its connection, which answers every call
 * pending on it 503 too (conn_drop): their replies are never read; their
 * requests may still run at Redis (received before the close) or not */
bit  a_orph[NC];        /* c's acquire was answered 503: its request may still run */
bit  rc_orph[NC];       /* c's reclaim was answered 503: its request may still run */
#ifndef HOR
bit  g_late;            /* ghost: a fault answered a call whose request had not run at
                         * Redis: it may run later, after every wake-up lockd made */
#define LATE(x) g_late = (g_late || (x))
#else
#define LATE(x) skip    /* (5) as before: only while no fault (the state space) */
#endif
bit  r_orph[NREL];      /* release i was answered 503: its request may still run */
bit  rel_nh[NREL];      /* release i found its slot gone (expired, released): not held */
byte g_nf;              /* faults so far (deadlines that fired) */
bit  g_exp;             /* a slot expired at Redis */
bit  g_live[NC];        /* ghost: c was answered OK, has not released or
                         * crashed, and its slot has not expired: it relies on it */
byte g_tok;             /* Redis' fence counter: each grant takes the next token */
byte g_tokmax;          /* ghost: the largest token granted */
#endif
#ifdef HOR
/* ---- renewals and a second release (HOR) */
bit  rn[NC];            /* c's renewal (renew.lua: sh_renew) on its way to Redis */
byte rn_rep[NC];        /* its reply, not yet read by lockd: OK+1, NOT_HELD+1 */
bit  rn_orph[NC];       /* c's renewal was answered 503: its request may still run */
bit  c_rn[NC];          /* c renewed (once: RENEWS 1) */
bit  c_rr[NC];          /* c released a second time (after a 503) */
bit  g_rok[NC];         /* ghost: Redis answered c's renewal OK and c's slot has not expired since */
hidden byte fr;        /* ghost (scratch): this release_handoff call removed its own lease's slot */
#endif
#ifdef HOL
/* ---- a client that leaves (HOL): client LEAVER, once, while it waits */
#if defined(HOR) || !defined(HOF)
#error "HOL is for -DHOF without -DHOR"
#endif
#ifndef LEAVER
#define LEAVER (NC - 1) /* the client that may leave */
#endif
bit  l_cancel;          /* its HTTP client left (engine_cancel): cancelled */
bit  l_fail;            /* its session ended (waiters_fail): failed, fail_code 404 */
bit  l_sweep;           /* on_sweep posted (waiters_fail) */
bit  gb[NC];            /* c's give-back (waiters_release_bg: release.lua of its lease) on its
                         * way to Redis: the leaver's (it left, or its attempt or reclaim was
                         * answered 503: engine_acquire_in_doubt; every client's with GB_ALL) */
byte gb_rep[NC];        /* its reply, not yet read by lockd: OK+1, NOT_HELD+1 */
bit  l_later;           /* ghost: a request lockd sent for the leaver after a fault (its
                         * reclaim, its give-back) has run at Redis */
bit  l_stale;           /* ghost: the leaver's slot came from a request answered 503 (sent
                         * on the dropped connection) that Redis ran after one of those: (6) */
hidden byte lw, lh;     /* scratch of one step */
/* c granted at Redis by a request lockd answered 503 (orph) after a
 * request lockd sent for c later (its reclaim or give-back, on a new
 * connection) ran: out of order across connections, nothing in lockd
 * frees that slot (README.md, (6)) */
#ifndef STALE_STRICT
#define STALE_IF(c, orph) if :: (c) == LEAVER && (orph) && l_later -> l_stale = 1 :: else fi
#else
#define STALE_IF(c, orph) skip  /* (a check's switch: (6) with no exclusion) */
#endif
#define LATER_RAN(c) if :: (c) == LEAVER -> l_later = 1 :: else fi
#define CANC(c) ((c) == LEAVER && l_cancel)
#define FAILED(c) ((c) == LEAVER && l_fail)
#define GONE(c) ((c) == LEAVER && (l_cancel || l_fail))
#else
#define FAILED(c) 0
#define GONE(c) 0
#endif

/* a grant by Redis to c: (1) and (2) */
inline granted_g(c) {
#ifdef HOF
  /* (3) tokens strictly increase per grant (the floor only raises them) */
  assert(g_tok < 255); g_tok++;
  assert(g_tok > g_tokmax); g_tokmax = g_tok;
#endif
  g_hold[c] = 1; g_granted[c] = 1;
  n = 0; j = 0;
  do
  :: j < NC ->
#ifdef HOF
     /* (1) a slot held at Redis, or a lease answered OK that its client
      * relies on (neither released nor expired) */
     if :: g_hold[j] || g_live[j] -> n++ :: else fi;
#else
     if :: g_hold[j] -> n++ :: else fi;
#endif
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
  :: n < LIMIT -> w_room[c] = (n + 1 < LIMIT); h[c] = 1; granted_g(c); att_rep[c] = OK + 1
#ifdef HOL
     ; STALE_IF(c, a_orph[c])
#endif
  :: else -> att_rep[c] = LOCKED + 1
  fi;
  att[c] = 0
}

/* release_handoff.lua: release slot i's release of its client's slot;
 * then its rider, asked only when its after holds the name (granted earlier
 * in this call or in the set: holds()), else not asked (0) */
inline release_handoff(i) {
  r = rel_rider[i]; a = rel_after[i]; rel_g[i] = 0;
#ifdef HOR
  fr = h[CL(i)];
#endif
#ifdef HOF
  /* a lease that expired (or, HOR, that a first release answered 503
   * released): 'not held' ({release's reply}), nobody asked */
  if :: !h[CL(i)] -> rel_nh[i] = 1; r = NONE :: else -> rel_nh[i] = 0 fi;
#endif
#ifdef MUT_HO_RERELEASE_FREES
  /* the mutant: a lease not in the set frees the slot that expires first
   * (as ZPOPMIN in place of ZREM lease would) and hands it on */
  if
  :: rel_nh[i] ->
     j = 0;
     do
     :: j < NC && !h[j] -> j++
     :: else -> break
     od;
     if :: j < NC -> h[j] = 0; g_hold[j] = 0; rel_nh[i] = 0; r = rel_rider[i] :: else fi
  :: else
  fi;
#endif
  h[CL(i)] = 0; g_hold[CL(i)] = 0;
  if
  :: r != NONE ->
     if
#ifndef MUT_RIDE_NO_AFTER
     :: a != NONE && !h[a]                    /* not asked */
#endif
     :: else ->                               /* ho_grant / acquire_shared */
#ifdef HOR
        /* (4h) a rider is asked only by a release that freed its own
         * lease's slot: a lease not held hands nothing on (no slot twice) */
        assert(fr);
#endif
        count_holders();
        if
        :: n < LIMIT -> w_room[r] = (n + 1 < LIMIT); h[r] = 1; granted_g(r); rel_g[i] = OK + 1
#ifdef HOL
           ; STALE_IF(r, r_orph[i])
#endif
        :: else -> rel_g[i] = LOCKED + 1
        fi
     fi
  :: else
  fi;
  rel[i] = 0; rel_done[i] = 1
#ifdef HOR
  ; fr = 0
#endif
}

#ifdef HOR
/* renew.lua on a semaphore's set (sh_renew): extends c's slot when c's
 * lease holds a live one, else not held (404, or 409 naming another
 * holder: the same for the model). Untimed: the extension changes nothing
 * but the ghost g_rok (the client may rely on the validity lockd answers) */
inline renew_lua(c) {
  if
  :: h[c] -> g_rok[c] = 1; rn_rep[c] = OK + 1
#ifdef MUT_HO_RENEW_READDS
  /* the mutant: ZADD without the ZSCORE check re-adds a lease whose slot
   * expired and was trimmed (or was released) */
  :: else -> h[c] = 1; g_hold[c] = 1; g_rok[c] = 1; rn_rep[c] = OK + 1
#else
  :: else -> rn_rep[c] = NOT_HELD + 1
#endif
  fi;
  rn[c] = 0
}

/* renew_done: the client relies on its lease for the validity answered
 * (ttl - elapsed since lockd sent it): until the slot's expiry at Redis
 * after the renewal ran there at the latest, so not at all when it expired
 * before the answer came (g_rok cleared). 404/409: the client stops */
inline renew_done(c) {
  cd = rn_rep[c]; rn_rep[c] = 0;
  if
  :: cl_st[c] != C_RENEWING                   /* it released meanwhile: nothing to rely on */
  :: else -> if
     :: cd == OK + 1 -> g_live[c] = g_rok[c]; cl_st[c] = C_HOLD
     :: else -> g_live[c] = 0; cl_st[c] = C_DONE
     fi
  fi;
  g_rok[c] = 0
}
#endif

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
  if :: qn == 0 -> q_ask = 0 :: else fi;       /* the queue freed (its next one starts with none owed) */
  w_st[c] = W_NONE; w_kick[c] = 0; w_retry[c] = 0; w_rode[c] = 0
}

/* attempt(): c (attempting) asks; with no release counted the free slots
 * are unknown */
inline attempt(c) {
  if :: q[0] == c -> q_ask = 0 :: else fi;     /* the head asks: what was owed to it is paid */
#ifndef MUT_RIDE_COUNTS_FREED
  if :: q_freed == 0 -> q_unknown = 1 :: else fi;
#endif
  att[c] = 1
}

/* post_poke(q, h, now) with now: the head asks at once; the ask is kept
 * on the queue (q->ask) for whoever heads it when a poke runs, in case h
 * left first (MUT_ASK_LOST: main before d0af9b2, the poke alone) */
#ifndef MUT_ASK_LOST
#define POKE_ASK q_ask = 1; poke_a = 1
#else
#define POKE_ASK poke_a = 1
#endif

/* slot_freed(): a release freed a slot for the queue: counted, the head
 * asks (again), unless it is sk, which asks itself */
inline slot_freed(sk) {
  assert(q_freed < 255);
  q_freed++;
  hd = q[0];
  if
  :: hd == sk
  :: hd != sk && w_st[hd] == W_ATTEMPTING -> w_kick[hd] = 1
  :: hd != sk && w_st[hd] == W_QUEUED -> POKE_ASK
  :: else
  fi
}

/* promote(h, now): the new head is told (an on_poke posted) */
inline promote(now) {
  if :: now -> POKE_ASK :: else -> poke_n = 1 fi
}

#ifdef HOL
/* the leaver unlinked and answered (cancelled: freed, answering nothing;
 * failed: fail(), 404): the new head, if it was the head, is told
 * (promote(h, now)) */
inline waiter_leaves(c, now) {
  lh = (q[0] == c);
  unlink_waiter(c);
  if :: lh && qn > 0 -> promote(now) :: else fi;
  g_seq[c] = 0; w_rrel[c] = 0; w_doubt[c] = 0; lh = 0
}

/* waiters_release_bg of the leaver's lease: a compare-and-delete release,
 * its own request (with FAULTS 1 never answered 503: see README.md) */
inline give_back(c) {
  assert(!gb[c] && gb_rep[c] == 0);
  gb[c] = 1
}
/* engine_acquire_in_doubt's give-back: the leaver's; every client's with
 * -DGB_ALL (by hand: past the 3000 MB cap, README.md) */
#ifdef GB_ALL
#define ACQ_GIVE_BACK(c) give_back(c)
#else
#define ACQ_GIVE_BACK(c) if :: (c) == LEAVER -> give_back(c) :: else fi
#endif

/* engine_cancel (its client's connection closed, on its loop): queued, it
 * is unlinked and freed; attempting, it is marked cancelled and its answer
 * frees it (attempt_done, ride_back) */
inline leave_cancel(c) {
  l_cancel = 1; cl_st[c] = C_DONE;
  if
  :: w_st[c] == W_QUEUED -> waiter_leaves(c, 0)
  :: else
  fi
}

/* waiters_fail(session) (its session deleted or expired, another thread,
 * under wmu): marked failed, its loop's on_sweep posted; the client waits
 * for its 404 (done here: it will never hold) */
inline leave_fail(c) {
  l_fail = 1; l_sweep = 1; cl_st[c] = C_DONE
}
#endif

/* waiters_acquire: c joins the queue; as the head it asks at once */
inline waiters_acquire(c) {
  q[qn] = c; qn++;
  g_seq[c] = g_next; g_next++;
  cl_st[c] = C_WAITING;
  if
#ifdef SUBKICK
  /* marked attempting under wmu; attempt() takes wmu again to look at
   * freed: a kick may come in between (w_pend) */
  :: qn == 1 -> w_st[c] = W_ATTEMPTING; w_pend[c] = 1
#else
  :: qn == 1 -> w_st[c] = W_ATTEMPTING; attempt(c)
#endif
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
#ifndef MUT_NO_ROOM
     /* the backend says a slot is still free: the next waiter asks,
      * whatever was counted here */
     if :: w_room[c] -> more = 1 :: else fi;
#endif
     w_room[c] = 0;
     hd = (q[0] == c);
     unlink_waiter(c);
     if
     :: hd && qn > 0 -> q_hexp = 1; promote(more)
     :: else
     fi;
#ifdef HOL
     if
     :: GONE(c) ->                             /* cancelled, or its session gone (session_add_lock */
        give_back(c)                            /* fails: 404): nobody knows this lease, it goes back */
     :: else ->
#endif
#ifdef HOF
     g_live[c] = h[c];                         /* (it may have expired: a reply slower than the lease) */
#endif
     cl_st[c] = C_HOLD
#ifdef HOL
     fi
#endif
#ifdef HOF
  :: code == BACKEND_DOWN + 1 ->               /* the deadline: 503, the waiter leaves */
     hd = (q[0] == c);
     unlink_waiter(c);
#ifndef MUT_DOWN_NO_PROMOTE
     if
     :: hd && qn > 0 -> promote(1)
     :: else
     fi;
#endif
     g_seq[c] = 0;                             /* (2) no longer queued here */
     cl_st[c] = C_DONE
#if defined(HOL) && !defined(MUT_NO_ACQ_GIVEBACK)
     /* engine_acquire_in_doubt (c157a0f): the acquire, or the reclaim's
      * renewal, may have run and granted c's lease, which nobody will
      * know: waiters_release_bg gives it back (left or not; the leaver's,
      * every client's with -DGB_ALL) */
     ; ACQ_GIVE_BACK(c)
#endif
#endif
#ifdef HOL
  :: code == LOCKED + 1 && GONE(c) ->          /* "cancelled, failed": unlinked, answered; */
     waiter_leaves(c, FAILED(c))               /* promote(h, code != LOCKED): fail_code, or LOCKED */
#endif
  :: else ->                                   /* LOCKED (no deadline here) */
     /* only the head's refusal is news for the queue: a rider's behind it
      * may predate releases counted since (they woke the head alone).
      * Unreachable here: a rider behind the head is granted or not asked,
      * never refused, the release before it having freed a slot (in Redis
      * a set over its limit after a re-assertion refuses it) */
     hd = (q[0] == c);
     if :: hd && !w_kick[c] -> q_freed = 0 :: else fi;
     if :: hd -> q_unknown = 0; q_hexp = 1 :: else fi;
     if
     :: w_kick[c] -> w_kick[c] = 0; attempt(c)
     :: else -> w_st[c] = W_QUEUED;
#ifndef MUT_SEM_NO_RETRY
        w_retry[c] = hd                        /* behind the head: promoted, no retry */
#endif
     fi
  fi
}

/* on_poke(now): the head, queued and not failed, asks when the poke says
 * so, an ask is owed to the queue's head (q->ask) or the holder's expiry
 * passed; else its retry is armed for that expiry. The model has one
 * loop: a poke reaches whichever head is there when it runs */
inline on_poke(now) {
  if
  :: qn > 0 && w_st[q[0]] == W_QUEUED && !FAILED(q[0]) ->   /* (a failed one: its sweep answers it) */
     if
     :: now || q_ask || !q_hexp -> w_st[q[0]] = W_ATTEMPTING; attempt(q[0])
     :: else -> w_retry[q[0]] = 1
#ifdef HOF
     /* holder_expiry_ms passed meanwhile (time is untimed here): an
      * atomic step, not a d_step, so that both are searched */
     :: !now && !q_ask && q_hexp -> w_st[q[0]] = W_ATTEMPTING; attempt(q[0])
     :: !now && !q_ask && q_hexp -> w_retry[q[0]] = 1
#endif
     fi
  :: else
  fi
}

/* ride_back: c's release asked nothing for it. A head asks itself (the
 * release released; a kick came; it never asked as the head; a release
 * was seen since its last answer, !q_hexp: that release's poke found it
 * riding); a waiter behind the head waits on. Its release answered 503
 * (ride_doubt): it first renews its own lease (reclaim), still attempting */
inline ride_back(c) {
#ifdef HOL
  if
  :: CANC(c) ->                                /* its client left meanwhile: unlinked, freed; */
     if :: w_doubt[c] -> give_back(c) :: else fi;  /* in doubt, the possible grant goes back */
     waiter_leaves(c, 0)
  :: FAILED(c) ->                              /* its session ended: no reclaim; in doubt, the */
#ifndef MUT_LEAVE_NO_GIVEBACK
     if :: w_doubt[c] -> give_back(c) :: else fi;  /* possible grant goes back; again: attempt() */
#endif
     waiter_leaves(c, 1)                       /* finds it failed, attempt_done(fail_code) */
  :: else ->
#endif
  w_rode[c] = 0;
#ifndef MUT_DOUBT_NO_RECLAIM
  if
  :: w_doubt[c] -> w_doubt[c] = 0; rc[c] = 1
  :: else ->
#else
  w_doubt[c] = 0;
#endif
  hd = (q[0] == c);
  again = hd && (w_kick[c] || w_rrel[c] || !w_retry[c] || !q_hexp);
  w_kick[c] = 0;
  if
  :: again -> attempt(c)
  :: else -> w_st[c] = W_QUEUED
  fi
#ifndef MUT_DOUBT_NO_RECLAIM
  fi
#endif
#ifdef HOL
  fi
#endif
}

/* reclaim_done: held, the hand-off's grant is c's; not held, it goes back
 * as a rider not asked */
inline reclaim_done(c, code) {
  if
  :: code == OK + 1 -> attempt_done(c, OK + 1)
  :: else -> ride_back(c)
  fi
}

/* engine_release with waiters_ride: c's release carries the first queued
 * waiter behind the waiters that ask already, naming the one right before it */
inline engine_release(i) {
  j = 0; bf = NONE;
  do
  :: j < qn && w_st[q[j]] == W_ATTEMPTING && !GONE(q[j]) -> bf = q[j]; j++
#ifdef HOL
  :: j < qn && w_st[q[j]] == W_ATTEMPTING && GONE(q[j]) -> j = qn  /* a failed or cancelled one asks: no rider */
#endif
  :: else -> break
  od;
  if
  :: j < qn && w_st[q[j]] == W_QUEUED && !FAILED(q[j]) ->
     r = q[j]; w_st[r] = W_ATTEMPTING; w_rode[r] = 1;
     rel_rider[i] = r; rel_after[i] = bf
  :: else -> rel_rider[i] = NONE; rel_after[i] = NONE
  fi;
#ifdef HOF
  g_live[CL(i)] = 0;
#endif
#ifdef HOR
  cl_st[CL(i)] = C_RELEASING;
#endif
  rel[i] = 1
}

/* release_done: waiters_kick_rider, then waiters_ride_done */
inline release_done(i) {
  r = rel_rider[i];
#ifdef HOF
  if
  :: rel_nh[i] -> rel_nh[i] = 0; ride_unknown(r)  /* 404: no kick, the rider back */
  :: else ->
#endif
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
     :: w_st[hd] == W_QUEUED -> POKE_ASK
     :: else
     fi
#else
     if :: r == NONE -> slot_freed(NONE) :: else fi
#endif
  :: else
  fi;
  if
  :: r != NONE && rel_g[i] == 0 ->           /* not asked */
#ifndef MUT_RIDE_COUNTS_FREED
     slot_freed(r);
#endif
     w_rrel[r] = 1; back[r] = 1
  :: r != NONE && rel_g[i] != 0 -> follow[r] = rel_g[i]
  :: else
  fi
#ifdef HOF
  fi
#endif
  ;
  rel_done[i] = 0; rel_rider[i] = NONE; rel_after[i] = NONE; rel_g[i] = 0;
  cl_st[CL(i)] = C_DONE
}

#ifdef HOF
/* release_done with a release that did not release (404): no kick
 * (waiters_kick_rider runs on LK_OK and in doubt only); its rider,
 * waiters_ride_done(released false, g NULL): nothing counted, ride_back
 * posted with ride_released false */
inline ride_unknown(rd) {
#ifndef MUT_RIDE_DOWN_FORGETS
  if :: rd != NONE -> w_rrel[rd] = 0; back[rd] = 1 :: else fi
#else
  skip
#endif
}

/* release_done with a release answered 503 (engine_release_in_doubt): it
 * may have run, so waiters_kick_rider (the head asks once, unless it is
 * the rider), then waiters_ride_done(released, doubt, g NULL): the slot
 * counted skipping the rider, which goes back with ride_released and
 * ride_doubt set */
inline ride_doubt(rd) {
#ifdef MUT_DOUBT_NO_KICK
  /* main before: no kick, the rider back with ride_released false */
  if :: rd != NONE -> w_rrel[rd] = 0; back[rd] = 1 :: else fi
#elif !defined(MUT_RIDE_DOWN_FORGETS)
  if
  :: qn > 0 -> q_hexp = 0; if :: rd == NONE -> slot_freed(NONE) :: else fi
  :: else
  fi;
  if :: rd != NONE -> slot_freed(rd); w_rrel[rd] = 1; w_doubt[rd] = 1; back[rd] = 1 :: else fi
#else
  skip
#endif
}

/* the deadline on c's release, or the drop of its connection (rcmd_expire,
 * cmd_answer_down, release_done with LK_BACKEND_DOWN): 503 to the client,
 * which gives up (its slot, if still held, expires); the head is kicked
 * and the rider goes back (ride_doubt) */
inline release_down(i) {
#ifndef NODOUBT
  ride_doubt(rel_rider[i]);
#else
  ride_unknown(rel_rider[i]);                  /* (main before: see NODOUBT above) */
#endif
  rel_done[i] = 0; rel_nh[i] = 0;
  if
  :: rel[i] -> r_orph[i] = 1; LATE(1)        /* its request may still run (rel_rider kept) */
  :: else -> rel_rider[i] = NONE; rel_after[i] = NONE; rel_g[i] = 0
  fi;
#ifdef HOR
  /* the client releases again (once; with FAULTS 1 that one is never
   * answered 503) */
  if
  :: i < NC && REREL_OF(i) && !c_rr[i] -> c_rr[i] = 1; cl_st[i] = C_REREL
  :: else -> cl_st[CL(i)] = C_DONE
  fi
#else
  cl_st[i] = C_DONE
#endif
}

/* j's call answered 503 (its deadline, or its connection dropped): its
 * reply, if on its way, is lost; its request, if not run yet, may run */
#ifndef HOR
#define INFL(j) ((!a_orph[j] && (att[j] || att_rep[j] != 0)) || (!r_orph[j] && (rel[j] || rel_done[j])) \
                 || (!rc_orph[j] && (rc[j] || rc_rep[j] != 0)))
#else
/* (the second release slots, j + NC, are never in flight while a fault is
 * left with FAULTS 1: a second release follows a 503) */
#define INFL(j) ((!a_orph[j] && (att[j] || att_rep[j] != 0)) || (!r_orph[j] && (rel[j] || rel_done[j])) \
                 || (!rn_orph[j] && (rn[j] || rn_rep[j] != 0)) || (!rc_orph[j] && (rc[j] || rc_rep[j] != 0)))
#endif
inline drop_one(j) {
  if
  :: !a_orph[j] && (att[j] || att_rep[j] != 0) ->
     LATE(att[j]);
     att_rep[j] = 0; a_orph[j] = att[j]; attempt_done(j, BACKEND_DOWN + 1)
  :: !rc_orph[j] && (rc[j] || rc_rep[j] != 0) ->
     /* a reclaim answered 503: answered as an attempt's 503 */
     LATE(rc[j]);
     rc_rep[j] = 0; rc_orph[j] = rc[j]; attempt_done(j, BACKEND_DOWN + 1)
#ifdef HOR
  :: !rn_orph[j] && (rn[j] || rn_rep[j] != 0) ->
     /* a renewal answered 503: the client keeps the validity it had */
     LATE(rn[j]);
     rn_rep[j] = 0; rn_orph[j] = rn[j]; g_rok[j] = 0;
     if :: cl_st[j] == C_RENEWING -> cl_st[j] = C_HOLD :: else fi
#endif
  :: else -> release_down(j)
  fi
}
/* another call pending on the connection dropped (same loop): any of them */
#define DROP_ALSO(j) if :: INFL(j) -> drop_one(j) :: true fi
#endif

/* every event of lockd's loops and every script Redis runs, one d_step each */
#ifndef HOF
#define EVENTS(c) \
  :: d_step { att[c] -> acquire_shared(c) } \
  :: d_step { rel[c] -> release_handoff(c) } \
  :: d_step { att_rep[c] != 0 -> cd = att_rep[c]; att_rep[c] = 0; attempt_done(c, cd) } \
  :: d_step { follow[c] != 0 -> cd = follow[c]; follow[c] = 0; attempt_done(c, cd) } \
  :: d_step { back[c] -> back[c] = 0; ride_back(c) } \
  :: d_step { rel_done[c] -> release_done(c) }
#else
/* with faults: lockd's deadline fires on a call in flight (one fault:
 * FAULTS), its connection is dropped with any other call pending on it:
 * all answered 503, their replies lost, their requests still run at Redis
 * or never (an orphan's reply is dropped); a holder's slot expires at
 * Redis (the set's trim), at any time (untimed); the head's retry timer
 * fires at any time once armed */
#if NC > 3
#define DROP_OTHERS DROP_ALSO(0); DROP_ALSO(1); DROP_ALSO(2); DROP_ALSO(3)
#else
#define DROP_OTHERS DROP_ALSO(0); DROP_ALSO(1); DROP_ALSO(2)
#endif
#define EVENTS(c) \
  :: d_step { att[c] -> acquire_shared(c); \
       if :: a_orph[c] -> att_rep[c] = 0; a_orph[c] = 0 :: else fi } \
  :: d_step { rel[c] -> release_handoff(c); \
       if :: r_orph[c] -> rel_done[c] = 0; rel_rider[c] = NONE; rel_after[c] = NONE; \
                          rel_g[c] = 0; rel_nh[c] = 0; r_orph[c] = 0 \
          :: else fi } \
  :: d_step { att_rep[c] != 0 -> cd = att_rep[c]; att_rep[c] = 0; attempt_done(c, cd) } \
  :: d_step { follow[c] != 0 -> cd = follow[c]; follow[c] = 0; attempt_done(c, cd) } \
  :: d_step { back[c] -> back[c] = 0; ride_back(c) } \
  :: d_step { rel_done[c] -> release_done(c) } \
  :: atomic { g_nf < FAULTS && INFL(c) -> g_nf++; drop_one(c); DROP_OTHERS } \
  :: d_step { att[c] && a_orph[c] -> att[c] = 0; a_orph[c] = 0 } \
  RECLAIM_EVENTS(c) \
  :: d_step { rel[c] && r_orph[c] -> rel[c] = 0; \
       rel_rider[c] = NONE; rel_after[c] = NONE; rel_g[c] = 0; r_orph[c] = 0 } \
  :: d_step { h[c] && EXPIRES -> h[c] = 0; g_hold[c] = 0; g_live[c] = 0; g_exp = 1 HOR_EXP(c) HOL_EXP(c) } \
  HOR_EVENTS(c) \
  HOL_EVENTS(c)
#endif
/* c's give-back at Redis (release.lua of c's lease, waiters_release_bg:
 * removes the slot only if that lease holds one) and its answer
 * (release_bg_done: released, waiters_kick) */
#ifdef HOL
#define HOL_EVENTS(c) \
  :: d_step { gb[c] -> gb[c] = 0; \
       if \
       :: h[c] -> h[c] = 0; g_hold[c] = 0; gb_rep[c] = OK + 1 \
       :: else -> gb_rep[c] = NOT_HELD + 1 \
       fi; \
       LATER_RAN(c) } \
  :: d_step { gb_rep[c] != 0 -> \
       if :: gb_rep[c] == OK + 1 && qn > 0 -> q_hexp = 0; slot_freed(NONE) :: else fi; \
       gb_rep[c] = 0 }
#define HOL_IDLE(c) && !gb[c] && gb_rep[c] == 0
#define HOL_EXP(c) ; if :: (c) == LEAVER -> l_stale = 0 :: else fi
#define HOL_RC(c) ; LATER_RAN(c)
#else
#define HOL_RC(c)
#define HOL_EXP(c)
#define HOL_EVENTS(c)
#define HOL_IDLE(c)
#endif
/* c's reclaim (renew.lua of its own lease: read-only here, the model
 * being untimed) at Redis, or lost (answered 503), and its answer. With
 * HOR (whose search is at its memory bound) the renewal's run and its
 * answer are one step: the slot's expiry in between is not searched, and
 * FAULTS 1 leaves no fault for the reclaim (the release's 503 used it). */
#ifndef HOR
#define RECLAIM_EVENTS(c) \
  :: d_step { rc[c] -> rc_rep[c] = (h[c] -> OK + 1 : NOT_HELD + 1); rc[c] = 0; \
       if :: rc_orph[c] -> rc_rep[c] = 0; rc_orph[c] = 0 :: else fi HOL_RC(c) } \
  :: d_step { rc[c] && rc_orph[c] -> rc[c] = 0; rc_orph[c] = 0 } \
  :: d_step { rc_rep[c] != 0 -> cd = rc_rep[c]; rc_rep[c] = 0; reclaim_done(c, cd) }
#else
#define RECLAIM_EVENTS(c) \
  :: d_step { rc[c] -> rc[c] = 0; reclaim_done(c, (h[c] -> OK + 1 : NOT_HELD + 1)) }
#endif
#ifdef NOEXP
#define EXPIRES 0       /* (a check's switch: no slot expires) */
#else
#define EXPIRES 1
#endif
#ifndef HOR
#define HOR_EXP(c)
#define HOR_EVENTS(c)
#else
#define HOR_EXP(c) ; g_rok[c] = 0
/* c's renewal at Redis (its reply dropped when lockd answered it 503) or
 * lost; its answer; c's second release (slot c + NC) at Redis and its
 * answer */
#define HOR_EVENTS(c) \
  :: d_step { rn[c] -> renew_lua(c); \
       if :: rn_orph[c] -> rn_rep[c] = 0; g_rok[c] = 0; rn_orph[c] = 0 :: else fi } \
  :: d_step { rn[c] && rn_orph[c] -> rn[c] = 0; rn_orph[c] = 0 } \
  :: d_step { rn_rep[c] != 0 -> renew_done(c) } \
  :: d_step { rel[c + NC] -> release_handoff(c + NC) } \
  :: d_step { rel_done[c + NC] -> release_done(c + NC) }
#endif

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
#ifdef SUBKICK
  :: d_step { w_pend[0] -> w_pend[0] = 0; attempt(0) }
  :: d_step { w_pend[1] -> w_pend[1] = 0; attempt(1) }
  :: d_step { w_pend[2] -> w_pend[2] = 0; attempt(2) }
#if NC > 3
  :: d_step { w_pend[3] -> w_pend[3] = 0; attempt(3) }
#endif
  /* redis_pubsub.c on_message: the subscription's confirmation wakes the
   * name's waiters as a release would (one may have gone unheard), at any
   * moment after the first waiter subscribed; it frees no slot */
  :: d_step { sub_conf -> sub_conf = 0;
       if :: qn > 0 -> q_hexp = 0; slot_freed(NONE) :: else fi }
#endif
#ifndef HOF
  :: d_step { poke_n -> poke_n = 0; on_poke(0) }
#else
  :: atomic { poke_n -> poke_n = 0; on_poke(0) }
#endif
#ifdef HOF
#ifndef HOL
  :: d_step { qn > 0 && w_st[q[0]] == W_QUEUED && w_retry[q[0]] -> /* on_timer: the head's retry */
       hd = q[0]; w_st[hd] = W_ATTEMPTING; attempt(hd) }
#else
  :: d_step { qn > 0 && w_st[q[0]] == W_QUEUED && w_retry[q[0]] -> /* on_timer: the head's retry */
       hd = q[0];
       if
       :: FAILED(hd) -> lw = hd; waiter_leaves(lw, 0); lw = 0   /* failed: unlinked, promote(h, false), fail() */
       :: else -> w_st[hd] = W_ATTEMPTING; attempt(hd)
       fi }
  /* on_sweep: the failed waiter, if queued, is unlinked and answered 404;
   * the new head, if it changed, is told (promote(h, false)) */
  :: d_step { l_sweep -> l_sweep = 0;
       if :: w_st[LEAVER] == W_QUEUED -> waiter_leaves(LEAVER, 0) :: else fi }
#endif
#endif
  od
}

#ifdef SUBKICK
#define SUB_PENDING sub_conf
#else
#define SUB_PENDING 0
#endif
/* (5) no slot idle while a waiter waits: lockd has nothing left to do (no
 * callback posted, no call in flight) while a waiter is queued here and
 * fewer than LIMIT slots are held. Only a holder's release would then move
 * it: the busy semaphore of main before the fix kept 1 of 8 slots in use so. */
#ifndef HOF
#define IDLE(c) (!att[c] && att_rep[c] == 0 && !rel[c] && !rel_done[c] && follow[c] == 0 && !back[c] && !PEND(c))
#define IDLE_ALL (!poke_a && !poke_n && !remote_rel && !SUB_PENDING)
#else
#ifndef HOR
#define IDLE(c) (!att[c] && att_rep[c] == 0 && !rel[c] && !rel_done[c] && follow[c] == 0 && !back[c] && !PEND(c) \
                 && !rc[c] && rc_rep[c] == 0 HOL_IDLE(c))
#else
#define IDLE(c) (!att[c] && att_rep[c] == 0 && !rel[c] && !rel_done[c] && follow[c] == 0 && !back[c] \
                 && !rel[c + NC] && !rel_done[c + NC] && !rn[c] && rn_rep[c] == 0 && !rc[c] && rc_rep[c] == 0)
#endif
#ifndef HOL
#define IDLE_ALL (!poke_a && !poke_n && !remote_rel && !SUB_PENDING)
#else
#define IDLE_ALL (!poke_a && !poke_n && !remote_rel && !SUB_PENDING && !l_sweep)
#endif
#endif
#if NC > 3
#define IDLE_N (IDLE(0) && IDLE(1) && IDLE(2) && IDLE(3))
#define HELD (g_hold[0] + g_hold[1] + g_hold[2] + g_hold[3])
#define QHOLDS(c) (w_st[c] != W_NONE && h[c])
#define QHELD (QHOLDS(0) || QHOLDS(1) || QHOLDS(2) || QHOLDS(3))
#else
#define IDLE_N (IDLE(0) && IDLE(1) && IDLE(2))
#define HELD (g_hold[0] + g_hold[1] + g_hold[2])
#define QHOLDS(c) (w_st[c] != W_NONE && h[c])
#define QHELD (QHOLDS(0) || QHOLDS(1) || QHOLDS(2))
#endif
proctype idle_slot()
{
end:
  atomic {
#ifndef HOF
    (qn > 0 && IDLE_ALL && IDLE_N && HELD < LIMIT) ->
#elif defined(HOR)
    (qn > 0 && IDLE_ALL && IDLE_N && HELD < LIMIT && g_nf == 0 && !g_exp) ->
#else
    /* only while no expiry happened and no fault answered a call before
     * its request ran (it may run later, after every wake-up: the slot it
     * frees is found by the head's retry timer alone, 5w, idle_retry); a
     * fault that lost only replies (503 on a release that ran) leaves a
     * head that asks, and a rider the hand-off granted reclaims its slot:
     * nor is a queued waiter left holding a slot at Redis */
    (qn > 0 && IDLE_ALL && IDLE_N && (HELD < LIMIT || QHELD) && !g_late && !g_exp) ->
#endif
    idle_free_slot = 1;
    assert(!idle_free_slot)
  }
}

#ifdef HOF
/* (5w) with faults and expiry: a slot free while a waiter is queued and
 * lockd has nothing left to do is found by the head's retry at its
 * holder's expiry; a state where the head has no retry armed then (lockd
 * would wait for a release that may never come) is a violation */
bit idle_no_retry;
proctype idle_retry()
{
end:
  atomic {
    (qn > 0 && IDLE_ALL && IDLE_N && HELD < LIMIT &&
     !(w_st[q[0]] == W_QUEUED && w_retry[q[0]])) ->
    idle_no_retry = 1;
    assert(!idle_no_retry)
  }
}
#endif

#ifdef HOL
/* (6) no orphan: a slot held at Redis by the lease of a client that left
 * (cancelled, or its session ended) while lockd has forgotten that waiter
 * (unlinked) and no give-back of it is on its way: nobody relies on it and
 * nothing in lockd will free it before its ttl. Checked in every state, so
 * the slot's expiry (any time later) does not hide it. Grants lockd was
 * never told of count (a reply lost to a 503, a reclaim answered 503, a
 * request run at Redis after lockd answered it 503: each is given back,
 * engine_acquire_in_doubt, ride_back), but for l_stale: such a request run
 * after the leaver's later reclaim or give-back had run (README.md) */
bit orphan;
proctype orphans()
{
end:
  atomic {
    ((l_cancel || l_fail) && h[LEAVER] && !l_stale && w_st[LEAVER] == W_NONE && !gb[LEAVER]) ->
    orphan = 1;
    assert(!orphan)
  }
}
#endif

#ifdef HOR
/* (1h) at every moment, not only at grants: never more than LIMIT slots at
 * Redis (a renewal or a second release changes them too), and (4h) a
 * client relies on its lease (answered OK by a grant or a renewal, not
 * released, crashed or expired) only while Redis holds its slot: no
 * release or renewal of another lease took it away */
#if NC > 3
#define RELY_HELD ((!g_live[0] || h[0]) && (!g_live[1] || h[1]) && (!g_live[2] || h[2]) && (!g_live[3] || h[3]))
#define NHELD (h[0] + h[1] + h[2] + h[3])
#else
#define RELY_HELD ((!g_live[0] || h[0]) && (!g_live[1] || h[1]) && (!g_live[2] || h[2]))
#define NHELD (h[0] + h[1] + h[2])
#endif
bit not_held_relied;
proctype relied()
{
end:
  atomic {
    !(RELY_HELD && NHELD <= LIMIT) ->
    not_held_relied = 1;
    assert(!not_held_relied)
  }
}
#endif

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
#ifdef HOF
             ; g_live[c] = 1
#endif
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
#ifndef HOF
  cl_st[c] == C_HOLD;                          /* (5): blocked here for ever is an invalid end state */
  d_step { engine_release(c) }
#elif defined(HOR)
  /* holds: renews (once), releases or crashes; answered 503 on its release,
   * releases again (slot c + NC); a renewal answered 404 ends it */
  do
  :: cl_st[c] == C_DONE -> break
  :: cl_st[c] == C_HOLD ->
     if
     :: d_step { engine_release(c) }
#ifndef NOCRASH
     :: d_step { g_live[c] = 0; cl_st[c] = C_DONE } /* crashes: its slot expires */
#endif
     :: RENEW_OF(c) && !c_rn[c] -> d_step { c_rn[c] = 1; rn[c] = 1; cl_st[c] = C_RENEWING }
     fi
  :: cl_st[c] == C_REREL -> d_step { engine_release(c + NC) }
  /* its release while its renewal is in flight (a session's watchdog
   * renews on its own): Redis may run the renewal after the release and
   * its hand-off */
  :: cl_st[c] == C_RENEWING -> d_step { engine_release(c) }
  od;
#else
#ifdef HOL
  /* the leaver may leave, once, at any moment while it waits (queued,
   * asking, riding, reclaiming): its client goes (engine_cancel) or its
   * session ends (waiters_fail) */
  if
  :: c == LEAVER ->
     if
     :: cl_st[c] == C_HOLD || cl_st[c] == C_DONE
     :: d_step { cl_st[c] == C_WAITING -> leave_cancel(c) }
     :: d_step { cl_st[c] == C_WAITING -> leave_fail(c) }
     fi
  :: else -> cl_st[c] == C_HOLD || cl_st[c] == C_DONE
  fi;
#else
  cl_st[c] == C_HOLD || cl_st[c] == C_DONE;    /* C_DONE: its acquire was answered 503 */
#endif
  if
  :: cl_st[c] == C_HOLD ->
     if
     :: d_step { engine_release(c) }
     :: d_step { g_live[c] = 0; cl_st[c] = C_DONE } /* crashes: its slot expires */
     fi
  :: else
  fi;
#endif
  cl_st[c] == C_DONE;
done:
  skip
}

init {
  atomic {
    j = 0;
    do
    :: j < NREL -> rel_rider[j] = NONE; rel_after[j] = NONE; j++
    :: else -> break
    od;
    j = 0;
    run events();
    run idle_slot();
#ifdef HOF
    run idle_retry();
#endif
#ifdef HOL
    run orphans();
#endif
#ifdef HOR
    run relied();
#endif
    run client(0);
    run client(1);
    run client(2)
#if NC > 3
    ; run client(3)
#endif
  }
}
