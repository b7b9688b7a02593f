-- release.lua - compare-and-delete: delete the lock only if the lease holds
-- it, optionally leave a lock-delay in its place, and tell other lockd
-- processes when one of their waiters asked to hear of it (the lock's value
-- is described in acquire.lua).
-- KEYS: lock. ARGV: lease, delay_ms, '<channel> <publisher>' (the releasing
-- lockd's instance id, so it can skip its own message).
-- Returns the token, as a string, when released; {0} nobody holds it;
-- {2, owner, token, sb, pttl} another lease holds it.
local v = redis.call('GET', KEYS[1])
if not v or v == 'd' then
  return {0}
end
local n = #ARGV[1]
if string.find(v, ARGV[1], 2, true) ~= 2 or string.byte(v, n + 2) ~= 32 then
  local _, tok, sb, _, owner = string.match(v, '^.(%S*) (%d+) (%d) (%d+) (.*)$')
  return {2, owner or '', tonumber(tok) or 0, sb or '0', redis.call('PTTL', KEYS[1])}
end
if ARGV[2] ~= '0' then
  redis.call('SET', KEYS[1], 'd', 'PX', ARGV[2])
else
  redis.call('DEL', KEYS[1])
end
if string.byte(v) == 49 then
  local channel, publisher = string.match(ARGV[3], '^(.*) (%S*)$')
  redis.call('PUBLISH', channel, publisher)
end
return string.match(v, '^%d+', n + 3)
