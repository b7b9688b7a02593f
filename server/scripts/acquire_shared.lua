-- acquire_shared.lua - grant one shared hold or semaphore slot
-- (_acquire_shared.lua says how); lockd groups them under load as
-- acquire_shared_many.lua.
-- KEYS: lock, fence counter. ARGV: '<w><lease>', '<sb> <ttl_ms> <mode>
-- <owner>', ttl_ms, limit, now_us; then the readers granted with it
-- (bk_req.more; mode '1', limit '1' only) in fours: lease, sb, ttl_ms, owner;
-- or, on a Redlock node (which never sends riders: no BK_CAP_GROUP), the
-- vote modulus and the node's residue (sh_step), ARGV[6] and ARGV[7].
--#include _shared.lua
--#call
local lock, fence, wl, rest, ttl, limit, nowus = KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local na = #ARGV
local more, step, sres = math.floor((na - 5) / 4), nil, nil
if na == 7 then
  step, sres = ARGV[6], ARGV[7]
end
--#include _acquire_shared.lua
