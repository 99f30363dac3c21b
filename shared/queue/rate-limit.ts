import type { RedisClient } from '../redis';
import { circuitKeys, RESERVE_RATE_SLOT_LUA } from './circuit-breaker';

const RESERVE_SCRIPT = `${RESERVE_RATE_SLOT_LUA}
local t = redis.call('TIME')
return reserveRateSlot(KEYS[1], tonumber(ARGV[1]), tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000)`;

type ScriptClient = RedisClient & { webhookRateReserve(numberOfKeys: number, ...keysAndArgs: (string | number)[]): Promise<number> };

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
}

/**
 * How late a job may run for the slot it reserved and still hold it, ms: a second. The gate
 * lets a late job go only while the last second's attempts leave room (the limit plus half its
 * burst of ceil(limit / 10)); else it takes a new slot, so late jobs never bunch above the limit.
 */
export const RATE_SLOT_TOLERANCE_MS = 1_000;

/**
 * @param redis - a `client`-role connection or a Cluster; the schedule's key starts with the
 *   prefix, as the endpoint's gate keys do, so it lives in their slot
 */
export function createEndpointRateLimiter(redis: RedisClient, prefix: string): EndpointRateLimiter {
  const client = redis as ScriptClient;
  if (typeof client.webhookRateReserve !== 'function') redis.defineCommand('webhookRateReserve', { lua: RESERVE_SCRIPT });
  return {
    reserve: async (gateKey, limitPerS) => Number(await client.webhookRateReserve(1, circuitKeys(prefix, gateKey).rate, limitPerS)),
  };
}
