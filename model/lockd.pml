/*
 * lockd.pml - the model's root: lockd with a single Redis, NC clients, the
 * clocks. `make model` checks it; README.md says what it stands for.
 */
#include "params.pml"
#include "backend_redis.pml"
#include "engine.pml"
#include "client.pml"
#include "clock.pml"

/* engine_drain: SIGTERM, at any moment (or never) */
proctype drain()
{
  byte j;
  atomic {
    draining = 1;
    j = 0;
    do
    :: j < NC -> waiters_fail(j, SHUTTING_DOWN); j++
    :: else -> break
    od
  }
}

init
{
  byte i;
  atomic {
    i = 0;
    do
    :: i < NC ->
       if :: SESS(i) -> s_alive[i] = 1; s_left[i] = STTL :: else -> skip fi;
       i++
    :: else -> break
    od;
    run redis();
    run janitor();
    run clock();
    i = 0;
    do
    :: i < NC -> run client(i); i++
    :: else -> break
    od;
#ifdef DRAIN
    run drain()
#endif
  }
}

#ifdef LIVE
/* (5) under weak fairness: a waiting acquire (wait_ms unbounded) is
 * answered; attempt_done asserts the answer is a grant or a fault/drain/
 * session code, never 409 */
ltl live { [] ((cl_st[0] == C_WAITING) -> <> (cl_st[0] != C_WAITING)) &&
           [] ((cl_st[1] == C_WAITING) -> <> (cl_st[1] != C_WAITING)) }
#endif
