-- _failed.lua - what a many-lock script answers for a lock whose function
-- raised an error (caught by pcall): Redis raises a table {err = ...}, Lua
-- a string, and either becomes an error reply for that lock alone.
local function failed(r)
  if type(r) == 'table' then
    return r
  end
  return {err = tostring(r)}
end
