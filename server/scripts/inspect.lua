-- inspect.lua - who holds a lock, never its lease.
-- KEYS: lock (its value is described in _acquire.lua and _shared.lua).
-- Returns {0} free; {1, owner, token, sb, pttl} held; {2, pttl} lock-delay
-- only; {4, limit, count, (owner, token, sb, pttl, mode)...} shared holders
-- or a semaphore's, newest token first, at most 100 of them.
--#include _shared.lua
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
if string.byte(v) == 115 then
  local lock, now = KEYS[1], sh_now()
  local n = sh_trim(lock, now)
  if n == 0 then
    redis.call('DEL', lock, lock .. ':z', lock .. ':h')
    return {0}
  end
  -- every holder, to order them by token: inspect alone pays O(N)
  local all = redis.call('ZRANGE', lock .. ':z', 0, -1, 'WITHSCORES')
  local hs = {}
  for i = 1, #all, 2 do
    local hv = redis.call('HGET', lock .. ':h', all[i]) or ''
    local tok, sb, _, mode, owner = string.match(hv, '^(%d+) (%d) (%d+) (%d) (.*)$')
    hs[#hs + 1] = {owner or '', tonumber(tok) or 0, sb or '0', math.max(tonumber(all[i + 1]) - now, 0),
      mode or '1'}
  end
  table.sort(hs, function(a, b) return a[2] > b[2] end)
  local out = {4, tonumber(string.match(v, '^s%d%d (%d+)')) or 1, n}
  for i = 1, math.min(#hs, 100) do
    for j = 1, 5 do
      out[#out + 1] = hs[i][j]
    end
  end
  return out
end
local _, tok, sb, _, owner = string.match(v, '^.(%S*) (%d+) (%d) (%d+) (.*)$')
return {1, owner or '', tonumber(tok) or 0, sb or '0', redis.call('PTTL', KEYS[1])}
