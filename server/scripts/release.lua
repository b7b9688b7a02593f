-- release.lua - release one lock (_release.lua says how).
-- KEYS: lock. ARGV: lease, delay_ms, '<channel> <publisher>'.
local chanpub -- set per call (below): publish is made once, at FUNCTION LOAD
local function publish()
  local channel, publisher = string.match(chanpub, '^(.*) (%S*)$')
  redis.call('PUBLISH', channel, publisher)
end
--#include _shared.lua
--#call
local lock, lease, delay = KEYS[1], ARGV[1], ARGV[2]
chanpub = ARGV[3]
--#include _release.lua
