-- force_release.lua - an operator's force-unlock (DESIGN.md §Operators):
-- drop every holder of a lock whatever its lease, exclusive or shared
-- (_shared.lua's keys too), and leave no lock-delay. Always publishes, as a
-- release a waiter asked to hear of does: it is rare, and every lockd's
-- waiters and watchers must learn of it.
-- KEYS: lock. ARGV: '<channel> <publisher>'.
-- Returns the highest token released, as a string; {0} nobody holds it.
--#include _shared.lua
--#call
sh_load() -- (a rare script: its helpers made at once, as before)
local lock = KEYS[1]
local v = redis.call('GET', lock)
if not v or v == 'd' then
  return {0}
end
local top = 0
if string.byte(v) == 116 then
  -- a lone shared holder (_shared.lua): as an exclusive one, index 2n to 2n+1
  top = tonumber(string.match(v, '^t%S* %d+ (%d+)')) or 0
  redis.call('DEL', lock)
elseif string.byte(v) == 115 then
  if sh_trim(lock, sh_now()) == 0 then
    redis.call('DEL', lock, lock .. ':z', lock .. ':h')
    return {0}
  end
  for _, hv in ipairs(redis.call('HVALS', lock .. ':h')) do
    local t = tonumber(string.match(hv, '^(%d+)')) or 0
    if t > top then
      top = t
    end
  end
  redis.call('DEL', lock, lock .. ':z', lock .. ':h')
  sh_bump(lock) -- the index moves (_shared.lua)
else
  top = tonumber(string.match(v, '^.%S* (%d+)')) or 0
  redis.call('DEL', lock)
end
local channel, publisher = string.match(ARGV[1], '^(.*) (%S*)$')
redis.call('PUBLISH', channel, publisher)
return string.format('%d', top)
