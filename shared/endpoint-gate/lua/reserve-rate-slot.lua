--[[
  Reserves the next slot of an endpoint's rate-limit schedule and records its limit there, so
  the gate's acquire reserves the next slots itself (docs/design.md §14.1, `rate_limit_per_s`).

  Input:
    KEYS[1] the gate key's rate schedule (hash: tat, limit)

    ARGV[1] the limit, attempts a second

  Output:
    the ms until the reserved slot starts (0: now); the slot stays reserved for the caller
]]
--- @include "includes/reserve-rate-slot"

local t = redis.call('TIME')
return reserveRateSlot(KEYS[1], tonumber(ARGV[1]), tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000)
