/*
 * engine.pml - lockd: engine.c (acquire, renew, release and their _done
 * callbacks), waiters.c (the FIFO queue per name, head-only attempts, kicks,
 * retries at the holder's PTTL), session.c (the session table, heartbeats,
 * lose_expired, the watchdog's table work) and janitor.c (reap, watchdog,
 * capped releases), plus engine_drain. Each callback is one atomic step: in
 * lockd it runs under smu/wmu on one loop. Timers count lockd's ticks.
 */
bit  draining;

/* session.c: one session per session client */
bit  s_alive[NC];
byte s_left[NC];        /* ticks to its deadline (ttl since the last heartbeat) */
byte s_lost[NC];        /* the lease reported in `lost` at the next heartbeat */
/* its lock (struct sess_lock): at most one per client in this model */
bit  sl_on[NC];
byte sl_name[NC];
byte sl_lease[NC];
byte sl_renew_in[NC];   /* ticks until the watchdog renews (renew_heap key) */
byte sl_exp[NC];        /* ticks until expires_ms, as of its last confirmed renewal */
byte sl_hold[NC];       /* ticks until hold_until_ms */
bit  sl_inflight[NC];
bit  sl_releasing[NC];
byte wd_age;            /* ticks since the watchdog batch was sent (b->sent_ms) */

/* waiters.c: the queue of each name, and each client's waiter */
byte q[NN*NC];          /* q[n*NC + i]: client ids, head first */
byte q_len[NN];
byte q_hexp[NN];        /* ticks to holder_expiry_ms; 0 = may be free (a kick) */
byte w_st[NC];
bit  w_kick[NC];        /* kick_pending */
bit  w_failed[NC];
byte w_fail_code[NC];
bit  w_armed[NC];       /* retry_at_ms set */
byte w_rt[NC];          /* ticks until retry_at_ms */
byte w_poke[NC];        /* a posted on_poke: 1 = look, 2 = attempt now */

/* the client side of the HTTP exchange (what lockd answered) */
byte cl_st[NC];
byte cl_name[NC];
byte cl_lease[NC];
byte cl_tok[NC];
byte cl_code[NC];

inline slot_clear(i_sc) {
  b_st[i_sc] = S_IDLE; b_op[i_sc] = 0; b_name[i_sc] = 0; b_lease[i_sc] = 0; b_ttl[i_sc] = 0;
  b_delay[i_sc] = 0; b_sb[i_sc] = 0; b_reap[i_sc] = 0; b_code[i_sc] = 0; b_tok[i_sc] = 0;
  b_pttl[i_sc] = 0
}

inline submit(i_s, op_s, nm_s, ls_s, ttl_s, dl_s, sb_s) {
  assert(b_st[i_s] == S_IDLE);
  b_op[i_s] = op_s; b_name[i_s] = nm_s; b_lease[i_s] = ls_s; b_ttl[i_s] = ttl_s; b_delay[i_s] = dl_s;
  b_sb[i_s] = sb_s; b_reap[i_s] = 0; b_st[i_s] = S_SENT
}

/* engine_bk_submit's answer: the reply, or LK_BACKEND_DOWN at the deadline */
#define bk_code(i) (b_st[i] == S_LOST -> BACKEND_DOWN : b_code[i])

/* waiters_release_bg / engine_bk_release: a release nobody answers */
inline release_bg(c_rb, nm_rb, ls_rb, dl_rb, reap_rb) {
  submit(NC + c_rb, OP_RELEASE, nm_rb, ls_rb, 0, dl_rb, 0);
  b_reap[NC + c_rb] = reap_rb
}

/* ---- waiters.c ---- */

#define q_head(n) q[(n)*NC]

inline unlink_waiter(c_uw, n_uw) {
  j = 0;
  do
  :: j < q_len[n_uw] && q[n_uw*NC + j] != c_uw -> j++
  :: j < q_len[n_uw] && q[n_uw*NC + j] == c_uw -> break
  od;
  do
  :: j + 1 < q_len[n_uw] -> q[n_uw*NC + j] = q[n_uw*NC + j + 1]; j++
  :: else -> break
  od;
  q_len[n_uw]--;
  w_st[c_uw] = W_NONE; w_kick[c_uw] = 0; w_armed[c_uw] = 0; w_poke[c_uw] = 0
}

/* promote: tell the new head (a poke posted to its loop) */
inline promote(n_p, now_p) {
  if
  :: q_len[n_p] > 0 && now_p -> w_poke[q_head(n_p)] = 2
  :: q_len[n_p] > 0 && !now_p && w_poke[q_head(n_p)] == 0 -> w_poke[q_head(n_p)] = 1
  :: else -> skip
  fi
}

/* waiters_kick: a release seen for n */
inline waiters_kick(n_wk) {
  if
  :: q_len[n_wk] > 0 ->
     q_hexp[n_wk] = 0;
     if
     :: w_st[q_head(n_wk)] == W_ATTEMPTING -> w_kick[q_head(n_wk)] = 1
     :: w_st[q_head(n_wk)] == W_QUEUED -> w_poke[q_head(n_wk)] = 2
     :: else -> skip
     fi
  :: else -> skip
  fi
}

/* attempt: the head asks the backend (or answers its failure) */
inline attempt(c_a) {
  if
  :: SESS(c_a) && !s_alive[c_a] -> w_failed[c_a] = 1; w_fail_code[c_a] = SESSION_NOT_FOUND
  :: else -> skip
  fi;
  if
  :: draining -> w_failed[c_a] = 1; w_fail_code[c_a] = SHUTTING_DOWN
  :: else -> skip
  fi;
  w_st[c_a] = W_ATTEMPTING;
  if
  :: w_failed[c_a] -> b_code[c_a] = w_fail_code[c_a]; b_st[c_a] = S_DONE /* attempt_done at once */
  :: else -> submit(c_a, OP_ACQUIRE, cl_name[c_a], cl_lease[c_a], TTL, 0, SESS(c_a))
  fi
}

/* session_add_lock */
inline session_add_lock(c_sal, n_sal, ls_sal, code_sal) {
  if
  :: s_alive[c_sal] ->
     sl_on[c_sal] = 1; sl_name[c_sal] = n_sal; sl_lease[c_sal] = ls_sal; sl_renew_in[c_sal] = WD_EVERY;
     sl_exp[c_sal] = TTL; sl_hold[c_sal] = MAXHOLD; sl_inflight[c_sal] = 0; sl_releasing[c_sal] = 0;
     code_sal = OK
  :: else -> code_sal = SESSION_NOT_FOUND
  fi
}

/* acquire_done / attempt_done's grant: the session may have died meanwhile */
inline granted(c_g, i_g) {
  rc = OK;
  if
  :: SESS(c_g) -> session_add_lock(c_g, cl_name[c_g], cl_lease[c_g], rc)
  :: else -> skip
  fi;
  if
  :: rc == OK -> cl_tok[c_g] = tk; cl_st[c_g] = C_HOLD
  :: else -> release_bg(c_g, cl_name[c_g], cl_lease[c_g], 0, 0); /* undo the grant */
     cl_code[c_g] = rc; cl_st[c_g] = C_IDLE
  fi
}

/* attempt_done */
inline attempt_done(c_ad) {
  n = cl_name[c_ad];
  rc = bk_code(c_ad); tk = b_tok[c_ad]; pt = b_pttl[c_ad];
  slot_clear(c_ad);
  if
  :: rc == OK ->
     unlink_waiter(c_ad, n);
     q_hexp[n] = TTL;
     promote(n, 0);
     granted(c_ad, c_ad)
  :: rc == LOCKED && !w_failed[c_ad] ->
     q_hexp[n] = pt;
     if
     :: w_kick[c_ad] -> w_kick[c_ad] = 0; attempt(c_ad)
#ifndef MUT_NO_RETRY
     :: else -> w_st[c_ad] = W_QUEUED; w_armed[c_ad] = 1; w_rt[c_ad] = q_hexp[n] + 1
#else
     :: else -> w_st[c_ad] = W_QUEUED /* waits for a kick only: a holder that expires wakes nobody */
#endif
     fi
  :: else ->
     rc = (w_failed[c_ad] -> w_fail_code[c_ad] : rc);
     assert(rc != LOCKED); /* wait_ms is unbounded here: never 409 */
     unlink_waiter(c_ad, n);
     promote(n, rc != LOCKED);
     cl_code[c_ad] = rc; cl_st[c_ad] = C_IDLE
  fi
}

/* on_poke */
inline on_poke(c_op) {
  n = cl_name[c_op];
  if
  :: q_head(n) == c_op && w_st[c_op] == W_QUEUED && !w_failed[c_op] ->
     if
     :: w_poke[c_op] == 2 || q_hexp[n] == 0 -> attempt(c_op)
     :: else -> w_armed[c_op] = 1; w_rt[c_op] = q_hexp[n] + 1
     fi
  :: else -> skip
  fi;
  w_poke[c_op] = 0
}

/* on_timer: the retry at the holder's expiry */
inline on_timer(c_ot) {
  w_armed[c_ot] = 0;
  if
  :: q_head(cl_name[c_ot]) == c_ot -> attempt(c_ot)
  :: else -> skip
  fi
}

/* on_sweep: a failed, queued waiter is answered */
inline on_sweep(c_os) {
  n = cl_name[c_os];
  unlink_waiter(c_os, n);
  promote(n, 0);
  cl_code[c_os] = w_fail_code[c_os]; cl_st[c_os] = C_IDLE
}

/* waiters_acquire */
inline waiters_acquire(c_wa, n_wa) {
  q[n_wa*NC + q_len[n_wa]] = c_wa; q_len[n_wa]++;
  w_failed[c_wa] = 0; w_kick[c_wa] = 0; w_armed[c_wa] = 0; w_poke[c_wa] = 0;
  if
  :: q_len[n_wa] == 1 -> attempt(c_wa)
  :: else -> w_st[c_wa] = W_QUEUED
  fi
}

/* waiters_fail(session) / (NULL when draining) */
inline waiters_fail(c_wf, code_wf) {
  if
  :: w_st[c_wf] != W_NONE -> w_failed[c_wf] = 1; w_fail_code[c_wf] = code_wf
  :: else -> skip
  fi
}

/* ---- engine.c ---- */

/* engine_acquire: wait > 0 goes to the queue; a try-once acquire never
 * jumps ahead of waiters */
inline engine_acquire(c_ea, n_ea, ls_ea, wait_ea) {
  cl_name[c_ea] = n_ea; cl_lease[c_ea] = ls_ea; cl_st[c_ea] = C_WAITING;
  if
  :: draining -> cl_code[c_ea] = SHUTTING_DOWN; cl_st[c_ea] = C_IDLE
  :: !draining && SESS(c_ea) && !s_alive[c_ea] -> cl_code[c_ea] = SESSION_NOT_FOUND; cl_st[c_ea] = C_IDLE
  :: else ->
     if
     :: wait_ea -> waiters_acquire(c_ea, n_ea)
     :: !wait_ea && q_len[n_ea] > 0 -> cl_code[c_ea] = LOCKED; cl_st[c_ea] = C_IDLE
     :: !wait_ea && q_len[n_ea] == 0 -> submit(c_ea, OP_ACQUIRE, n_ea, ls_ea, TTL, 0, SESS(c_ea))
     fi
  fi
}

inline acquire_done(c_ad) {
  rc = bk_code(c_ad); tk = b_tok[c_ad]; pt = b_pttl[c_ad];
  slot_clear(c_ad);
  if
  :: rc == OK -> granted(c_ad, c_ad)
  :: else -> cl_code[c_ad] = rc; cl_st[c_ad] = C_IDLE
  fi
}

/* engine_renew / renew_done (session_note_renew: a session lock's expiry
 * moves too). The client takes the answer's fencing_token, as the API
 * gives it. */
inline engine_renew(c_er) {
  submit(c_er, OP_RENEW, cl_name[c_er], cl_lease[c_er], TTL, 0, 0)
}

inline renew_done(c_rd) {
  rc = bk_code(c_rd); tk = b_tok[c_rd]; pt = b_pttl[c_rd];
  slot_clear(c_rd);
  cl_code[c_rd] = rc;
  if
  :: rc == OK -> cl_tok[c_rd] = tk;
     if /* session_note_renew: a session lock's expiry moves too */
     :: SESS(c_rd) && sl_on[c_rd] && sl_lease[c_rd] == cl_lease[c_rd] -> sl_exp[c_rd] = TTL
     :: else -> skip
     fi
  :: rc == NOT_HELD || rc == HELD_BY_OTHER -> cl_st[c_rd] = C_IDLE /* lost: stop */
  :: else -> skip /* 503: still ours as far as anyone knows */
  fi
}

/* engine_release: session_release_begin marks it releasing; it stays in the
 * session (renewed) until release_done's session_release_end */
inline engine_release(c_er) {
  if
  :: SESS(c_er) && sl_on[c_er] && sl_lease[c_er] == cl_lease[c_er] -> sl_releasing[c_er] = 1
  :: else -> skip
  fi;
  submit(c_er, OP_RELEASE, cl_name[c_er], cl_lease[c_er], 0, 0, 0)
}

inline release_done(c_rd) {
  rc = bk_code(c_rd); tk = b_tok[c_rd]; pt = b_pttl[c_rd];
  slot_clear(c_rd);
  if
  :: SESS(c_rd) && sl_on[c_rd] && sl_lease[c_rd] == cl_lease[c_rd] ->
     sl_releasing[c_rd] = 0;
     if
     :: rc == OK || rc == NOT_HELD || rc == HELD_BY_OTHER -> sl_on[c_rd] = 0
     :: else -> skip /* 503: kept, so the watchdog renews it and reports it lost */
     fi
  :: else -> skip
  fi;
  if
  :: rc == OK -> waiters_kick(cl_name[c_rd])
  :: else -> skip
  fi;
  cl_code[c_rd] = rc; cl_st[c_rd] = C_IDLE
}

/* engine_session_get(touch): a heartbeat. lose_expired first. */
inline engine_session_get(c_esg) {
  if
  :: s_alive[c_esg] ->
     s_left[c_esg] = STTL;
     if
     :: sl_on[c_esg] && sl_exp[c_esg] == 0 -> s_lost[c_esg] = sl_lease[c_esg]; sl_on[c_esg] = 0
     :: else -> skip
     fi;
     if
     :: cl_st[c_esg] == C_HOLD && s_lost[c_esg] == cl_lease[c_esg] -> cl_st[c_esg] = C_IDLE /* in `lost` */
     :: else -> skip
     fi;
     s_lost[c_esg] = 0;
     cl_code[c_esg] = OK
  :: else -> cl_code[c_esg] = SESSION_NOT_FOUND; cl_st[c_esg] = C_IDLE
  fi
}

/* ---- janitor.c ---- */

/* reap: session_reap_due + reap(): the session's locks are released with
 * compare-and-delete and its lock_delay_ms */
inline reap(c_r) {
  s_alive[c_r] = 0;
  waiters_fail(c_r, SESSION_NOT_FOUND);
  if
  :: sl_on[c_r] ->
     sl_on[c_r] = 0;
#ifndef MUT_NO_LOCK_DELAY
     release_bg(c_r, sl_name[c_r], sl_lease[c_r], LDELAY, 1)
#else
     release_bg(c_r, sl_name[c_r], sl_lease[c_r], 0, 1)
#endif
  :: else -> skip
  fi
}

/* session_watchdog_due: the due locks into one renew_many batch, ttl capped
 * at hold_until; a lock past hold_until is let go (capped) */
inline session_watchdog_due() {
  j = 0;
  do
  :: j < NC ->
     wd_in[j] = 0;
     if
     :: sl_on[j] && !sl_inflight[j] && sl_renew_in[j] == 0 ->
        if
#ifndef MUT_NO_MAX_HOLD
        :: sl_hold[j] == 0 && b_st[NC + j] == S_IDLE ->
           s_lost[j] = sl_lease[j]; sl_on[j] = 0;
           release_bg(j, sl_name[j], sl_lease[j], 0, 0)
        :: sl_hold[j] == 0 && b_st[NC + j] != S_IDLE -> skip /* next cycle */
        :: sl_hold[j] > 0 ->
           wd_ttl[j] = (sl_hold[j] < TTL -> sl_hold[j] : TTL);
#else
        :: else ->
           wd_ttl[j] = TTL;
#endif
           wd_in[j] = 1; wd_name[j] = sl_name[j]; wd_lease[j] = sl_lease[j];
           sl_inflight[j] = 1
        fi
     :: else -> skip
     fi;
     j++
  :: else -> break
  od;
  wd_age = 0;
  if
  :: wd_in[0] || wd_in[1] || (NC > 2 && wd_in[NC-1]) -> b_op[WD] = OP_RENEW; b_st[WD] = S_SENT
  :: else -> skip
  fi
}

/* session_watchdog_done */
inline session_watchdog_done() {
  j = 0;
  do
  :: j < NC ->
     if
     :: wd_in[j] ->
        sl_inflight[j] = 0;
        rc = (b_st[WD] == S_LOST -> BACKEND_DOWN : wd_res[j]);
        if
        :: sl_on[j] && sl_lease[j] == wd_lease[j] ->
           if
           :: rc == OK ->
              sl_exp[j] = (wd_ttl[j] > wd_age -> wd_ttl[j] - wd_age : 0);
              sl_renew_in[j] = (sl_hold[j] < WD_EVERY -> sl_hold[j] : WD_EVERY)
           :: rc == NOT_HELD || rc == HELD_BY_OTHER -> s_lost[j] = sl_lease[j]; sl_on[j] = 0
           :: else ->
              if
              :: sl_exp[j] == 0 -> s_lost[j] = sl_lease[j]; sl_on[j] = 0
              :: else -> sl_renew_in[j] = 1 /* retry until the lease's own ttl ran out */
              fi
           fi
        :: else -> skip /* dead meanwhile */
        fi;
        wd_in[j] = 0; wd_lease[j] = 0; wd_name[j] = 0; wd_ttl[j] = 0; wd_res[j] = 0
     :: else -> skip
     fi;
     j++
  :: else -> break
  od;
  b_st[WD] = S_IDLE; b_op[WD] = 0; wd_age = 0
}

#define JZAP j = 0; n = 0; rc = 0

proctype janitor()
{
  byte j, n, rc, tk, pt;
end:
  do
  /* the reaper */
  :: atomic { s_alive[0] && s_left[0] == 0 && b_st[NC] == S_IDLE -> reap(0); JZAP }
#if NC > 2
  :: atomic { s_alive[2] && s_left[2] == 0 && b_st[NC+2] == S_IDLE -> reap(2); JZAP }
#endif
  /* the watchdog */
  :: atomic { b_st[WD] == S_IDLE &&
              ((sl_on[0] && sl_renew_in[0] == 0) || (NC > 2 && sl_on[NC-1] && sl_renew_in[NC-1] == 0)) ->
              session_watchdog_due(); JZAP }
  :: atomic { b_st[WD] == S_DONE || b_st[WD] == S_LOST -> session_watchdog_done(); JZAP }
  /* release_bg_done: a background release that freed the name kicks its waiters */
  :: atomic { (b_st[NC] == S_DONE || b_st[NC] == S_LOST) ->
              if :: b_st[NC] == S_DONE && b_code[NC] == OK -> waiters_kick(b_name[NC]) :: else -> skip fi;
              slot_clear(NC) }
  :: atomic { (b_st[NC+1] == S_DONE || b_st[NC+1] == S_LOST) ->
              if :: b_st[NC+1] == S_DONE && b_code[NC+1] == OK -> waiters_kick(b_name[NC+1]) :: else -> skip fi;
              slot_clear(NC+1) }
#if NC > 2
  :: atomic { (b_st[NC+2] == S_DONE || b_st[NC+2] == S_LOST) ->
              if :: b_st[NC+2] == S_DONE && b_code[NC+2] == OK -> waiters_kick(b_name[NC+2]) :: else -> skip fi;
              slot_clear(NC+2) }
#endif
  od
}

/* One tick of lockd's clock (lk_now_ms). */
inline lockd_tick() {
  j = 0;
  do
  :: j < NC ->
     if :: s_alive[j] && s_left[j] > 0 -> s_left[j]-- :: else -> skip fi;
     if
     :: sl_on[j] ->
        if :: sl_renew_in[j] > 0 -> sl_renew_in[j]-- :: else -> skip fi;
        if :: sl_exp[j] > 0 -> sl_exp[j]-- :: else -> skip fi;
        if
        :: sl_hold[j] > 1 -> sl_hold[j]--
        :: sl_hold[j] == 1 -> sl_hold[j] = 0; g_capped[sl_lease[j]] = 1
        :: else -> skip
        fi
     :: else -> skip
     fi;
     if :: w_armed[j] && w_rt[j] > 0 -> w_rt[j]-- :: else -> skip fi;
     j++
  :: else -> break
  od;
  n = 0;
  do
  :: n < NN -> if :: q_hexp[n] > 0 -> q_hexp[n]-- :: else -> skip fi; n++
  :: else -> break
  od;
  if :: wd_age < TTL && b_st[WD] != S_IDLE -> wd_age++ :: else -> skip fi;
  j = 0; n = 0
}
