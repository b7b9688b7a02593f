-- inspect.lua - who holds a lock, never its lease.
-- KEYS: lock (its value is described in acquire.lua).
-- Returns {0} free; {1, owner, token, sb, pttl} held; {2, pttl} lock-delay only.
local v = redis.call('GET', KEYS[1])
if not v then
  return {0}
end
if v == 'd' then
  local d = redis.call('PTTL', KEYS[1])
  if d > 0 then
    return {2, d}
  end
  return {0} -- the delay's last millisecond
end
local _, tok, sb, _, owner = string.match(v, '^.(%S*) (%d+) (%d) (%d+) (.*)$')
return {1, owner or '', tonumber(tok) or 0, sb or '0', redis.call('PTTL', KEYS[1])}
