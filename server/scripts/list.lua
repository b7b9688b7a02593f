-- list.lua - one page of locks plus their holders, in one round trip.
-- Touches keys it did not declare, so it runs on a single Redis, not on a
-- cluster (where SCAN is per node anyway).
-- ARGV: SCAN cursor, span end ('' for none), name to resume after ('' for
-- none), MATCH pattern ('<prefix>{<filter>*}'), limit, prefix length.
-- Returns {next_cursor, name, owner, token, sb, pttl, mode, limit, count,
-- index, name, ...}: mode '0' exclusive (or a semaphore's slot), '1' shared;
-- for shared holders or a semaphore (_shared.lua) the holder is the one that
-- expires last and count counts the live ones (O(log N) each); index as
-- inspect.lua gives it (_shared.lua: 2n held exclusive or by a lone shared
-- holder, 2n+1 by a set of them).
--
-- A page runs SCAN calls (at most 8) until it holds limit locks or the walk
-- ends. COUNT is only a hint: one call may return more keys than the page
-- has room for. The keys of a call are taken in name order, and when the
-- page fills before they run out, the next cursor is
-- '<call's cursor>:<call's next cursor>:<last name taken>': the span of
-- buckets the call visited, and the names in it already listed.
--
-- Resuming in a span repeats the call, and skips the names listed only when
-- the repeated call stays inside the span: after deletions it reaches
-- further, into buckets no page has visited, and there no name may be
-- skipped. Such a call is repeated with COUNT 1, and if even that leaves the
-- span, nothing of it is skipped (a name may then be listed twice). So a
-- key present for the whole listing is returned at least once.
-- SCAN visits the buckets in the order of their bits reversed, whatever the
-- table's size (cursors stay below the size, so below 2^32), so a cursor's
-- place in the walk is its 32 bits reversed; '0' as a next cursor is the end.
local function place(c)
  if c == '0' then
    return 4294967296
  end
  local v, r = tonumber(c), 0
  for _ = 1, 32 do
    local b = v % 2
    r = r * 2 + b
    v = (v - b) / 2
  end
  return r
end

-- The name's fence counter, as inspect.lua reads it (_shared.lua's sh_fence:
-- '<n>[l][w]', the 'l' counting one unless held, the lock's value a lone
-- holder's 't'): the index is 2n or 2n+1.
local function fence_n(k, held)
  local n, l = string.match(redis.call('GET', k .. ':fence') or '0', '^(%d*)(l?)')
  n = tonumber(n) or 0
  if l == 'l' and not held then
    n = n + 1
  end
  return n
end

--#call
local cursor, stop, after = ARGV[1], ARGV[2], ARGV[3]
local pattern, limit, skip = ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
local out = {'0'}
local taken = 0
for _ = 1, 8 do
  local r = redis.call('SCAN', cursor, 'MATCH', pattern, 'COUNT', limit)
  local inside = after ~= '' and place(r[1]) <= place(stop)
  if after ~= '' and not inside then
    r = redis.call('SCAN', cursor, 'MATCH', pattern, 'COUNT', 1)
    inside = place(r[1]) <= place(stop)
  end
  local names, keys = {}, {}
  for _, k in ipairs(r[2]) do
    -- the pattern ends in '}', so ':fence' keys never match
    local n = string.sub(k, skip + 2, -2)
    if not inside or n > after then
      names[#names + 1] = n
      keys[n] = k
    end
  end
  table.sort(names)
  for i, n in ipairs(names) do
    if taken == limit then
      out[1] = cursor .. ':' .. r[1] .. ':' .. names[i - 1]
      return out
    end
    local k = keys[n]
    -- lock-delays, and foreign keys that happen to match, are skipped: they
    -- are not strings of the form acquire.lua describes
    local v = redis.pcall('GET', k)
    if type(v) == 'string' and string.byte(v) == 115 then
      local t = redis.call('TIME')
      local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      local live = redis.call('ZCOUNT', k .. ':z', '(' .. now, '+inf')
      if live > 0 then
        local e = redis.call('ZRANGE', k .. ':z', -1, -1, 'WITHSCORES')
        local hv = redis.call('HGET', k .. ':h', e[1]) or ''
        local tok, sb, _, mode, owner = string.match(hv, '^(%d+) (%d) (%d+) (%d) (.*)$')
        out[#out + 1] = n
        out[#out + 1] = owner or ''
        out[#out + 1] = tonumber(tok) or 0
        out[#out + 1] = sb or '0'
        out[#out + 1] = math.max(tonumber(e[2]) - now, 0)
        out[#out + 1] = mode or '1'
        out[#out + 1] = tonumber(string.match(v, '^s%d%d (%d+)')) or 1
        out[#out + 1] = live
        out[#out + 1] = 2 * fence_n(k, false) + 1
        taken = taken + 1
      end
    elseif type(v) == 'string' then
      local lim, tok, sb, mode, owner, _
      if string.byte(v) == 116 then
        -- a lone shared holder (_shared.lua's 't' value)
        lim, tok, sb, mode, owner = string.match(v, '^t.%S* (%d+) (%d+) (%d) %d+ (%d) (.*)$')
      else
        _, tok, sb, _, owner = string.match(v, '^.(%S*) (%d+) (%d) (%d+) (.*)$')
        lim, mode = 1, '0'
      end
      if tok then
        out[#out + 1] = n
        out[#out + 1] = owner
        out[#out + 1] = tonumber(tok)
        out[#out + 1] = sb
        out[#out + 1] = redis.call('PTTL', k)
        out[#out + 1] = mode
        out[#out + 1] = tonumber(lim)
        out[#out + 1] = 1
        out[#out + 1] = 2 * fence_n(k, string.byte(v) == 116)
        taken = taken + 1
      end
    end
  end
  -- the call's keys are all listed; a span goes on past it only while the
  -- call ended strictly inside it
  if not inside or r[1] == stop then
    after, stop = '', ''
  end
  cursor = r[1]
  if cursor == '0' or taken == limit then
    break
  end
end
if after ~= '' then
  out[1] = cursor .. ':' .. stop .. ':' .. after
else
  out[1] = cursor
end
return out
