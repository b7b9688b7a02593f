-- fence_raise.lua - Redlock's write-back (backend_redlock.c): after a
-- majority granted a lock, its token is the largest of their counters, and
-- each granting node whose counter is below it raises its counter to it, so
-- that any later majority (which shares a node with this one) counts past
-- it. The lock's value, when this lease still holds it, takes the same token
-- (so renew and inspect report the token the client was given); a shared
-- holder's token is its entry in '<lock>:h' (_shared.lua). Never lowers a
-- counter. The value's form is described in _acquire.lua.
-- KEYS: lock, fence counter. ARGV: lease, token.
-- Returns 1 when the lease still holds the lock here, else 0 (the counter
-- is raised either way).
--#include _shared.lua
--#call
sh_load() -- (a rare script: its helpers made at once, as before)
local lock, fence, lease, token = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
-- '<n>w': a watcher's mark (_shared.lua), kept: the next grant here
-- publishes; '<n>l': a lone holder's end owed a count (sh_fence), kept
-- while its 't' holds, else counted
local v = redis.call('GET', lock)
local held = v and string.byte(v) == 116
local n, w, l = sh_fence(redis.call('GET', fence) or '0', held)
if (n or 0) < tonumber(token) then
  redis.call('SET', fence, token .. ((l and held) and 'l' or '') .. (w and 'w' or ''), 'PX', 'FENCE_RETENTION_MS')
end
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
if string.byte(v) == 115 then
  local e = redis.call('ZSCORE', lock .. ':z', lease)
  local hv = redis.call('HGET', lock .. ':h', lease)
  if not e or not hv or tonumber(e) <= sh_now() then
    return 0
  end
  local tok, hrest = string.match(hv, '^(%d+) (.*)$')
  if tok ~= token then
    redis.call('HSET', lock .. ':h', lease, token .. ' ' .. hrest)
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
