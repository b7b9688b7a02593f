-- release_handoff.lua - a release that hands the name to lockd's next waiter
-- in the same call (bk_req.handoff): release.lua, then, when it released,
-- acquire.lua (exclusive) or acquire_shared.lua (a semaphore's slot, a
-- reader) for the waiter, as one step. A busy semaphore's pair costs one
-- script call rather than two (bench/RESULTS.md).
-- KEYS: lock, fence counter. ARGV: the acquire's arguments as acquire.lua
-- (4: '<w><lease>', rest, ttl_ms, now_us) or acquire_shared.lua (5:
-- '<w><lease>', rest, ttl_ms, limit, now_us) takes them, then release.lua's
-- (lease, delay_ms, '<channel> <publisher>'): 7 or 8 in all.
-- Returns {release's reply} when it did not release, else {token, the
-- acquire's reply} (an error for it alone when its calls raised one: the
-- release stands).
local lock, fence = KEYS[1], KEYS[2]
local x = #ARGV == 7
local r0 = x and 4 or 5
local chanpub = ARGV[r0 + 3]
local function publish()
  local channel, publisher = string.match(chanpub, '^(.*) (%S*)$')
  redis.call('PUBLISH', channel, publisher)
end
--#include _shared.lua
local function release(lock, lease, delay)
--#include _release.lua
end
local function acquire(lock, fence, wl, rest, ttl, now)
--#include _acquire.lua
end
local function acquire_shared(lock, fence, wl, rest, ttl, limit, nowus, more)
--#include _acquire_shared.lua
end
--#include _failed.lua
local r = release(lock, ARGV[r0 + 1], ARGV[r0 + 2])
if type(r) ~= 'string' then
  return {r}
end
local ok, a
if x then
  ok, a = pcall(acquire, lock, fence, ARGV[1], ARGV[2], ARGV[3], ARGV[4])
else
  ok, a = pcall(acquire_shared, lock, fence, ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], 0)
end
return {r, ok and a or failed(a)}
