--[[
  Asks the endpoint gates of a batch of attempts for a lease each (docs/design.md §6.4, §6.5; §14.1,
  `rate_limit_per_s`), handled in order as separate calls would be. For each attempt, in order:
  an open circuit refuses; a FIFO line lets only its head on; a half-open circuit lets one
  probe through; a known rate limit reserves the attempt's slot; the concurrency cap grants a
  lease (TTL-based: a dead worker's lease expires by itself) or parks the token with the gate,
  so the release that frees a lease wakes it. A circuit whose origin epoch is older than the
  attempt's (its endpoint moved to another origin since) is stale: it is reset, and ignored.

  Input, for attempt i = 0, 1, ... (seven keys and five arguments each):
    KEYS[7i + 1] the gate key's circuit (hash: until, failures, openings, probe, probe_until,
                 epoch: the origin epoch its state is of, absent for 0)
    KEYS[7i + 2] its leases (sorted set: token by expiry, ms)
    KEYS[7i + 3] its parked tokens (sorted set: token by parking time, ms)
    KEYS[7i + 4] its rate schedule (hash: tat, limit; see includes/reserve-rate-slot)
    KEYS[7i + 5] its log of starts (sorted set; see start-attempt.lua)
    KEYS[7i + 6] its line record (hash: fifo '1' or '0', head: the FIFO line's head token)
    KEYS[7i + 7] its partition's index of circuits not closed (see release.lua)

    ARGV[1] the cap (WEBHOOK_ENDPOINT_CONCURRENCY)
    ARGV[2] a lease's TTL, ms
    ARGV[3] a parked set's TTL, ms
    ARGV[4] a line record's TTL, ms
    ARGV[5] a circuit's first opening, ms
    ARGV[6] a circuit's longest opening, ms
    ARGV[6 + 5i + 1] the token (the job id)
    ARGV[6 + 5i + 2] '1' when the token holds the rate slot it reserved earlier, else '0'
    ARGV[6 + 5i + 3] its place: 'unclaimed' (not claimed yet), or its claimed delivery's
                     'unordered', 'head' (recorded in the line record) or 'aside'
    ARGV[6 + 5i + 4] the origin epoch of its claimed delivery's endpoint, or '' (unknown:
                     not claimed yet, or no endpoint)
    ARGV[6 + 5i + 5] the gate key (its member in the index)

  Output, three numbers per attempt:
    0, rate limit or 0, 1 if the probe else 0 - granted (the limit whose slot it reserved)
    1, 0, 0             - refused for the cap; parked
    2, ms until reopening, 0 - refused: the circuit is open
    3, ms until the probe's lease ends, ms the circuit would open for should the probe fail -
                        refused: the probe is in flight; parked
    4, ms until the slot, limit - refused until the rate slot it reserved
    5, 0, 0             - claim first: not the FIFO line's head, or the ordering is unknown
]]
--- @include "includes/now-ms"
--- @include "includes/opening-ms"
--- @include "includes/reserve-rate-slot"

local now = nowMs()
local cap, ttl, parkedTtl, lineTtl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local openingBase, openingMax = tonumber(ARGV[5]), tonumber(ARGV[6])

local function park(parked, token)
  redis.call('ZADD', parked, now, token)
  redis.call('PEXPIRE', parked, parkedTtl)
end

-- The attempts a rate-limited gate started in the last second (recorded as each request
-- leaves, start-attempt.lua): a job late for its slot may still go while that second has room
-- (the limit plus half its burst), else it takes a new slot.
local function startedInWindow(starts, limit)
  redis.call('ZREMRANGEBYSCORE', starts, '-inf', now - 1000)
  return redis.call('ZCARD', starts) < limit + math.floor(math.ceil(limit / 10) / 2)
end

-- Only the head of a FIFO line goes on (docs/design.md §6.5); a
-- claimed place records what its claim showed. A read does not refresh the record: one that
-- expires sends the next job to claim first, and that claim records it again.
local function inLine(line, token, place)
  if place == 'unclaimed' then
    local fifo, head = unpack(redis.call('HMGET', line, 'fifo', 'head'))
    return fifo == '0' or (fifo == '1' and head == token)
  elseif place == 'unordered' then
    redis.call('HSET', line, 'fifo', '0')
    redis.call('HDEL', line, 'head')
  elseif place == 'head' then
    redis.call('HSET', line, 'fifo', '1', 'head', token)
  end
  redis.call('PEXPIRE', line, lineTtl)
  return true
end

-- An endpoint that moved to another origin starts with a closed circuit: the state of the
-- origin it left is dropped, and the new epoch recorded, so the old origin's late answers
-- count for nothing (release.lua).
local function forgetStale(circuit, index, epoch, member)
  if epoch == '' then return end
  epoch = tonumber(epoch)
  if tonumber(redis.call('HGET', circuit, 'epoch') or '0') >= epoch then return end
  redis.call('DEL', circuit)
  redis.call('ZREM', index, member)
  redis.call('HSET', circuit, 'epoch', epoch)
  redis.call('PEXPIRE', circuit, lineTtl)
end

local function acquire(circuit, leases, parked, rate, starts, line, index, token, holdsSlot, place, epoch, member)
  redis.call('ZREM', parked, token)
  forgetStale(circuit, index, epoch, member)
  local probe = 0
  local untilMs = tonumber(redis.call('HGET', circuit, 'until') or '0')
  if untilMs > 0 and now < untilMs then return {2, untilMs - now, 0} end
  if not inLine(line, token, place) then return {5, 0, 0} end
  if untilMs > 0 then
    local probeUntil, holder, openings = unpack(redis.call('HMGET', circuit, 'probe_until', 'probe', 'openings'))
    probeUntil = tonumber(probeUntil or '0')
    if probeUntil > now and holder ~= token then
      park(parked, token)
      return {3, probeUntil - now, openingMs(tonumber(openings or '0') + 1, openingBase, openingMax)}
    end
    probe = 1
  end
  local rated = 0
  local limit = tonumber(redis.call('HGET', rate, 'limit') or '0')
  if limit > 0 then
    if holdsSlot ~= '1' or not startedInWindow(starts, limit) then
      local wait = reserveRateSlot(rate, limit, now)
      if wait > 0 then return {4, wait, limit} end
    end
    rated = limit
  end
  -- Added first, counted after: the set never holds more than the cap, so its expired leases
  -- are only swept when a new one would not fit (three commands for a lease that fits).
  if redis.call('ZADD', leases, now + ttl, token) == 1 and redis.call('ZCARD', leases) > cap then
    redis.call('ZREMRANGEBYSCORE', leases, '-inf', now)
    if redis.call('ZCARD', leases) > cap then
      redis.call('ZREM', leases, token)
      park(parked, token)
      return {1, 0, 0}
    end
  end
  redis.call('PEXPIRE', leases, ttl)
  if probe == 1 then redis.call('HSET', circuit, 'probe', token, 'probe_until', now + ttl) end
  return {0, rated, probe}
end

local out = {}
for i = 0, (#ARGV - 6) / 5 - 1 do
  local k, a = 7 * i, 6 + 5 * i
  local decision = acquire(KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], KEYS[k + 5], KEYS[k + 6], KEYS[k + 7],
    ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5])
  out[3 * i + 1], out[3 * i + 2], out[3 * i + 3] = decision[1], decision[2], decision[3]
end
return out
