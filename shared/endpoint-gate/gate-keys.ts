import { shardKeyBase } from '../queue/shards';

/** The gate key of an endpoint: `e:<id>` (docs/design.md §6.4). */
export function endpointGateKey(endpointId: number): string {
  return `e:${endpointId}`;
}

/**
 * The gate key of an ad-hoc delivery: its URL's origin, `o:<scheme>://<host>:<port>`, so every
 * delivery to one receiver shares a cap and a circuit; a URL that does not parse is its own.
 */
export function originGateKey(url: string): string {
  try {
    return `o:${new URL(url).origin}`;
  } catch {
    return `o:${url}`;
  }
}

/** The gate key of a delivery: its endpoint's ({@link endpointGateKey}), else its URL origin's ({@link originGateKey}). */
export function gateKeyOf(delivery: { endpointId: number | null; url: string }): string {
  return delivery.endpointId !== null ? endpointGateKey(delivery.endpointId) : originGateKey(delivery.url);
}

/** What a gate key names: an endpoint, or an ad-hoc delivery's origin. */
export type ParsedGateKey = { endpointId: number } | { origin: string };

/**
 * Reads a gate key made by {@link endpointGateKey} or {@link originGateKey}.
 * @returns the endpoint id, or the origin (whatever follows `o:`; also for a key of neither form)
 */
export function parseGateKey(gateKey: string): ParsedGateKey {
  const match = /^e:(\d+)$/.exec(gateKey);
  return match ? { endpointId: Number(match[1]) } : { origin: gateKey.startsWith('o:') ? gateKey.slice(2) : gateKey };
}

/** The Redis keys of one gate key in one queue partition (see {@link gateKeys}). */
export interface GateKeys {
  /** The circuit breaker's state (hash). */
  circuit: string;
  /** The leases in flight (sorted set by expiry). */
  leases: string;
  /** Tokens parked behind the cap or a probe (sorted set by parking time). */
  parked: string;
  /** The FIFO line record: ordering and head (hash). */
  line: string;
  /** The rate limit's schedule and limit (hash). */
  rate: string;
  /** The rate limit's log of the last second's starts (sorted set). */
  starts: string;
  /** The rate limit's pace (string). */
  pace: string;
  /** The partition's index of circuits not closed (sorted set), one per partition. */
  index: string;
}

/**
 * Redis keys of one gate key in one queue partition: all start with the partition's key base
 * (`<prefix>:webhooks`, or `<prefix>:{webhooks-<i>}`), whose hash tag (the prefix's with one
 * partition, the partition's own with several) keeps them in the slot of the partition's queue.
 *
 * @param shard - the partition of the job that uses them (shared/queue/shards.ts); default 0
 */
export function gateKeys(prefix: string, gateKey: string, shard = 0): GateKeys {
  const base = shardKeyBase(prefix, shard);
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
