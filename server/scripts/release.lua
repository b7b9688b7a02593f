-- release.lua - release one lock (_release.lua says how).
-- KEYS: lock. ARGV: lease, delay_ms, '<channel> <publisher>'.
local lock, lease, delay, chanpub = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
--#include _release.lua
