/*
 * client.pml - an application using lockd over HTTP, and the lockd loop
 * that serves it (its waiter's pokes and timers, its requests' callbacks).
 * It acquires (waiting, or try-once), works against the resource with its
 * token, renews its lease (plain client) or heartbeats its session (session
 * clients), releases, crashes, or pauses (it simply takes no step while the
 * clocks run). A session client may hang: it keeps heartbeating and never
 * releases, which only max_hold_ms ends.
 */
#define wait_reply(c) (b_st[c] == S_DONE || b_st[c] == S_LOST)

#define ZAP rc = 0; tk = 0; pt = 0; j = 0; l = 0; n = 0

proctype client(byte c)
{
  byte a, n, j, rc, l, r, tk, pt;
  bit hung, wait;
#ifdef SOLO
  a = (c == 0 -> 0 : K);  /* only client 0 acquires */
#endif
  do
  :: cl_st[c] == C_IDLE && a < K && !(SESS(c) && (sl_on[c] || !s_alive[c])) ->
     n = 0;
#if NN > 1
     if :: n = 1 :: skip fi;
#endif
#if defined(TRYONCE)
     if :: wait = 1 :: wait = 0 fi;
#elif defined(PLAIN_TRYONCE)
     wait = SESS(c);    /* the plain client only tries once */
#else
     wait = 1;
#endif
     atomic { engine_acquire(c, n, LEASE(c, a), wait); a++; wait = 0; ZAP }
     do
     :: atomic { w_poke[c] > 0 -> on_poke(c); ZAP }
     :: atomic { w_armed[c] && w_rt[c] == 0 && w_st[c] == W_QUEUED -> on_timer(c); ZAP }
     :: atomic { w_failed[c] && w_st[c] == W_QUEUED -> on_sweep(c); ZAP }
     :: atomic { wait_reply(c) && b_st[NC + c] == S_IDLE ->
                 if
                 :: w_st[c] == W_ATTEMPTING -> attempt_done(c)
                 :: else -> acquire_done(c)
                 fi;
                 ZAP }
     :: cl_st[c] != C_WAITING -> break
     od;
     r = 0;
     do
     :: cl_st[c] != C_HOLD -> break
     :: cl_st[c] == C_HOLD -> atomic { client_write(c); ZAP }
     :: cl_st[c] == C_HOLD && !SESS(c) && r < RENEWS ->
        r++;
        atomic { engine_renew(c) };
        atomic { wait_reply(c) -> renew_done(c); ZAP }
#ifdef SESS_RENEW
     /* PUT /locks/{name} on a session lock: a renewal by hand, which the
      * max-hold cap must still end (property 6) */
     :: cl_st[c] == C_HOLD && SESS(c) && r < RENEWS ->
        r++;
        atomic { engine_renew(c) };
        atomic { wait_reply(c) -> renew_done(c); ZAP }
#endif
     :: cl_st[c] == C_HOLD && SESS(c) && (r < RENEWS || hung) ->
        r = (r < RENEWS -> r + 1 : r);
        atomic { engine_session_get(c); ZAP }
#ifdef HUNG
     :: cl_st[c] == C_HOLD && SESS(c) && !hung -> hung = 1
#endif
     :: cl_st[c] == C_HOLD && !hung ->
        atomic { engine_release(c) };
        atomic { wait_reply(c) -> release_done(c); ZAP }
     :: cl_st[c] == C_HOLD && !hung -> goto crashed
     od
  /* a session client whose session expired makes a new one
   * (engine_session_create) */
  :: atomic { cl_st[c] == C_IDLE && SESS(c) && !s_alive[c] && !sl_on[c] && b_st[NC + c] == S_IDLE ->
              s_alive[c] = 1; s_left[c] = STTL; s_lost[c] = 0 }
  :: cl_st[c] == C_IDLE && a == K -> break
  od;
  cl_st[c] = C_DONE;
crashed:
  skip
}
