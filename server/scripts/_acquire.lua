-- _acquire.lua - one acquire: grant a lock if it is free and out of any
-- lock-delay. acquire.lua runs it as the script itself, acquire_many.lua as
-- the body of a function called per lock (as a function in acquire.lua too,
-- a lone acquire + release cost Redis 1.7 % more instructions, measured
-- with the body before SET ... NX GET: 83,329 against 81,887 per pair).
-- lock, fence: the lock's key and its fence counter (both share the {name}
-- tag). wl, rest: '<w><lease>' and '<sb> <ttl_ms> <owner>', the lock's value
-- around its token, so it is one concatenation here. ttl: ttl_ms. now: now_us,
-- lockd's wall clock. sb is 1 for a session-bound lease; w is 1 when a waiter
-- asks, and wants the release published (see below).
-- The lock is one string that expires with the lease:
--   '<w><lease> <token> <sb> <ttl_ms> <owner>'
-- where w is '1' when release.lua must publish: the lock went to a waiting
-- caller (lockd may have queued others behind it without asking Redis), or a
-- waiting caller was refused by it; else '0'. Or 'd' alone while a lock-delay
-- runs.
-- Returns the token, as a string, when granted; {0, owner, token, sb, pttl}
-- held by someone (and a sixth element, the mode, when shared holders
-- block it); {2, pttl} in a lock-delay window; {3, limit} a semaphore
-- holds the name; an error reply when the
-- fence counter cannot be read (and then nothing is held). A lone shared
-- holder's value ('t', _shared.lua) refuses as a set's holders do. (Every argument,
-- table and number conversion is work for Redis on each call: a grant is
-- returned and stored without any.)
--
-- One command checks that the lock is free and takes it: SET ... NX GET
-- (Redis 7.0), under the token 'now' (lockd's wall clock in microseconds). A
-- refusal writes nothing. A grant then raises the fence counter to that
-- token: a token is strictly above the name's last one and never below the
-- wall clock, so tokens keep growing even when Redis lost the counter
-- (non-persistent restart, FLUSHALL). When the counter is already at or past
-- 'now' (another lockd's clock runs ahead, or two grants fell in one
-- microsecond), the token is the counter + 1, and the lock's value is
-- rewritten with it before the script returns: nobody sees the first one, a
-- script being atomic. The counter outlives the lock by fence_retention_ms
-- (lockd fills FENCE_RETENTION_MS in when it loads the script; 24 h by
-- default) after its
-- last grant. 1.8e15 today is far below 2^53.
local v = redis.call('SET', lock, wl .. ' ' .. now .. ' ' .. rest, 'NX', 'PX', ttl, 'GET')
if v == 'd' then
  -- a delay in its last millisecond still holds the key (time stands still
  -- in a script): answered as 1 ms to go
  local d = redis.call('PTTL', lock)
  return {2, d > 0 and d or 1}
end
if v and string.byte(v) == 116 then
  -- a lone shared holder or semaphore slot (_shared.lua), live while its
  -- value is: refused; a waiting writer spills it (sh_refuse marks the
  -- writer waiting, so that readers queue behind it)
  sh_load()
  local _, _, vlim, tok, sb, _, mode, owner = sh_one(v)
  if vlim ~= '1' then
    return {3, tonumber(vlim) or 0}
  end
  if string.byte(wl) ~= 49 then
    return {0, owner or '', tonumber(tok) or 0, sb or '0', redis.call('PTTL', lock), mode}
  end
  v = sh_spill(lock, v, sh_now())
end
if v and string.byte(v) == 115 then
  -- shared holders or a semaphore (_shared.lua): refused, or taken when
  -- their last slot expired (sh_refuse dropped the keys)
  sh_load()
  local r = sh_refuse(lock, v, string.byte(wl) == 49)
  if r then
    return r
  end
  v = redis.call('SET', lock, wl .. ' ' .. now .. ' ' .. rest, 'NX', 'PX', ttl, 'GET')
end
if v then
  if string.byte(wl) == 49 and string.byte(v) == 48 then
    redis.call('SETRANGE', lock, 0, '1')
  end
  local _, tok, sb, _, owner = string.match(v, '^.(%S*) (%d+) (%d) (%d+) (.*)$')
  return {0, owner or '', tonumber(tok) or 0, sb or '0', redis.call('PTTL', lock)}
end
-- Granted. A counter that cannot be read or written undoes the grant: an
-- acquire that answers an error holds nothing.
local last = redis.pcall('SET', fence, now, 'PX', 'FENCE_RETENTION_MS', 'GET')
if last then
  local n = tonumber(last) -- nil for an error reply (a table) or a foreign value
  if not n and type(last) == 'string' then
    -- '<n>w': a watcher waits for the next grant; '<n>l': a lone reader's
    -- end owed a count, the name free now: counted (_shared.lua)
    sh_load()
    local w
    n, w = sh_fence(last, false)
    if w then
      sh_publish(lock, 'g')
    end
  end
  if not n then
    redis.call('DEL', lock)
    return type(last) == 'table' and last or {err = 'ERR fence counter is not a number'}
  end
  if n >= now + 0 then -- (lockd's digits: coerced, one strtod where tonumber makes two)
    local ts = string.format('%d', n + 1)
    redis.call('SET', fence, ts, 'PX', 'FENCE_RETENTION_MS')
    redis.call('SET', lock, wl .. ' ' .. ts .. ' ' .. rest, 'XX', 'KEEPTTL')
    return ts
  end
end
return now
