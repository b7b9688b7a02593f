-- reassert.lua - after lockd found that its Redis is a new process (a
-- restart, or a replica promoted by a failover: server/reassert.c), put back
-- the leases this lockd granted that are still live, in batches like the
-- watchdog's renew_many.lua. For each lease: the fence counter is raised to
-- at least its token (never lowered), so the name's next grant gets a larger
-- one; then, if nobody holds the lock, its value comes back as it was
-- (_acquire.lua's form, with w = 1 so that its release publishes: lockd
-- processes may have waiters queued behind it) with what is left of its ttl.
-- A lock held by another lease (or a lock-delay) is never overwritten.
-- Also decides whether data was lost, for every lockd on this Redis: a
-- marker key lockd keeps (gone after an empty restart or FLUSHALL), a lease
-- found missing, or the caller's force flag; then the grace key is set for
-- grace_ms, and a lockd that runs this later sees it and keeps the grace too.
-- KEYS: marker, grace key, then the locks (fence key: lock .. ':fence').
-- ARGV: grace_ms, mode ('0' check, '1' data lost for sure, '2' startup: only
-- learn the grace, never start one), fence retention ms, then per lock:
-- lease, token, '<sb> <ttl_ms> <owner>', ttl left in ms.
-- Returns {lost (0/1), grace key's pttl (0 when none), one status per lock:
-- 0 still held by the lease, 1 put back, 2 another holder (never touched)}.
local grace_ms, mode, keep = ARGV[1], ARGV[2], ARGV[3]
local lost = mode == '1'
if redis.call('SET', KEYS[1], '1', 'NX') and mode ~= '2' then
  lost = true
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  lost = true
end
local out = {0, 0}
for i = 3, #KEYS do
  local k = KEYS[i]
  local j = 4 * (i - 3) + 4
  local lease, tok = ARGV[j], ARGV[j + 1]
  local fence = k .. ':fence'
  -- '<n>w' while watched (_shared.lua): the number, and the mark kept
  local raw = redis.call('GET', fence) or '0'
  local cur = tonumber(string.match(raw, '^%d*')) or 0
  if cur < tonumber(tok) then
    redis.call('SET', fence, tok .. (string.match(raw, 'w$') or ''), 'PX', keep)
  end
  local v = redis.call('GET', k)
  if not v then
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
