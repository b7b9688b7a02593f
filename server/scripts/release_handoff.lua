-- release_handoff.lua - releases that hand their name to lockd's next waiter
-- in the same call (bk_req.handoff): for each lock, release.lua, then, when
-- it released, acquire.lua (exclusive) or acquire_shared.lua (a semaphore's
-- slot) for its waiter, as one step. lockd groups the hand-offs of one loop
-- turn (per slot on a cluster) as release_many.lua's releases, in the order
-- it took the waiters from the queue: a busy semaphore's pair costs one
-- script call at most, and less when several holders release together
-- (bench/RESULTS.md).
-- A waiter taken while the waiters queued before it still ask (after: the
-- lease of the one right before it) is granted only when that one holds the
-- name (granted by this call or an earlier one): so no waiter of a lockd's
-- queue is granted before one queued ahead of it (waiters.c, waiters_ride).
-- KEYS: each lock (its fence counter is '<lock>:fence'). ARGV: the publisher
-- (the lockd's instance id), then 7 per lock: '<w><lease>', rest, ttl_ms,
-- limit ('x': an exclusive acquire, rest as acquire.lua's; else
-- acquire_shared.lua's), now_us, the lease released, after ('' or a
-- lease); last, the length of the key prefix (the channel is built from the
-- key, as release_many.lua builds it). No lock-delay.
-- Returns, per lock, {release's reply} when it did not release, else
-- {token, the acquire's reply (an error for it alone when its calls raised
-- one: the release stands), or 0 when it was not asked (after)}; an error
-- when the release raised one. One lock: that element alone.
-- A release whose waiter takes the slot it freed frees nothing for anyone
-- else: it publishes nothing (a watcher hears of the grant, as of any
-- grant: '<n>w' on the fence counter), and the index is moved by the grant
-- (sh_ho; and by the release's trim when it drops expired holders). A
-- semaphore's slot released from the set and handed on (holders left) is
-- granted from what the release read (ho_grant): no second look at the
-- marker or count (the release trimmed the expired holders first).
local publisher, plen -- set per call, as pub and extended (below)
local pub -- the lock whose release publishes, once its waiter's part is known
local function publish(lock)
  pub = lock
end
--#include _shared.lua
local function release(lock, lease, delay)
--#include _release.lua
end
local function acquire(lock, fence, wl, rest, ttl, now)
--#include _acquire.lua
end
local function acquire_shared(lock, fence, wl, rest, ttl, limit, nowus, more, step, sres)
--#include _acquire_shared.lua
end
--#include _failed.lua
-- Whether lease holds a slot of lock, right after a release of another
-- slot (after only names a semaphore's waiter): only in the set, and only
-- when the release left holders (a lone slot's release left none). That
-- release trimmed the expired holders at this call's clock, so every one
-- left in the set is live: ZRANK (an integer) says it, where ZSCORE's
-- double reply would be formatted and parsed (~6,500 instructions).
local function holds(lock, lease)
  if not sh_mark or sh_left <= 0 then
    return false
  end
  return redis.call('ZRANK', lock .. ':z', lease) ~= false
end
-- Per lock, the ttl its keys were made to outlive by ho_grant in this call
-- (Redis' clock stands still in a script).
local extended
-- A semaphore's slot right after sh_release freed one of the set: v, the
-- marker it met, n > 0 the live holders it left (it trimmed the expired
-- ones first: n >= limit is a set over its limit, a re-assertion's, full).
-- As _acquire_shared.lua grants into the set, less what the release read.
local function ho_grant(lock, fence, wl, rest, ttl, limit, nowus, v, n)
  sh_load()
  local fw, flim = string.match(v, '^s(%d)%d (%d+) ')
  if flim ~= limit then
    return {3, tonumber(flim) or 0}
  end
  local now = sh_now()
  if n >= limit + 0 then
    local hd = sh_holder(lock, true, now)
    return {0, hd[1], hd[2], hd[3], hd[4], hd[5]}
  end
  if fw == '0' then
    v = 's1' .. string.sub(v, 3)
    redis.call('SET', lock, v, 'KEEPTTL')
  end
  local tok, last = sh_fence_next(fence, nowus, 0)
  if last and string.byte(last, -1) == 119 then
    sh_publish(lock, 'g') -- a watcher hears of the grant
  end
  local t = ttl + 0
  local z = lock .. ':z'
  local added = redis.call('ZADD', z, sh_int(now + t), string.sub(wl, 2))
  redis.call('HSET', lock .. ':h', string.sub(wl, 2), tok .. ' ' .. rest)
  if (extended[lock] or 0) < t then
    sh_extend(lock, t) -- the keys live t more: no need to look again in this call
    extended[lock] = t
  end
  -- the marker and holders now, for a release of lock next (_release.lua)
  sh_cl, sh_cv, sh_cn = lock, v, n + added
  if n + added < limit + 0 then
    return tok .. '+' -- a slot is still free (as _acquire_shared.lua answers)
  end
  return tok
end
-- The message a release held back (publish) when its waiter did not take
-- the slot. (Written as redis.call('PUBLISH', ...): a cluster primary's
-- copy of the script says SPUBLISH there.)
local function publish_now(lock)
  redis.call('PUBLISH', string.sub(lock, 1, plen) .. 'released:' .. string.sub(lock, plen + 1), publisher)
end
--#call
publisher, plen, pub, extended = ARGV[1], ARGV[#ARGV] + 0, nil, {}
local granted, out = {}, {}
sh_ho = true
for i = 1, #KEYS do
  local a, lock = 7 * i - 5, KEYS[i]
  pub, sh_left, sh_mark = nil, nil, nil
  if i > 1 and KEYS[i - 1] ~= lock then
    sh_cl = nil -- (ho_grant's marker and count are for the release of its lock right after it)
  end
  local ok, r = pcall(release, lock, ARGV[a + 5], '0')
  if not ok then
    out[i] = failed(r)
  elseif type(r) ~= 'string' then
    out[i] = {r}
  else
    -- its waiter: its acquire's reply, or 0 when not asked
    local after, limit, ask, aok, g = ARGV[a + 6], ARGV[a + 3], true, true, 0
    if after ~= '' and not granted[after] then
      local hok, h = pcall(holds, lock, after)
      ask = hok and h -- else not asked (0): the waiter before it was not granted
    end
    if not ask then
      g = 0
    elseif limit == 'x' then
      aok, g = pcall(acquire, lock, lock .. ':fence', ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 4])
    elseif sh_left and sh_left > 0 and limit ~= '1' then
      aok, g = pcall(ho_grant, lock, lock .. ':fence', ARGV[a], ARGV[a + 1], ARGV[a + 2], limit, ARGV[a + 4], sh_mark,
        sh_left)
    else
      -- (a semaphore's slot: lockd hands no name to a waiting reader,
      -- waiters_ride; a reader granted here in place of a release's held-back
      -- message would have to publish 'g' for the readers refused elsewhere)
      aok, g = pcall(acquire_shared, lock, lock .. ':fence', ARGV[a], ARGV[a + 1], ARGV[a + 2], limit, ARGV[a + 4], 0)
    end
    if aok and type(g) == 'string' then
      granted[string.sub(ARGV[a], 2)] = true
    else
      -- the slot stays free (or went elsewhere): the release's own index
      -- move and message (the message also when the release held it
      -- back, sh_release, and a watcher marked the counter)
      local bok, watched = false, false
      if sh_mark then
        sh_load() -- (loaded by the release that set sh_mark: pcall would hide a nil)
        bok, watched = pcall(sh_bump, lock)
      end
      if pub or (bok and watched and string.byte(sh_mark, 2) == 49) then
        pcall(publish_now, lock)
      end
      g = aok and g or failed(g)
    end
    out[i] = {r, g}
  end
end
if #KEYS == 1 then
  return out[1]
end
return out
