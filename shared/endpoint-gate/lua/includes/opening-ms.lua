--[[
  How long a circuit stays open at its n-th opening (n >= 1), ms (docs/design.md §6.4): the
  first opening's length, doubled at each opening after it, at most the longest. The one
  statement of the rule: release.lua opens by it, acquire.lua tells a job parked behind a
  probe how long a failed probe would keep the circuit open.
]]
local function openingMs(openings, base, max)
  return math.min(base * 2 ^ (openings - 1), max)
end
