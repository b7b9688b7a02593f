-- release.lua - release one lock (_release.lua says how).
-- KEYS: lock. ARGV: lease, delay_ms, '<channel> <publisher>'.
--#include _release.lua
return release(KEYS[1], ARGV[1], ARGV[2], ARGV[3])
