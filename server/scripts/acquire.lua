-- acquire.lua - grant a lock if it is free and out of any lock-delay.
-- KEYS: lock, fence counter (both share the {name} tag).
-- ARGV: lease, owner, ttl_ms, session_bound (0/1), now_us (lockd's wall
-- clock), wait (1: a waiter asks, and wants the release published; see w).
-- The lock is one string that expires with the lease:
--   '<w><lease> <token> <sb> <ttl_ms> <owner>'
-- where w is '1' when release.lua must publish: the lock went to a waiting
-- caller (lockd may have queued others behind it without asking Redis), or a
-- waiting caller was refused by it; else '0'. Or 'd' alone while a lock-delay
-- runs.
-- Returns {1, token} granted; {0, owner, token, sb, pttl} held by someone;
-- {2, pttl} in a lock-delay window.
local v = redis.call('GET', KEYS[1])
if v == 'd' then
  local d = redis.call('PTTL', KEYS[1])
  if d > 0 then
    return {2, d}
  end
  v = false -- the delay's last millisecond: over, as with any expiry
end
if v then
  if ARGV[6] == '1' and string.byte(v) == 48 then
    redis.call('SETRANGE', KEYS[1], 0, '1')
  end
  local _, tok, sb, _, owner = string.match(v, '^.(%S*) (%d+) (%d) (%d+) (.*)$')
  return {0, owner or '', tonumber(tok) or 0, sb or '0', redis.call('PTTL', KEYS[1])}
end
-- Fencing: strictly above the name's last token, and never below lockd's
-- wall clock in microseconds, so tokens keep growing even when Redis lost the
-- counter (non-persistent restart, FLUSHALL). The counter outlives the lock
-- by 30 days after its last grant. 1.8e15 today is far below 2^53.
local ts = ARGV[5]
local t = tonumber(ts)
local last = redis.call('SET', KEYS[2], ts, 'PX', 2592000000, 'GET')
if last and tonumber(last) >= t then
  t = tonumber(last) + 1
  ts = string.format('%d', t)
  redis.call('SET', KEYS[2], ts, 'PX', 2592000000)
end
redis.call('SET', KEYS[1], ARGV[6] .. ARGV[1] .. ' ' .. ts .. ' ' .. ARGV[4] .. ' ' .. ARGV[3] .. ' ' .. ARGV[2],
  'PX', ARGV[3])
return {1, t}
