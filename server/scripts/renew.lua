-- renew.lua - extend a lease only if it still holds the lock (compare, then
-- PEXPIRE, atomically: a renewal racing a release never resurrects the key).
-- KEYS: lock hash. ARGV: lease, ttl_ms ('0' = the ttl the lease was last given).
-- Returns {1, token, ttl_ms} renewed; {0} nobody holds it;
-- {2, owner, token, sb, pttl} another lease holds it.
local h = redis.call('HMGET', KEYS[1], 'lease', 'owner', 'token', 'sb', 'ttl')
if not h[1] then
  return {0}
end
if h[1] ~= ARGV[1] then
  return {2, h[2] or '', tonumber(h[3]) or 0, h[4] or '0', redis.call('PTTL', KEYS[1])}
end
local ttl = ARGV[2]
if ttl == '0' then
  ttl = h[5] or '30000'
elseif ttl ~= h[5] then
  redis.call('HSET', KEYS[1], 'ttl', ttl)
end
redis.call('PEXPIRE', KEYS[1], ttl)
return {1, tonumber(h[3]), tonumber(ttl)}
