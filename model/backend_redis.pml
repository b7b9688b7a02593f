/*
 * backend_redis.pml - one Redis: each lock is one key (server/scripts/
 * _acquire.lua describes its value), each script runs as one atomic step,
 * keys expire on the backend's clock (PX), and the channel to lockd delays,
 * reorders across connections and loses requests or replies.
 */

/* the keys of each name: '<lock>' and '<lock>:fence' */
byte k_st[NN];          /* KFREE, KHELD, KDELAY */
byte k_lease[NN];
byte k_ttl[NN];         /* PTTL in ticks */
byte k_tok[NN];
bit  k_sb[NN];          /* session bound */
byte fence[NN];         /* the fence counter */

/* Backend calls. Slot c: client c's own request (one HTTP request at a
 * time); slot NC+c: the janitor's background release of c's session lock
 * (reaper, max-hold cap, undo of a grant its session missed); slot WD: the
 * watchdog's renew_many batch. */
#define WD (2*NC)
#define NSLOT (2*NC+1)
byte b_st[NSLOT];
byte b_op[NSLOT];
byte b_name[NSLOT];
byte b_lease[NSLOT];
byte b_ttl[NSLOT];
byte b_delay[NSLOT];
bit  b_sb[NSLOT];
bit  b_reap[NSLOT];     /* ghost: the reaper's release of an expired session */
byte b_code[NSLOT];
byte b_tok[NSLOT];
byte b_pttl[NSLOT];
/* the watchdog batch: one item per session client */
bit  wd_in[NC];
byte wd_lease[NC];
byte wd_name[NC];
byte wd_ttl[NC];
byte wd_res[NC];
byte faults;

#include "props.pml"

/* _acquire.lua (acquire.lua; acquire_many.lua per lock): SET NX, then the
 * fence counter. The token is max(now_us, counter + 1): the wall-clock
 * floor only ever raises it, so the model takes counter + 1. */
inline acquire_lua(i_al) {
  n = b_name[i_al];
  if
  :: k_st[n] == KDELAY -> b_code[i_al] = LOCKED; b_pttl[i_al] = k_ttl[n]
  :: k_st[n] == KHELD -> b_code[i_al] = LOCKED; b_pttl[i_al] = k_ttl[n]
  :: k_st[n] == KFREE ->
     fence[n] = fence[n] + 1;
     prop_grant(n, b_lease[i_al], fence[n], b_ttl[i_al]);
     k_st[n] = KHELD; k_lease[n] = b_lease[i_al]; k_ttl[n] = b_ttl[i_al];
     k_tok[n] = fence[n]; k_sb[n] = b_sb[i_al];
     b_code[i_al] = OK; b_tok[i_al] = fence[n]
  fi
}

/* renew.lua (and one element of renew_many.lua): compare the lease, then
 * extend. Answers the holder's token. */
inline renew_body(n_rb, lease_rb, ttl_rb, code_rb, tok_rb) {
  pre = (k_st[n_rb] == KHELD -> k_lease[n_rb] : 0);
  if
  :: k_st[n_rb] != KHELD -> code_rb = NOT_HELD
#ifndef MUT_RENEW_NO_OWNER
  :: k_st[n_rb] == KHELD && k_lease[n_rb] != lease_rb -> code_rb = HELD_BY_OTHER
  :: k_st[n_rb] == KHELD && k_lease[n_rb] == lease_rb ->
#else
  :: k_st[n_rb] == KHELD ->
#endif
     k_ttl[n_rb] = ttl_rb; code_rb = OK; tok_rb = k_tok[n_rb]
  fi;
  prop_renewed(n_rb, lease_rb, ttl_rb, code_rb, pre)
}

inline renew_lua(i_rl) {
  renew_body(b_name[i_rl], b_lease[i_rl], b_ttl[i_rl], b_code[i_rl], b_tok[i_rl])
}

/* renew_many.lua: the watchdog's batch, one script call */
inline renew_many_lua() {
  j = 0;
  do
  :: j < NC ->
     if
     :: wd_in[j] -> renew_body(wd_name[j], wd_lease[j], wd_ttl[j], wd_res[j], t)
     :: else -> skip
     fi;
     j++
  :: else -> break
  od
}

/* _release.lua (release.lua; release_many.lua per lock): compare-and-delete,
 * leaving 'd' for delay ticks when asked. */
inline release_lua(i_rl) {
  n = b_name[i_rl];
  pre = (k_st[n] == KHELD -> k_lease[n] : 0);
  if
  :: k_st[n] != KHELD -> b_code[i_rl] = NOT_HELD
#ifndef MUT_RELEASE_NO_CAD
  :: k_st[n] == KHELD && k_lease[n] != b_lease[i_rl] -> b_code[i_rl] = HELD_BY_OTHER
  :: k_st[n] == KHELD && k_lease[n] == b_lease[i_rl] ->
#else
  :: k_st[n] == KHELD ->
#endif
     b_code[i_rl] = OK; b_tok[i_rl] = k_tok[n];
     if
     :: b_delay[i_rl] > 0 -> k_st[n] = KDELAY; k_ttl[n] = b_delay[i_rl]
     :: else -> k_st[n] = KFREE; k_ttl[n] = 0
     fi;
     k_lease[n] = 0
  fi;
  prop_released(n, b_lease[i_rl], b_code[i_rl], pre, b_reap[i_rl])
}

inline exec(i_e) {
  if
  :: b_op[i_e] == OP_ACQUIRE -> acquire_lua(i_e)
  :: b_op[i_e] == OP_RENEW && i_e != WD -> renew_lua(i_e)
  :: b_op[i_e] == OP_RENEW && i_e == WD -> renew_many_lua()
  :: b_op[i_e] == OP_RELEASE -> release_lua(i_e)
  fi
}

/* One call reaches Redis: lost on the way, or run and answered, or run and
 * its reply lost. */
inline serve(i_s) {
  n = 0; /* (temporaries are zeroed after each step: no state differs by a dead value) */
  if
  :: faults < FAULTS -> faults++; b_st[i_s] = S_LOST
  :: exec(i_s);
     if
     :: b_st[i_s] = S_DONE
     :: faults < FAULTS -> faults++; b_st[i_s] = S_LOST
     fi
  fi;
  n = 0; pre = 0; j = 0; t = 0; l = 0
}

/* acquire_many.lua / release_many.lua: the acquires and the delay-free
 * releases that one turn of lockd's loop makes, in one script call. Here:
 * both clients' pending calls, run back to back in one step. */
inline serve_group() {
  exec(0); b_st[0] = S_DONE; exec(1); b_st[1] = S_DONE;
  n = 0; pre = 0; j = 0; t = 0; l = 0
}

proctype redis()
{
  byte n, pre, j, t, l;
end:
  do
  :: atomic { b_st[0] == S_SENT -> serve(0) }
  :: atomic { b_st[1] == S_SENT -> serve(1) }
  :: atomic { b_st[NC] == S_SENT -> serve(NC) }
  :: atomic { b_st[NC+1] == S_SENT -> serve(NC+1) }
  :: atomic { b_st[WD] == S_SENT -> serve(WD) }
#if NC > 2
  :: atomic { b_st[2] == S_SENT -> serve(2) }
  :: atomic { b_st[NC+2] == S_SENT -> serve(NC+2) }
#endif
#ifdef GROUPED
  :: atomic { b_st[0] == S_SENT && b_st[1] == S_SENT &&
              b_op[0] != OP_RENEW && b_op[1] != OP_RENEW && b_delay[0] == 0 && b_delay[1] == 0 ->
              serve_group() }
#endif
  od
}

/* One tick of the backend's clock: keys expire (PX), the ghosts age. */
inline backend_tick() {
  n = 0;
  do
  :: n < NN ->
     if
     :: k_ttl[n] > 1 -> k_ttl[n]--
     :: k_ttl[n] == 1 -> k_ttl[n] = 0; k_st[n] = KFREE; k_lease[n] = 0
     :: else -> skip
     fi;
     n++
  :: else -> break
  od;
  prop_backend_tick();
  n = 0; l = 0
}
