-- renew_many.lua - the watchdog's batch: many owner-checked renewals in one
-- EVALSHA. Keys of different names may sit in different cluster slots, so
-- this runs on a single Redis only.
-- KEYS: locks (their value is described in acquire.lua).
-- ARGV: lease, ttl_ms pairs in KEYS order ('0' = last ttl).
-- Returns one integer per key: 1 renewed, 0 nobody holds it, 2 another lease does.
--#include _shared.lua
--#call
local out = {}
for i, k in ipairs(KEYS) do
  local want, nt = ARGV[2 * i - 1], ARGV[2 * i]
  local v = redis.call('GET', k)
  if not v or v == 'd' then
    out[i] = 0
  elseif string.byte(v) == 115 then
    sh_load()
    out[i] = sh_renew(k, want, nt)[1] -- one of shared holders (_shared.lua)
  elseif string.byte(v) == 116 then
    sh_load()
    out[i] = sh_one_renew(k, v, want, nt)[1] -- a lone shared holder (_shared.lua)
  else
    local lease, tok, sb, ttl, owner = string.match(v, '^.(%S*) (%d+) (%d) (%d+) (.*)$')
    if lease ~= want then
      out[i] = 2
    elseif nt == '0' or nt == ttl then
      redis.call('PEXPIRE', k, ttl)
      out[i] = 1
    else
      local left = redis.call('PTTL', k)
      redis.call('SET', k, string.sub(v, 1, 1) .. lease .. ' ' .. tok .. ' ' .. sb .. ' ' .. nt .. ' ' .. owner,
        'PX', nt)
      sh_load()
      sh_shortened(k, left, nt)
      out[i] = 1
    end
  end
end
return out
