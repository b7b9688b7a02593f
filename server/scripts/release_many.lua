-- release_many.lua - release.lua for several locks in one call, grouped by
-- lockd as acquire_many.lua's acquires are.
-- KEYS: each lock. ARGV: release.lua's three arguments of each, in the same
-- order (3i-2 .. 3i).
-- Returns one element per lock: what release.lua returns for it, or an error
-- when its calls raised one. An error stops that lock alone.
local function release(lock, lease, delay, chanpub)
--#include _release.lua
end
--#include _failed.lua
local out = {}
for i = 1, #KEYS do
  local a = 3 * i - 2
  local ok, r = pcall(release, KEYS[i], ARGV[a], ARGV[a + 1], ARGV[a + 2])
  out[i] = ok and r or failed(r)
end
return out
