import type { RedisClient } from '../redis';

/** A circuit's state as DESIGN §6 and the endpoint stats of §11 name it. */
export type CircuitState = 'closed' | 'open' | 'half_open';

/** The first opening lasts 30 s; each consecutive one doubles it, up to 10 min (DESIGN §6). */
export const CIRCUIT_OPEN_BASE_MS = 30_000;
export const CIRCUIT_OPEN_MAX_MS = 600_000;
/** A circuit's failure count and openings are forgotten after a day without attempts. */
const CIRCUIT_MEMORY_MS = 86_400_000;

/**
 * The gate key of a delivery: its endpoint (`e:<id>`), or for an ad-hoc delivery its URL
 * origin (`o:<scheme>://<host>:<port>`), so every delivery to one receiver shares a cap and
 * a circuit (DESIGN §6, "Isolation between endpoints").
 */
export function gateKeyOf(delivery: { endpointId: number | null; url: string }): string {
  if (delivery.endpointId !== null) return `e:${delivery.endpointId}`;
  try {
    return `o:${new URL(delivery.url).origin}`;
  } catch {
    return `o:${delivery.url}`;
  }
}

/** Redis keys of one gate key; all start with the prefix, so a `{hash-tag}` prefix keeps them in one cluster slot. */
export function circuitKeys(prefix: string, gateKey: string): { circuit: string; leases: string; index: string } {
  return {
    circuit: `${prefix}:webhooks:circuit:${gateKey}`,
    leases: `${prefix}:webhooks:leases:${gateKey}`,
    index: `${prefix}:webhooks:circuits`,
  };
}

/**
 * Reads an endpoint's circuit without changing it: `open` until its reopening time,
 * `half_open` from then until a probe attempt closes or reopens it, `closed` otherwise (also
 * when Redis holds nothing for it). One HGET.
 *
 * @param prefix - REDIS_PREFIX (`config.redisPrefix`)
 * @param endpointId - a webhook_endpoints id
 */
export async function readCircuitState(redis: RedisClient, prefix: string, endpointId: number): Promise<CircuitState> {
  const until = await redis.hget(circuitKeys(prefix, `e:${endpointId}`).circuit, 'until');
  return stateAt(Number(until ?? 0), Date.now());
}

/**
 * Every circuit that is not closed, for the `webhook_circuit_state` metric: gate key (`e:12`,
 * `o:https://example.com`) and state. Two commands over an index the scripts keep.
 */
export async function listOpenCircuits(redis: RedisClient, prefix: string): Promise<{ gateKey: string; state: CircuitState }[]> {
  const index = circuitKeys(prefix, '').index;
  const now = Date.now();
  // A circuit whose keys expired unprobed (its endpoint gone quiet or deleted) is forgotten.
  await redis.zremrangebyscore(index, '-inf', now - CIRCUIT_MEMORY_MS);
  const flat = await redis.zrange(index, 0, -1, 'WITHSCORES');
  const out: { gateKey: string; state: CircuitState }[] = [];
  for (let i = 0; i < flat.length; i += 2) out.push({ gateKey: flat[i], state: stateAt(Number(flat[i + 1]), now) });
  return out;
}

function stateAt(until: number, now: number): CircuitState {
  if (!until) return 'closed';
  return now < until ? 'open' : 'half_open';
}

/** What {@link DeliveryGate.acquire} decided. */
export type GateDecision =
  | { granted: true; probe: boolean }
  /** `cap`: too many attempts in flight; `open`: the circuit is open; `probing`: a probe is in flight. */
  | { granted: false; reason: 'cap' | 'open' | 'probing'; waitMs: number };

/** How an attempt under a lease ended, for the circuit. */
export type AttemptVerdict = 'success' | 'failure' | 'neutral';

/** What {@link DeliveryGate.release} changed in the circuit. */
export type CircuitChange = 'none' | 'opened' | 'closed';

export interface DeliveryGate {
  /**
   * One script: refuses while the circuit is open or its probe is in flight, else takes one
   * of the gate key's WEBHOOK_ENDPOINT_CONCURRENCY leases (TTL-based, so a dead worker's
   * lease expires by itself), marking it the probe when the circuit is half-open.
   *
   * @param token - the lease holder, unique per attempt (the job id)
   */
  acquire(gateKey: string, token: string): Promise<GateDecision>;
  /**
   * One script: returns the lease and reports the attempt. `failure` (timeout, connection
   * error, 5xx, 429) counts towards opening, or reopens after a failed probe for twice as
   * long (30 s to 10 min); `success` closes the circuit; `neutral` (another 4xx, or no
   * attempt made) only returns the lease.
   */
  release(gateKey: string, token: string, verdict: AttemptVerdict): Promise<CircuitChange>;
}

export interface DeliveryGateOptions {
  /** REDIS_PREFIX. */
  prefix: string;
  /** WEBHOOK_ENDPOINT_CONCURRENCY. */
  concurrency: number;
  /** WEBHOOK_BREAKER_FAILURES. */
  breakerFailures: number;
  /** How long a lease lives unless returned, ms: longer than one attempt can take. */
  leaseTtlMs: number;
}

// Redis's own clock (TIME) orders every worker's view of a circuit; replicas receive effects.
const ACQUIRE_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local token, cap, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local probe = 0
local untilMs = tonumber(redis.call('HGET', KEYS[1], 'until') or '0')
if untilMs > 0 then
  if now < untilMs then return {2, untilMs - now, 0} end
  local probeUntil = tonumber(redis.call('HGET', KEYS[1], 'probe_until') or '0')
  if probeUntil > now and redis.call('HGET', KEYS[1], 'probe') ~= token then return {3, probeUntil - now, 0} end
  probe = 1
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if not redis.call('ZSCORE', KEYS[2], token) and redis.call('ZCARD', KEYS[2]) >= cap then return {1, 0, 0} end
redis.call('ZADD', KEYS[2], now + ttl, token)
redis.call('PEXPIRE', KEYS[2], ttl)
if probe == 1 then redis.call('HSET', KEYS[1], 'probe', token, 'probe_until', now + ttl) end
return {0, 0, probe}`;

const RELEASE_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local token, verdict, threshold = ARGV[1], ARGV[2], tonumber(ARGV[3])
local base, max, memory, member = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
redis.call('ZREM', KEYS[2], token)
local isProbe = redis.call('HGET', KEYS[1], 'probe') == token
if verdict == 'neutral' then
  if isProbe then redis.call('HDEL', KEYS[1], 'probe', 'probe_until') end
  return 0
end
local untilMs = tonumber(redis.call('HGET', KEYS[1], 'until') or '0')
if verdict == 'success' then
  if redis.call('DEL', KEYS[1]) == 1 then
    redis.call('ZREM', KEYS[3], member)
    if untilMs > 0 then return 2 end
  end
  return 0
end
if untilMs > 0 and not isProbe then return 0 end
local failures = redis.call('HINCRBY', KEYS[1], 'failures', 1)
if isProbe or failures >= threshold then
  local openings = redis.call('HINCRBY', KEYS[1], 'openings', 1)
  local duration = math.min(base * 2 ^ (openings - 1), max)
  redis.call('HSET', KEYS[1], 'until', now + duration, 'failures', 0)
  redis.call('HDEL', KEYS[1], 'probe', 'probe_until')
  redis.call('PEXPIRE', KEYS[1], duration + memory)
  redis.call('ZADD', KEYS[3], now + duration, member)
  return 1
end
redis.call('PEXPIRE', KEYS[1], memory)
return 0`;

type ScriptClient = RedisClient & {
  webhookGateAcquire(circuit: string, leases: string, index: string, ...args: (string | number)[]): Promise<number[]>;
  webhookGateRelease(circuit: string, leases: string, index: string, ...args: (string | number)[]): Promise<number>;
};

/**
 * The per-endpoint concurrency cap and circuit breaker of DESIGN §6, shared by every worker
 * through Redis: one script call before an attempt and one after it, nothing more.
 *
 * @param redis - a `client`-role connection (shared/redis) or a Cluster; the scripts are
 *   defined on it (EVALSHA with an EVAL fallback)
 */
export function createDeliveryGate(redis: RedisClient, options: DeliveryGateOptions): DeliveryGate {
  const client = redis as ScriptClient;
  if (typeof client.webhookGateAcquire !== 'function') {
    redis.defineCommand('webhookGateAcquire', { numberOfKeys: 3, lua: ACQUIRE_SCRIPT });
    redis.defineCommand('webhookGateRelease', { numberOfKeys: 3, lua: RELEASE_SCRIPT });
  }
  return {
    async acquire(gateKey, token) {
      const keys = circuitKeys(options.prefix, gateKey);
      const [code, waitMs, probe] = await client.webhookGateAcquire(
        keys.circuit,
        keys.leases,
        keys.index,
        token,
        options.concurrency,
        options.leaseTtlMs,
      );
      if (code === 0) return { granted: true, probe: probe === 1 };
      return { granted: false, reason: code === 1 ? 'cap' : code === 2 ? 'open' : 'probing', waitMs };
    },
    async release(gateKey, token, verdict) {
      const keys = circuitKeys(options.prefix, gateKey);
      const change = await client.webhookGateRelease(
        keys.circuit,
        keys.leases,
        keys.index,
        token,
        verdict,
        options.breakerFailures,
        CIRCUIT_OPEN_BASE_MS,
        CIRCUIT_OPEN_MAX_MS,
        CIRCUIT_MEMORY_MS,
        gateKey,
      );
      return change === 1 ? 'opened' : change === 2 ? 'closed' : 'none';
    },
  };
}
