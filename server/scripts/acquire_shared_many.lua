-- acquire_shared_many.lua - acquire_shared.lua for several shared holds or
-- semaphore slots in one call, grouped by lockd as acquire_many.lua's
-- exclusive acquires are (backend_redis.c), in the order lockd queued them
-- (so a name's waiters keep their FIFO order). Redis' clock is read once for
-- all (sh_now).
-- KEYS: the lock of each; its fence counter is '<lock>:fence'. ARGV: now_us,
-- once for all (the latest member's clock: a floor for every token), then
-- acquire_shared.lua's first four arguments of each, in KEYS order
-- (4i-2 .. 4i+1). No more readers ride on a grouped acquire, and a
-- Redlock node's shared acquires are never grouped (their floor is their
-- own: backend_redlock.c), so no vote residue comes here.
-- Returns one element per lock: what acquire_shared.lua returns for it, or an
-- error when its calls raised one. An error stops that lock alone.
--#include _shared.lua
local function acquire(lock, fence, wl, rest, ttl, limit, nowus, more, step, sres)
--#include _acquire_shared.lua
end
--#include _failed.lua
--#call
local out, nowus = {}, ARGV[1]
for i = 1, #KEYS do
  local a, lock = 4 * i - 2, KEYS[i]
  local ok, r = pcall(acquire, lock, lock .. ':fence', ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], nowus, 0, nil, nil)
  out[i] = ok and r or failed(r)
end
return out
