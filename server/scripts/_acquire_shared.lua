-- _acquire_shared.lua - one shared hold (a reader of a reader-writer lock)
-- or a semaphore's slot (limit > 1); _shared.lua describes the keys.
-- acquire_shared.lua runs it as the script itself, acquire_shared_many.lua
-- as the body of a function called per acquire (as _acquire.lua is).
-- lock, fence: the lock's key and its fence counter. wl: '<w><lease>' (w is
-- '1' when a waiter asks). rest: '<sb> <ttl_ms> <mode> <owner>', the
-- holder's hash value after its token (mode '1' shared, '0' a semaphore's
-- slot: limit > 1). ttl: ttl_ms. limit. nowus: lockd's wall clock in
-- microseconds, the token's floor. more: how many readers come with it
-- (acquire_shared.lua only, from ARGV[6] in fours: lease, sb, ttl_ms,
-- owner); they are admitted with the first, all or none, the k-th with
-- token + k (the returned token is the first's), and the fence counter ends
-- at the last one. step, sres: nil, or on a Redlock node lockd's vote
-- modulus and the node's residue (sh_step: a counter that ran ahead of
-- nowus, a multiple of step there, steps to that residue; never with
-- riders).
-- Returns the token, as a string, when granted (a semaphore's with '+'
-- after it when a slot is still free: lockd's next waiter asks at once,
-- whatever lockd counted; waiters.c); {0, owner, token, sb, pttl,
-- mode} a holder that blocks it; {2, pttl} a lock-delay runs; {3, limit}
-- the holders use another limit. Tokens as _acquire.lua's: above the fence
-- counter and lockd's wall clock, in one script with the grant.
-- O(log N) in the holders. A name nobody holds costs what an exclusive
-- grant costs: one SET ... NX GET writes its holder into the value ('t',
-- _shared.lua) and the fence counter gives the token (sh_grant_one). A
-- second holder spills the first into the set (sh_spill, which gives the
-- keys the life sh_extend would); the marker is only written again when it
-- changes, and the keys live at least as long as the holders (sh_extend: 2
-- x the ttl when short). Readers riding on a
-- grant (more) go to the set at once.
-- (Nothing is computed before the lone holder's grant that it does not need:
-- every string made costs Redis' Lua its hashing.)
sh_load()
-- On a Redlock node (step) the lone holder's grant marks the counter '<n>l'
-- (sh_grant_one): its end (a release, an undo, its key's expiry) is then
-- counted where the counter is next read (sh_fence), as Redlock's watch
-- index needs every node that lets a reader go to count one more
-- (backend_redlock.c majority_index; model/redlock.pml -DRLIDX found a
-- reader's release that moved no index when a lone end counted nothing).
local lone = more == 0
local v
if lone then
  v = redis.call('SET', lock, 't' .. wl .. ' ' .. limit .. ' ' .. nowus .. ' ' .. rest, 'NX', 'PX', ttl, 'GET')
  if not v then
    return sh_grant_one(lock, fence, wl, limit, nowus, rest, false, step, sres)
  end
else
  v = redis.call('SET', lock, 's' .. string.sub(wl, 1, 1) .. '0 ' .. limit .. ' 0', 'NX', 'PX', ttl, 'GET')
end
local w = string.sub(wl, 1, 1)
local lease = string.sub(wl, 2)
local z, h = lock .. ':z', lock .. ':h'
local mk -- the marker to write, when it changes
-- 'g' for a reader's grant that lets readers refused elsewhere in
-- (sh_grant_one says which): a waiting writer's lapsed x cleared (below)
local wake = false
if v == 'd' then
  local d = redis.call('PTTL', lock)
  return {2, d > 0 and d or 1}
end
local now = sh_now()
local x, xu = '0', '0'
local renew_keys = false -- the marker was written here with PX: set the others' life too
local n -- the holders, when known
local live -- how long the keys are known to live (ms), when known
local b = v and string.byte(v) -- the value's form, read once
if b == 116 then
  -- a lone holder: joined (in the set, with it) when the limits agree
  local vlim = string.match(v, '^t.%S* (%d+) ')
  if vlim ~= limit then
    return {3, tonumber(vlim) or 0}
  end
  v, live = sh_spill(lock, v, now, ttl + 0)
  n, b = 1, 115
end
if not v then
  renew_keys = true
  mk = nil
elseif b ~= 115 then
  -- an exclusive holder (its value as _acquire.lua describes)
  if limit ~= '1' then
    return {3, 1}
  end
  if w == '1' and b == 48 then
    redis.call('SETRANGE', lock, 0, '1')
  end
  local _, tok, hsb, _, howner = string.match(v, '^.(%S*) (%d+) (%d) (%d+) (.*)$')
  return {0, howner or '', tonumber(tok) or 0, hsb or '0', redis.call('PTTL', lock), '0'}
else
  -- (readers' usual markers compared whole: Lua's strings are interned, so
  -- == is a pointer's compare where the match costs ~1,800 instructions)
  local fw, fx, flim, fxu
  if v == 's10 1 0' then
    fw, fx, flim, fxu = '1', '0', '1', '0'
  elseif v == 's00 1 0' then
    fw, fx, flim, fxu = '0', '0', '1', '0'
  else
    fw, fx, flim, fxu = string.match(v, '^s(%d)(%d) (%d+) (%d+)$')
  end
  local xs = fx == '1' and tonumber(fxu) > now -- a waiting writer's reservation stands
  -- A reader joining readers (limit 1 on both sides) is refused by nothing
  -- but xs: expired readers in the set do not block it, so it is granted
  -- without trimming and counting them (ZRANGEBYSCORE + ZCARD less: half
  -- the read-mostly load's acquires). They stay in the set until whoever
  -- counts next trims them (a release, a writer, inspect; each moves the
  -- index then, as the grant here does), and the keys' expiry is kept by
  -- sh_extend below. A set whose readers all expired is joined as it is,
  -- not reset ('s' marker kept, w sticky): the same holders seen.
  if not n and (limit ~= '1' or flim ~= '1' or xs) then
    n = sh_trim(lock, now)
  end
  if not n or n > 0 then
    if flim ~= limit then
      return {3, tonumber(flim) or 0}
    end
    if xs then
      x, xu = fx, fxu -- a writer waits: readers queue behind it
    elseif fx == '1' then
      wake = true -- its x lapsed: the readers it refused may come in now
    end
    local full
    if limit == '1' then
      full = x == '1'
    else
      full = n >= limit + 0
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
    mk = 's' .. w .. x .. ' ' .. limit .. ' ' .. xu
    if mk == v then
      mk = nil -- unchanged
    end
  elseif fx == '1' and tonumber(fxu) > now then
    -- reserved for a waiting writer (sh_release): like a lock-delay
    return {2, math.max(redis.call('PTTL', lock), 1)}
  else
    -- a marker whose holders all expired: the name is free
    wake = wake or fx == '1'
    redis.call('DEL', z, h)
    if lone then
      redis.call('SET', lock, 't' .. wl .. ' ' .. limit .. ' ' .. nowus .. ' ' .. rest, 'PX', ttl)
      return sh_grant_one(lock, fence, wl, limit, nowus, rest, wake, step, sres)
    end
    redis.call('SET', lock, 's' .. w .. '0 ' .. limit .. ' 0', 'PX', ttl)
    renew_keys = true
  end
end
-- Granted: the token first (an error here leaves nothing granted).
local tok, last = sh_fence_next(fence, nowus, more, step, sres, not renew_keys)
if (wake and limit == '1') or (last and string.byte(last, -1) == 119) then
  sh_publish(lock, 'g') -- a watcher (or readers refused elsewhere) hears of the grant (sh_grant_one)
end
if mk then
  redis.call('SET', lock, mk, 'KEEPTTL')
end
local t = ttl + 0 -- (lockd's digits, coerced: one strtod where tonumber makes two)
redis.call('ZADD', z, sh_int(now + t), lease)
redis.call('HSET', h, lease, tok .. ' ' .. rest)
for k = 1, more do
  local a = 5 + (k - 1) * 4
  local kt = ARGV[a + 3] + 0
  redis.call('ZADD', z, sh_int(now + kt), ARGV[a + 1])
  redis.call('HSET', h, ARGV[a + 1], string.format('%d', tok + k) .. ' ' .. ARGV[a + 2] .. ' ' .. ARGV[a + 3] .. ' 1 ' .. ARGV[a + 4])
  if kt > t then
    t = kt
  end
end
if renew_keys then
  redis.call('PEXPIRE', z, ttl)
  redis.call('PEXPIRE', h, ttl)
  live = ttl + 0
end
if not live or t > live then
  sh_extend(lock, t) -- (a reader riding on it may hold longer)
end
if limit ~= '1' and n + 1 < limit + 0 then
  return tok .. '+' -- a semaphore's slot is still free (sh_grant_one)
end
return tok
