import type { DeliveryGate, EndpointRateLimiter } from '../../../shared/endpoint-gate';

/** A partition's per-endpoint controls. */
export interface ShardGates {
  gate: DeliveryGate;
  /** Each endpoint's `rate_limit_per_s`, across all workers. */
  rateLimiter: EndpointRateLimiter;
}

/** What one job's attempt works with: its partition and that partition's gates. */
export interface JobScope extends ShardGates {
  shard: number;
}
