-- list.lua - one SCAN page of lock hashes plus their holders, in one round
-- trip. Touches keys it did not declare, so it runs on a single Redis, not on
-- a cluster (where SCAN is per node anyway).
-- ARGV: cursor, MATCH pattern ('<prefix>{<filter>*}'), COUNT, prefix length.
-- Returns {next_cursor, name, owner, token, sb, pttl, name, ...}.
local r = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', ARGV[3])
local out = {r[1]}
local skip = tonumber(ARGV[4])
for _, k in ipairs(r[2]) do
  -- the pattern ends in '}', so ':fence' and ':delay' keys never match;
  -- foreign keys that happen to match are skipped by type
  if redis.call('TYPE', k)['ok'] == 'hash' then
    local p = redis.call('PTTL', k)
    if p ~= -2 then
      local h = redis.call('HMGET', k, 'owner', 'token', 'sb')
      out[#out + 1] = string.sub(k, skip + 2, -2)
      out[#out + 1] = h[1] or ''
      out[#out + 1] = tonumber(h[2]) or 0
      out[#out + 1] = h[3] or '0'
      out[#out + 1] = p
    end
  end
end
return out
