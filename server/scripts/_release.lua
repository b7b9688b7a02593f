-- _release.lua - one release (included as _acquire.lua is):
-- compare-and-delete. Deletes the lock only if the lease holds it, optionally
-- leaves a lock-delay in its place, and tells other lockd processes when one
-- of their waiters asked to hear of it (the lock's value is described in
-- _acquire.lua).
-- lock: the lock's key. lease. delay: delay_ms. publish(lock): publishes the
-- release on the lock's channel, '<prefix>released:{<name>}', with the
-- releasing lockd's instance id as the message (so it can skip its own);
-- each script that includes this part defines it.
-- Returns the token, as a string, when released; {0} nobody holds it;
-- {2, owner, token, sb, pttl} another lease holds it.
local call = redis.call -- (a local: two table lookups less per call below)
-- (right after a grant into its set in this call, the marker is known:
-- release_handoff.lua's ho_grant, _shared.lua's sh_cl)
local v = sh_cl == lock and sh_cv or call('GET', lock)
if not v or v == 'd' then
  return {0}
end
local n, b = #lease, string.byte(v) -- b: the value's form, read once
if b == 116 then
  -- a lone shared holder (_shared.lua): its lease after 't<w>'
  if string.find(v, lease, 3, true) ~= 3 or string.byte(v, n + 3) ~= 32 then
    sh_load()
    local _, _, _, tok, sb, _, _, owner = sh_one(v)
    return {2, owner or '', tonumber(tok) or 0, sb or '0', call('PTTL', lock)}
  end
  if delay ~= '0' then
    call('SET', lock, 'd', 'PX', delay)
  else
    call('DEL', lock)
  end
  if string.byte(v, 2) == 49 then
    publish(lock)
  end
  return string.match(v, '^%d+ (%d+)', n + 4)
end
if b == 115 then
  -- one of shared holders (a marker's lease is never at 2: no find)
  sh_load()
  return sh_release(lock, v, lease, delay, publish)
end
if string.find(v, lease, 2, true) ~= 2 or string.byte(v, n + 2) ~= 32 then
  local _, tok, sb, _, owner = string.match(v, '^.(%S*) (%d+) (%d) (%d+) (.*)$')
  return {2, owner or '', tonumber(tok) or 0, sb or '0', call('PTTL', lock)}
end
if delay ~= '0' then
  call('SET', lock, 'd', 'PX', delay)
else
  call('DEL', lock)
end
if b == 49 then
  publish(lock)
end
return string.match(v, '^%d+', n + 3)
