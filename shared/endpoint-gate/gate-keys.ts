import { partitionKeyBase } from '../queue/partitions';

/**
 * The gate key of a delivery: its endpoint (`e:<id>`), or for an ad-hoc delivery its URL
 * origin (`o:<scheme>://<host>:<port>`), so every delivery to one receiver shares a cap and
 * a circuit (docs/design.md §6, "Isolation between endpoints").
 */
export function gateKeyOf(delivery: { endpointId: number | null; url: string }): string {
  if (delivery.endpointId !== null) return `e:${delivery.endpointId}`;
  try {
    return `o:${new URL(delivery.url).origin}`;
  } catch {
    return `o:${delivery.url}`;
  }
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
 * @param partition - the partition of the job that uses them (shared/queue/partitions.ts); default 0
 */
export function gateKeys(prefix: string, gateKey: string, partition = 0): GateKeys {
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
