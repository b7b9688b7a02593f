-- reassert.lua - after lockd found that its Redis is a new process (a
-- restart, or a replica promoted by a failover: server/reassert.c), put back
-- the leases this lockd granted that are still live, in batches like the
-- watchdog's renew_many.lua. For each lease: the fence counter is raised to
-- at least its token (never lowered), so the name's next grant gets a larger
-- one; then, if nobody holds the lock, its value comes back as it was
-- (_acquire.lua's form, with w = 1 so that its release publishes: lockd
-- processes may have waiters queued behind it) with what is left of its ttl.
-- A lock held by another lease (or a lock-delay) is never overwritten.
-- Shared holds and semaphore slots (_shared.lua) go back the same way: a
-- free name's as its lone holder ('t'), else into the name's holder set, a
-- slot added when the holders there use the same limit and (a semaphore)
-- a slot is free; never past the limit, never over an exclusive holder.
-- Also decides whether data was lost, for every lockd on this Redis: a
-- marker key lockd keeps (gone after an empty restart or FLUSHALL), a lease
-- found missing, or the caller's force flag; then the grace key is set for
-- grace_ms, and a lockd that runs this later sees it and keeps the grace too.
-- KEYS: marker, grace key, then the locks (fence key: lock .. ':fence').
-- ARGV: grace_ms, mode ('0' check, '1' data lost for sure, '3' check the
-- locks only, not the marker (a cluster batch: its slot's marker says
-- nothing), '2' startup: only
-- learn the grace, never start one), fence retention ms, then per lock:
-- lease, token, '<sb> <ttl_ms> <owner>', ttl left in ms, kind ('x' an
-- exclusive lease, '<mode> <limit>' a shared hold: mode 1 a reader, 0 a
-- semaphore's slot).
-- Returns {lost (0/1), grace key's pttl (0 when none), one status per lock:
-- 0 still held by the lease, 1 put back, 2 another holder (never touched)}.
--#include _shared.lua
--#call
local grace_ms, mode, keep = ARGV[1], ARGV[2], ARGV[3]

-- A shared hold back into lock's holder set (v: the lock's value): 0 still
-- there, 1 put back, 2 refused (an exclusive holder or a lock-delay, other
-- holders with another limit, or a semaphore already full).
local function put_shared(lock, v, lease, tok, rest, left, kind)
  local hm, limit = string.match(kind, '^(%d) (%d+)$')
  local sb, ttl, owner = string.match(rest, '^(%d) (%d+) (.*)$')
  if not hm or not sb then
    return 2
  end
  if not v then
    -- a free name: the lease back as its lone holder ('t', w = 1: its
    -- release publishes)
    redis.call('SET', lock, 't1' .. lease .. ' ' .. limit .. ' ' .. tok .. ' ' .. sb .. ' ' .. ttl .. ' ' .. hm .. ' '
      .. owner, 'PX', left)
    return 1
  end
  sh_load() -- (tests/integration/redis_restart.c runs this file alone: exclusive leases only)
  local now = sh_now()
  local marker = 's10 ' .. limit .. ' 0' -- w = 1: its release publishes
  if string.byte(v) == 116 then
    -- a lone holder: this lease's, or joined by it (spilled into the set)
    local _, l, vlim = sh_one(v)
    if l == lease then
      return 0
    end
    if vlim ~= limit then
      return 2
    end
    v = sh_spill(lock, v, now)
  end
  if v then
    local fw, fx, flim, fxu = string.match(v, '^s(%d)(%d) (%d+) (%d+)$')
    if not fw then
      return 2
    end
    local n = sh_trim(lock, now)
    if n > 0 then
      if redis.call('ZSCORE', lock .. ':z', lease) then
        return 0
      end
      if flim ~= limit or (limit ~= '1' and n >= tonumber(limit)) then
        return 2
      end
      marker = 's1' .. fx .. ' ' .. flim .. ' ' .. fxu
    else
      redis.call('DEL', lock .. ':z', lock .. ':h')
    end
  end
  redis.call('SET', lock, marker)
  redis.call('ZADD', lock .. ':z', now + tonumber(left), lease)
  redis.call('HSET', lock .. ':h', lease, tok .. ' ' .. sb .. ' ' .. ttl .. ' ' .. hm .. ' ' .. owner)
  sh_expire(lock, now)
  return 1
end

local lost = mode == '1'
if mode ~= '3' and redis.call('SET', KEYS[1], '1', 'NX') and mode ~= '2' then
  lost = true
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  lost = true
end
local out = {0, 0}
for i = 3, #KEYS do
  local k = KEYS[i]
  local j = 5 * (i - 3) + 4
  local lease, tok = ARGV[j], ARGV[j + 1]
  local fence = k .. ':fence'
  -- '<n>w' while watched (_shared.lua): the number, and the mark kept
  local raw = redis.call('GET', fence) or '0'
  local cur = tonumber(string.match(raw, '^%d*')) or 0
  if cur < tonumber(tok) then
    redis.call('SET', fence, tok .. (string.match(raw, 'w$') or ''), 'PX', keep)
  end
  local v = redis.call('GET', k)
  if ARGV[j + 4] ~= 'x' then
    local st = put_shared(k, v, lease, tok, ARGV[j + 2], ARGV[j + 3], ARGV[j + 4])
    out[#out + 1] = st
    if st == 1 then
      lost = true
    end
  elseif not v then
    redis.call('SET', k, '1' .. lease .. ' ' .. tok .. ' ' .. ARGV[j + 2], 'PX', ARGV[j + 3])
    out[#out + 1] = 1
    lost = true
  elseif string.match(v, '^.(%S*) ') == lease then
    out[#out + 1] = 0
  else
    out[#out + 1] = 2
  end
end
if lost and mode ~= '2' then
  if tonumber(grace_ms) > 0 and redis.call('PTTL', KEYS[2]) < tonumber(grace_ms) then
    redis.call('SET', KEYS[2], '1', 'PX', grace_ms)
  end
  out[1] = 1
end
local p = redis.call('PTTL', KEYS[2])
out[2] = p > 0 and p or 0
return out
