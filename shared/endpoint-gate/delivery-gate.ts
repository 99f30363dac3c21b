import { createGroupCommit, Settled } from '../db/group-commit';
import type { RedisClient } from '../redis';
import { CIRCUIT_MEMORY_MS, CIRCUIT_OPEN_BASE_MS, CIRCUIT_OPEN_MAX_MS } from './circuit-state';
import { gateKeys } from './gate-keys';
import { withGateScripts } from './scripts';

/**
 * Where a claimed delivery stands in its endpoint's FIFO line (docs/design.md §6.5), which the
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
  /** `cap`: too many attempts in flight; `open`: the circuit is open (`waitMs` until it reopens). */
  | { granted: false; reason: 'cap' | 'open'; waitMs: number }
  /**
   * A probe is in flight: `waitMs` until its lease ends, `failedProbeOpeningMs` how long the
   * circuit reopens for should it fail (docs/design.md §6.4: twice the last opening, at most 10 min).
   */
  | { granted: false; reason: 'probing'; waitMs: number; failedProbeOpeningMs: number }
  /** The endpoint's rate limit reserved the job a slot `waitMs` from now. */
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
   * probe (docs/design.md §6.5), so for a FIFO gate key a token other
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
   * Once a rate limit is known for the gate key ({@link EndpointRateLimiter}, rate-limiter.ts),
   * the same script first reserves the token's slot, unless `holdsRateSlot`: a
   * slot in the future is a `rate` refusal, without a lease.
   *
   * The caller holds the claim of its delivery, whose place in its endpoint's line the gate
   * records (`unordered` and `head` set the gate key's ordering; `head` names the token the head).
   *
   * The circuit carries the origin epoch its state is of (docs/design.md §6.4): one older than
   * `originEpoch` (the endpoint moved to another origin since) is reset and ignored.
   *
   * @param token - the lease holder, unique per attempt (the job id)
   * @param options - `holdsRateSlot`: the token runs at the rate-limit slot it reserved earlier
   *   (default false); `place`: the claimed delivery's {@link LinePlace} (default `unordered`);
   *   `originEpoch`: its endpoint's `origin_epoch` as claimed (default null: none, an ad-hoc delivery)
   */
  acquire(gateKey: string, token: string, options?: { holdsRateSlot?: boolean; place?: LinePlace; originEpoch?: number | null }): Promise<GateDecision>;
  /**
   * One script: returns the lease and reports the attempt. `failure` (timeout, connection
   * error, 5xx, 429) counts towards opening, or reopens after a failed probe for twice as
   * long (30 s to 10 min); `success` closes the circuit; `neutral` (another 4xx, or no
   * attempt made) only returns the lease. Then, unless the circuit is open or probing, it
   * takes as many parked tokens, oldest first, as there are free leases (one while half-open).
   *
   * The verdict of an attempt that started with an older origin epoch than the circuit's (its
   * endpoint moved to another origin meanwhile) counts for nothing; one of a newer epoch
   * resets the circuit first.
   *
   * @param next - the FIFO delivery that comes next, once the token's ended: the gate records it
   *   as the line's head, so it asks like one (none: the record stays)
   * @param originEpoch - the endpoint's `origin_epoch` the attempt started with (default null: unknown, or ad-hoc)
   */
  release(gateKey: string, token: string, verdict: AttemptVerdict, next?: string, originEpoch?: number | null): Promise<GateRelease>;
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
  shard?: number;
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

/**
 * The per-endpoint concurrency cap and circuit breaker of docs/design.md §6.4, shared by every worker
 * through Redis: one script call before an attempt and one after it, each shared with the
 * concurrent attempts of this process (group commit: one round trip per batch of leases).
 *
 * @param redis - a `client`-role connection (shared/redis) or a Cluster; the scripts
 *   (lua/acquire.lua, lua/release.lua) are defined on it (EVALSHA with an EVAL fallback).
 *   Every key of a gate starts with its partition's key base, one `{hash-tag}` on a Cluster.
 */
export function createDeliveryGate(redis: RedisClient, options: DeliveryGateOptions): DeliveryGate {
  return createDeliveryGates(redis, options, { batchAcrossShards: false })(options.shard ?? 0);
}

/**
 * The gates of every queue partition of one process ({@link createDeliveryGate}, one per
 * partition) over shared batches. On a Redis Cluster a script may touch one slot only, so each
 * partition batches its own leases; on a single Redis the leases of all partitions share one
 * batch, so spreading endpoints over partitions adds no round trips (docs/design.md §13.1: partitions
 * must not cost throughput on a single Redis).
 *
 * @param options - as for one gate; its `partition` is ignored
 * @param batching - `batchAcrossShards`: true only when `redis` is not a Cluster
 * @returns the gate of a partition, the same object for every call with that partition
 */
export function createDeliveryGates(
  redis: RedisClient,
  options: DeliveryGateOptions,
  batching: { batchAcrossShards: boolean },
): (shard: number) => DeliveryGate {
  const client = withGateScripts(redis);
  // Each script's keys per gate key, in the order its header lists them (lua/acquire.lua, lua/release.lua).
  const acquireKeys = (gateKey: string, shard: number) => {
    const keys = gateKeys(options.prefix, gateKey, shard);
    return [keys.circuit, keys.leases, keys.parked, keys.rate, keys.starts, keys.line, keys.index];
  };
  const releaseKeys = (gateKey: string, shard: number) => {
    const keys = gateKeys(options.prefix, gateKey, shard);
    return [keys.circuit, keys.leases, keys.parked, keys.line, keys.index];
  };
  const parkedTtlMs = options.parkedTtlMs ?? 600_000;
  const settled = <R>(values: R[]): Settled<R>[] => values.map((value) => ({ ok: true, value }));

  type Acquire = { gateKey: string; shard: number; token: string; holdsRateSlot: boolean; place: LinePlace | 'unclaimed'; originEpoch: number | null };
  type Release = { gateKey: string; shard: number; token: string; verdict: AttemptVerdict; next: string; originEpoch: number | null };
  const epochArg = (epoch: number | null) => (epoch === null ? '' : String(epoch));

  async function acquireBatch(batch: Acquire[]): Promise<Settled<GateDecision | LineDecision>[]> {
    const keys = batch.flatMap(({ gateKey, shard }) => acquireKeys(gateKey, shard));
    const flat = await client.webhookGateAcquire(
      keys.length,
      ...keys,
      options.concurrency,
      options.leaseTtlMs,
      parkedTtlMs,
      LINE_MEMORY_MS,
      CIRCUIT_OPEN_BASE_MS,
      CIRCUIT_OPEN_MAX_MS,
      ...batch.flatMap(({ gateKey, token, holdsRateSlot, place, originEpoch }) => [token, holdsRateSlot ? '1' : '0', place, epochArg(originEpoch), gateKey]),
    );
    return settled(
      batch.map((_, i): GateDecision | LineDecision => {
        const [code, waitMs, third] = flat.slice(3 * i, 3 * i + 3);
        if (code === 0) return { granted: true, probe: third === 1, rateLimitPerS: waitMs > 0 ? waitMs : null };
        if (code === 4) return { granted: false, reason: 'rate', waitMs, limitPerS: third };
        if (code === 5) return { granted: false, reason: 'line' };
        if (code === 3) return { granted: false, reason: 'probing', waitMs, failedProbeOpeningMs: third };
        return { granted: false, reason: code === 1 ? 'cap' : 'open', waitMs };
      }),
    );
  }

  async function releaseBatch(batch: Release[]): Promise<Settled<GateRelease>[]> {
    const keys = batch.flatMap(({ gateKey, shard }) => releaseKeys(gateKey, shard));
    const flat = await client.webhookGateRelease(
      keys.length,
      ...keys,
      options.breakerFailures,
      CIRCUIT_OPEN_BASE_MS,
      CIRCUIT_OPEN_MAX_MS,
      CIRCUIT_MEMORY_MS,
      options.concurrency,
      LINE_MEMORY_MS,
      ...batch.flatMap(({ gateKey, token, verdict, next, originEpoch }) => [token, verdict, gateKey, next, epochArg(originEpoch)]),
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
  const shared = batching.batchAcrossShards ? newBatches() : undefined;
  const gates = new Map<number, DeliveryGate>();
  return (shard) => {
    let gate = gates.get(shard);
    if (gate) return gate;
    const { acquires, releases } = shared ?? newBatches();
    gate = {
      ask: (gateKey, token, holdsRateSlot = false) => acquires.submit({ gateKey, shard, token, holdsRateSlot, place: 'unclaimed', originEpoch: null }),
      acquire: async (gateKey, token, { holdsRateSlot = false, place = 'unordered', originEpoch = null } = {}) =>
        // A claimed place never answers `line`.
        (await acquires.submit({ gateKey, shard, token, holdsRateSlot, place, originEpoch })) as GateDecision,
      release: (gateKey, token, verdict, next = '', originEpoch = null) => releases.submit({ gateKey, shard, token, verdict, next, originEpoch }),
      markLine: async (gateKey) => {
        const { line } = gateKeys(options.prefix, gateKey, shard);
        await redis.multi().hset(line, 'fifo', '1').pexpire(line, LINE_MEMORY_MS).exec();
      },
      forgetRateLimit: async (gateKey) => {
        await redis.hdel(gateKeys(options.prefix, gateKey, shard).rate, 'limit');
      },
      isParked: async (gateKey, token) => (await redis.zscore(gateKeys(options.prefix, gateKey, shard).parked, token)) !== null,
    };
    gates.set(shard, gate);
    return gate;
  };
}
