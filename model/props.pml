/*
 * props.pml - ghost state and the safety properties, asserted inside the
 * atomic steps where the state they speak of changes. Ghosts are written
 * from what happened (who held the key before a script ran, what the
 * session table configured), never from the code they judge, so a mutant
 * cannot switch its own check off.
 *
 * (1) lease exclusivity: a lease whose grant or renewal the backend answered
 *     OK is live for its ttl on the backend's clock unless its owner released
 *     it; at most one live lease per name.
 * (2) the tokens granted for a name strictly increase.
 * (3) fencing: the resource (client_write) accepts a write only with a
 *     token granted to the writer's lease and never below a token it has
 *     seen; so after a newer holder wrote, an older one never does.
 * (4) a release or renewal answered OK was made with the lease that held the
 *     key.
 * (6) max_hold_ms: a session lock stays in the backend at most TTL + DRIFT
 *     ticks after lockd's clock passed its hold_until_ms.
 * (7) lock-delay: after the reaper released an expired session's lock, the
 *     name is not granted for lock_delay ticks.
 * (5) liveness is an LTL formula in lockd.pml.
 */
byte g_live[NLEASE];    /* (1) ticks left of the last OK grant/renew */
byte g_name[NLEASE];
byte g_last_tok[NN];    /* (2) */
byte g_tok_lease[NN*NTOK]; /* (3) the lease each token of each name went to */
byte res_tok[NN];       /* (3) the resource's newest token seen */
byte g_delay[NN];       /* (7) */
bit  g_capped[NLEASE];  /* (6) lockd's clock passed the lease's hold_until */
byte g_over[NN];        /* (6) backend ticks held since */

inline prop_exclusive(n_pe, lease_pe) {
  l = 1;
  do
  :: l < NLEASE ->
     assert(l == lease_pe || g_name[l] != n_pe || g_live[l] == 0); /* (1) */
     l++
  :: else -> break
  od
}

inline prop_grant(n_pg, lease_pg, tok_pg, ttl_pg) {
  prop_exclusive(n_pg, lease_pg);
  assert(tok_pg > g_last_tok[n_pg]);                           /* (2) */
  assert(g_delay[n_pg] == 0);                               /* (7) */
  g_last_tok[n_pg] = tok_pg; g_tok_lease[n_pg*NTOK + tok_pg] = lease_pg;
  g_live[lease_pg] = ttl_pg; g_name[lease_pg] = n_pg; g_over[n_pg] = 0
}

inline prop_renewed(n_pr, lease_pr, ttl_pr, code_pr, pre_pr) {
  if
  :: code_pr == OK ->
     assert(pre_pr == lease_pr);                               /* (4) */
     prop_exclusive(n_pr, lease_pr);
     g_live[lease_pr] = ttl_pr; g_name[lease_pr] = n_pr
  :: else -> skip
  fi
}

inline prop_released(n_pr, lease_pr, code_pr, pre_pr, reap_pr) {
  if
  :: code_pr == OK ->
     assert(pre_pr == lease_pr);                               /* (4) */
     g_live[lease_pr] = 0;
     if
     :: reap_pr -> g_delay[n_pr] = LDELAY
     :: else -> skip
     fi
  :: else -> skip
  fi
}

inline prop_backend_tick() {
  l = 1;
  do
  :: l < NLEASE ->
     if
     :: g_live[l] > 0 -> g_live[l]--
     :: else -> skip
     fi;
     l++
  :: else -> break
  od;
  n = 0;
  do
  :: n < NN ->
     if
     :: g_delay[n] > 0 -> g_delay[n]--
     :: else -> skip
     fi;
     if
     :: k_st[n] == KHELD && g_capped[k_lease[n]] ->
        g_over[n]++;
        assert(g_over[n] <= TTL + DRIFT)                 /* (6) */
     :: else -> skip
     fi;
     n++
  :: else -> break
  od
}

/* (3) the resource that rejects stale tokens */
inline client_write(c_cw) {
  n = cl_name[c_cw];
  if
  :: cl_tok[c_cw] >= res_tok[n] ->
     assert(g_tok_lease[n*NTOK + cl_tok[c_cw]] == cl_lease[c_cw]); /* (3) */
     res_tok[n] = cl_tok[c_cw]
  :: else -> skip /* rejected: stale */
  fi
}
