/*
 * clock.pml - discrete time. The backend's clock (Redis PX expiry) and
 * lockd's clock (lk_now_ms: timers, session deadlines, watchdog, waiter
 * retries) tick separately; their difference stays within DRIFT ticks
 * (bounded clock-rate drift). The clients' clock is the backend's: the
 * model's real time.
 */
byte skew = DRIFT;      /* DRIFT + backend ticks - lockd ticks, in 0..2*DRIFT */

proctype clock()
{
  byte n, j, l;
end:
  do
#if DRIFT == 0
  /* no drift: both clocks tick in one step */
  :: atomic { backend_tick(); lockd_tick() }
#else
  :: atomic { skew < 2*DRIFT -> backend_tick(); skew++ }
  :: atomic { skew > 0 -> lockd_tick(); skew-- }
#endif
  od
}
