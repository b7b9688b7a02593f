-- acquire.lua - grant one lock (_acquire.lua says how).
-- KEYS: lock, fence counter. ARGV: '<w><lease>', '<sb> <ttl_ms> <owner>',
-- ttl_ms, now_us.
--#include _shared.lua
--#call
local lock, fence, wl, rest, ttl, now = KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4]
--#include _acquire.lua
