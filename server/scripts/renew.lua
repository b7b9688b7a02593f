-- renew.lua - extend a lease only if it still holds the lock (compare, then
-- extend, atomically: a renewal racing a release never resurrects the key).
-- KEYS: lock (its value is described in acquire.lua).
-- ARGV: lease, ttl_ms ('0' = the ttl the lease was last given).
--#include _shared.lua
--#call
-- Returns {1, token, ttl_ms, owner, mode} renewed (mode '1' shared, '0'
-- exclusive or a semaphore's slot); {0} nobody holds it; {2, owner, token,
-- sb, pttl} another lease holds it.
local v = redis.call('GET', KEYS[1])
if not v or v == 'd' then
  return {0}
end
if string.byte(v) == 115 then
  sh_load()
  return sh_renew(KEYS[1], ARGV[1], ARGV[2]) -- one of shared holders (_shared.lua)
end
if string.byte(v) == 116 then
  sh_load()
  return sh_one_renew(KEYS[1], v, ARGV[1], ARGV[2]) -- a lone shared holder (_shared.lua)
end
local lease, tok, sb, ttl, owner = string.match(v, '^.(%S*) (%d+) (%d) (%d+) (.*)$')
if lease ~= ARGV[1] then
  return {2, owner or '', tonumber(tok) or 0, sb or '0', redis.call('PTTL', KEYS[1])}
end
local nt = ARGV[2]
if nt == '0' or nt == ttl then
  nt = ttl
  redis.call('PEXPIRE', KEYS[1], nt)
else
  local left = redis.call('PTTL', KEYS[1])
  redis.call('SET', KEYS[1], string.sub(v, 1, 1) .. lease .. ' ' .. tok .. ' ' .. sb .. ' ' .. nt .. ' ' .. owner,
    'PX', nt)
  sh_load()
  sh_shortened(KEYS[1], left, nt) -- other lockd's waiters hear of a sooner end
end
return {1, tonumber(tok), tonumber(nt), owner, '0'}
