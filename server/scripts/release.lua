-- release.lua - compare-and-delete: delete the lock only if the lease holds
-- it, optionally start a lock-delay, and tell other lockd processes.
-- KEYS: lock hash, lock-delay key. ARGV: lease, delay_ms, channel, publisher
-- (the releasing lockd's instance id, so it can skip its own message).
-- Returns {1, token} released; {0} nobody holds it;
-- {2, owner, token, sb, pttl} another lease holds it.
local h = redis.call('HMGET', KEYS[1], 'lease', 'owner', 'token', 'sb')
if not h[1] then
  return {0}
end
if h[1] ~= ARGV[1] then
  return {2, h[2] or '', tonumber(h[3]) or 0, h[4] or '0', redis.call('PTTL', KEYS[1])}
end
redis.call('DEL', KEYS[1])
if ARGV[2] ~= '0' then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
end
redis.call('PUBLISH', ARGV[3], ARGV[4])
return {1, tonumber(h[3])}
