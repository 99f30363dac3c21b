import type { RedisClient } from '../redis';
import { gateKeys } from './gate-keys';
import { withGateScripts } from './scripts';

/** How early an attempt may start for its place in the pace, ms (see lua/start-attempt.lua). */
const PACE_TOLERANCE_MS = 25;

/** The per-endpoint rate limit of docs/design.md §14.1 (`rate_limit_per_s`), shared by every worker through Redis. */
export interface EndpointRateLimiter {
  /**
   * Reserves the next slot of the gate key's schedule at `limitPerS` attempts a second, and
   * records the limit there, so the gate's acquire script reserves the next jobs' slots itself
   * (without a database round trip) for the minute after. One script call (lua/reserve-rate-slot.lua).
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
   * database claim between the two would otherwise bunch. One script call (lua/start-attempt.lua).
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
 * @param shard - the queue partition whose jobs this limiter serves; default 0
 */
export function createEndpointRateLimiter(redis: RedisClient, prefix: string, shard = 0): EndpointRateLimiter {
  const client = withGateScripts(redis);
  return {
    reserve: async (gateKey, limitPerS) => Number(await client.webhookRateReserve(1, gateKeys(prefix, gateKey, shard).rate, limitPerS)),
    start: async (gateKey, token, limitPerS) => {
      const keys = gateKeys(prefix, gateKey, shard);
      return Number(await client.webhookRateStart(2, keys.starts, keys.pace, limitPerS, token, PACE_TOLERANCE_MS));
    },
  };
}
