-- inspect.lua - who holds a lock, never its lease, and the name's index
-- (watching, _shared.lua).
-- KEYS: lock (its value is described in _acquire.lua and _shared.lua), its
-- fence counter. ARGV: '1' when a watcher asks: then the next change
-- publishes (the lock's w flag for a release, the counter's mark for a
-- grant), else '0'; then, optionally, a floor: the counter is first raised
-- to it, never lowered (Redlock keeps its nodes' counters level,
-- backend_redlock.c level_counters: the index and holders answered are
-- read after the raise).
-- Returns {index, holders} where holders is {0} free; {1, owner, token, sb,
-- pttl} held; {2, pttl} lock-delay only; {4, limit, count, (owner, token,
-- sb, pttl, mode)...} shared holders or a semaphore's, newest token first,
-- at most 100 of them.
--#include _shared.lua
--#call
local lock, fence, mark, floor = KEYS[1], KEYS[2], ARGV[1] == '1', ARGV[2]

-- The counter's number (its marks aside, '<n>[l][w]': a lone holder's end
-- owed one unless held, the lock's value that holder's 't'; _shared.lua
-- sh_fence); marks it if asked, raises it to the floor if given (keeping
-- the 'l' of a lone holder that holds).
local function fence_n(held)
  local f = redis.call('GET', fence)
  local n, w, l = tonumber(f or '0'), false, false
  if not n then
    sh_load()
    n, w, l = sh_fence(f, held)
    n = n or 0
  end
  if floor and n < tonumber(floor) then
    redis.call('SET', fence, floor .. ((l and held) and 'l' or '') .. ((mark or w) and 'w' or ''), 'PX',
      'FENCE_RETENTION_MS')
    return tonumber(floor)
  end
  if mark and not w then
    if f then
      redis.call('SET', fence, f .. 'w', 'KEEPTTL')
    else
      redis.call('SET', fence, '0w', 'PX', 'FENCE_RETENTION_MS')
    end
  end
  return n
end

local v = redis.call('GET', lock)
if not v then
  return {2 * fence_n() + 1, {0}}
end
if v == 'd' then
  local d = redis.call('PTTL', lock)
  if d > 0 then
    return {2 * fence_n() + 1, {2, d}}
  end
  return {2 * fence_n() + 1, {0}} -- the delay's last millisecond
end
if string.byte(v) == 116 then
  -- a lone shared holder (_shared.lua): the name's last grant, index 2n
  if mark and string.byte(v, 2) == 48 then
    redis.call('SETRANGE', lock, 1, '1')
  end
  sh_load()
  local _, _, limit, tok, sb, _, mode, owner = sh_one(v)
  return {2 * fence_n(true), {4, tonumber(limit) or 1, 1, owner or '', tonumber(tok) or 0, sb or '0',
    redis.call('PTTL', lock), mode or '1'}}
end
if string.byte(v) == 115 then
  sh_load()
  local now = sh_now()
  local n = sh_trim(lock, now)
  if n == 0 then
    redis.call('DEL', lock, lock .. ':z', lock .. ':h')
    return {2 * fence_n() + 1, {0}}
  end
  if mark and string.byte(v, 2) == 48 then
    redis.call('SETRANGE', lock, 1, '1')
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
  return {2 * fence_n() + 1, out}
end
if mark and string.byte(v) == 48 then
  redis.call('SETRANGE', lock, 0, '1')
end
local _, tok, sb, _, owner = string.match(v, '^.(%S*) (%d+) (%d) (%d+) (.*)$')
return {2 * fence_n(), {1, owner or '', tonumber(tok) or 0, sb or '0', redis.call('PTTL', lock)}}
