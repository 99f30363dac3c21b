--[[
  Reserves the next slot of a rate-limit schedule: GCRA (the generic cell rate algorithm of
  ATM networks, as in redis-cell) in reservation form with a burst of one.

  rate  - the schedule's hash: 'tat' (its theoretical arrival time, ms on Redis's clock) and
          'limit' (attempts a second); kept a minute past the schedule's end
  limit - attempts a second
  now   - Redis's clock, ms

  Returns the ms until the reserved slot starts (0: now).
]]
local function reserveRateSlot(rate, limit, now)
  local interval = 1000 / limit
  local tat = tonumber(redis.call('HGET', rate, 'tat') or '0')
  if tat < now then tat = now end
  redis.call('HSET', rate, 'tat', string.format('%.3f', tat + interval), 'limit', limit)
  redis.call('PEXPIRE', rate, math.ceil(tat + interval - now) + 60000)
  return math.ceil(tat - now)
end
