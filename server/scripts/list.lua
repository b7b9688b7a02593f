-- list.lua - one page of lock hashes plus their holders, in one round trip.
-- Touches keys it did not declare, so it runs on a single Redis, not on a
-- cluster (where SCAN is per node anyway).
-- ARGV: SCAN cursor, name to resume after ('' for none), MATCH pattern
-- ('<prefix>{<filter>*}'), limit, prefix length.
-- Returns {next_cursor, name, owner, token, sb, pttl, name, ...}.
--
-- SCAN's COUNT is only a hint: one call may return more keys than the page
-- holds. The keys of a call are taken in name order; when the page fills
-- before they run out, the next cursor is '<scan cursor>:<last name>', and
-- the next page repeats that SCAN call and skips names up to the last one.
-- A key present for the whole listing is still returned at least once.
local cursor, after, limit = ARGV[1], ARGV[2], tonumber(ARGV[4])
local skip = tonumber(ARGV[5])
local r = redis.call('SCAN', cursor, 'MATCH', ARGV[3], 'COUNT', limit)
local names, keys = {}, {}
for _, k in ipairs(r[2]) do
  -- the pattern ends in '}', so ':fence' and ':delay' keys never match
  local n = string.sub(k, skip + 2, -2)
  if after == '' or n > after then
    names[#names + 1] = n
    keys[n] = k
  end
end
table.sort(names)
local out = {r[1]}
local taken = 0
for i, n in ipairs(names) do
  if taken == limit then
    out[1] = cursor .. ':' .. names[i - 1]
    break
  end
  local k = keys[n]
  -- foreign keys that happen to match are skipped by type
  if redis.call('TYPE', k)['ok'] == 'hash' then
    local p = redis.call('PTTL', k)
    if p ~= -2 then
      local h = redis.call('HMGET', k, 'owner', 'token', 'sb')
      out[#out + 1] = n
      out[#out + 1] = h[1] or ''
      out[#out + 1] = tonumber(h[2]) or 0
      out[#out + 1] = h[3] or '0'
      out[#out + 1] = p
      taken = taken + 1
    end
  end
end
return out
