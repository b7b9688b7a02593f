/*
 * params.pml - bounds, constants and the mutant switches of the lockd model.
 * Time is discrete: one tick stands for ttl/3 of a lock lease (the watchdog's
 * cadence). Every bound can be raised on the command line, e.g.
 *   spin -a -DNC=3 lockd.pml
 */
#ifndef NC
#define NC 2            /* clients: 0 and 2 use sessions, 1 a plain lease */
#endif
#ifndef NN
#define NN 1            /* lock names */
#endif
#ifndef K
#define K 1             /* acquires per client, each under a fresh lease */
#endif
#define NLEASE (NC*K+1) /* lease ids 1..NC*K (0 = none): c*K + a + 1 */
#define NTOK (NC*K*NN+2)/* tokens 1.. (each lease is granted at most once) */

#ifndef TTL
#define TTL 3
#endif
/* TTL: lock lease ttl in ticks */
#define WD_EVERY 1      /* the watchdog renews every ttl/3 */
#ifndef STTL
#define STTL 2
#endif
/* STTL: session ttl */
#ifndef LDELAY
#define LDELAY 2
#endif
/* LDELAY: the sessions' lock_delay_ms */
#ifndef MAXHOLD
#define MAXHOLD 2
#endif
/* MAXHOLD: the session locks' max_hold_ms */
#ifndef DRIFT
#define DRIFT 1         /* |lockd clock - backend clock| stays within DRIFT ticks */
#endif
#ifndef FAULTS
#define FAULTS 1        /* lost requests or replies between lockd and Redis */
#endif
#ifndef RENEWS
#define RENEWS 1        /* renewals / heartbeats a healthy holder makes per hold */
#endif

/* Mutants, one at a time (make model-mutants):
 *   MUT_RENEW_NO_OWNER   renew.lua / renew_many.lua without the lease compare
 *   MUT_RELEASE_NO_CAD   _release.lua deletes without comparing the lease
 *   MUT_NO_MAX_HOLD      session_watchdog_due ignores hold_until_ms
 *   MUT_NO_LOCK_DELAY    reap() releases an expired session's locks with delay 0
 *   MUT_NO_RETRY         attempt_done never arms the retry at the holder's
 *                        expiry: a refused head waits for a kick only (liveness)
 *   MUT_RL_NO_WRITEBACK  redlock.pml: the token is the majority's largest
 *                        counter, written back nowhere (LOCKD_REDLOCK_NO_WRITEBACK)
 *   MUT_RL_RENEW_MAX     redlock.pml: a renewal answers the largest token of the
 *                        nodes that renewed (the bug the model found)
 *   MUT_RLSH_X_IGNORES_S redlock.pml -DRLSH: a node grants an exclusive acquire
 *                        beside shared holders (blind to readers)
 *   MUT_RLSH_MINORITY    redlock.pml -DRLSH: a shared acquire counts as granted
 *                        on one node (no majority)
 *   MUT_RLIDX_NO_LEVEL   redlock.pml -DRLIDX: a watcher's inspect never levels
 *                        the nodes' counters (level_counters returns false)
 *   MUT_RLIDX_RAISE_ONLY redlock.pml -DRLIDX: levels by the raise alone, the
 *                        answer keeping the first reads' holders
 *   MUT_RLIDX_LONE_NOBUMP redlock.pml -DRLIDX: a node keeps a lone reader in
 *                        its value ('t'), whose end counts nothing (the
 *                        code before _acquire_shared.lua's fix)
 *   MUT_RIDE_DOWN_FORGETS handoff.pml -DHOF: a release answered 503 or 404
 *                        leaves its rider attempting (no waiters_ride_done)
 *   MUT_SEM_NO_RETRY     handoff.pml -DHOF: a refused semaphore head arms no
 *                        retry (waits for a kick only; an expiry sends none)
 *   MUT_DOWN_NO_PROMOTE  handoff.pml -DHOF: a head answered 503 leaves the
 *                        queue without telling the next waiter
 *   MUT_LEAVE_NO_GIVEBACK handoff.pml -DHOL: ride_back's failed branch gives
 *                        nothing back (main before 85a02bc)
 *   MUT_ASK_LOST         handoff.pml -DHOL: no wqueue.ask, on_poke reads only
 *                        the poke and the holder's expiry (main before d0af9b2)
 *   MUT_HO_RERELEASE_FREES handoff.pml -DHOR: a release whose lease holds no
 *                        slot (a second release after a 503, a late one)
 *                        frees the first holder's slot and hands it on
 *   MUT_HO_RENEW_READDS  handoff.pml -DHOR: a renewal re-adds a lease whose
 *                        slot expired and was trimmed (ZADD with no ZSCORE
 *                        check)
 * Switches of handoff.pml: HO (the root), HOF (lost requests and replies,
 * holder expiry, crashes, the retry timer), HOL (with HOF: client LEAVER
 * leaves once while it waits), HOR (with HOF: renewals and a
 * second release after a 503; RENEWER, RERELEASER pick the clients),
 * TRYONCE, REMOTE, LIMIT; NOEXP, NOCRASH (HOR: no expiry, no crash: for
 * trails without them).
 */

/* lk_code */
#define OK 0
#define LOCKED 1
#define NOT_HELD 2
#define HELD_BY_OTHER 3
#define BACKEND_DOWN 4
#define SESSION_NOT_FOUND 5
#define SHUTTING_DOWN 6

/* the Redis key of a lock */
#define KFREE 0
#define KHELD 1
#define KDELAY 2        /* 'd' while a lock-delay runs */

/* a backend call between lockd and Redis */
#define S_IDLE 0
#define S_SENT 1        /* in flight (delayed as long as the scheduler likes) */
#define S_DONE 2        /* the reply arrived */
#define S_LOST 3        /* request or reply lost: lockd's deadline answers BACKEND_DOWN */

#define OP_ACQUIRE 1
#define OP_RENEW 2
#define OP_RELEASE 3

/* what a client believes */
#define C_IDLE 0
#define C_WAITING 1     /* an acquire is in lockd (queued, attempting or in flight) */
#define C_HOLD 2
#define C_DONE 3

/* a waiter (waiters.c enum wstate) */
#define W_NONE 0
#define W_QUEUED 1
#define W_ATTEMPTING 2

#ifdef NOSESS
#define SESS(c) 0       /* every client holds a plain lease (no sessions) */
#else
#define SESS(c) ((c) != 1)
#endif
#define LEASE(c, a) ((c)*K + (a) + 1)
