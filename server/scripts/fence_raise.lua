-- fence_raise.lua - Redlock's write-back (backend_redlock.c): after a
-- majority granted a lock, its token is the largest of their counters, and
-- each granting node whose counter is below it raises its counter to it, so
-- that any later majority (which shares a node with this one) counts past
-- it. The lock's value, when this lease still holds it, takes the same token
-- (so renew and inspect report the token the client was given); a shared
-- holder's token is in its entry among the value's holders or in
-- '<lock>:h' (_shared.lua). Never lowers a
-- counter. The value's form is described in _acquire.lua.
-- KEYS: lock, fence counter. ARGV: lease, token.
-- Returns 1 when the lease still holds the lock here, else 0 (the counter
-- is raised either way).
--#include _shared.lua
local lock, fence, lease, token = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
-- '<n>w': a watcher's mark (_shared.lua), kept: the next grant here publishes
local n, w = string.match(redis.call('GET', fence) or '0', '^(%d*)(w?)$')
if (tonumber(n or '') or 0) < tonumber(token) then
  redis.call('SET', fence, token .. (w or ''), 'PX', 'FENCE_RETENTION_MS')
end
local v = redis.call('GET', lock)
if not v or v == 'd' then
  return 0
end
if string.byte(v) == 116 then
  -- a lone shared holder (_shared.lua): its token in the value
  local w, l, limit, tok, rest = string.match(v, '^t(.)(%S*) (%d+) (%d+) (.*)$')
  if l ~= lease then
    return 0
  end
  if tok ~= token then
    redis.call('SET', lock, 't' .. w .. l .. ' ' .. limit .. ' ' .. token .. ' ' .. rest, 'XX', 'KEEPTTL')
  end
  return 1
end
if string.find(v, '^[sm]') then
  local m = sh_m(v)
  local e, hv, s, en
  if m then
    e, hv, s, en = sh_mfind(m, lease) -- one of the value's holders
  else
    e, hv = tonumber(redis.call('ZSCORE', lock .. ':z', lease)), redis.call('HGET', lock .. ':h', lease)
  end
  if not e or not hv or e <= sh_now() then
    return 0
  end
  local tok, hrest = string.match(hv, '^(%d+) (.*)$')
  if tok ~= token then
    if m then
      sh_mput(m, lease, e, token .. ' ' .. hrest, s, en)
      sh_msave(lock, m, sh_now())
    else
      redis.call('HSET', lock .. ':h', lease, token .. ' ' .. hrest)
    end
  end
  return 1
end
local w, l, tok, rest = string.match(v, '^(.)(%S*) (%d+) (.*)$')
if l ~= lease then
  return 0
end
if tok ~= token then
  redis.call('SET', lock, w .. l .. ' ' .. token .. ' ' .. rest, 'XX', 'KEEPTTL')
end
return 1
