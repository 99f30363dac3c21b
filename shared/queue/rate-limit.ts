import type { RedisClient } from '../redis';
import { circuitKeys, RESERVE_RATE_SLOT_LUA } from './circuit-breaker';

const RESERVE_SCRIPT = `${RESERVE_RATE_SLOT_LUA}
local t = redis.call('TIME')
return reserveRateSlot(KEYS[1], tonumber(ARGV[1]), tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000)`;

// A sliding-window log of the attempts started in the last second (DESIGN §14's promise is
// about any one-second window at the endpoint): an attempt starts only while it holds fewer
// than the limit; else the answer is the ms until the oldest start leaves the window.
const START_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 1000)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return math.max(1, tonumber(oldest[2]) + 1000 - now)
end
redis.call('ZADD', KEYS[1], now, ARGV[2])
redis.call('PEXPIRE', KEYS[1], 2000)
return 0`;

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
   * attempts already started in the last second across all workers. Slots space attempts
   * when they are taken; this bounds them when they go, which a slow database claim between
   * the two would otherwise bunch. One script call.
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
    start: async (gateKey, token, limitPerS) => Number(await client.webhookRateStart(1, circuitKeys(prefix, gateKey, partition).starts, limitPerS, token)),
  };
}
