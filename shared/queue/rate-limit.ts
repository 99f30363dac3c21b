import type { RedisClient } from '../redis';
import { circuitKeys, RESERVE_RATE_SLOT_LUA } from './circuit-breaker';

const RESERVE_SCRIPT = `${RESERVE_RATE_SLOT_LUA}
local t = redis.call('TIME')
return reserveRateSlot(KEYS[1], tonumber(ARGV[1]), tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000)`;

// Two bounds on the attempts as they leave, both needed for DESIGN §14's promise about any
// one-second window at the endpoint. A sliding-window log of the last second's starts holds
// them to the limit in any second. GCRA on a pace key spaces them 1000 / limit ms apart:
// without it the log alone lets a second's starts bunch into its first few hundred ms and
// repeat that shape a second later, and then a few ms of jitter between a start and its
// arrival put more than the limit into one second at the endpoint. The pace tolerates
// starts up to PACE_TOLERANCE_MS early (within the burst of ceil(limit / 10)), so a waiting
// worker whose timer fires a few ms late does not lose the slot; a larger tolerance would
// bank the credit earned while the log holds starts back and spend it as a burst that then
// repeats every second. The answer is 0 (recorded: send now) or the ms until both have room.
const START_SCRIPT = `
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
return 0`;

/** How early an attempt may start for its place in the pace, ms (see START_SCRIPT). */
const PACE_TOLERANCE_MS = 25;

type ScriptClient = RedisClient & {
  webhookRateReserve(numberOfKeys: number, ...keysAndArgs: (string | number)[]): Promise<number>;
  webhookRateStart(numberOfKeys: number, ...keysAndArgs: (string | number)[]): Promise<number>;
};

/** The per-endpoint rate limit of DESIGN §14 (`rate_limit_per_s`), shared by every worker through Redis. */
export interface EndpointRateLimiter {
  /**
   * Reserves the next slot of the gate key's schedule at `limitPerS` attempts a second, and
   * records the limit there, so the gate's acquire script reserves the next jobs' slots itself
   * (without a database round trip) for the minute after. One script call.
   *
   * @returns ms until the reserved slot starts: 0 to go now, else the time to wait without an
   *   attempt (the slot stays reserved for the caller)
   */
  reserve(gateKey: string, limitPerS: number): Promise<number>;
  /**
   * Records an attempt starting now, right before its request leaves, unless `limitPerS`
   * attempts already started in the last second across all workers or it comes too soon after
   * the one before (GCRA: 1000 / `limitPerS` ms apart, a burst of at most ceil(limitPerS / 10)).
   * Slots space attempts when they are taken; this bounds them when they go, which a slow
   * database claim between the two would otherwise bunch. One script call.
   *
   * @param token - the attempt (its job id)
   * @returns 0 when recorded (send now), else ms until the window has room
   */
  start(gateKey: string, token: string, limitPerS: number): Promise<number>;
}

/**
 * How late a job may run for the slot it reserved and still hold it, ms: a second. The gate
 * lets a late job go only while the last second's attempts leave room (the limit plus half its
 * burst of ceil(limit / 10)); else it takes a new slot, so late jobs never bunch above the limit.
 */
export const RATE_SLOT_TOLERANCE_MS = 1_000;

/**
 * @param redis - a `client`-role connection or a Cluster; the schedule's keys start with the
 *   partition's key base, as the endpoint's gate keys do, so they live in their slot
 * @param prefix - REDIS_PREFIX
 * @param partition - the queue partition whose jobs this limiter serves; default 0
 */
export function createEndpointRateLimiter(redis: RedisClient, prefix: string, partition = 0): EndpointRateLimiter {
  const client = redis as ScriptClient;
  if (typeof client.webhookRateReserve !== 'function') {
    redis.defineCommand('webhookRateReserve', { lua: RESERVE_SCRIPT });
    redis.defineCommand('webhookRateStart', { lua: START_SCRIPT });
  }
  return {
    reserve: async (gateKey, limitPerS) => Number(await client.webhookRateReserve(1, circuitKeys(prefix, gateKey, partition).rate, limitPerS)),
    start: async (gateKey, token, limitPerS) => {
      const keys = circuitKeys(prefix, gateKey, partition);
      return Number(await client.webhookRateStart(2, keys.starts, keys.pace, limitPerS, token, PACE_TOLERANCE_MS));
    },
  };
}
