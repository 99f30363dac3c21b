--[[
  Returns the leases of a batch of attempts and reports each attempt to its circuit (docs/design.md
  §6.4), handled in order as separate calls would be. 'failure' (timeout, connection error, 5xx,
  429) counts towards opening, or reopens after a failed probe for twice as long (30 s to
  10 min); 'success' closes the circuit; 'neutral' only returns the lease. Then, unless the
  circuit is open or probing, it wakes as many parked tokens, oldest first, as there are free
  leases (one while half-open). The circuit counts an attempt only of its own origin epoch
  (acquire.lua): an attempt that started before its endpoint moved to another origin returns
  its lease and nothing else; one of a newer epoch than the circuit's resets it first.

  Input, for release i = 0, 1, ... (five keys and five arguments each):
    KEYS[5i + 1] the gate key's circuit (hash; see acquire.lua)
    KEYS[5i + 2] its leases
    KEYS[5i + 3] its parked tokens
    KEYS[5i + 4] its line record
    KEYS[5i + 5] its partition's index of circuits not closed (sorted set: gate key by reopening, ms)

    ARGV[1] failures that open the circuit (WEBHOOK_BREAKER_FAILURES)
    ARGV[2] the first opening's length, ms
    ARGV[3] the longest opening, ms
    ARGV[4] how long a circuit is remembered without attempts, ms
    ARGV[5] the cap (WEBHOOK_ENDPOINT_CONCURRENCY)
    ARGV[6] a line record's TTL, ms
    ARGV[6 + 5i + 1] the token
    ARGV[6 + 5i + 2] the verdict: 'success', 'failure' or 'neutral'
    ARGV[6 + 5i + 3] the gate key (its member in the index)
    ARGV[6 + 5i + 4] the FIFO line's next head, now that the token's delivery ended, or ''
    ARGV[6 + 5i + 5] the origin epoch the attempt started with, or '' (unknown, or no endpoint)

  Output, per release: its change (0 none, 1 opened, 2 closed), the number of tokens woken,
  then those tokens.
]]
--- @include "includes/now-ms"
--- @include "includes/opening-ms"

-- Read once, and only by a release that needs it (a wake-up or a failure): most need neither.
local clock
local function now()
  clock = clock or nowMs()
  return clock
end
local threshold, base, max, memory, cap, lineTtl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])

-- The parked tokens that may run now: none while open or probing, one while half-open, else
-- one per free lease, oldest first. Most releases find none parked and stop at that.
local function wake(circuit, leases, parked)
  if redis.call('EXISTS', parked) == 0 then return {} end
  local untilMs, probeUntil = unpack(redis.call('HMGET', circuit, 'until', 'probe_until'))
  untilMs = tonumber(untilMs or '0')
  if untilMs > now() then return {} end
  local free = 1
  if untilMs > 0 then
    if tonumber(probeUntil or '0') > now() then return {} end
  else
    redis.call('ZREMRANGEBYSCORE', leases, '-inf', now())
    free = cap - redis.call('ZCARD', leases)
  end
  if free <= 0 then return {} end
  local popped = redis.call('ZPOPMIN', parked, free)
  local tokens = {}
  for j = 1, #popped, 2 do tokens[#tokens + 1] = popped[j] end
  return tokens
end

local function release(circuit, leases, index, token, verdict, member, epoch)
  redis.call('ZREM', leases, token)
  -- One read of the circuit: a closed one that never failed holds none of these fields.
  local untilMs, probe, failures, openings, circuitEpoch = unpack(redis.call('HMGET', circuit, 'until', 'probe', 'failures', 'openings', 'epoch'))
  local isProbe = probe == token
  circuitEpoch = tonumber(circuitEpoch or '0')
  epoch = tonumber(epoch) or circuitEpoch
  if epoch < circuitEpoch then
    if isProbe then redis.call('HDEL', circuit, 'probe', 'probe_until') end
    return 0
  end
  if epoch > circuitEpoch then
    redis.call('DEL', circuit)
    redis.call('ZREM', index, member)
    redis.call('HSET', circuit, 'epoch', epoch)
    redis.call('PEXPIRE', circuit, memory)
    untilMs, probe, failures, openings, isProbe = nil, nil, nil, nil, false
  end
  if verdict == 'neutral' then
    if isProbe then redis.call('HDEL', circuit, 'probe', 'probe_until') end
    return 0
  end
  untilMs = tonumber(untilMs or '0')
  if verdict == 'success' then
    if (untilMs > 0 or probe or failures or openings) and redis.call('DEL', circuit) == 1 then
      redis.call('ZREM', index, member)
      -- The epoch stays known, so the late answers of an origin the endpoint left still count for nothing.
      if epoch > 0 then
        redis.call('HSET', circuit, 'epoch', epoch)
        redis.call('PEXPIRE', circuit, memory)
      end
      if untilMs > 0 then return 2 end
    end
    return 0
  end
  if untilMs > 0 and not isProbe then return 0 end
  failures = redis.call('HINCRBY', circuit, 'failures', 1)
  if isProbe or failures >= threshold then
    openings = redis.call('HINCRBY', circuit, 'openings', 1)
    local duration = openingMs(openings, base, max)
    redis.call('HSET', circuit, 'until', now() + duration, 'failures', 0)
    redis.call('HDEL', circuit, 'probe', 'probe_until')
    redis.call('PEXPIRE', circuit, duration + memory)
    redis.call('ZADD', index, now() + duration, member)
    return 1
  end
  redis.call('PEXPIRE', circuit, memory)
  return 0
end

local out = {}
for i = 0, (#ARGV - 6) / 5 - 1 do
  local k, a = 5 * i, 6 + 5 * i
  local circuit, leases, parked, line, index = KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], KEYS[k + 5]
  out[#out + 1] = release(circuit, leases, index, ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 5])
  if ARGV[a + 4] ~= '' then
    redis.call('HSET', line, 'fifo', '1', 'head', ARGV[a + 4])
    redis.call('PEXPIRE', line, lineTtl)
  end
  local woken = wake(circuit, leases, parked)
  out[#out + 1] = #woken
  for _, woke in ipairs(woken) do out[#out + 1] = woke end
end
return out
