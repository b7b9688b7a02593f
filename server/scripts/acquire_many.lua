-- acquire_many.lua - acquire.lua for several locks in one call. lockd groups
-- the acquires that one turn of its event loop makes (backend_redis.c), so
-- Redis parses, sets up and answers one script call for all of them.
-- KEYS: lock and fence counter of each (2i-1, 2i). ARGV: now_us, once for
-- all (a floor for every token, see _acquire.lua), then acquire.lua's other
-- three arguments of each, in the same order (3i-1 .. 3i+1).
-- Returns one element per lock: what acquire.lua returns for it, or an error
-- when its calls raised one. An error stops that lock alone.
local function acquire(lock, fence, wl, rest, ttl, now)
--#include _acquire.lua
end
--#include _failed.lua
local out, now = {}, ARGV[1]
for i = 1, #KEYS / 2 do
  local a = 3 * i - 1
  local ok, r = pcall(acquire, KEYS[2 * i - 1], KEYS[2 * i], ARGV[a], ARGV[a + 1], ARGV[a + 2], now)
  out[i] = ok and r or failed(r)
end
return out
