import { createGroupCommit, Settled } from '../db/group-commit';
import type { RedisClient } from '../redis';
import { partitionKeyBase, partitionOf } from './partitions';

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

/**
 * Lua: reserves the next slot of a rate-limit schedule, GCRA (the generic cell rate algorithm
 * of ATM networks, as in redis-cell) in reservation form with a burst of one: `rate` is a hash
 * of the schedule's theoretical arrival time (`tat`, ms on Redis's clock) and the limit, kept a
 * minute past the schedule's end. Returns the ms until the reserved slot starts (0: now).
 */
export const RESERVE_RATE_SLOT_LUA = `
local function reserveRateSlot(rate, limit, now)
  local interval = 1000 / limit
  local tat = tonumber(redis.call('HGET', rate, 'tat') or '0')
  if tat < now then tat = now end
  redis.call('HSET', rate, 'tat', string.format('%.3f', tat + interval), 'limit', limit)
  redis.call('PEXPIRE', rate, math.ceil(tat + interval - now) + 60000)
  return math.ceil(tat - now)
end`;

/**
 * Redis keys of one gate key in one queue partition: all start with the partition's key base
 * (`<prefix>:webhooks`, or `<prefix>:{webhooks-<i>}`), whose hash tag (the prefix's with one
 * partition, the partition's own with several) keeps them in the slot of the partition's queue.
 *
 * @param partition - the partition of the job that uses them (shared/queue/partitions.ts); default 0
 */
export function circuitKeys(
  prefix: string,
  gateKey: string,
  partition = 0,
): { circuit: string; leases: string; parked: string; line: string; rate: string; starts: string; pace: string; index: string } {
  const base = partitionKeyBase(prefix, partition);
  return {
    circuit: `${base}:circuit:${gateKey}`,
    leases: `${base}:leases:${gateKey}`,
    parked: `${base}:parked:${gateKey}`,
    line: `${base}:line:${gateKey}`,
    rate: `${base}:rate:${gateKey}`,
    starts: `${base}:rate-starts:${gateKey}`,
    pace: `${base}:rate-pace:${gateKey}`,
    index: `${base}:circuits`,
  };
}

/**
 * Reads an endpoint's circuit without changing it: `open` until its reopening time,
 * `half_open` from then until a probe attempt closes or reopens it, `closed` otherwise (also
 * when Redis holds nothing for it). One HGET, in the endpoint's partition under `partitions`.
 *
 * @param prefix - REDIS_PREFIX (`config.redisPrefix`)
 * @param endpointId - a webhook_endpoints id
 * @param partitions - WEBHOOK_QUEUE_PARTITIONS; default 1
 */
export async function readCircuitState(redis: RedisClient, prefix: string, endpointId: number, partitions = 1): Promise<CircuitState> {
  const gateKey = `e:${endpointId}`;
  const until = await redis.hget(circuitKeys(prefix, gateKey, partitionOf(gateKey, partitions)).circuit, 'until');
  return stateAt(Number(until ?? 0), Date.now());
}

/**
 * Every circuit that is not closed, for the `webhook_circuit_state` metric: gate key (`e:12`,
 * `o:https://example.com`) and state. Two commands per partition over an index the scripts
 * keep; a gate key found in several partitions (the count changed) reports its worst state.
 *
 * @param partitions - the partitions to read (WebhookQueue `partitions()`); default [0]
 */
export async function listOpenCircuits(
  redis: RedisClient,
  prefix: string,
  partitions: readonly number[] = [0],
): Promise<{ gateKey: string; state: CircuitState }[]> {
  const now = Date.now();
  const worst = new Map<string, number>();
  for (const partition of partitions) {
    const index = circuitKeys(prefix, '', partition).index;
    // A circuit whose keys expired unprobed (its endpoint gone quiet or deleted) is forgotten.
    await redis.zremrangebyscore(index, '-inf', now - CIRCUIT_MEMORY_MS);
    const flat = await redis.zrange(index, 0, -1, 'WITHSCORES');
    for (let i = 0; i < flat.length; i += 2) worst.set(flat[i], Math.max(worst.get(flat[i]) ?? 0, Number(flat[i + 1])));
  }
  return [...worst].map(([gateKey, until]) => ({ gateKey, state: stateAt(until, now) }));
}

function stateAt(until: number, now: number): CircuitState {
  if (!until) return 'closed';
  return now < until ? 'open' : 'half_open';
}

/**
 * Where a claimed delivery stands in its endpoint's FIFO line (DESIGN §6, Ordering), which the
 * gate records: `unordered` (an unordered endpoint's or an ad-hoc delivery), `head` (the
 * line's head: its claim found nothing earlier unfinished) or `aside` (a redelivery, out of
 * line: the record is left as it is).
 */
export type LinePlace = 'unordered' | 'head' | 'aside';

/** {@link DeliveryGate.ask}'s answer for a delivery that must be claimed before it asks again. */
export type LineDecision = { granted: false; reason: 'line' };

/** What {@link DeliveryGate.acquire} decided. */
export type GateDecision =
  /** `rateLimitPerS`: the limit whose slot the script reserved (now) for this lease, or null. */
  | { granted: true; probe: boolean; rateLimitPerS: number | null }
  /** `cap`: too many attempts in flight; `open`: the circuit is open; `probing`: a probe is in flight. */
  | { granted: false; reason: 'cap' | 'open' | 'probing'; waitMs: number }
  /** The endpoint's rate limit reserved the job a slot `waitMs` from now (DESIGN §14). */
  | { granted: false; reason: 'rate'; waitMs: number; limitPerS: number };

/** How an attempt under a lease ended, for the circuit. */
export type AttemptVerdict = 'success' | 'failure' | 'neutral';

/** What {@link DeliveryGate.release} changed in the circuit. */
export type CircuitChange = 'none' | 'opened' | 'closed';

/** What a release did: the circuit's change, and the parked jobs (their tokens) it woke. */
export interface GateRelease {
  change: CircuitChange;
  /** Tokens (job ids) that were parked behind the cap or a probe and may run now. */
  woken: string[];
}

export interface DeliveryGate {
  /**
   * {@link acquire} for a job that has not claimed its delivery yet (its gate key is in its
   * data). Only the head of a FIFO endpoint's line asks the gate for a rate slot, a lease or the
   * probe (DESIGN §6, "FIFO with a rate limit or a cap"), so for a FIFO gate key a token other
   * than the head the gate recorded, and for a gate key whose ordering the gate does not know
   * (nothing recorded for a day, or Redis lost it), the answer is `line` and nothing is taken:
   * the job claims first (the claim tells), then calls {@link acquire}. An open circuit still
   * refuses first: no job claims into it.
   */
  ask(gateKey: string, token: string, holdsRateSlot?: boolean): Promise<GateDecision | LineDecision>;
  /**
   * One script: refuses while the circuit is open or its probe is in flight, else takes one
   * of the gate key's WEBHOOK_ENDPOINT_CONCURRENCY leases (TTL-based, so a dead worker's
   * lease expires by itself), marking it the probe when the circuit is half-open. A token
   * refused for the cap or a probe in flight is parked with the gate (in the same script, so
   * no release can miss it): the release that frees a lease wakes it.
   *
   * Once a rate limit is known for the gate key ({@link EndpointRateLimiter}, shared/queue
   * rate-limit), the same script first reserves the token's slot, unless `holdsRateSlot`: a
   * slot in the future is a `rate` refusal, without a lease.
   *
   * The caller holds the claim of its delivery, whose place in its endpoint's line the gate
   * records (`unordered` and `head` set the gate key's ordering; `head` names the token the head).
   *
   * @param token - the lease holder, unique per attempt (the job id)
   * @param options - `holdsRateSlot`: the token runs at the rate-limit slot it reserved earlier
   *   (default false); `place`: the claimed delivery's {@link LinePlace} (default `unordered`)
   */
  acquire(gateKey: string, token: string, options?: { holdsRateSlot?: boolean; place?: LinePlace }): Promise<GateDecision>;
  /**
   * One script: returns the lease and reports the attempt. `failure` (timeout, connection
   * error, 5xx, 429) counts towards opening, or reopens after a failed probe for twice as
   * long (30 s to 10 min); `success` closes the circuit; `neutral` (another 4xx, or no
   * attempt made) only returns the lease. Then, unless the circuit is open or probing, it
   * takes as many parked tokens, oldest first, as there are free leases (one while half-open).
   *
   * @param next - the FIFO delivery that comes next, once the token's ended: the gate records it
   *   as the line's head, so it asks like one (none: the record stays)
   */
  release(gateKey: string, token: string, verdict: AttemptVerdict, next?: string): Promise<GateRelease>;
  /**
   * Records that the gate key's deliveries form a FIFO line, whose head the gate does not know:
   * a job it let through found an earlier delivery unfinished (the endpoint became FIFO). One
   * MULTI.
   */
  markLine(gateKey: string): Promise<void>;
  /** Stops reserving rate-limit slots at acquire for the gate key (its endpoint's limit was removed). One HDEL. */
  forgetRateLimit(gateKey: string): Promise<void>;
  /** Whether `token` is still parked with the gate (a release has not woken it yet). One ZSCORE. */
  isParked(gateKey: string, token: string): Promise<boolean>;
}

export interface DeliveryGateOptions {
  /** REDIS_PREFIX. */
  prefix: string;
  /** The queue partition whose jobs this gate serves (its keys live there); default 0. */
  partition?: number;
  /** WEBHOOK_ENDPOINT_CONCURRENCY. */
  concurrency: number;
  /** WEBHOOK_BREAKER_FAILURES. */
  breakerFailures: number;
  /** How long a lease lives unless returned, ms: longer than one attempt can take. */
  leaseTtlMs: number;
  /** How long a gate remembers its parked tokens without news, ms: longer than a job stays parked. */
  parkedTtlMs?: number;
}

/** How long a gate key's line record (ordering, head) outlives its last use, ms: a day. */
const LINE_MEMORY_MS = 86_400_000;

// Redis's own clock (TIME) orders every worker's view of a circuit; replicas receive effects.
// Each script serves a batch of leases: per lease seven keys, its circuit, its lease set, its
// parked set, its rate schedule, its log of starts, its partition's circuit index and its line
// record; the leases of one call are handled in order, as separate calls would be.
const ACQUIRE_SCRIPT = `${RESERVE_RATE_SLOT_LUA}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cap, ttl, parkedTtl, lineTtl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local function park(parked, token)
  redis.call('ZADD', parked, now, token)
  redis.call('PEXPIRE', parked, parkedTtl)
end
-- The attempts a rate-limited gate started in the last second (recorded as each request
-- leaves, shared/queue/rate-limit.ts): a job late for its slot may still go while that second
-- has room (the limit plus half its burst), else it takes a new slot.
local function startedInWindow(starts, limit)
  redis.call('ZREMRANGEBYSCORE', starts, '-inf', now - 1000)
  return redis.call('ZCARD', starts) < limit + math.floor(math.ceil(limit / 10) / 2)
end
-- The line record: 'fifo' ('1' or '0') and the FIFO line's 'head'. Only the head of a FIFO
-- line goes on (place 'unclaimed' is a job that has not claimed yet); a claimed place records.
local function inLine(line, token, place)
  if place == 'unclaimed' then
    local fifo, head = unpack(redis.call('HMGET', line, 'fifo', 'head'))
    if not fifo or (fifo == '1' and head ~= token) then return false end
  elseif place == 'unordered' then
    redis.call('HSET', line, 'fifo', '0')
    redis.call('HDEL', line, 'head')
  elseif place == 'head' then
    redis.call('HSET', line, 'fifo', '1', 'head', token)
  end
  redis.call('PEXPIRE', line, lineTtl)
  return true
end
local function acquire(circuit, leases, parked, rate, starts, line, token, holdsSlot, place)
  redis.call('ZREM', parked, token)
  local probe = 0
  local untilMs = tonumber(redis.call('HGET', circuit, 'until') or '0')
  if untilMs > 0 and now < untilMs then return {2, untilMs - now, 0} end
  if not inLine(line, token, place) then return {5, 0, 0} end
  if untilMs > 0 then
    local probeUntil = tonumber(redis.call('HGET', circuit, 'probe_until') or '0')
    if probeUntil > now and redis.call('HGET', circuit, 'probe') ~= token then
      park(parked, token)
      return {3, probeUntil - now, 0}
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
  redis.call('ZREMRANGEBYSCORE', leases, '-inf', now)
  if not redis.call('ZSCORE', leases, token) and redis.call('ZCARD', leases) >= cap then
    park(parked, token)
    return {1, 0, 0}
  end
  redis.call('ZADD', leases, now + ttl, token)
  redis.call('PEXPIRE', leases, ttl)
  if probe == 1 then redis.call('HSET', circuit, 'probe', token, 'probe_until', now + ttl) end
  return {0, rated, probe}
end
local out = {}
for i = 1, (#ARGV - 4) / 3 do
  local k, a = 7 * (i - 1), 4 + 3 * (i - 1)
  local decision = acquire(KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], KEYS[k + 5], KEYS[k + 7], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3])
  out[3 * i - 2], out[3 * i - 1], out[3 * i] = decision[1], decision[2], decision[3]
end
return out`;

const RELEASE_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local threshold, base, max, memory, cap, lineTtl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
-- The parked tokens that may run now: none while open or probing, one while half-open, else
-- one per free lease, oldest first.
local function wake(circuit, leases, parked)
  local untilMs = tonumber(redis.call('HGET', circuit, 'until') or '0')
  if untilMs > now then return {} end
  local free = 1
  if untilMs > 0 then
    if tonumber(redis.call('HGET', circuit, 'probe_until') or '0') > now then return {} end
  else
    redis.call('ZREMRANGEBYSCORE', leases, '-inf', now)
    free = cap - redis.call('ZCARD', leases)
  end
  if free <= 0 then return {} end
  local popped = redis.call('ZPOPMIN', parked, free)
  local tokens = {}
  for j = 1, #popped, 2 do tokens[#tokens + 1] = popped[j] end
  return tokens
end
local function release(circuit, leases, index, token, verdict, member)
  redis.call('ZREM', leases, token)
  local isProbe = redis.call('HGET', circuit, 'probe') == token
  if verdict == 'neutral' then
    if isProbe then redis.call('HDEL', circuit, 'probe', 'probe_until') end
    return 0
  end
  local untilMs = tonumber(redis.call('HGET', circuit, 'until') or '0')
  if verdict == 'success' then
    if redis.call('DEL', circuit) == 1 then
      redis.call('ZREM', index, member)
      if untilMs > 0 then return 2 end
    end
    return 0
  end
  if untilMs > 0 and not isProbe then return 0 end
  local failures = redis.call('HINCRBY', circuit, 'failures', 1)
  if isProbe or failures >= threshold then
    local openings = redis.call('HINCRBY', circuit, 'openings', 1)
    local duration = math.min(base * 2 ^ (openings - 1), max)
    redis.call('HSET', circuit, 'until', now + duration, 'failures', 0)
    redis.call('HDEL', circuit, 'probe', 'probe_until')
    redis.call('PEXPIRE', circuit, duration + memory)
    redis.call('ZADD', index, now + duration, member)
    return 1
  end
  redis.call('PEXPIRE', circuit, memory)
  return 0
end
-- Per release: its change, the number of tokens woken, then those tokens.
local out = {}
for i = 1, (#ARGV - 6) / 4 do
  local k, at = 7 * (i - 1), 6 + 4 * (i - 1)
  local circuit, leases, parked, line = KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 7]
  out[#out + 1] = release(circuit, leases, KEYS[k + 6], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3])
  if ARGV[at + 4] ~= '' then
    redis.call('HSET', line, 'fifo', '1', 'head', ARGV[at + 4])
    redis.call('PEXPIRE', line, lineTtl)
  end
  local woken = wake(circuit, leases, parked)
  out[#out + 1] = #woken
  for _, woke in ipairs(woken) do out[#out + 1] = woke end
end
return out`;

type ScriptClient = RedisClient & {
  webhookGateAcquire(numberOfKeys: number, ...keysAndArgs: (string | number)[]): Promise<number[]>;
  webhookGateRelease(numberOfKeys: number, ...keysAndArgs: (string | number)[]): Promise<(number | string)[]>;
};

/**
 * The per-endpoint concurrency cap and circuit breaker of DESIGN §6, shared by every worker
 * through Redis: one script call before an attempt and one after it, each shared with the
 * concurrent attempts of this process (group commit: one round trip per batch of leases).
 *
 * @param redis - a `client`-role connection (shared/redis) or a Cluster; the scripts are
 *   defined on it (EVALSHA with an EVAL fallback). Every key of a gate starts with its
 *   partition's key base, one `{hash-tag}` on a Cluster.
 */
export function createDeliveryGate(redis: RedisClient, options: DeliveryGateOptions): DeliveryGate {
  return createDeliveryGates(redis, options, { batchAcrossPartitions: false })(options.partition ?? 0);
}

/**
 * The gates of every queue partition of one process ({@link createDeliveryGate}, one per
 * partition) over shared batches. On a Redis Cluster a script may touch one slot only, so each
 * partition batches its own leases; on a single Redis the leases of all partitions share one
 * batch, so spreading endpoints over partitions adds no round trips (DESIGN §13: partitions
 * must not cost throughput on a single Redis).
 *
 * @param options - as for one gate; its `partition` is ignored
 * @param batching - `batchAcrossPartitions`: true only when `redis` is not a Cluster
 * @returns the gate of a partition, the same object for every call with that partition
 */
export function createDeliveryGates(
  redis: RedisClient,
  options: DeliveryGateOptions,
  batching: { batchAcrossPartitions: boolean },
): (partition: number) => DeliveryGate {
  const client = redis as ScriptClient;
  if (typeof client.webhookGateAcquire !== 'function') {
    redis.defineCommand('webhookGateAcquire', { lua: ACQUIRE_SCRIPT });
    redis.defineCommand('webhookGateRelease', { lua: RELEASE_SCRIPT });
  }
  const keysOf = (gateKey: string, partition: number) => {
    const keys = circuitKeys(options.prefix, gateKey, partition);
    return [keys.circuit, keys.leases, keys.parked, keys.rate, keys.starts, keys.index, keys.line];
  };
  const parkedTtlMs = options.parkedTtlMs ?? 600_000;
  const settled = <R>(values: R[]): Settled<R>[] => values.map((value) => ({ ok: true, value }));

  type Acquire = { gateKey: string; partition: number; token: string; holdsRateSlot: boolean; place: LinePlace | 'unclaimed' };
  type Release = { gateKey: string; partition: number; token: string; verdict: AttemptVerdict; next: string };

  async function acquireBatch(batch: Acquire[]): Promise<Settled<GateDecision | LineDecision>[]> {
    const keys = batch.flatMap(({ gateKey, partition }) => keysOf(gateKey, partition));
    const flat = await client.webhookGateAcquire(
      keys.length,
      ...keys,
      options.concurrency,
      options.leaseTtlMs,
      parkedTtlMs,
      LINE_MEMORY_MS,
      ...batch.flatMap(({ token, holdsRateSlot, place }) => [token, holdsRateSlot ? '1' : '0', place]),
    );
    return settled(
      batch.map((_, i): GateDecision | LineDecision => {
        const [code, waitMs, third] = flat.slice(3 * i, 3 * i + 3);
        if (code === 0) return { granted: true, probe: third === 1, rateLimitPerS: waitMs > 0 ? waitMs : null };
        if (code === 4) return { granted: false, reason: 'rate', waitMs, limitPerS: third };
        if (code === 5) return { granted: false, reason: 'line' };
        return { granted: false, reason: code === 1 ? 'cap' : code === 2 ? 'open' : 'probing', waitMs };
      }),
    );
  }

  async function releaseBatch(batch: Release[]): Promise<Settled<GateRelease>[]> {
    const keys = batch.flatMap(({ gateKey, partition }) => keysOf(gateKey, partition));
    const flat = await client.webhookGateRelease(
      keys.length,
      ...keys,
      options.breakerFailures,
      CIRCUIT_OPEN_BASE_MS,
      CIRCUIT_OPEN_MAX_MS,
      CIRCUIT_MEMORY_MS,
      options.concurrency,
      LINE_MEMORY_MS,
      ...batch.flatMap(({ gateKey, token, verdict, next }) => [token, verdict, gateKey, next]),
    );
    const out: GateRelease[] = [];
    for (let at = 0; at < flat.length; ) {
      const change = Number(flat[at]);
      const count = Number(flat[at + 1]);
      out.push({ change: change === 1 ? 'opened' : change === 2 ? 'closed' : 'none', woken: flat.slice(at + 2, at + 2 + count).map(String) });
      at += 2 + count;
    }
    return settled(out);
  }

  const newBatches = () => ({ acquires: createGroupCommit(acquireBatch), releases: createGroupCommit(releaseBatch) });
  const shared = batching.batchAcrossPartitions ? newBatches() : undefined;
  const gates = new Map<number, DeliveryGate>();
  return (partition) => {
    let gate = gates.get(partition);
    if (gate) return gate;
    const { acquires, releases } = shared ?? newBatches();
    gate = {
      ask: (gateKey, token, holdsRateSlot = false) => acquires.submit({ gateKey, partition, token, holdsRateSlot, place: 'unclaimed' }),
      acquire: async (gateKey, token, { holdsRateSlot = false, place = 'unordered' } = {}) =>
        // A claimed place never answers `line`.
        (await acquires.submit({ gateKey, partition, token, holdsRateSlot, place })) as GateDecision,
      release: (gateKey, token, verdict, next = '') => releases.submit({ gateKey, partition, token, verdict, next }),
      markLine: async (gateKey) => {
        const { line } = circuitKeys(options.prefix, gateKey, partition);
        await redis.multi().hset(line, 'fifo', '1').pexpire(line, LINE_MEMORY_MS).exec();
      },
      forgetRateLimit: async (gateKey) => {
        await redis.hdel(circuitKeys(options.prefix, gateKey, partition).rate, 'limit');
      },
      isParked: async (gateKey, token) => (await redis.zscore(circuitKeys(options.prefix, gateKey, partition).parked, token)) !== null,
    };
    gates.set(partition, gate);
    return gate;
  };
}
