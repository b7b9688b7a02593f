-- acquire_set.lua - a multi-lock (DESIGN.md §2 "Multi-lock"): every lock of
-- a set granted under one lease, or none, in one script call. Each name is
-- granted as acquire.lua grants one (_acquire.lua: its own fence counter and
-- token), but only once every name was found free, so the set is never half
-- taken, and nobody sees it half taken (a script is atomic). Overlapping
-- sets cannot deadlock: nothing is held while a set waits.
-- KEYS: lock and fence counter of each name (2i-1 and 2i; one slot on a
-- cluster, the {name} tags of all of them hashing alike). ARGV: '<w><lease>',
-- '<sb> <ttl_ms> <owner>', ttl_ms, now_us, once for all (acquire.lua's).
-- Returns the tokens, as strings, in KEYS order when granted; {i, ...} when
-- the i-th name (from 1) refuses the set: i, then what acquire.lua returns
-- for it; an error reply when a fence counter cannot be used. Only a grant
-- leaves anything held.
--#include _shared.lua
local function acquire(lock, fence, wl, rest, ttl, now)
--#include _acquire.lua
end
--#call
local wl, rest, ttl, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local n = #KEYS / 2
local out = {}
-- Gives back what this call granted, and answers r (name i refused it).
local function undo(i, r)
  for j = 1, n do
    if out[j] then
      redis.call('DEL', KEYS[2 * j - 1])
    end
  end
  if r.err then
    return r
  end
  table.insert(r, 1, i)
  return r
end
-- Pass 1, every held name first: a held one refuses the set before
-- anything is taken. acquire() writes nothing on a held name but the
-- waiter's mark; a shared name whose holders all expired is taken there
-- (then kept in out). Pass 2, the names not taken yet.
for pass = 1, 2 do
  for i = 1, n do
    local lock = KEYS[2 * i - 1]
    if pass == 1 and redis.call('EXISTS', lock) == 1 or pass == 2 and not out[i] then
      local r = acquire(lock, KEYS[2 * i], wl, rest, ttl, now)
      if type(r) ~= 'table' then
        out[i] = r
      else
        return undo(i, r)
      end
    end
  end
end
return out
