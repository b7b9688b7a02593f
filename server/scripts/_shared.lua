-- _shared.lua - holders of shared (reader-writer) locks and semaphores, an
-- expirable-permit set as Redisson's RPermitExpirableSemaphore keeps it
-- (included by every script that meets such a lock; the plain lock's value
-- is described in _acquire.lua). For the lock's key '<lock>':
--   '<lock>'    's<w><x> <limit> <x_until_ms>': the marker, so the exclusive
--               scripts' SET ... NX GET sees the name held. w as in
--               _acquire.lua (release publishes); x is 1 while an exclusive
--               waiter was refused by shared holders until x_until_ms (Redis
--               TIME): new shared acquires are then refused too, so writers
--               are not starved.
--   '<lock>:z'  a sorted set lease -> expiry (ms, Redis TIME): each slot
--               frees at its own holder's expiry, trimmed by whatever script
--               counts the name's holders next or releases one (ZCOUNT,
--               then ZRANGEBYSCORE + ZREM when some expired: O(log N) per
--               holder dropped; a reader joining readers counts none,
--               _acquire_shared.lua). No sweep is needed for correctness.
--   '<lock>:h'  a hash lease -> '<token> <sb> <ttl_ms> <mode> <owner>'
--               (mode 1 = shared, 0 = a semaphore's slot).
-- The three keys expire together, no sooner than the last holder (sh_extend;
-- sh_expire to the last holder's expiry exactly), share the {name} tag, and
-- ':z', ':h' never match list.lua's pattern (it ends in '}').
--
-- A name's first holder (one that no other holder joined yet) costs none of
-- that: it is kept in the lock's value alone, as an exclusive lease is,
--   '<lock>'    't<w><lease> <limit> <token> <sb> <ttl_ms> <mode> <owner>'
-- expiring with that lease (w as above), so that a lone reader or slot costs
-- Redis the commands of an exclusive lock: SET NX GET and the fence counter
-- to grant, GET and DEL to release, PEXPIRE to renew. A second holder (or a
-- writer that waits, or a re-assertion) spills it into the set and hash
-- first (sh_spill); the set is not folded back when holders leave. On a
-- Redlock node (a vote's step given) a lone holder's grant also marks the
-- fence counter '<n>l': its end is owed one count (below).

-- Watching (inspect.lua): a name's index is 2n+1 while it is free or held
-- shared (n: its fence counter '<lock>:fence'), 2n while an exclusive
-- holder or a lone holder ('t', the name's last grant: its token is n)
-- holds it. A grant raises n; an exclusive release
-- or expiry turns 2n into 2n+1; a shared release or an expired shared
-- holder trimmed raises n by one (sh_bump). A watcher's inspect marks the
-- counter '<n>w' (the next grant publishes, _acquire.lua) and the lock's w
-- flag (its release publishes).
-- On a Redlock node every reader's end must count one (backend_redlock.c
-- majority_index), a lone holder's too, whose release is a DEL and whose
-- expiry is its key's PX (no script runs). So its grant leaves the counter
-- '<n>l' (sh_grant_one) and the end is counted where the counter is read:
-- n + 1 once the lock's value is no longer a 't' (sh_fence); a script
-- that writes the counter writes it counted (or keeps the 'l' while the
-- 't' holds: fence_raise.lua, inspect.lua's floor). Marks: '<n>[l][w]'.

-- The helpers below are made only when a script call meets a shared lock
-- (or needs Redis' clock): every `local function` of a script is a closure
-- that Redis' Lua makes again on each call, ~900 instructions apiece
-- (measured, bench/RESULTS.md), and every script includes this file, the
-- exclusive ones too (~18,000 instructions per call for ~20 helpers). So
-- they are locals declared here and assigned by sh_load(), which each path
-- that uses one calls first (once per script call: later calls return at
-- once). A path that misses it fails with "attempt to call a nil value".
-- (lockd runs each script as a Redis Function, whose top level, this file
-- included, runs once per FUNCTION LOAD: sh_load() then makes them once per
-- library, and each call resets the per-call state below with sh_begin().)
-- Redis' own clock, read once per script call (sh_now): the time in ms and
-- as an argument.
local sh_t, sh_ts
-- What sh_release left for release_handoff.lua: the live holders left (it
-- trims the expired ones first) and the marker it met. sh_ho set (a
-- hand-off follows in the same script): the release's own index move is
-- left to the grant (a grant raises the counter anyway; the trim still
-- moves it when it drops expired holders).
local sh_left, sh_mark, sh_ho
-- What this call knows of a holder set without asking again (Redis' clock
-- stands still in a call, and every score written is past it): sh_tz, the
-- set (its '<lock>:z') last trimmed at sh_now(), which holds no expired
-- holder for the rest of the call (sh_trim); sh_cl, sh_cv, sh_cn, a lock,
-- its value (the marker) and how many holders its set has right after
-- release_handoff.lua's grant into it (ho_grant) or a release that left
-- holders (sh_release, but not under sh_ho: a waiter's acquire follows
-- there), for the next release of the same lock in that call
-- (_release.lua and sh_release take them, once, in place of GET and ZCARD;
-- release_many.lua's releases touch no other lock's keys, and
-- release_handoff.lua drops them when the next lock is another). A busy
-- semaphore's chain of hand-offs on one name, or readers of one name
-- released together, cost one GET, ZCOUNT and ZCARD per call and name, not
-- per release.
local sh_tz, sh_cl, sh_cv, sh_cn
local sh_publish, sh_bump, sh_now, sh_int, sh_nows, sh_trim, sh_expire, sh_extend, sh_one,
  sh_spill, sh_fence_next, sh_grant_one, sh_one_renew, sh_holder, sh_refuse, sh_renew, sh_release, sh_step,
  sh_fence, sh_shortened

-- Resets the per-call state above: a script is a Function library whose top
-- level (this file) runs once, at FUNCTION LOAD, and its callback calls this
-- first (tools/lua2c.sh): a clock kept from an earlier call would grant on a
-- wrong expiry. Every per-call local of this file is reset here.
local function sh_begin()
  sh_t, sh_ts, sh_left, sh_mark, sh_ho = nil, nil, nil, nil, nil
  sh_tz, sh_cl, sh_cv, sh_cn = nil, nil, nil, nil
end

-- Makes the helpers (idempotent).
local function sh_load()
  if sh_publish then
    return
  end
  -- Publishes a change of lock on its release channel,
  -- '<prefix>released:{<name>}' (names hold no '{').
  function sh_publish(lock, msg)
    local p = string.find(lock, '{[^{]*$')
    redis.call('PUBLISH', string.sub(lock, 1, p - 1) .. 'released:' .. string.sub(lock, p), msg)
  end

  -- A renewal to nt ms of a lease that had left ms (its old expiry): when
  -- it ends sooner now, 'r<nt>' tells other lockd processes, whose waiters
  -- and watchers timed their next look for the old expiry
  -- (redis_pubsub.c). Only a renewal that changes the ttl can shorten one.
  function sh_shortened(lock, left, nt)
    if nt + 0 < left then
      sh_publish(lock, 'r' .. nt)
    end
  end

  -- The fence counter's value f, '<n>[l][w]' (above): n, plus the one a
  -- lone holder's end is owed ('l') unless that holder still holds (held:
  -- the lock's value is its 't'), or nil when f is no counter; then
  -- whether a watcher marked it ('w') and whether it carries the 'l'.
  function sh_fence(f, held)
    local n, l, w = string.match(f, '^(%d+)(l?)(w?)$')
    n = tonumber(n)
    if n and l == 'l' and not held then
      n = n + 1
    end
    return n, w == 'w', l == 'l'
  end

  -- A holder left without a grant: the fence counter (and so the index) moves
  -- on, keeping a watcher's mark. INCR, one call, unless marked ('<n>w' or
  -- '<n>l': not a number; an 'l' under a set is a spilled lone holder's,
  -- whose end this count is, or will be: dropped); it keeps the counter's
  -- expiry (fence_retention_ms after the last grant), and gives one to a
  -- counter it had to create. Returns true when a watcher marked the
  -- counter (the change must be published).
  function sh_bump(lock)
    local f = lock .. ':fence'
    local r = redis.pcall('INCR', f)
    if type(r) == 'number' then
      if r == 1 then
        redis.call('PEXPIRE', f, 'FENCE_RETENTION_MS')
      end
      return
    end
    local n, w = sh_fence(redis.call('GET', f) or '0', true)
    redis.call('SET', f, string.format('%d', (n or 0) + 1) .. (w and 'w' or ''), 'PX', 'FENCE_RETENTION_MS')
    return w
  end

  -- Redis' own clock, so that every lockd counts expiries alike: read once
  -- per script call (a grouped call's operations share it).
  function sh_now()
    if not sh_t then
      local t = redis.call('TIME') -- two numeric strings: coerced (tonumber parses twice)
      sh_t = t[1] * 1000 + math.floor(t[2] / 1000)
    end
    return sh_t
  end

  -- A number as a command argument: an integer's digits. A Lua number given
  -- to redis.call as it is goes through '%.17g' (a float's formatting, ~2,000
  -- instructions in Redis 7.0: the shared scripts' largest single cost).
  function sh_int(n)
    return string.format('%d', n)
  end

  -- sh_now() as an argument (sh_int), formatted once per call.
  function sh_nows()
    if not sh_ts then
      sh_ts = sh_int(sh_now())
    end
    return sh_ts
  end

  -- Drops expired holders; returns how many remain (n: how many the set held,
  -- when the caller knows: one call less; sh_release gives 0 and counts
  -- later). now: sh_now(), which every caller gives (sent as sh_nows()).
  -- z: lock .. ':z' when the caller has it (sh_release).
  -- Usually none expired: ZCOUNT's integer says so (~4,000 instructions
  -- less than ZRANGEBYSCORE's empty array, a Lua table, measured on a
  -- reader's release), and only then are they listed. A set trimmed at
  -- sh_now() earlier in this call is not looked at again (sh_tz).
  function sh_trim(lock, now, n, z)
    z = z or lock .. ':z'
    local ngone = 0
    if now == sh_t and sh_tz == z then
      -- trimmed at this clock already: nothing in it expired since
    elseif redis.call('ZCOUNT', z, '-inf', now == sh_t and sh_nows() or now) > 0 then
      local max = now == sh_t and sh_nows() or now
      local gone = redis.call('ZRANGEBYSCORE', z, '-inf', max)
      ngone = #gone
      for i = 1, ngone, 1000 do
        local part = {}
        for j = i, math.min(i + 999, ngone) do
          part[#part + 1] = gone[j]
        end
        redis.call('ZREM', z, unpack(part))
        redis.call('HDEL', lock .. ':h', unpack(part))
      end
      if ngone > 0 then
        sh_bump(lock)
      end
    end
    if now == sh_t then
      sh_tz = z
    end
    if n then
      return n - ngone
    end
    return redis.call('ZCARD', z)
  end

  -- The three keys expire with the last holder.
  function sh_expire(lock, now)
    local z = lock .. ':z'
    local last = redis.call('ZRANGE', z, -1, -1, 'WITHSCORES')
    local ms = math.max(tonumber(last[2]) - now, 1)
    redis.call('PEXPIRE', lock, ms)
    redis.call('PEXPIRE', z, ms)
    redis.call('PEXPIRE', lock .. ':h', ms)
  end

  -- The three keys live at least t ms more (a grant or a renewal of ttl t).
  -- They are not trimmed to the last holder's expiry each time (that took a
  -- ZRANGE and three PEXPIREs per grant): when they must live longer they
  -- get 2t, so the holders granted or renewed in the next t ms cost one PTTL.
  -- Keys that outlive their holders hold nothing: whoever touches the name
  -- next trims the set to empty and treats the name as free.
  function sh_extend(lock, t)
    if redis.call('PTTL', lock) < t then
      local k = sh_int(2 * t)
      redis.call('PEXPIRE', lock, k)
      redis.call('PEXPIRE', lock .. ':z', k)
      redis.call('PEXPIRE', lock .. ':h', k)
    end
  end

  -- The lone holder of a 't' value: w, lease, limit, token, sb, ttl_ms, mode,
  -- owner (strings).
  function sh_one(v)
    return string.match(v, '^t(.)(%S*) (%d+) (%d+) (%d) (%d+) (%d) (.*)$')
  end

  -- A 't' value's holder spilled into '<lock>:z' and '<lock>:h' (they do not
  -- exist: they expire with the value), the value made the marker; returns
  -- the marker and how long the three keys live (ms). now: sh_now(). t: the
  -- ttl of a grant that follows (_acquire_shared.lua), else nil: when the
  -- value lives less, the keys get sh_extend's 2t here at once (its PTTL
  -- and three PEXPIREs less), so that grant needs no sh_extend.
  function sh_spill(lock, v, now, t)
    local w, lease, limit, rest = string.match(v, '^t(.)(%S*) (%d+) (.*)$')
    local ms = math.max(redis.call('PTTL', lock), 1)
    local mk = 's' .. w .. '0 ' .. limit .. ' 0'
    local live = ms
    if t and ms < t then
      live = 2 * t
    end
    local k = sh_int(live)
    if live == ms then
      redis.call('SET', lock, mk, 'KEEPTTL')
    else
      redis.call('SET', lock, mk, 'PX', k)
    end
    redis.call('ZADD', lock .. ':z', sh_int(now + ms), lease)
    redis.call('HSET', lock .. ':h', lease, rest)
    redis.call('PEXPIRE', lock .. ':z', k)
    redis.call('PEXPIRE', lock .. ':h', k)
    return mk, live
  end

  -- The token after a fence counter n that ran ahead of the floor: n + 1
  -- (step nil: one Redis, Sentinel, Cluster), or on a Redlock node (step:
  -- lockd's vote modulus, 16; res: this node's residue, 1 .. 15, never the
  -- floor's 0: backend_redlock.c says why) the first value above n with
  -- residue res modulo step. As a string.
  function sh_step(n, step, res)
    local t = n + 1
    if step then
      t = t + (res - t) % step -- (Lua's %: never negative for step > 0)
    end
    return string.format('%d', t)
  end

  -- A grant's token into the set: now_us, or one past the fence counter when
  -- it ran ahead of it (as sh_grant_one's). more: how many readers ride on
  -- it (tokens token + 1 .. token + more, _acquire_shared.lua): the counter
  -- is left at the last one, by the same SET ... GET unless it ran ahead.
  -- step, res: nil, or a Redlock node's vote modulus and residue (sh_step).
  -- held: the name is held by a set (a marker 's'): an 'l' on the counter
  -- is then a spilled lone holder's, still in the set, whose end its
  -- release or trim counts (sh_bump), not owed here; on a free name it is
  -- an ended lone holder's, counted here (sh_fence). Returns the token and
  -- what the counter held ('<n>w': a watcher marked it).
  function sh_fence_next(fence, nowus, more, step, res, held)
    local tok = nowus
    local last = redis.call('SET', fence, more > 0 and string.format('%d', nowus + more) or nowus, 'PX',
      'FENCE_RETENTION_MS', 'GET')
    -- a plain counter read with one tonumber, a marked one ('<n>w', '<n>l')
    -- with sh_fence; nowus is lockd's digits (coerced: one strtod, not two)
    local lastn = last and (tonumber(last) or sh_fence(last, held))
    if lastn and lastn >= nowus + 0 then
      tok = sh_step(lastn, step, res)
      redis.call('SET', fence, more > 0 and string.format('%d', tok + more) or tok, 'PX', 'FENCE_RETENTION_MS')
    end
    return tok, last
  end

  -- A lone holder's grant ('t'; _acquire_shared.lua wrote its value
  -- 't<wl> <limit> <now> <rest>' with the token now): the token as
  -- _acquire.lua's (the fence counter's SET GET, the value rewritten when the
  -- counter ran ahead); a counter that cannot be used undoes the grant. A
  -- reader's grant (limit 1) publishes 'g' when it lets readers refused
  -- elsewhere in (wake: it clears a waiting writer's lapsed x), as a
  -- watched counter does
  -- (a 'g' wakes watchers and queued readers only: lockd's
  -- waiters_kick_granted). Any other reader's grant frees nothing for
  -- anyone: the readers refused by what held the name before it were told
  -- by its release (w) or wait for its expiry (their retry timer), and a
  -- waiting reader's own lockd queues nobody behind it without asking.
  -- step, res: as sh_fence_next's; with step (a Redlock node) the counter
  -- is left '<token>l': this holder's end is owed a count (sh_fence). The
  -- name was free: an 'l' read here (an earlier lone holder's) is counted.
  -- Returns the token; a semaphore's (limit > 1) with '+' after it, as
  -- _acquire_shared.lua answers a grant that leaves a slot free.
  function sh_grant_one(lock, fence, wl, limit, now, rest, wake, step, res)
    local last = redis.pcall('SET', fence, step and now .. 'l' or now, 'PX', 'FENCE_RETENTION_MS', 'GET')
    local n, g = 0, wake and limit == '1'
    if last then
      n = tonumber(last)
      if not n and type(last) == 'string' then
        local w
        n, w = sh_fence(last, false)
        g = g or w
      end
      if not n then
        redis.call('DEL', lock)
        return type(last) == 'table' and last or {err = 'ERR fence counter is not a number'}
      end
    end
    if g then
      sh_publish(lock, 'g')
    end
    if n >= now + 0 then -- (coerced, as _acquire.lua's)
      local ts = sh_step(n, step, res)
      redis.call('SET', fence, step and ts .. 'l' or ts, 'PX', 'FENCE_RETENTION_MS')
      redis.call('SET', lock, 't' .. wl .. ' ' .. limit .. ' ' .. ts .. ' ' .. rest, 'XX', 'KEEPTTL')
      now = ts
    end
    if limit ~= '1' then
      return now .. '+' -- a semaphore's lone holder: limit - 1 slots are free
    end
    return now
  end

  -- A lease's hold on a 't' value v: renew (nt: ttl_ms, '0' = the last one)
  -- as renew.lua renews an exclusive lease. Returns {1, token, ttl, owner,
  -- mode} renewed, {2, owner, token, sb, pttl} another lease holds it.
  function sh_one_renew(lock, v, lease, nt)
    local w, l, limit, tok, sb, ttl, mode, owner = sh_one(v)
    if l ~= lease then
      return {2, owner or '', tonumber(tok) or 0, sb or '0', redis.call('PTTL', lock)}
    end
    if nt == '0' or nt == ttl then
      nt = ttl
      redis.call('PEXPIRE', lock, nt)
    else
      local left = redis.call('PTTL', lock)
      redis.call('SET', lock, 't' .. w .. l .. ' ' .. limit .. ' ' .. tok .. ' ' .. sb .. ' ' .. nt .. ' ' .. mode .. ' '
        .. owner, 'PX', nt)
      sh_shortened(lock, left, nt)
    end
    return {1, tonumber(tok), tonumber(nt), owner, mode}
  end

  -- {owner, token, sb, pttl, mode} of the holder that expires first (first =
  -- true: a full semaphore frees a slot then) or last (a writer needs every
  -- reader gone).
  function sh_holder(lock, first, now)
    local e = redis.call('ZRANGE', lock .. ':z', first and 0 or -1, first and 0 or -1, 'WITHSCORES')
    local v = redis.call('HGET', lock .. ':h', e[1]) or ''
    local tok, sb, _, mode, owner = string.match(v, '^(%d+) (%d) (%d+) (%d) (.*)$')
    return {owner or '', tonumber(tok) or 0, sb or '0', math.max(tonumber(e[2]) - now, 0), mode or '1'}
  end

  -- What an exclusive acquire (limit 1) meets on a marker v: nil when nobody
  -- holds the name any more (the keys are gone: take it), {3, limit} when a
  -- semaphore holds it, else {0, owner, token, sb, pttl, mode} of the reader
  -- that leaves last. A waiter refused by readers marks a writer waiting.
  function sh_refuse(lock, v, waiter)
    local now = sh_now()
    if sh_trim(lock, now) == 0 then
      redis.call('DEL', lock, lock .. ':z', lock .. ':h')
      return nil
    end
    local limit = string.match(v, '^s%d%d (%d+)')
    if limit ~= '1' then
      return {3, tonumber(limit) or 0}
    end
    local hd = sh_holder(lock, false, now)
    if waiter then
      redis.call('SET', lock, 's11 1 ' .. string.format('%d', now + hd[4] + 1000), 'KEEPTTL')
    end
    return {0, hd[1], hd[2], hd[3], hd[4], hd[5]}
  end

  -- A lease's hold on a marked name: renew (nt: ttl_ms, '0' = the last one)
  -- or, with nt nil, nothing but the check. Returns {1, token, ttl} held (and
  -- renewed), {0} nobody holds it, {2, owner, token, sb, pttl} another does.
  function sh_renew(lock, lease, nt)
    local now = sh_now()
    local e = redis.call('ZSCORE', lock .. ':z', lease)
    if not e or tonumber(e) <= now then
      if sh_trim(lock, now) == 0 then
        redis.call('DEL', lock, lock .. ':z', lock .. ':h')
        return {0}
      end
      local hd = sh_holder(lock, false, now)
      return {2, hd[1], hd[2], hd[3], hd[4]}
    end
    local v = redis.call('HGET', lock .. ':h', lease) or ''
    local tok, sb, ttl, mode, owner = string.match(v, '^(%d+) (%d) (%d+) (%d) (.*)$')
    if not nt then
      return {1, tok, ttl}
    end
    if nt == '0' then
      nt = ttl
    elseif nt ~= ttl then
      redis.call('HSET', lock .. ':h', lease, tok .. ' ' .. sb .. ' ' .. nt .. ' ' .. mode .. ' ' .. owner)
    end
    redis.call('ZADD', lock .. ':z', sh_int(now + tonumber(nt)), lease)
    sh_extend(lock, tonumber(nt))
    if nt ~= ttl then
      sh_shortened(lock, tonumber(e) - now, nt)
    end
    return {1, tonumber(tok), tonumber(nt), owner, mode}
  end

  -- Releases lease's slot of a marked name (v: the marker). The name's keys
  -- go with its last holder, leaving a lock-delay when asked. A release
  -- publishes when a waiter or watcher asked (w, which stays set while the
  -- name is held), as _release.lua's does, but only when it can let a waiter
  -- in or a watcher marked the counter (sh_bump's answer; under sh_ho
  -- release_handoff.lua asks sh_bump itself): the last holder's release, or
  -- any release of a semaphore's slot. A reader leaving while other readers
  -- hold frees nothing for a writer (it needs them all gone), nor for readers
  -- while a waiting writer's x stands (only it refuses them); after it lapsed
  -- such a release publishes again. The keys' expiry is left alone
  -- (sh_extend): the last one out deletes them.
  function sh_release(lock, v, lease, delay, publish)
    local now = sh_now()
    local z, h = lock .. ':z', lock .. ':h'
    local call = redis.call -- (a local: two table lookups less per call below)
    local cn = sh_cl == lock and sh_cn -- the holders this call left in the set, when known (sh_cl)
    sh_cl = nil
    -- the expired holders first (lease's own slot too, if it expired): then
    -- ZREM says whether lease held a live slot, with no ZSCORE (its double
    -- reply is formatted with %.17g and parsed again: ~6,500 instructions).
    if sh_trim(lock, now, 0, z) ~= 0 then
      cn = nil -- (never when known: they were counted after a trim at this clock)
    end
    if call('ZREM', z, lease) == 0 then
      return sh_renew(lock, lease, nil) -- not held: who is, as a renewal says
    end
    local n = cn and cn - 1 or call('ZCARD', z)
    local tok = string.match(call('HGET', h, lease) or '', '^%d+') or '0'
    if n > 0 then
      call('HDEL', h, lease)
    end
    local watched = false
    if not sh_ho then
      watched = sh_bump(lock)
      if n > 0 then
        sh_cl, sh_cv, sh_cn = lock, v, n -- (the marker stays while holders do)
      end
    end
    sh_left, sh_mark = n, v
    -- the marker 's<w><x> <limit> <xu>': x and w read as bytes, xu only
    -- when x is set (one match at most); readers' usual marker (w set, no
    -- x, limit 1) compared whole (interned strings: a pointer's compare)
    local usual = v == 's10 1 0'
    local x = not usual and string.byte(v, 3) == 49
    local xu = x and tonumber(string.match(v, '(%d+)$') or 0) or 0
    if n <= 0 then
      if delay ~= '0' then
        call('DEL', z, h)
        call('SET', lock, 'd', 'PX', delay)
      elseif xu > now then
        -- a writer waits: the last reader leaves it reserved, for a second at
        -- most, so that no reader (of another lockd) overtakes it now
        call('DEL', z, h)
        call('SET', lock, 's11 1 ' .. xu, 'PX', math.min(xu - now, 1000))
      else
        call('DEL', lock, z, h)
      end
    end
    -- readers are refused only by a waiting writer's x: while it stands, a
    -- reader leaving others behind lets no one in; once it lapsed (the
    -- writer gave up) and no grant has cleared it yet (a reader's grant
    -- clears it and wakes them), readers it refused may come in now
    if usual then
      if n <= 0 or watched then
        publish(lock)
      end
    elseif string.byte(v, 2) == 49 and (n <= 0 or watched or (x and xu <= now) or string.sub(v, 4, 6) ~= ' 1 ') then
      publish(lock) -- (limit not 1: a semaphore)
    end
    return tok
  end
end
