--[[
  Records an attempt to a rate-limited endpoint as it leaves, unless the limit would be
  exceeded (docs/design.md §14.1's promise about any one-second window at the endpoint). Two bounds,
  both needed: a sliding-window log of the last second's starts holds them to the limit in any
  second; GCRA on a pace key spaces them 1000 / limit ms apart: without it the log alone lets
  a second's starts bunch into its first few hundred ms and repeat that shape a second later,
  and then a few ms of jitter between a start and its arrival put more than the limit into one
  second at the endpoint. The pace tolerates starts up to ARGV[3] ms early (within the burst of
  ceil(limit / 10)), so a waiting worker whose timer fires a few ms late does not lose the
  slot; a larger tolerance would bank the credit earned while the log holds starts back and
  spend it as a burst that then repeats every second.

  Input:
    KEYS[1] the gate key's log of starts (sorted set: token by ms)
    KEYS[2] the gate key's pace (string: the next start's theoretical time, ms)

    ARGV[1] the limit, attempts a second
    ARGV[2] the attempt's token (its job id)
    ARGV[3] the pace's tolerance, ms

  Output:
    0 - recorded: send now
    n - the ms until both bounds have room (nothing recorded)
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local limit = tonumber(ARGV[1])
local interval = 1000 / limit
local tolerance = math.min((math.ceil(limit / 10) - 1) * interval, tonumber(ARGV[3]))
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 1000)
local wait = 0
if redis.call('ZCARD', KEYS[1]) >= limit then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  wait = tonumber(oldest[2]) + 1000 - now
end
local tat = math.max(tonumber(redis.call('GET', KEYS[2]) or '0'), now)
wait = math.max(wait, tat - tolerance - now)
if wait > 0 then return math.max(1, math.ceil(wait)) end
redis.call('ZADD', KEYS[1], string.format('%.3f', now), ARGV[2])
redis.call('PEXPIRE', KEYS[1], 2000)
redis.call('SET', KEYS[2], string.format('%.3f', tat + interval), 'PX', math.ceil(tat + interval - now) + 1000)
return 0
