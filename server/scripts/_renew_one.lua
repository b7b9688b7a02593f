-- _renew_one.lua - a lone shared holder's renewal (the 't' value of
-- _shared.lua), for renew.lua and renew_many.lua (included after
-- _shared.lua).
-- A lease's hold on a 't' value v: renew (nt: ttl_ms, '0' = the last one)
-- as renew.lua renews an exclusive lease. Returns {1, token, ttl} renewed,
-- {2, owner, token, sb, pttl} another lease holds it.
local function sh_one_renew(lock, v, lease, nt)
  local w, l, limit, tok, sb, ttl, mode, owner = sh_one(v)
  if l ~= lease then
    return {2, owner or '', tonumber(tok) or 0, sb or '0', redis.call('PTTL', lock)}
  end
  if nt == '0' or nt == ttl then
    nt = ttl
    redis.call('PEXPIRE', lock, nt)
  else
    redis.call('SET', lock, 't' .. w .. l .. ' ' .. limit .. ' ' .. tok .. ' ' .. sb .. ' ' .. nt .. ' ' .. mode .. ' '
      .. owner, 'PX', nt)
  end
  return {1, tonumber(tok), tonumber(nt)}
end
