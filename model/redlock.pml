/*
 * redlock.pml - lockd on the redlock backend (server/backend_redlock.c):
 * NC clients each acquire (try once) up to K times under a fresh lease a
 * name that three independent Redis nodes keep. Every lock operation goes to
 * all three nodes at once and is answered from the majority (2); a grant's
 * token is the largest counter of its majority, written back (fence_raise.lua)
 * to every node that answered below it before the grant is answered; a
 * missed majority is undone (undo.lua). Each node's keys expire on its own
 * clock, which runs ahead of lockd's by at most RDRIFT ticks (the validity's
 * drift allowance); a node restarts, keeping or losing its data, and lockd
 * re-asserts its live leases there (reassert.c, reassert.lua) before it is
 * used again, then refuses grants on it for the restart grace when data was
 * lost. Requests and replies are delayed, reordered across nodes, lost.
 * README.md ("Redlock") says what stands for what; `model/check.sh safety
 * redlock` runs it.
 * -DRLSH (`redlock-shared`): Redlock's shared mode (BK_CAP_SHARED, limit 1).
 * Each node keeps the name's holders (_shared.lua's holder set, abstracted
 * as shared.pml's: one entry per lease with its own expiry and token, and
 * its mode): an exclusive acquire is granted on a node with no live holder,
 * a shared one with no live exclusive holder. Client 0 asks either mode on
 * each acquire, client 1 shared (-DRLSH_X1: either). backend_redlock.c
 * counts, grants, writes back and undoes alike in both modes; (1) becomes:
 * no exclusive lease beside any other lease lockd answered OK for. A
 * shared acquire's floor is rounded up to a multiple of VM (RL_VOTE_MOD),
 * the same on every node, and a node whose counter ran past it steps to
 * the next value with residue n + 1 modulo VM (node n); an exclusive
 * one's vote is plain, as on one Redis. -DRL_UNIQUE asserts no token is
 * granted twice (in `redlock-shared`), and that a shared acquire no
 * other call raced (no counter at its floor when sent, no other call's
 * script on a node while it was open) gets agreeing votes: no write-back;
 * -DMUT_RLSH_NO_RESIDUE steps without the residue (its trail: two
 * readers, one token).
 */
#ifndef K
#define K 2             /* acquires of client 0 (leases 1..K) */
#endif
#ifndef K1
#define K1 1            /* acquires of client 1 (leases K+1..K+K1) */
#endif
#include "params.pml"

#define NR 3            /* nodes */
#define QUORUM 2
#ifndef RDRIFT
#define RDRIFT 0        /* a node's clock runs ahead of lockd's by at most this */
#endif
#define VD RDRIFT       /* validity_of's drift allowance (ttl/100 + 2 ms), in ticks */
#ifndef GRACE
#define GRACE 1         /* restart_grace_ms, in lockd ticks */
#endif
#ifndef RESTARTS
#define RESTARTS 1
#endif
#define RECOVERING 7    /* LK_BACKEND_RECOVERING: no vote */
#ifdef RLSH
#define VM (NR+1)       /* RL_VOTE_MOD: residue 0 the floor's, n + 1 node n's */
#ifdef RLIDX
#define RTOK (NC*K*NR*VM+2+NLEASE*NR) /* as below, and a bump (sh_bump) per holder that leaves a node */
#else
#define RTOK (NC*K*NR*VM+2) /* tokens: each node acquire raises the largest counter by at most VM */
#endif
#else
#define RTOK (NC*K*NR+2) /* tokens: each node acquire raises a counter by at most one */
#endif
#define M_X 1           /* mode exclusive (bk_req.mode BK_EXCLUSIVE) */
#define M_S 2           /* mode shared (BK_SHARED, limit 1) */

/* channel ops beyond params.pml's */
#define OP_RAISE 4      /* fence_raise.lua */
#define OP_UNDO 5       /* undo.lua */

/* ---- the nodes: one name; its lock key and fence counter on each */
#ifdef RLSH
/* the name's holders on node n, one entry per lease (n*NLEASE + lease):
 * _shared.lua's set ('<lock>:z' expiry, '<lock>:h' token and mode) or the
 * lone holder's value ('t', or an exclusive lock's), abstracted alike */
byte h_ttl[NR*NLEASE];  /* node ticks to its expiry; 0 = not a holder */
byte h_tok[NR*NLEASE];
bit  h_x[NR*NLEASE];    /* an exclusive holder */
byte l_mode[NLEASE];    /* the mode each lease's acquire asks (its request) */
#ifdef RLIDX
bit  r_set[NR];         /* node n keeps the name's holders in the set ('s' marker,
                         * _shared.lua), not as a lone holder's value ('t') */
#endif
#else
byte r_st[NR];          /* KFREE, KHELD */
byte r_lease[NR];
byte r_ttl[NR];         /* PTTL, in the node's ticks */
byte r_tok[NR];         /* the token in the lock's value */
#endif
byte r_fence[NR];
byte r_skew[NR];        /* node ticks - lockd ticks, 0..RDRIFT */
bit  r_busy[NR];        /* restarted, lockd has not re-asserted yet (reassert.c busy) */
byte r_grace[NR];       /* lockd ticks of restart grace left (grants refused) */
byte restarts;
byte faults;
byte maxc;              /* the largest counter value any node took */
byte wall = 1;          /* lockd's wall clock, the token floor (see README) */

/* ---- lockd: each node layer's grants table (grant_log.c), per lease */
byte gl_left[NR*NLEASE];        /* lockd ticks to its expiry; 0 = not in the table */
byte gl_tok[NR*NLEASE];

/* ---- the channel from client c's call to node n: ch = c*NR + n. One
 * operation in flight, one queued behind it (a connection runs in order). */
byte ch_st[NC*NR];      /* S_IDLE, S_SENT, S_DONE, S_LOST */
byte ch_op[NC*NR];
byte ch_lease[NC*NR];
byte ch_arg[NC*NR];     /* ACQUIRE: the floor (now_us); RAISE: the token */
byte ch_code[NC*NR];
byte ch_tok[NC*NR];
bit  ch_wb[NC*NR];      /* a RAISE the grant waits for (wb_done), not a late one */
bit  ch_undo[NC*NR];    /* an undo queued behind the operation in flight */

/* ---- the call (struct rl_call), one per client at a time */
byte k_op[NC];
byte k_ph[NC];          /* PH_OPEN, PH_GRANT, PH_FAIL */
bit  k_ans[NC];         /* answered */
byte k_age[NC];         /* lockd ticks since call_new (start_us) */
byte k_now[NC];         /* the floor the acquire's nodes get */
byte k_tok[NC];
byte k_wbp[NC];         /* write-backs pending */
byte k_wbok[NC];
#ifdef RLSH
byte k_seen[NC];        /* ghost: the largest token granted (answered) before this acquire was sent */
#ifdef RL_UNIQUE
bit  k_race[NC];        /* ghost: a counter at its floor when sent, or another call's script ran while it was open */
#endif
#endif
bit  s_done[NC*NR];     /* struct rl_sub */
byte s_code[NC*NR];
byte s_tok[NC*NR];

#define ZAP i = 0; n = 0; m = 0; l = 0; ok = 0; pend = 0; ans = 0; nh = 0; oth = 0; rc = 0; tk = 0; op = 0; wb = 0; gi = 0
#define PH_OPEN 1
#define PH_GRANT 2
#define PH_FAIL 3

/* ---- the clients */
byte cl_st[NC];
byte cl_lease[NC];
byte cl_tok[NC];

/* ---- ghosts and properties
 * (1) a lease lockd answered OK (grant or renewal) is the client's for its
 *     validity on lockd's clock, until the client releases it; at most one
 *     such lease at a time.
 * (2) the tokens lockd grants strictly increase.
 * (3) the resource accepts a write only with a token granted to the
 *     writer's lease, never below the newest it has seen. */
byte g_live[NLEASE];
byte g_last_tok;        /* the largest token answered so far */
#ifdef RLSH
byte g_tok_ls[RTOK];    /* the leases each token was granted to, a bit each (one, -DRL_UNIQUE asserts) */
byte g_last_x;          /* the largest token answered to an exclusive grant so far */
#else
byte g_tok_lease[RTOK];
#endif
byte res_tok;

inline prop_exclusive(ls) {
  l = 1;
  do
#ifdef RLSH
  /* (1) of shared mode: an exclusive lease beside no other live one, a
   * shared one beside no exclusive one */
  :: l < NLEASE -> assert(l == ls || g_live[l] == 0 || (l_mode[l] == M_S && l_mode[ls] == M_S)); l++
#else
  :: l < NLEASE -> assert(l == ls || g_live[l] == 0); l++   /* (1) */
#endif
  :: else -> break
  od
}

inline client_write(c_cw) {
  if
  :: cl_tok[c_cw] >= res_tok ->
#ifdef RLSH
     assert(g_tok_ls[cl_tok[c_cw]] & (1 << cl_lease[c_cw]));  /* (3) */
#else
     assert(g_tok_lease[cl_tok[c_cw]] == cl_lease[c_cw]);    /* (3) */
#endif
     res_tok = cl_tok[c_cw]
  :: else -> skip /* rejected: stale */
  fi
}

/* ---- the scripts on node n, for channel i: each one atomic step */
#ifdef RLSH
/* -DRL_UNIQUE's ghost: client c_rc's script may move a counter (NC: the
 * restarter's reassert); every other client's shared acquire still open
 * was raced */
#define RACED(c, c_rc) ((c_rc) != c && k_op[c] == OP_ACQUIRE && k_ph[c] == PH_OPEN && l_mode[cl_lease[c]] == M_S)
inline race(c_rc) {
#ifdef RL_UNIQUE
  if :: RACED(0, c_rc) -> k_race[0] = 1 :: else -> skip fi;
  if :: RACED(1, c_rc) -> k_race[1] = 1 :: else -> skip fi;
#if NC > 2
  if :: RACED(2, c_rc) -> k_race[2] = 1 :: else -> skip fi;
#endif
#endif
  skip
}

/* the live holders of node n but lease ls: hx exclusive, hs shared */
inline holders(n_h, ls_h) {
  hx = 0; hs = 0; l = 1;
  do
  :: l < NLEASE ->
     if
     :: l != ls_h && h_ttl[n_h*NLEASE + l] > 0 -> if :: h_x[n_h*NLEASE + l] -> hx++ :: else -> hs++ fi
     :: else -> skip
     fi;
     l++
  :: else -> break
  od;
  l = 0
}

#ifdef RLIDX
/* -DRLIDX: a holder left node n_b (release, undo, expiry; x_b: it was a
 * writer): in the set ('s') the counter counts one more (sh_release's and
 * sh_trim's sh_bump), and so does a lone reader's end ('t': its grant on
 * a Redlock node marks the counter '<n>l', counted by every script that
 * reads it once the 't' is gone, _shared.lua sh_fence: to every reader of
 * the counter, the count taken here); a writer's end counts nothing (its
 * index is its token). With MUT_RLIDX_LONE_NOBUMP a lone holder's end
 * counts nothing (the code before the fix). The set goes with its last
 * live holder (sh_release's DEL; an expired marker's keys expire with it,
 * sh_extend). */
inline left_node(n_b, x_b) {
  if
#ifndef MUT_RLIDX_LONE_NOBUMP
  :: !x_b ->
#else
  :: r_set[n_b] ->
#endif
     race(NC);
     r_fence[n_b] = r_fence[n_b] + 1; maxc = (r_fence[n_b] > maxc -> r_fence[n_b] : maxc)
  :: else -> skip
  fi
}
inline set_gone(n_b) {
  holders(n_b, 0);
  if :: hx + hs == 0 -> r_set[n_b] = 0 :: else -> skip fi;
  hx = 0; hs = 0
}
#endif

/* _acquire.lua (exclusive: SET NX, or sh_refuse over the holders) and
 * _acquire_shared.lua (shared: refused by an exclusive holder only; the
 * writer's x flag is set by waiting writers alone, and these clients try
 * once): the token is max(now_us, counter + 1) in both (sh_fence_next,
 * sh_grant_one); a shared one's floor is now_us rounded up to a multiple
 * of VM (rb_acquire_shared) and its counter + 1 steps on to node n's
 * residue n + 1 (sh_step) */
inline acquire_node(n_a, i_a) {
  holders(n_a, ch_lease[i_a]);
  if
#ifdef MUT_RLSH_X_IGNORES_S
  :: hx > 0 -> ch_code[i_a] = LOCKED   /* an exclusive acquire blind to readers */
#else
  :: hx > 0 || (l_mode[ch_lease[i_a]] == M_X && hs > 0) -> ch_code[i_a] = LOCKED
#endif
  :: else ->
     if
     :: l_mode[ch_lease[i_a]] == M_S ->
        t = ch_arg[i_a] + (VM - ch_arg[i_a] % VM) % VM;
        if
        :: t <= r_fence[n_a] ->
           t = r_fence[n_a] + 1;
#ifndef MUT_RLSH_NO_RESIDUE
           t = t + (n_a + 1 + VM - t % VM) % VM
#else
           skip
#endif
        :: else -> skip
        fi
     :: else -> t = (ch_arg[i_a] > r_fence[n_a] -> ch_arg[i_a] : r_fence[n_a] + 1)
     fi;
     race(i_a / NR);
#ifdef RLIDX
     if :: hs > 0 -> r_set[n_a] = 1 :: else -> skip fi; /* sh_spill: a second holder */
#endif
     r_fence[n_a] = t; maxc = (t > maxc -> t : maxc);
     gi = n_a*NLEASE + ch_lease[i_a];
     h_ttl[gi] = TTL; h_tok[gi] = t; h_x[gi] = (l_mode[ch_lease[i_a]] == M_X);
#ifdef TRACE
     printf("TR node %d grants lease %d (mode %d) token %d, counter %d, set %d\n", n_a, ch_lease[i_a], l_mode[ch_lease[i_a]], t, t, r_set[n_a]);
#endif
     ch_code[i_a] = OK; ch_tok[i_a] = t; gi = 0
  fi;
  hx = 0; hs = 0
}

/* renew.lua: renew.lua's own compare, sh_one_renew, sh_renew */
inline renew_node(n_r, i_r) {
  gi = n_r*NLEASE + ch_lease[i_r];
  if
  :: h_ttl[gi] > 0 -> h_ttl[gi] = TTL; ch_code[i_r] = OK; ch_tok[i_r] = h_tok[gi]
  :: else ->
     holders(n_r, ch_lease[i_r]);
     ch_code[i_r] = (hx + hs > 0 -> HELD_BY_OTHER : NOT_HELD); hx = 0; hs = 0
  fi;
  gi = 0
}

/* _release.lua, sh_release and undo.lua: the lease's own hold only. (A
 * reader's release or trim also bumps the counter, sh_bump: it only raises
 * a counter, as the wall clock's floor does; not modelled.) */
inline release_node(n_r, i_r) {
  gi = n_r*NLEASE + ch_lease[i_r];
  if
  :: h_ttl[gi] > 0 ->
     ch_code[i_r] = OK; ch_tok[i_r] = h_tok[gi];
#ifdef TRACE
     printf("TR node %d lets lease %d go (op %d), set %d, counter %d before\n", n_r, ch_lease[i_r], ch_op[i_r], r_set[n_r], r_fence[n_r]);
#endif
     h_ttl[gi] = 0; h_tok[gi] = 0;
#ifdef RLIDX
     left_node(n_r, h_x[gi]);
#endif
     h_x[gi] = 0
#ifdef RLIDX
     ; set_gone(n_r)
#endif
  :: else ->
     holders(n_r, ch_lease[i_r]);
     ch_code[i_r] = (hx + hs > 0 -> HELD_BY_OTHER : NOT_HELD); hx = 0; hs = 0
  fi;
  gi = 0
}

/* fence_raise.lua: the counter, then the lease's hold ('t' value, the set's
 * hash entry, or the lock's value) takes the token */
inline raise_node(n_f, i_f) {
#ifdef TRACE
  printf("TR node %d fence_raise lease %d to %d (counter %d)\n", n_f, ch_lease[i_f], ch_arg[i_f], r_fence[n_f]);
#endif
  race(i_f / NR);
  if :: r_fence[n_f] < ch_arg[i_f] -> r_fence[n_f] = ch_arg[i_f] :: else -> skip fi;
  gi = n_f*NLEASE + ch_lease[i_f];
  if
  :: h_ttl[gi] > 0 -> h_tok[gi] = ch_arg[i_f]; ch_code[i_f] = OK
  :: else -> ch_code[i_f] = NOT_HELD
  fi;
  gi = 0
}
#else

/* _acquire.lua: SET NX; the token is max(now_us, counter + 1) */
inline acquire_node(n_a, i_a) {
  if
  :: r_st[n_a] == KHELD -> ch_code[i_a] = LOCKED
  :: else ->
     t = (ch_arg[i_a] > r_fence[n_a] -> ch_arg[i_a] : r_fence[n_a] + 1);
     r_fence[n_a] = t; maxc = (t > maxc -> t : maxc);
     r_st[n_a] = KHELD; r_lease[n_a] = ch_lease[i_a]; r_ttl[n_a] = TTL; r_tok[n_a] = t;
     ch_code[i_a] = OK; ch_tok[i_a] = t
  fi
}

/* renew.lua */
inline renew_node(n_r, i_r) {
  if
  :: r_st[n_r] != KHELD -> ch_code[i_r] = NOT_HELD
  :: r_st[n_r] == KHELD && r_lease[n_r] != ch_lease[i_r] -> ch_code[i_r] = HELD_BY_OTHER
  :: r_st[n_r] == KHELD && r_lease[n_r] == ch_lease[i_r] ->
     r_ttl[n_r] = TTL; ch_code[i_r] = OK; ch_tok[i_r] = r_tok[n_r]
  fi
}

/* _release.lua (release.lua) and undo.lua: compare-and-delete */
inline release_node(n_r, i_r) {
  if
  :: r_st[n_r] != KHELD -> ch_code[i_r] = NOT_HELD
  :: r_st[n_r] == KHELD && r_lease[n_r] != ch_lease[i_r] -> ch_code[i_r] = HELD_BY_OTHER
  :: r_st[n_r] == KHELD && r_lease[n_r] == ch_lease[i_r] ->
     ch_code[i_r] = OK; ch_tok[i_r] = r_tok[n_r];
     r_st[n_r] = KFREE; r_lease[n_r] = 0; r_ttl[n_r] = 0; r_tok[n_r] = 0
  fi
}

/* fence_raise.lua: never lowers the counter; the lease's lock takes the token */
inline raise_node(n_f, i_f) {
  if :: r_fence[n_f] < ch_arg[i_f] -> r_fence[n_f] = ch_arg[i_f] :: else -> skip fi;
  if
  :: r_st[n_f] == KHELD && r_lease[n_f] == ch_lease[i_f] -> r_tok[n_f] = ch_arg[i_f]; ch_code[i_f] = OK
  :: else -> ch_code[i_f] = NOT_HELD
  fi
}
#endif

inline exec_node(n_e, i_e) {
  if
  :: ch_op[i_e] == OP_ACQUIRE -> acquire_node(n_e, i_e)
  :: ch_op[i_e] == OP_RENEW -> renew_node(n_e, i_e)
  :: ch_op[i_e] == OP_RELEASE || ch_op[i_e] == OP_UNDO -> release_node(n_e, i_e)
  :: ch_op[i_e] == OP_RAISE -> raise_node(n_e, i_e)
  fi
}

/* one call reaches node n: lost on the way, or run and answered, or run and
 * its reply lost */
inline serve(n_s, i_s, c_s) {
  if
  :: faults < FAULTS -> faults++; ch_st[i_s] = S_LOST
#ifdef TRACE
     ; printf("TR request lost: client %d node %d op %d\n", c_s, n_s, ch_op[i_s])
#endif
  :: exec_node(n_s, i_s);
     if
#ifdef SLOWREPLY
     :: ch_st[i_s] = S_DONE
#else
     /* the reply reaches lockd in the same step (a reply's delay is a
      * request's: see README) */
     :: ch_st[i_s] = S_DONE; node_reply(c_s, n_s); ZAP
#endif
     :: faults < FAULTS -> faults++; ch_st[i_s] = S_LOST
#ifdef TRACE
        ; printf("TR reply lost: client %d node %d op %d\n", c_s, n_s, ch_op[i_s])
#endif
     fi
  fi;
  t = 0
}

/* ---- lockd: backend_redlock.c over three node layers (backend_redis.c) */

/* ra_gate: while a node is re-asserted nothing reaches it; in its grace no
 * acquire does. Answered at once, nothing sent. */
#define gated(n, op) (r_busy[n] || (op == OP_ACQUIRE && r_grace[n] > 0))

/* cmd_submit on node n's layer (rb_submit / redis_lock_*) */
inline node_submit(c_ns, n_ns, op_ns, arg_ns) {
  i = c_ns*NR + n_ns;
  assert(ch_st[i] == S_IDLE);
  ch_op[i] = op_ns; ch_lease[i] = cl_lease[c_ns]; ch_arg[i] = arg_ns;
  ch_code[i] = 0; ch_tok[i] = 0; ch_wb[i] = 0;
  if
  :: gated(n_ns, op_ns) -> ch_code[i] = RECOVERING; ch_st[i] = S_DONE
  :: else -> ch_st[i] = S_SENT
  fi
}

/* fan_out: call_new, then every node at once */
inline rl_submit(c_rs, op_rs) {
  k_op[c_rs] = op_rs; k_ph[c_rs] = PH_OPEN; k_ans[c_rs] = 0; k_age[c_rs] = 0;
  k_now[c_rs] = wall; k_tok[c_rs] = 0; k_wbp[c_rs] = 0; k_wbok[c_rs] = 0;
#ifdef RLSH
  k_seen[c_rs] = (op_rs == OP_ACQUIRE -> g_last_tok : 0);
#ifdef RL_UNIQUE
  /* a counter already at the rounded floor: raced before it was sent */
  k_race[c_rs] = (op_rs == OP_ACQUIRE && l_mode[cl_lease[c_rs]] == M_S &&
                  (r_fence[0] >= k_now[c_rs] + (VM - k_now[c_rs] % VM) % VM ||
                   r_fence[1] >= k_now[c_rs] + (VM - k_now[c_rs] % VM) % VM ||
                   r_fence[2] >= k_now[c_rs] + (VM - k_now[c_rs] % VM) % VM));
#endif
#endif
  n = 0;
  do
  :: n < NR ->
     s_done[c_rs*NR + n] = 0; s_code[c_rs*NR + n] = 0; s_tok[c_rs*NR + n] = 0;
     node_submit(c_rs, n, op_rs, k_now[c_rs]); n++
  :: else -> break
  od
}

/* undo_node: compare-and-delete with the acquire's lease; glog_drop */
inline undo_node(c_u, n_u) {
  gl_left[n_u*NLEASE + cl_lease[c_u]] = 0; gl_tok[n_u*NLEASE + cl_lease[c_u]] = 0;
  i = c_u*NR + n_u;
  if
  :: ch_st[i] == S_IDLE -> node_submit(c_u, n_u, OP_UNDO, 0)
  :: else -> ch_undo[i] = 1 /* behind the late fence_raise on that connection */
  fi
}

/* redis_lock_fence_raise: glog_token, then fence_raise.lua */
inline raise(c_r, n_r, wb_r) {
  if
  :: gl_left[n_r*NLEASE + cl_lease[c_r]] > 0 -> gl_tok[n_r*NLEASE + cl_lease[c_r]] = k_tok[c_r]
  :: else -> skip
  fi;
  node_submit(c_r, n_r, OP_RAISE, k_tok[c_r]);
  ch_wb[c_r*NR + n_r] = wb_r
}

#define idle(c) (ch_st[(c)*NR] == S_IDLE && ch_st[(c)*NR+1] == S_IDLE && ch_st[(c)*NR+2] == S_IDLE && \
                 !ch_undo[(c)*NR] && !ch_undo[(c)*NR+1] && !ch_undo[(c)*NR+2])
#define maybe_granted(i) (s_done[i] && (s_code[i] == OK || s_code[i] == BACKEND_DOWN))

/* tally_of */
inline tally(c_t) {
  ok = 0; pend = 0; ans = 0; nh = 0; oth = 0;
  m = 0;
  do
  :: m < NR ->
     i = c_t*NR + m;
     if
     :: !s_done[i] -> pend++
     :: s_done[i] && (s_code[i] == BACKEND_DOWN || s_code[i] == RECOVERING) -> skip
     :: s_done[i] && s_code[i] != BACKEND_DOWN && s_code[i] != RECOVERING ->
        ans++;
        if
        :: s_code[i] == OK -> ok++
        :: s_code[i] == NOT_HELD -> nh++
        :: s_code[i] == HELD_BY_OTHER -> oth++
        :: else -> skip
        fi
     fi;
     m++
  :: else -> break
  od
}

/* call_answer: what the engine answers the client */
inline answer(c_an, code_an) {
  k_ans[c_an] = 1;
#ifdef TRACE
  printf("TR lockd answers client %d op %d lease %d: code %d token %d\n", c_an, k_op[c_an], cl_lease[c_an], code_an, k_tok[c_an]);
#endif
  if
  :: k_op[c_an] == OP_ACQUIRE && code_an == OK ->
     prop_exclusive(cl_lease[c_an]);
#ifdef RLSH
     /* (2) of shared mode: every grant above every token answered before
      * its acquire was sent; an exclusive grant above every token answered
      * before it, a shared one above every exclusive one answered before
      * it. (Concurrent readers: see README, "Redlock's shared mode".) */
     assert(k_tok[c_an] > k_seen[c_an]);
     if
     :: l_mode[cl_lease[c_an]] == M_X ->
        assert(k_tok[c_an] > g_last_tok); g_last_x = k_tok[c_an]
     :: else -> assert(k_tok[c_an] > g_last_x)
     fi;
#ifdef RL_UNIQUE
     /* no token granted twice, as one Redis keeps DESIGN.md's "Fencing
      * tokens": two concurrent readers got the same one before a shared
      * stepped vote took the node's residue (README, "Redlock's shared mode";
      * -DMUT_RLSH_NO_RESIDUE) */
     assert(g_tok_ls[k_tok[c_an]] == 0);
#endif
     if :: k_tok[c_an] > g_last_tok -> g_last_tok = k_tok[c_an] :: else -> skip fi;
     g_tok_ls[k_tok[c_an]] = g_tok_ls[k_tok[c_an]] | (1 << cl_lease[c_an]);
#else
     assert(k_tok[c_an] > g_last_tok);                     /* (2) */
     g_last_tok = k_tok[c_an];
     g_tok_lease[k_tok[c_an]] = cl_lease[c_an];
#endif
     g_live[cl_lease[c_an]] = TTL - k_age[c_an] - VD;
     cl_tok[c_an] = k_tok[c_an]; cl_st[c_an] = C_HOLD
  :: k_op[c_an] == OP_ACQUIRE && code_an != OK -> cl_st[c_an] = C_IDLE
  :: k_op[c_an] == OP_RENEW && code_an == OK ->
     prop_exclusive(cl_lease[c_an]);
     g_live[cl_lease[c_an]] = TTL - k_age[c_an] - VD;
     cl_tok[c_an] = k_tok[c_an]
  :: k_op[c_an] == OP_RENEW && (code_an == NOT_HELD || code_an == HELD_BY_OTHER) ->
     cl_st[c_an] = C_IDLE /* lost: stop */
  :: k_op[c_an] == OP_RENEW && code_an == BACKEND_DOWN -> skip
  :: k_op[c_an] == OP_RELEASE -> cl_st[c_an] = C_IDLE
  fi
}

/* acq_fail_answer */
inline acq_fail_answer(c_fa) {
  tally(c_fa);
  if
  :: k_ans[c_fa] -> skip
  :: !k_ans[c_fa] && ans >= QUORUM -> answer(c_fa, LOCKED)
  :: !k_ans[c_fa] && ans < QUORUM && ans + pend < QUORUM -> answer(c_fa, BACKEND_DOWN)
  :: else -> skip
  fi
}

/* acq_fail, and acq_finish's undo */
inline undo_all(c_ua) {
  k_ph[c_ua] = PH_FAIL;
  n = 0;
  do
  :: n < NR -> if :: maybe_granted(c_ua*NR + n) -> undo_node(c_ua, n) :: else -> skip fi; n++
  :: else -> break
  od
}

/* acq_finish: a majority known to count past the token, within validity */
inline acq_finish(c_f) {
  if
  :: k_wbok[c_f] < QUORUM -> undo_all(c_f); answer(c_f, BACKEND_DOWN)
  :: k_wbok[c_f] >= QUORUM && TTL <= k_age[c_f] + VD -> undo_all(c_f); answer(c_f, LOCKED)
  :: else -> answer(c_f, OK)
  fi
}

/* acq_grant: the token is the majority's largest counter; every node that
 * answered below it (or refused) raises its counter before the answer */
inline acq_grant(c_g) {
  k_ph[c_g] = PH_GRANT;
  k_tok[c_g] = 0;
  n = 0;
  do
  :: n < NR ->
     i = c_g*NR + n;
     if :: s_done[i] && s_code[i] == OK && s_tok[i] > k_tok[c_g] -> k_tok[c_g] = s_tok[i] :: else -> skip fi;
     n++
  :: else -> break
  od;
  k_wbp[c_g] = 0; k_wbok[c_g] = 0;
  n = 0;
  do
  :: n < NR ->
     i = c_g*NR + n;
     if
     :: !s_done[i] || s_code[i] == BACKEND_DOWN -> skip
#ifdef MUT_RL_NO_WRITEBACK
     :: else -> if :: s_code[i] == OK -> k_wbok[c_g]++ :: else -> skip fi
#else
     :: s_done[i] && s_code[i] == OK && s_tok[i] == k_tok[c_g] -> k_wbok[c_g]++
     :: else ->
#if defined(RLSH) && defined(RL_UNIQUE)
        /* an unraced reader's OK votes agree: no write-back to them */
        assert(s_code[i] != OK || l_mode[cl_lease[c_g]] != M_S || k_race[c_g]);
#endif
        k_wbp[c_g]++; raise(c_g, n, 1)
#endif
     fi;
     n++
  :: else -> break
  od;
  if
  :: k_wbp[c_g] == 0 -> acq_finish(c_g)
  :: else -> skip
  fi
}

/* acq_eval: one node's vote arrived */
inline acq_eval(c_e, n_e) {
  i = c_e*NR + n_e;
  if
  :: k_ph[c_e] == PH_FAIL ->
     if :: maybe_granted(i) -> undo_node(c_e, n_e) :: else -> skip fi;
     acq_fail_answer(c_e)
  :: k_ph[c_e] == PH_GRANT ->
     /* late_raise: a late vote takes the lock's token; nobody waits */
#ifndef MUT_RL_NO_WRITEBACK
     if
     :: s_code[i] != BACKEND_DOWN && (s_code[i] != OK || s_tok[i] != k_tok[c_e]) && k_tok[c_e] > 0 ->
        raise(c_e, n_e, 0)
     :: else -> skip
     fi
#else
     skip
#endif
  :: k_ph[c_e] == PH_OPEN ->
     tally(c_e);
     if
#ifdef MUT_RLSH_MINORITY
     /* a shared acquire counted granted on one node */
     :: ok >= QUORUM || (l_mode[cl_lease[c_e]] == M_S && ok >= 1) -> acq_grant(c_e)
     :: ok < QUORUM && !(l_mode[cl_lease[c_e]] == M_S && ok >= 1) && ok + pend < QUORUM -> undo_all(c_e); acq_fail_answer(c_e)
#else
     :: ok >= QUORUM -> acq_grant(c_e)
     :: ok < QUORUM && ok + pend < QUORUM -> undo_all(c_e); acq_fail_answer(c_e)
#endif
     :: else -> skip
     fi
  fi
}

/* agree_eval: renew and release */
inline agree_eval(c_ag) {
  if
  :: k_ans[c_ag] -> skip
  :: else ->
     tally(c_ag);
     if
     :: ok >= QUORUM ->
        /* renew_token: the token a majority renewed under (the largest, as
         * before the fix, with -DMUT_RL_RENEW_MAX) */
        k_tok[c_ag] = 0;
        m = 0;
        do
        :: m < NR ->
           i = c_ag*NR + m;
#ifdef MUT_RL_RENEW_MAX
           if :: s_done[i] && s_code[i] == OK && s_tok[i] > k_tok[c_ag] -> k_tok[c_ag] = s_tok[i] :: else -> skip fi;
#else
           if
           :: s_done[i] && s_code[i] == OK ->
              l = 0; wb = 0;
              do
              :: l < NR ->
                 if :: s_done[c_ag*NR + l] && s_code[c_ag*NR + l] == OK && s_tok[c_ag*NR + l] == s_tok[i] -> wb++ :: else -> skip fi;
                 l++
              :: else -> break
              od;
              if :: wb >= QUORUM -> k_tok[c_ag] = s_tok[i] :: else -> skip fi
           :: else -> skip
           fi;
#endif
           m++
        :: else -> break
        od;
        if
        :: k_op[c_ag] == OP_RENEW && k_tok[c_ag] == 0 && pend > 0 -> skip /* the rest may settle it */
        :: k_op[c_ag] == OP_RENEW && k_tok[c_ag] == 0 && pend == 0 -> answer(c_ag, BACKEND_DOWN)
        :: k_op[c_ag] == OP_RENEW && k_tok[c_ag] != 0 && TTL <= k_age[c_ag] + VD -> answer(c_ag, BACKEND_DOWN)
        :: else -> answer(c_ag, OK)
        fi
     :: ok < QUORUM && ok + pend >= QUORUM -> skip
     :: ok + pend < QUORUM && ans >= QUORUM -> answer(c_ag, (oth > nh -> HELD_BY_OTHER : NOT_HELD))
     :: ok + pend < QUORUM && ans < QUORUM && ans + pend < QUORUM -> answer(c_ag, BACKEND_DOWN)
     :: else -> skip
     fi
  fi
}

/* a reply from node n reaches lockd: the node layer's callback
 * (handle_acquire's note_grant, note_owner_result: the grants table), then
 * backend_redlock.c's sub_done / wb_done / the ignored late ones */
inline node_reply(c_r, n_r) {
  i = c_r*NR + n_r;
  rc = (ch_st[i] == S_LOST -> BACKEND_DOWN : ch_code[i]);
  tk = ch_tok[i]; op = ch_op[i]; wb = ch_wb[i];
  gi = n_r*NLEASE + cl_lease[c_r];
  if
  :: op == OP_ACQUIRE && rc == OK && k_age[c_r] < TTL -> gl_left[gi] = TTL - k_age[c_r]; gl_tok[gi] = tk
  :: op == OP_RENEW && rc == OK && k_age[c_r] < TTL && gl_left[gi] > 0 -> gl_left[gi] = TTL - k_age[c_r]
  :: op == OP_RELEASE && (rc == OK || rc == NOT_HELD || rc == HELD_BY_OTHER) -> gl_left[gi] = 0; gl_tok[gi] = 0
  :: else -> skip
  fi;
  ch_st[i] = S_IDLE; ch_op[i] = 0; ch_lease[i] = 0; ch_arg[i] = 0; ch_code[i] = 0; ch_tok[i] = 0; ch_wb[i] = 0;
  if
  :: op == OP_ACQUIRE || op == OP_RENEW || op == OP_RELEASE ->
     s_done[i] = 1; s_code[i] = rc; s_tok[i] = tk;
     if
     :: op == OP_ACQUIRE -> acq_eval(c_r, n_r)
     :: else -> agree_eval(c_r)
     fi
  :: op == OP_RAISE && wb ->
     /* wb_done: the counter was raised either way */
     if :: rc == OK || rc == NOT_HELD -> k_wbok[c_r]++ :: else -> skip fi;
     k_wbp[c_r]--;
     if :: k_wbp[c_r] == 0 -> acq_finish(c_r) :: else -> skip fi
  :: else -> skip /* a late raise or an undo: nobody waits */
  fi;
  if /* what was queued behind it on the connection */
  :: ch_undo[c_r*NR + n_r] -> ch_undo[c_r*NR + n_r] = 0; node_submit(c_r, n_r, OP_UNDO, 0)
  :: else -> skip
  fi;
  if /* call_unref's last reference: the call is gone (no state kept by a dead value) */
  :: k_ans[c_r] && idle(c_r) ->
     k_op[c_r] = 0; k_ph[c_r] = 0; k_age[c_r] = 0; k_now[c_r] = 0; k_tok[c_r] = 0; k_wbp[c_r] = 0; k_wbok[c_r] = 0;
#ifdef RLSH
     k_seen[c_r] = 0;
#ifdef RL_UNIQUE
     k_race[c_r] = 0;
#endif
#endif
     m = 0;
     do
     :: m < NR -> s_done[c_r*NR + m] = 0; s_code[c_r*NR + m] = 0; s_tok[c_r*NR + m] = 0; m++
     :: else -> break
     od
  :: else -> skip
  fi
}

#define replied(i) (ch_st[i] == S_DONE || ch_st[i] == S_LOST)

proctype nodes()
{
  byte x, cx, nx, t, i, n, m, l, ok, pend, ans, nh, oth, rc, tk, op, gi, wb;
#ifdef RLSH
  byte hx, hs;
#endif
end:
  do
  :: atomic {
       if
       :: ch_st[0] == S_SENT -> x = 0
       :: ch_st[1] == S_SENT -> x = 1
       :: ch_st[2] == S_SENT -> x = 2
       :: ch_st[3] == S_SENT -> x = 3
       :: ch_st[4] == S_SENT -> x = 4
       :: ch_st[5] == S_SENT -> x = 5
#if NC > 2
       :: ch_st[6] == S_SENT -> x = 6
       :: ch_st[7] == S_SENT -> x = 7
       :: ch_st[8] == S_SENT -> x = 8
#endif
       fi;
       cx = x / NR; nx = x % NR;
       serve(nx, x, cx);
       x = 0; cx = 0; nx = 0 }
  od
}

/* a client and the lockd loop serving its calls */
proctype client(byte c)
{
  byte a, r, x, i, n, m, l, ok, pend, ans, nh, oth, rc, tk, op, gi, wb;
end:
  do
  /* lockd: a node's reply */
  :: atomic {
       if
       :: replied(c*NR) -> x = 0
       :: replied(c*NR+1) -> x = 1
       :: replied(c*NR+2) -> x = 2
       fi;
       node_reply(c, x); x = 0; ZAP }
  /* the application */
  :: atomic { cl_st[c] == C_IDLE && a < (c == 0 -> K : K1) && idle(c) ->
              cl_lease[c] = LEASE(c, a); a++; r = 0; cl_st[c] = C_WAITING; cl_tok[c] = 0;
#ifdef RLSH
              /* the mode it asks: client 0 either, client 1 shared */
              if
#if !defined(RLSH_X1) && !defined(RLIDX_LATE)
              :: c == 0 -> l_mode[cl_lease[c]] = M_X
#elif defined(RLIDX_LATE)
              /* the directed search: readers only */
#else
              :: l_mode[cl_lease[c]] = M_X
#endif
              :: l_mode[cl_lease[c]] = M_S
              fi;
#endif
              rl_submit(c, OP_ACQUIRE); ZAP }
  :: atomic { cl_st[c] == C_HOLD -> client_write(c) }
  :: atomic { cl_st[c] == C_HOLD && k_ans[c] && r < RENEWS && idle(c) -> r++; rl_submit(c, OP_RENEW); ZAP }
  :: atomic { cl_st[c] == C_HOLD && k_ans[c] && idle(c) ->
              g_live[cl_lease[c]] = 0; /* it stops using the lock */
              cl_st[c] = C_WAITING; rl_submit(c, OP_RELEASE); ZAP }
  :: cl_st[c] == C_HOLD -> cl_st[c] = C_DONE /* crashes: its lease runs out */
  od
}

/* a node restarts (with or without its data); the connections to it drop.
 * lockd sees a new process before any command reaches it (on_restart):
 * re-asserts its grants table there (reassert.lua), then grace when data
 * was lost */
proctype restarter()
{
  byte n, c, i, l;
#ifdef RLSH
  byte m, hx, hs;
#endif
  bit lost;
end:
  do
  :: atomic { restarts < RESTARTS ->
       restarts++;
       if :: n = 0 :: n = 1 :: n = 2 fi;
       if
       :: lost = 0 /* persisted: keys and counter survive */
#ifdef RLSH
       :: lost = 1; r_fence[n] = 0;
          l = 1;
          do
          :: l < NLEASE -> h_ttl[n*NLEASE + l] = 0; h_tok[n*NLEASE + l] = 0; h_x[n*NLEASE + l] = 0; l++
          :: else -> break
          od;
          l = 0
#else
       :: lost = 1; r_st[n] = KFREE; r_lease[n] = 0; r_ttl[n] = 0; r_tok[n] = 0; r_fence[n] = 0
#endif
       fi;
       c = 0;
       do
       :: c < NC -> i = c*NR + n; if :: ch_st[i] == S_SENT -> ch_st[i] = S_LOST :: else -> skip fi; c++
       :: else -> break
       od;
       r_busy[n] = 1 }
     atomic { /* reassert.lua over the grants table */
#ifdef RLSH
       race(NC);
#endif
       l = 1;
       do
       :: l < NLEASE ->
          i = n*NLEASE + l;
          if
          :: gl_left[i] > 0 ->
             if :: r_fence[n] < gl_tok[i] -> r_fence[n] = gl_tok[i] :: else -> skip fi;
#ifdef RLSH
             /* an exclusive lease back on a name nobody holds; a shared
              * one (put_shared) beside readers, never over a writer */
             hx = 0; hs = 0; m = 1;
             do
             :: m < NLEASE ->
                if
                :: m != l && h_ttl[n*NLEASE + m] > 0 -> if :: h_x[n*NLEASE + m] -> hx++ :: else -> hs++ fi
                :: else -> skip
                fi;
                m++
             :: else -> break
             od;
             if
             :: h_ttl[i] == 0 && hx == 0 && (l_mode[l] == M_S || hs == 0) ->
                h_ttl[i] = gl_left[i]; h_tok[i] = gl_tok[i]; h_x[i] = (l_mode[l] == M_X); lost = 1
             :: else -> skip
             fi;
             hx = 0; hs = 0; m = 0
#else
             if
             :: r_st[n] == KFREE ->
                r_st[n] = KHELD; r_lease[n] = l; r_tok[n] = gl_tok[i]; r_ttl[n] = gl_left[i]; lost = 1
             :: else -> skip
             fi
#endif
          :: else -> skip
          fi;
          l++
       :: else -> break
       od;
       if :: lost -> r_grace[n] = GRACE :: else -> skip fi;
       r_busy[n] = 0;
       n = 0; c = 0; i = 0; l = 0; lost = 0 }
  od
}

/* one tick of node n's clock: its keys expire (PX) */
#ifdef RLSH
/* each holder expires on its own (PX, or its score in '<lock>:z') */
inline node_tick(n_t) {
  m = 1;
  do
  :: m < NLEASE ->
     if
     :: h_ttl[n_t*NLEASE + m] > 1 -> h_ttl[n_t*NLEASE + m]--
     :: h_ttl[n_t*NLEASE + m] == 1 -> h_ttl[n_t*NLEASE + m] = 0; h_tok[n_t*NLEASE + m] = 0
#ifdef TRACE
        ; printf("TR node %d: lease %d expires, counter %d before\n", n_t, m, r_fence[n_t])
#endif
#ifdef RLIDX
        ; left_node(n_t, h_x[n_t*NLEASE + m]) /* counted by the next script there (sh_trim, sh_fence), before anything reads */
#endif
        ; h_x[n_t*NLEASE + m] = 0
     :: else -> skip
     fi;
     m++
  :: else -> break
  od;
#ifdef RLIDX
  set_gone(n_t);
#endif
  m = 0
}
#else
inline node_tick(n_t) {
  if
  :: r_ttl[n_t] > 1 -> r_ttl[n_t]--
  :: r_ttl[n_t] == 1 -> r_st[n_t] = KFREE; r_lease[n_t] = 0; r_ttl[n_t] = 0; r_tok[n_t] = 0
  :: else -> skip
  fi
}
#endif

/* one tick of lockd's clock; each node ticks with it unless it is ahead */
inline lockd_tick() {
#ifdef TRACE
  printf("TR tick\n");
#endif
  l = 1;
  do
  :: l < NLEASE -> if :: g_live[l] > 0 -> g_live[l]-- :: else -> skip fi; l++
  :: else -> break
  od;
  l = 0;
  do
  :: l < NR*NLEASE -> if :: gl_left[l] > 1 -> gl_left[l]-- :: gl_left[l] == 1 -> gl_left[l] = 0; gl_tok[l] = 0 :: else -> skip fi; l++
  :: else -> break
  od;
  l = 0;
  do
  :: l < NC -> if :: k_op[l] != 0 && k_age[l] < TTL -> k_age[l]++ :: else -> skip fi; l++
  :: else -> break
  od;
  n = 0;
  do
  :: n < NR ->
     if :: r_grace[n] > 0 -> r_grace[n]-- :: else -> skip fi;
     if :: r_skew[n] > 0 -> r_skew[n]-- :: else -> node_tick(n) fi;
     n++
  :: else -> break
  od;
  wall = maxc + 1;  /* the wall clock passed every token of an earlier tick */
  l = 0; n = 0
}

proctype clock()
{
  byte l, n;
#ifdef RLSH
  byte m;
#endif
#ifdef RLIDX
  byte hx, hs;
#endif
end:
  do
#if !defined(RLIDX_LATE) && !defined(RLIDX_STILL)
  :: atomic { lockd_tick() }
#else
  :: atomic { false -> lockd_tick() } /* the directed searches: time stands still */
#endif
#if RDRIFT > 0
  :: atomic { r_skew[0] < RDRIFT -> r_skew[0]++; node_tick(0) }
  :: atomic { r_skew[1] < RDRIFT -> r_skew[1]++; node_tick(1) }
  :: atomic { r_skew[2] < RDRIFT -> r_skew[2]++; node_tick(2) }
#endif
  od
}

#ifdef RLIDX
/* ---- -DRLIDX: a watcher's inspect (bk_req.wait) and the name's index
 * (DESIGN.md "Watching"; backend_redlock.c inspect_eval, view_eval,
 * majority_index, level_counters; inspect.lua). WI inspects one after the
 * other; each goes to the three nodes at once, and each node's inspect.lua
 * is one atomic step at any moment (between the clients' scripts there),
 * never lost (no node down: RESTARTS 0, see README). After each read the
 * call is evaluated as inspect_eval does: the majority view (the leases a
 * majority list with one token), its index (2T exclusive, 2C shared, 2C+1
 * otherwise; C the quorum-th largest counter read, known as majority_index
 * says), and, with two readers or more in the view, every node awaited
 * and, when their counters differ, each lagging node read again with the
 * largest, M, as its floor (raise, then read: level_counters, PH_LEVEL),
 * answered from those reads. */
#ifndef WI
#define WI 2
#endif
byte w_n;               /* inspects begun */
byte w_ph;              /* 0 idle, 1 first reads, 2 the levelling reads (PH_LEVEL) */
bit  w_rd[NR];          /* node n's read is in (rl_sub done) */
byte w_c[NR];           /* the counter node n's inspect read (its index / 2) */
byte w_ht[NR*NLEASE];   /* the token node n listed lease l with; 0: not listed */
byte w_floor;           /* the levelling floor M */
byte w_gm;              /* ghost: the leases gone at every read so far (no node
                         * holds it, no call of it on its way: its release's
                         * fan-out or its expiry is through) */
/* ghosts: the last answer */
bit  g_wany;
byte g_wv;              /* its view: the leases it listed, a bit each */
byte g_wi;              /* its index */
byte g_wl;              /* the leases any node listed in its reads */

/* inspect.lua on node n_w: the floor first (levelling), then the read */
inline w_read(n_w) {
  if
  :: w_ph == 2 ->
     race(NC);
     if :: r_fence[n_w] < w_floor -> r_fence[n_w] = w_floor :: else -> skip fi
  :: else -> skip
  fi;
#ifdef MUT_RLIDX_RAISE_ONLY
  /* levelled by the raise alone: the answer keeps the first read's holders */
  if
  :: w_ph == 2 -> w_c[n_w] = w_floor
  :: else ->
#endif
  w_c[n_w] = r_fence[n_w];
  l = 1;
  do
  :: l < NLEASE -> w_ht[n_w*NLEASE + l] = (h_ttl[n_w*NLEASE + l] > 0 -> h_tok[n_w*NLEASE + l] : 0); l++
  :: else -> break
  od;
#ifdef MUT_RLIDX_RAISE_ONLY
  fi;
#endif
  w_rd[n_w] = 1;
  l = 1;
  do
  :: l < NLEASE ->
     if
     :: h_ttl[l] > 0 || h_ttl[NLEASE + l] > 0 || h_ttl[2*NLEASE + l] > 0 ||
        (ch_lease[0] == l && ch_st[0] == S_SENT) || (ch_lease[1] == l && ch_st[1] == S_SENT) ||
        (ch_lease[2] == l && ch_st[2] == S_SENT) || (ch_lease[3] == l && ch_st[3] == S_SENT) ||
        (ch_lease[4] == l && ch_st[4] == S_SENT) || (ch_lease[5] == l && ch_st[5] == S_SENT) ||
        (l == cl_lease[0] && cl_st[0] != C_IDLE && cl_st[0] != C_DONE) ||
        (l == cl_lease[1] && cl_st[1] != C_IDLE && cl_st[1] != C_DONE) -> w_gm = w_gm & ~(1 << l)
     :: else -> skip
     fi;
     l++
  :: else -> break
  od;
  l = 0;
#ifdef TRACE
  printf("TR watcher reads node %d (phase %d): counter %d, lists", n_w, w_ph, w_c[n_w]);
  l = 1;
  do
  :: l < NLEASE -> if :: w_ht[n_w*NLEASE + l] > 0 -> printf(" lease %d token %d", l, w_ht[n_w*NLEASE + l]) :: else -> skip fi; l++
  :: else -> break
  od;
  printf("\n"); l = 0;
#endif
  skip
}

/* the answer: (P1) the index never goes below an answered one; (P2) a view
 * whose holders differ from the last answer's gets an index that differs
 * from it (with P1: above it, so above every index the old view got),
 * when (st) every lease that left the view was gone from every node, with
 * no call of it on its way, its client done with it, before each read of
 * this answer (earlier, the index may follow later, as majority_index's
 * comment says: a read from before the release), and every lease that
 * joined it was listed by no node the last answer read (a grant, not a
 * late write-back making a holder's tokens agree). NC 2: six channels. */
inline w_answer(v_w, i_w) {
  st = 1; lm = 0; l = 1;
  do
  :: l < NLEASE ->
     if
     :: w_ht[l] > 0 || w_ht[NLEASE + l] > 0 || w_ht[2*NLEASE + l] > 0 -> lm = lm | (1 << l)
     :: else -> skip
     fi;
     /* a lease that left the view was gone before every read of this
      * answer (w_gm) */
     if :: (g_wv & (1 << l)) && !(v_w & (1 << l)) && !(w_gm & (1 << l)) -> st = 0 :: else -> skip fi;
     /* a lease that joined the view was listed nowhere before (a grant,
      * not a late write-back that made its nodes' tokens agree) */
     if :: !(g_wv & (1 << l)) && (v_w & (1 << l)) && (g_wl & (1 << l)) -> st = 0 :: else -> skip fi;
     l++
  :: else -> break
  od;
  l = 0;
#ifdef TRACE
  printf("TR watcher answered: view %d index %d (last: view %d index %d), gone %d\n", v_w, i_w, g_wv, g_wi, st);
#endif
  if
  :: g_wany ->
#ifndef RLIDX_NO_P1
     assert(i_w >= g_wi);                        /* (P1) */
#endif
     assert(v_w == g_wv || !st || i_w != g_wi)   /* (P2) */
  :: else -> skip
  fi;
  g_wany = 1; g_wv = v_w; g_wi = i_w; g_wl = lm; st = 0; lm = 0;
  w_ph = 0; w_floor = 0; w_gm = 0;
  n = 0;
  do
  :: n < NR -> w_rd[n] = 0; w_c[n] = 0; n++
  :: else -> break
  od;
  n = 0;
  do
  :: n < NR*NLEASE -> w_ht[n] = 0; n++
  :: else -> break
  od;
  n = 0
}

/* inspect_eval after each read */
inline w_eval() {
  pend = NR - w_rd[0] - w_rd[1] - w_rd[2];
  /* view_eval: a lease is in the view when a majority list it with one
   * token (same_holder, holder_votes); unsettled while the silent nodes
   * could still make one */
  vm = 0; nv = 0; xt = 0; ok = 1; fr = 0;
  l = 1;
  do
  :: l < NLEASE ->
     n = 0;
     do
     :: n < NR ->
        if
        :: w_rd[n] && w_ht[n*NLEASE + l] > 0 ->
           m = 0; vt = 0;
           do
           :: m < NR -> if :: w_rd[m] && w_ht[m*NLEASE + l] == w_ht[n*NLEASE + l] -> vt++ :: else -> skip fi; m++
           :: else -> break
           od;
           if
           :: vt >= QUORUM && (vm & (1 << l)) == 0 ->
              vm = vm | (1 << l); nv++;
              if :: l_mode[l] == M_X -> xt = w_ht[n*NLEASE + l] :: else -> skip fi
           :: vt < QUORUM && vt + pend >= QUORUM -> ok = 0
           :: else -> skip
           fi
        :: else -> skip
        fi;
        n++
     :: else -> break
     od;
     l++
  :: else -> break
  od;
  n = 0;
  do
  :: n < NR ->
     if :: w_rd[n] -> m = 1; vt = 0;
           do
           :: m < NLEASE -> if :: w_ht[n*NLEASE + m] > 0 -> vt = 1 :: else -> skip fi; m++
           :: else -> break
           od;
           if :: vt == 0 -> fr++ :: else -> skip fi
     :: else -> skip
     fi;
     n++
  :: else -> break
  od;
  if
  :: pend > 0 && (ok == 0 || (nv == 0 && fr < QUORUM)) -> skip /* LK_AGAIN */
  :: else ->
     /* majority_index: c1 the quorum-th largest counter read, c0 the
      * largest (with two reads, k = 1: known when they agree) */
     c0 = 0; c1 = 0; lo = 255;
     n = 0;
     do
     :: n < NR ->
        if
        :: w_rd[n] ->
           if
           :: w_c[n] >= c0 -> c1 = c0; c0 = w_c[n]
           :: w_c[n] < c0 && w_c[n] > c1 -> c1 = w_c[n]
           :: else -> skip
           fi;
           if :: w_c[n] < lo -> lo = w_c[n] :: else -> skip fi
        :: else -> skip
        fi;
        n++
     :: else -> break
     od;
     if
     :: xt > 0 -> ix = 2*xt; kn = 1
     :: else -> ix = 2*c1 + (nv > 0 -> 0 : 1); kn = (c0 == c1 || pend == 0)
     fi;
     /* a watcher's inspect with two readers waits for every node */
     if :: nv >= 2 && pend > 0 -> kn = 0 :: else -> skip fi;
     if
     :: !kn -> skip
#ifndef MUT_RLIDX_NO_LEVEL
     :: kn && nv >= 2 && w_ph == 1 && lo != c0 ->
        /* level_counters: the lagging nodes read again, floor M = c0 */
        w_ph = 2; w_floor = c0;
#ifdef TRACE
        printf("TR watcher levels to %d\n", c0);
#endif
        n = 0;
        do
        :: n < NR -> if :: w_c[n] < c0 -> w_rd[n] = 0 :: else -> skip fi; n++
        :: else -> break
        od;
        n = 0
#endif
     :: else -> w_answer(vm, ix)
     fi
  fi;
  vm = 0; nv = 0; xt = 0; ok = 0; fr = 0; vt = 0; c0 = 0; c1 = 0; lo = 0; ix = 0; kn = 0; pend = 0; l = 0; n = 0; m = 0
}

proctype watcher()
{
  byte l, n, m, pend, vm, nv, xt, ok, fr, vt, c0, c1, lo, ix, kn, st, lm;
end:
  do
#ifndef RLIDX_LATE
  :: atomic { w_ph == 0 && w_n < WI -> w_n++; w_ph = 1; w_gm = 255 }
#else
  /* a directed search: the inspects begin once both clients hold, client
   * 1's acquire still on its way to node 2 (a node that missed a grant) */
  :: atomic { w_ph == 0 && w_n < WI && cl_st[0] == C_HOLD && cl_st[1] == C_HOLD && ch_st[NR + 2] == S_SENT -> w_n++; w_ph = 1; w_gm = 255 }
#endif
  :: atomic { w_ph > 0 && !w_rd[0] -> w_read(0); w_eval() }
  :: atomic { w_ph > 0 && !w_rd[1] -> w_read(1); w_eval() }
  :: atomic { w_ph > 0 && !w_rd[2] -> w_read(2); w_eval() }
  od
}
#endif

init
{
  atomic {
    run nodes();
    run restarter();
    run clock();
    run client(0);
    run client(1)
#ifdef RLIDX
    ; run watcher()
#endif
#if NC > 2
    ; run client(2)   /* -DRLSH -DNC=3: a second reader (K1 acquires) */
#endif
  }
}
