-- renew_many.lua - the watchdog's batch: many owner-checked renewals in one
-- EVALSHA. Keys of different names may sit in different cluster slots, so
-- this runs on a single Redis only.
-- KEYS: lock hashes. ARGV: lease, ttl_ms pairs in KEYS order ('0' = last ttl).
-- Returns one integer per key: 1 renewed, 0 nobody holds it, 2 another lease does.
local out = {}
for i, k in ipairs(KEYS) do
  local lease, ttl = ARGV[2 * i - 1], ARGV[2 * i]
  local h = redis.call('HMGET', k, 'lease', 'ttl')
  if not h[1] then
    out[i] = 0
  elseif h[1] ~= lease then
    out[i] = 2
  else
    if ttl == '0' then
      ttl = h[2] or '30000'
    elseif ttl ~= h[2] then
      redis.call('HSET', k, 'ttl', ttl)
    end
    redis.call('PEXPIRE', k, ttl)
    out[i] = 1
  end
end
return out
