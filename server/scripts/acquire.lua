-- acquire.lua - grant a lock if it is free and out of any lock-delay.
-- KEYS: lock hash, fence counter, lock-delay key (all share the {name} tag).
-- ARGV: lease, owner, ttl_ms, session_bound (0/1), now_us (lockd's wall clock).
-- Returns {1, token} granted; {0, owner, token, sb, pttl} held by someone;
-- {2, pttl} in a lock-delay window.
local d = redis.call('PTTL', KEYS[3])
if d > 0 then
  return {2, d}
end
local p = redis.call('PTTL', KEYS[1])
if p ~= -2 then
  local h = redis.call('HMGET', KEYS[1], 'owner', 'token', 'sb')
  return {0, h[1] or '', tonumber(h[2]) or 0, h[3] or '0', p}
end
-- Fencing: strictly above the last token (INCR), and never below lockd's
-- wall clock in microseconds, so tokens keep growing even when Redis lost the
-- counter (non-persistent restart, FLUSHALL). 1.8e15 today is far below 2^53.
local t = redis.call('INCR', KEYS[2])
local now = tonumber(ARGV[5])
if t < now then
  t = now
end
local ts = string.format('%d', t)
redis.call('SET', KEYS[2], ts, 'PX', 2592000000)
redis.call('HSET', KEYS[1], 'lease', ARGV[1], 'owner', ARGV[2], 'token', ts, 'sb', ARGV[4],
  'ttl', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, t}
