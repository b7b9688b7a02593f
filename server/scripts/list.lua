-- list.lua - one page of locks plus their holders, in one round trip.
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
  -- the pattern ends in '}', so ':fence' keys never match
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
  -- lock-delays, and foreign keys that happen to match, are skipped: they
  -- are not strings of the form acquire.lua describes
  local v = redis.pcall('GET', k)
  if type(v) == 'string' then
    local _, tok, sb, _, owner = string.match(v, '^.(%S*) (%d+) (%d) (%d+) (.*)$')
    if tok then
      out[#out + 1] = n
      out[#out + 1] = owner
      out[#out + 1] = tonumber(tok)
      out[#out + 1] = sb
      out[#out + 1] = redis.call('PTTL', k)
      taken = taken + 1
    end
  end
end
return out
