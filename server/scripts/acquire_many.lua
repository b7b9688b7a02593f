-- acquire_many.lua - acquire.lua for several locks in one call. lockd groups
-- the acquires that one turn of its event loop makes (backend_redis.c), so
-- Redis parses, sets up and answers one script call for all of them.
-- KEYS: the lock of each; its fence counter is '<lock>:fence', as
-- acquire.lua's second key (built here rather than sent: one argument less
-- per lock to parse; a group touches keys of many slots anyway, so it runs on
-- a single Redis, not on a cluster). ARGV: now_us, once for all (a floor for
-- every token, see _acquire.lua), then acquire.lua's other three arguments of
-- each, in KEYS order (3i-1 .. 3i+1).
-- Returns one element per lock: what acquire.lua returns for it, or an error
-- when its calls raised one. An error stops that lock alone.
--#include _shared.lua
local function acquire(lock, fence, wl, rest, ttl, now)
--#include _acquire.lua
end
--#include _failed.lua
--#call
local out, now = {}, ARGV[1]
for i = 1, #KEYS do
  local a, lock = 3 * i - 1, KEYS[i]
  local ok, r = pcall(acquire, lock, lock .. ':fence', ARGV[a], ARGV[a + 1], ARGV[a + 2], now)
  out[i] = ok and r or failed(r)
end
return out
