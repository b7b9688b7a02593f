-- release.lua - release one lock (_release.lua says how).
-- KEYS: lock. ARGV: lease, delay_ms, '<channel> <publisher>'.
local lock, lease, delay, chanpub = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local function publish()
  local channel, publisher = string.match(chanpub, '^(.*) (%S*)$')
  redis.call('PUBLISH', channel, publisher)
end
--#include _shared.lua
--#include _release.lua
