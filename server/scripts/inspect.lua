-- inspect.lua - who holds a lock, never its lease.
-- KEYS: lock hash, lock-delay key.
-- Returns {0} free; {1, owner, token, sb, pttl} held; {2, pttl} lock-delay only.
local p = redis.call('PTTL', KEYS[1])
if p == -2 then
  local d = redis.call('PTTL', KEYS[2])
  if d > 0 then
    return {2, d}
  end
  return {0}
end
local h = redis.call('HMGET', KEYS[1], 'owner', 'token', 'sb')
return {1, h[1] or '', tonumber(h[2]) or 0, h[3] or '0', p}
