-- acquire_shared.lua - grant a shared hold (a reader of a reader-writer
-- lock) or a semaphore's slot (limit > 1); _shared.lua describes the keys.
-- KEYS: lock, fence counter. ARGV: w ('1' when a waiter asks), lease, sb,
-- ttl_ms, owner, mode ('1' shared, '0' a semaphore's slot), limit, now_us.
-- Returns the token, as a string, when granted; {0, owner, token, sb, pttl,
-- mode} a holder that blocks it; {2, pttl} a lock-delay runs; {3, limit}
-- the holders use another limit. Tokens as _acquire.lua's: above the fence
-- counter and lockd's wall clock in microseconds, in one script with the
-- grant. One call per acquire: never grouped (acquire_many.lua is the
-- exclusive path's), O(log N) in the holders.
-- More readers granted with this one (bk_req.more; mode '1', limit '1'
-- only): ARGV[9..] in fours, lease, sb, ttl_ms, owner each. They are
-- admitted with the first, all or none; the k-th of them gets token + k
-- (the returned token is the first's), and the fence counter ends at the
-- last one.
local lock, fence = KEYS[1], KEYS[2]
local w, lease, sb, ttl, owner, mode, limit, nowus =
  ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
--#include _shared.lua
local v = redis.call('GET', lock)
if v == 'd' then
  local d = redis.call('PTTL', lock)
  return {2, d > 0 and d or 1}
end
local now = sh_now()
local x, xu = '0', '0'
if v and string.byte(v) ~= 115 then
  -- an exclusive holder (its value as _acquire.lua describes)
  if limit ~= '1' then
    return {3, 1}
  end
  if w == '1' and string.byte(v) == 48 then
    redis.call('SETRANGE', lock, 0, '1')
  end
  local _, tok, hsb, _, howner = string.match(v, '^.(%S*) (%d+) (%d) (%d+) (.*)$')
  return {0, howner or '', tonumber(tok) or 0, hsb or '0', redis.call('PTTL', lock), '0'}
end
if v then
  local fw, fx, flim, fxu = string.match(v, '^s(%d)(%d) (%d+) (%d+)$')
  local n = sh_trim(lock, now)
  if n > 0 then
    if flim ~= limit then
      return {3, tonumber(flim) or 0}
    end
    if fx == '1' and tonumber(fxu) > now then
      x, xu = fx, fxu -- a writer waits: readers queue behind it
    end
    local full
    if limit == '1' then
      full = mode ~= '1' or x == '1'
    else
      full = n >= tonumber(limit)
    end
    if full then
      if w == '1' and fw == '0' then
        redis.call('SET', lock, 's1' .. x .. ' ' .. limit .. ' ' .. xu, 'KEEPTTL')
      end
      local hd = sh_holder(lock, limit ~= '1', now)
      return {0, hd[1], hd[2], hd[3], hd[4], hd[5]}
    end
    if fw == '1' then
      w = '1'
    end
  elseif fx == '1' and tonumber(fxu) > now then
    -- reserved for a waiting writer (sh_release): like a lock-delay
    return {2, math.max(redis.call('PTTL', lock), 1)}
  else
    redis.call('DEL', lock .. ':z', lock .. ':h')
  end
end
-- Granted: the token first (an error here leaves nothing granted).
local tok = nowus
local more = math.floor((#ARGV - 8) / 4)
local last = redis.call('SET', fence, nowus, 'PX', 'FENCE_RETENTION_MS', 'GET')
local lastn = last and tonumber(string.match(last, '^(%d+)w?$'))
if lastn and lastn >= tonumber(nowus) then
  tok = string.format('%d', lastn + 1)
  redis.call('SET', fence, tok, 'PX', 'FENCE_RETENTION_MS')
end
if more > 0 then
  redis.call('SET', fence, string.format('%d', tonumber(tok) + more), 'PX', 'FENCE_RETENTION_MS')
end
if w == '1' or (last and string.byte(last, -1) == 119) then
  sh_publish(lock, 'g') -- a watcher (or a waiter) hears of the grant
end
redis.call('SET', lock, 's' .. w .. x .. ' ' .. limit .. ' ' .. xu)
redis.call('ZADD', lock .. ':z', now + tonumber(ttl), lease)
redis.call('HSET', lock .. ':h', lease, tok .. ' ' .. sb .. ' ' .. ttl .. ' ' .. mode .. ' ' .. owner)
for k = 1, more do
  local a = 8 + (k - 1) * 4
  local t = string.format('%d', tonumber(tok) + k)
  redis.call('ZADD', lock .. ':z', now + tonumber(ARGV[a + 3]), ARGV[a + 1])
  redis.call('HSET', lock .. ':h', ARGV[a + 1], t .. ' ' .. ARGV[a + 2] .. ' ' .. ARGV[a + 3] .. ' 1 ' .. ARGV[a + 4])
end
sh_expire(lock, now)
return tok
