--[[
  Redis's own clock in whole ms: it orders every worker's view of a gate (replicas receive
  the scripts' effects, not the scripts).
]]
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
