/*
 * shared.pml - shared locks (mode shared, a reader-writer lock: LIMIT 1)
 * and semaphores (LIMIT > 1): lockd's waiter queue (server/waiters.c:
 * FIFO, the head asks, grouped grants of the shared waiters behind a shared
 * head) over the memory backend's holders (server/backend_memory.c:
 * admits(), grant_more(), owned(); the Redis scripts _acquire_shared.lua and
 * _shared.lua keep the same rules). A third root beside lockd.pml and
 * redlock.pml (it shares params.pml); README.md ("Shared locks and
 * semaphores") says what stands for what. `model/check.sh safety rwlock`
 * (semaphore, shared-live) runs it.
 *
 * NC = 3 clients, one name, each holder with its own lease, token and
 * expiry (TTL ticks on the backend's clock, which lockd shares: the memory
 * backend is in lockd's process). LIMIT 1: client 0 asks exclusive, 1 and 2
 * shared; LIMIT 2: every client asks for a slot. Clients 0 and 1 wait in
 * lockd's queue; client 2 waits there, tries once, or (REMOTE) asks through
 * another lockd, which has no queue of this one's: straight to the backend.
 * A holder renews at most once, releases or crashes (its lease then runs
 * out); a release or renewal may come after its lease ran out (a paused
 * client), i.e. with a lease the backend no longer holds. With REMOTE the
 * backend also keeps the rule only Redis has (several lockd share it): the
 * last reader out leaves the name reserved for a waiting writer
 * (sh_release). Every lockd callback and backend call is one d_step.
 *
 * Mutants (make model-mutants), one at a time:
 *   MUT_SH_IGNORE_X        a shared acquire joins an exclusive holder
 *   MUT_SEM_NO_LIMIT       a semaphore admits without counting its holders
 *   MUT_SH_RELEASE_ANY     a release removes a live holder, whatever its lease
 *   MUT_SH_NO_WRITER_PREF  readers ignore a waiting writer (LIVE: starved)
 */
#ifndef NC
#define NC 3
#endif
#ifndef LIMIT
#define LIMIT 1
#endif
#include "params.pml"

#define EX 0            /* bk_mode */
#define SH 1
#define LIMIT_MISMATCH 7

#if LIMIT == 1
#define MODE(c) ((c) == 0 -> EX : SH)
#else
#define MODE(c) SH      /* a semaphore's slot (the mode is not looked at) */
#endif

/* ---- the backend (struct mem_lock): one name, holder slot per client */
byte h_left[NC];        /* ticks to the holder's expiry; 0 = no holder (trim) */
byte h_tok[NC];
bit  h_mode[NC];
byte b_xleft;           /* writer_until_ms - now, in ticks (0: no writer waits) */
byte b_fence;           /* the last token given (next_token) */

/* ---- lockd: the name's wqueue and its waiters (struct eng_waiter) */
byte q[NC];             /* the FIFO, q[0] the head */
byte qn;
byte w_st[NC];          /* W_NONE, W_QUEUED, W_ATTEMPTING */
bit  w_kick[NC];        /* kick_pending */
bit  w_grouped[NC];     /* asks with its head (group_take) */
byte w_retry[NC];       /* retry_at_ms - now + 1 (0: on a kick only) */
byte q_hexp;            /* holder_expiry_ms - now (0: may be free, a release was seen) */
byte q_freed;           /* releases seen and not used by a grant (semaphores) */
bit  q_unknown;         /* wqueue.unknown: a waiter asked with no release counted */
byte poke;              /* 0 none, 1 on_poke posted, 2 on_poke(attempt) posted */
byte req[NC];           /* an acquire in flight to the backend: 1 + how many ride on it */
byte rep[NC];           /* its reply, not yet read: OK+1, LOCKED+1 */
byte rep_tok[NC];

/* ---- the clients */
byte cl_st[NC];         /* C_IDLE, C_WAITING, C_HOLD, C_DONE */
byte cl_tok[NC];

/* ---- ghosts (props): what the backend answered, never what it keeps */
byte g_left[NC];        /* a lease answered OK lives this many ticks (0: dead or released) */
bit  g_mode[NC];
byte g_last;            /* the newest token granted */

/* ---- properties, asserted where the backend answers OK */
/* (1) no exclusive holder beside any other live one; never more than LIMIT */
inline check_holders(c) {
  cn = 0; cj = 0;
  do
  :: cj < NC ->
     if
     :: g_left[cj] > 0 ->
        cn++;
        assert(cj == c || (g_mode[cj] == SH && g_mode[c] == SH) || LIMIT > 1)
     :: else
     fi; cj++
  :: else -> break
  od;
  assert(cn <= LIMIT || (LIMIT == 1 && g_mode[c] == SH))
}

/* a grant: (2) tokens strictly increase, then (1) */
inline granted_g(c, tok, mode) {
#ifndef LIVE
  assert(tok > g_last);
  g_last = tok;
#endif
  g_left[c] = TTL; g_mode[c] = mode;
  check_holders(c)
}

#ifdef LIVE
#define NEXT_TOKEN b_fence = 1  /* tokens are not followed in the liveness run: bounded state */
#else
#define NEXT_TOKEN b_fence++
#endif

/* ---- the backend's steps (mem_*: one step each, under mu) */

/* trim(): drops every holder whose lease ran out (the clock sets h_left 0) */

/* admits(): whether c (mode, wait) may join the holders; on a refusal the
 * blocking holder's expiry in rt (blocking_holder: the first to expire of a
 * full semaphore, the last otherwise) */
inline admits(c, mode, wait) {
  n = 0; j = 0; rt = 0; lm = 0; xm = 0;
  do
  :: j < NC ->
     if
     :: h_left[j] > 0 ->
        n++;
        if
        :: h_mode[j] == EX -> xm = 1
        :: else
        fi;
        if
        :: LIMIT > 1 && (rt == 0 || h_left[j] < rt) -> rt = h_left[j]
        :: LIMIT == 1 && h_left[j] > rt -> rt = h_left[j]; lm = h_mode[j]
        :: else
        fi
     :: else
     fi; j++
  :: else -> break
  od;
  if
#ifdef REMOTE
  /* _acquire_shared.lua: the last reader left (or expired) while a writer
   * waits: the name is reserved for it until x_until (sh_release) */
#ifdef MUT_SH_NO_WRITER_PREF
  :: n == 0 -> b_xleft = 0; ok = 1
#else
  :: n == 0 && b_xleft > 0 && mode == SH -> ok = 0; rt = b_xleft
  :: n == 0 && !(b_xleft > 0 && mode == SH) -> b_xleft = 0; ok = 1
#endif
#else
  :: n == 0 -> b_xleft = 0; ok = 1             /* free: a fresh start (admits: !alive) */
#endif
#ifdef MUT_SEM_NO_LIMIT
  :: n > 0 && LIMIT > 1 -> ok = 1              /* the slots are not counted */
#else
  :: n > 0 && LIMIT > 1 -> ok = (n < LIMIT)
#endif
#ifdef MUT_SH_IGNORE_X
  :: n > 0 && LIMIT == 1 -> ok = (mode == SH && b_xleft == 0)  /* blind to an exclusive holder */
#elif defined(MUT_SH_NO_WRITER_PREF)
  :: n > 0 && LIMIT == 1 -> ok = (mode == SH && !xm)   /* readers ignore a waiting writer */
#else
  :: n > 0 && LIMIT == 1 -> ok = (mode == SH && !xm && b_xleft == 0)
#endif
  fi;
  if
  :: !ok && wait && mode == EX && LIMIT == 1 && lm == SH ->
     b_xleft = rt + 1                           /* a writer waits: readers queue behind it */
  :: else
  fi
}

/* mem_acquire (take, holder_set, next_token) and grant_more: c asks, with
 * the more - 1 waiters behind it in lockd's queue riding on it (all shared:
 * granted with it, tokens following its token, or refused with it) */
inline mem_acquire(c, more, wait) {
  d_step {
    admits(c, MODE(c), wait);
    if
    :: ok ->
       NEXT_TOKEN; h_left[c] = TTL; h_tok[c] = b_fence; h_mode[c] = MODE(c);
       granted_g(c, b_fence, MODE(c));
       rep_tok[c] = b_fence;
       j = 1;
       do
       :: j < more ->
          k = q[j];
          assert(w_grouped[k] && MODE(k) == SH);
          NEXT_TOKEN; h_left[k] = TTL; h_tok[k] = b_fence; h_mode[k] = SH;
          granted_g(k, b_fence, SH);
          rep_tok[k] = b_fence;
          j++
       :: else -> break
       od
    :: else
    fi
  }
}

/* owned() then mem_renew: only the lease's own holder is renewed; (4) */
inline mem_renew(c, rc) {
  d_step {
    if
    :: h_left[c] > 0 ->
       assert(g_left[c] > 0);                   /* (4) the answered lease itself, still live */
       h_left[c] = TTL; g_left[c] = TTL; check_holders(c); rc = OK
    :: else -> rc = NOT_HELD
    fi
  }
}

/* owned() then mem_release (holder_remove); (4) */
inline mem_release(c, rc) {
  d_step {
    if
    :: h_left[c] > 0 -> k = c
    :: else -> k = NC
    fi;
#ifdef MUT_SH_RELEASE_ANY
    /* sh_release removes a live holder, whichever lease it has */
    if
    :: k == NC && h_left[0] > 0 -> k = 0
    :: k == NC && h_left[1] > 0 -> k = 1
    :: k == NC && h_left[2] > 0 -> k = 2
    :: else
    fi;
#endif
    if
    :: k < NC ->
       assert(k == c && g_left[c] > 0);         /* (4) the answered lease itself, still live */
       h_left[k] = 0; g_left[k] = 0; rc = OK;
#ifdef REMOTE
       /* sh_release: the last reader out leaves a waiting writer the name
        * for min(x_until - now, 1 s) */
       if
       :: h_left[0] + h_left[1] + h_left[2] == 0 && b_xleft > 1 -> b_xleft = 1
       :: else
       fi
#endif
    :: else -> rc = NOT_HELD
    fi
  }
}

/* ---- lockd: the waiter queue (waiters.c); every step one loop callback */

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
  w_st[c] = W_NONE; w_kick[c] = 0; w_grouped[c] = 0; w_retry[c] = 0
}

/* group_take + attempt: the head c asks the backend, with the queued shared
 * waiters right behind it when it is shared (LIMIT 1) */
inline attempt(c) {
  assert(q[0] == c && w_st[c] == W_ATTEMPTING);
  j = 1;
  if
  :: LIMIT == 1 && MODE(c) == SH ->
     do
     :: j < qn && MODE(q[j]) == SH && w_st[q[j]] == W_QUEUED ->
        w_st[q[j]] = W_ATTEMPTING; w_grouped[q[j]] = 1; j++
     :: else -> break
     od
  :: else
  fi;
  /* a semaphore's waiter asking with no release counted: free slots unknown */
  if :: LIMIT > 1 && q_freed == 0 -> q_unknown = 1 :: else fi;
  req[c] = j
}

/* waiters_kick: a release here (release_done) or from another lockd */
inline waiters_kick() {
  if
  :: qn > 0 ->
     q_hexp = 0;
     if :: LIMIT > 1 && q_freed < NC -> q_freed++ :: else fi;  /* counted for semaphores only, up to NC */
     if
     :: w_st[q[0]] == W_ATTEMPTING -> w_kick[q[0]] = 1
     :: w_st[q[0]] == W_QUEUED -> poke = 2
     :: else
     fi
  :: else
  fi
}

/* waiters_acquire: c joins the queue; as the head it asks at once */
inline waiters_acquire(c) {
  q[qn] = c; qn++;
  cl_st[c] = C_WAITING;
  if
  :: qn == 1 -> w_st[c] = W_ATTEMPTING; attempt(c)
  :: else -> w_st[c] = W_QUEUED
  fi
}

/* attempt_done (group_done: the followers first, then the head): the
 * answer of c's attempt */
inline attempt_done(c) {
  if
  :: rep[c] == OK + 1 ->
     /* a semaphore's next waiter asks now only if more slots were freed */
     more = 1;
     if
     :: LIMIT > 1 && q_freed == 0 -> q_unknown = 1
     :: LIMIT > 1 && q_freed > 0 && !q_unknown -> q_freed--; more = (q_freed > 0)
     :: else
     fi;
     hd = (q[0] == c);
     unlink_waiter(c);
     if
     :: hd && qn > 0 ->
        q_hexp = TTL;
        if
        :: (MODE(c) == SH && MODE(q[0]) == SH && LIMIT == 1) || (LIMIT > 1 && more) -> poke = 2
        :: else -> if :: poke == 0 -> poke = 1 :: else fi
        fi
     :: else
     fi;
     cl_st[c] = C_HOLD; cl_tok[c] = rep_tok[c]
  :: else ->                                   /* LOCKED: wait is unbounded here */
     if
     :: !w_kick[c] -> q_freed = 0
     :: else
     fi;
     q_unknown = 0;
     q_hexp = rt_of_rep[c];
     if
     :: w_kick[c] || (w_grouped[c] && q[0] == c) ->
        w_kick[c] = 0; w_grouped[c] = 0; attempt(c)
     :: else ->
        w_grouped[c] = 0; w_st[c] = W_QUEUED;
#ifdef MUT_NO_RETRY
        w_retry[c] = 0
#else
        w_retry[c] = q_hexp + 1
#endif
     fi
  fi;
  rep[c] = 0
}

byte rt_of_rep[NC];     /* a refusal's holder expiry (bk_holder.expires_in_ms) */
byte rep_n[NC];         /* how many asked in the call (the head and its riders) */

/* the backend serves c's acquire (engine_bk_submit -> mem_acquire) */
inline serve(c) {
  mem_acquire(c, req[c], 1);
  rep_n[c] = req[c];
  if
  :: ok -> rep[c] = OK + 1;
     j = 1;
     do
     :: j < req[c] -> rep[q[j]] = OK + 1; j++
     :: else -> break
     od
  :: else -> rep[c] = LOCKED + 1; rt_of_rep[c] = rt;
     j = 1;
     do
     :: j < req[c] -> rep[q[j]] = LOCKED + 1; rt_of_rep[q[j]] = rt; j++
     :: else -> break
     od
  fi;
  req[c] = 0
}

byte n, j, k, g, rt, lm, xm, more, hd, cn, cj;
bit ok;
bit remote_rel;         /* a release through another lockd, its message not yet here */

/* lockd's loop and the backend. Each kind of event is a process of its
 * own, every step one atomic callback: the interleavings are those of one
 * loop running them in any order, and weak fairness (LIVE) then says what
 * the loop's FIFO of events does: an event pending for ever is run. */

/* the backend runs the acquire in flight (a grouped one for its riders);
 * one at a time is in flight: only the head asks */
proctype backend()
{
end:
  do
  :: d_step { req[0] > 0 -> serve(0) }
  :: d_step { req[1] > 0 -> serve(1) }
  :: d_step { req[2] > 0 -> serve(2) }
  od
}

/* group_done: the followers' attempt_done (on_follower), then the head's */
proctype group_done()
{
  byte c;
end:
  do
  :: d_step { qn > 0 && rep[q[0]] != 0 ->
       c = q[0]; g = rep_n[c];
       do
       :: g > 1 -> g--; attempt_done(q[g])
       :: else -> break
       od;
       attempt_done(c) }
  od
}

/* on_poke: the head asks now, or arms its retry at the holder's expiry */
proctype on_poke()
{
end:
  do
  :: d_step { poke > 0 ->
       if
       :: qn > 0 && w_st[q[0]] == W_QUEUED ->
          if
          :: poke == 2 || q_hexp == 0 -> w_st[q[0]] = W_ATTEMPTING; attempt(q[0])
          :: else -> w_retry[q[0]] = q_hexp + 1
          fi
       :: else
       fi;
       poke = 0 }
  od
}

/* on_timer: the head's retry is due */
proctype on_timer()
{
end:
  do
  :: d_step { qn > 0 && w_st[q[0]] == W_QUEUED && w_retry[q[0]] == 1 ->
       w_retry[q[0]] = 0; w_st[q[0]] = W_ATTEMPTING; attempt(q[0]) }
  od
}

/* on_backend_release: another lockd's release message (pub/sub) kicks */
proctype on_backend_release()
{
end:
  do
  :: d_step { remote_rel -> remote_rel = 0; waiters_kick() }
  od
}

/* discrete time: holders' leases, writer_until, the waiters' retry timers.
 * With LIVE, time passes only while lockd has nothing to do (it answers
 * within a tick: see README.md). */
proctype clock()
{
  byte t;
end:
  do
  :: d_step {
#ifdef LIVE
       (poke == 0 && !remote_rel && req[0] + req[1] + req[2] == 0 && rep[0] + rep[1] + rep[2] == 0 &&
        !(qn > 0 && w_st[q[0]] == W_QUEUED && w_retry[q[0]] == 1)) ->
#endif
       t = 0;
       do
       :: t < NC ->
          if :: h_left[t] > 0 -> h_left[t]-- :: else fi;
          if :: g_left[t] > 0 -> g_left[t]-- :: else fi;
          if :: w_retry[t] > 1 -> w_retry[t]-- :: else fi;
          t++
       :: else -> break
       od;
       if :: b_xleft > 0 -> b_xleft-- :: else fi;
       if :: q_hexp > 0 -> q_hexp-- :: else fi }
  od
}

/* a holder: renews at most once, then releases (through lockd: release_done
 * kicks the queue) or crashes; any of it possibly after its lease ran out */
inline hold(c, via_remote) {
  if
  :: mem_renew(c, rc)
  :: skip
  fi;
  if
  :: via_remote ->                             /* release.lua publishes in the script */
     d_step { mem_release(c, rc); if :: rc == OK -> remote_rel = 1 :: else fi }
  :: !via_remote ->
     mem_release(c, rc);
     d_step {                                  /* release_done */
       if
       :: rc == OK -> waiters_kick()
       :: else
       fi }
  :: skip                                      /* crash: the lease runs out */
  fi
}

proctype client(byte c)
{
  byte rc;
#if defined(LIVE) && LIMIT == 1
  if
  :: c == 2 ->
     /* another lockd's reader, again and again (LIMIT 1: a writer waiting
      * here must not be starved by it) */
     do
     :: d_step { mem_acquire(c, 1, 0); if :: ok -> cl_st[c] = C_HOLD :: else fi };
        if
        :: cl_st[c] == C_HOLD ->
           /* release.lua: the release and its PUBLISH are one script */
           d_step { mem_release(c, rc); if :: rc == OK -> remote_rel = 1 :: else fi; cl_st[c] = C_IDLE }
        :: else
        fi
     od
  :: else
  fi;
#endif
  if
  :: c < 2 -> d_step { waiters_acquire(c) }
  :: c == 2 -> d_step { waiters_acquire(c) }
  :: c == 2 -> d_step {                        /* try once: never ahead of the queue */
       if
       :: qn > 0 -> cl_st[c] = C_DONE
       :: else -> mem_acquire(c, 1, 0);
          if :: ok -> cl_st[c] = C_HOLD; cl_tok[c] = rep_tok[c] :: else -> cl_st[c] = C_DONE fi
       fi }
#ifdef REMOTE
  :: c == 2 -> d_step {                        /* through another lockd */
       mem_acquire(c, 1, 0);
       if :: ok -> cl_st[c] = C_HOLD; cl_tok[c] = rep_tok[c] :: else -> cl_st[c] = C_DONE fi }
       if
       :: cl_st[c] == C_HOLD -> hold(c, 1)
       :: else
       fi;
       goto done
#endif
  fi;
  cl_st[c] != C_WAITING;
  if
  :: cl_st[c] == C_HOLD -> hold(c, 0)
  :: else
  fi;
done:
  cl_st[c] = C_DONE
}

init {
  atomic {
    run backend();
    run group_done();
    run on_poke();
    run on_timer();
    run on_backend_release();
    run clock();
    run client(0);
    run client(1);
    run client(2)
  }
}

#ifdef LIVE
/* (5) a waiter of this lockd is answered, under weak fairness (LIMIT 1:
 * while another lockd's reader comes again and again; LIMIT 2: client 2
 * as in the safety runs, as a semaphore promises no order across lockd
 * processes) */
ltl live { [] ((cl_st[0] == C_WAITING) -> <> (cl_st[0] != C_WAITING)) &&
           [] ((cl_st[1] == C_WAITING) -> <> (cl_st[1] != C_WAITING)) &&
           [] ((cl_st[2] == C_WAITING) -> <> (cl_st[2] != C_WAITING)) }
#endif
