-- acquire_shared_many.lua - acquire_shared.lua for several shared holds or
-- semaphore slots in one call, grouped by lockd as acquire_many.lua's
-- exclusive acquires are (backend_redis.c), in the order lockd queued them
-- (so a name's waiters keep their FIFO order). Redis' clock is read once for
-- all (sh_now).
-- KEYS: the lock of each; its fence counter is '<lock>:fence'. ARGV: now_us,
-- once for all (the latest member's clock: a floor for every token), then
-- acquire_shared.lua's first four arguments of each, in KEYS order
-- (4i-2 .. 4i+1). Or, from a Redlock node: 'v', the vote modulus and the
-- node's residue (sh_step), then acquire_shared.lua's first five of each,
-- its own now_us the fifth (5i-1 .. 5i+3): each member's floor is its own
-- call's, the same on every node (backend_redlock.c says why it must be),
-- so each runs here exactly as its acquire_shared.lua call would. No more
-- readers ride on a grouped acquire.
-- Returns one element per lock: what acquire_shared.lua returns for it, or an
-- error when its calls raised one. An error stops that lock alone.
--#include _shared.lua
local function acquire(lock, fence, wl, rest, ttl, limit, nowus, more, step, sres)
--#include _acquire_shared.lua
end
--#include _failed.lua
--#call
local out, nowus, a, na, step, sres = {}, ARGV[1], 2, 4, nil, nil
if nowus == 'v' then
  a, na, step, sres = 4, 5, ARGV[2], ARGV[3]
end
for i = 1, #KEYS do
  local lock = KEYS[i]
  if step then
    nowus = ARGV[a + 4]
  end
  local ok, r = pcall(acquire, lock, lock .. ':fence', ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], nowus, 0, step, sres)
  out[i] = ok and r or failed(r)
  a = a + na
end
return out
