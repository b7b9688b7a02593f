-- undo.lua - Redlock's undo (backend_redlock.c): give back a grant that did
-- not win a majority. Compare-and-delete like _release.lua (never someone
-- else's lock), but it publishes nothing: the grant was never anyone's
-- lock, and a release message would wake the other lockd processes' head
-- waiters at once, each of them undoing its own minority grant in turn, so
-- that a split vote would repeat instead of ending after the waiters'
-- random delays. (The value is described in _acquire.lua; a shared hold's
-- keys in _shared.lua: its slot goes as sh_release lets it go, without the
-- message.)
-- KEYS: lock. ARGV: lease.
-- Returns 1 when it was deleted, 0 when the lease did not hold it.
--#include _shared.lua
--#call
sh_load() -- (a rare script: its helpers made at once, as before)
local v = redis.call('GET', KEYS[1])
if not v or v == 'd' then
  return 0
end
local lease = ARGV[1]
if string.byte(v) == 116 then
  -- a lone shared holder (_shared.lua): its lease after 't<w>'
  if string.find(v, lease, 3, true) ~= 3 or string.byte(v, #lease + 3) ~= 32 then
    return 0
  end
  redis.call('DEL', KEYS[1])
  return 1
end
if string.byte(v) == 115 then
  local r = sh_release(KEYS[1], v, lease, '0', function(_) end)
  if type(r) == 'table' then
    return 0
  end
  return 1
end
if string.find(v, lease, 2, true) ~= 2 or string.byte(v, #lease + 2) ~= 32 then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
