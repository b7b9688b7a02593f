-- release_many.lua - release.lua for several locks in one call, grouped by
-- lockd as acquire_many.lua's acquires are. Only releases without a
-- lock-delay are grouped, and all of one call come from one lockd, so what
-- release.lua takes per lock is here the lease alone: Redis parses and sets
-- up one argument per lock instead of three.
-- KEYS: each lock. ARGV: the publisher (the lockd's instance id), the length
-- of the key prefix (the channel is built from the key, and only when a
-- release is published), then the lease of each lock in KEYS order.
-- Returns one element per lock: what release.lua returns for it, or an error
-- when its calls raised one. An error stops that lock alone.
local publisher, plen -- set per call (below)
local function publish(lock)
  redis.call('PUBLISH', string.sub(lock, 1, plen) .. 'released:' .. string.sub(lock, plen + 1), publisher)
end
--#include _shared.lua
local function release(lock, lease, delay)
--#include _release.lua
end
--#include _failed.lua
--#call
publisher, plen = ARGV[1], ARGV[2] + 0
local out = {}
for i = 1, #KEYS do
  local ok, r = pcall(release, KEYS[i], ARGV[i + 2], '0')
  out[i] = ok and r or failed(r)
end
return out
