import type { RedisClient } from '../redis';
import { shardOf } from '../queue/shards';
import { endpointGateKey, gateKeys } from './gate-keys';

/** A circuit's state as docs/design.md §6.4 and the endpoint stats of §11.1 name it. */
export type CircuitState = 'closed' | 'open' | 'half_open';

/** The first opening lasts 30 s; each consecutive one doubles it, up to 10 min (docs/design.md §6.4). */
export const CIRCUIT_OPEN_BASE_MS = 30_000;
export const CIRCUIT_OPEN_MAX_MS = 600_000;
/** A circuit's failure count and openings are forgotten after a day without attempts. */
export const CIRCUIT_MEMORY_MS = 86_400_000;

/**
 * Reads an endpoint's circuit without changing it: `open` until its reopening time,
 * `half_open` from then until a probe attempt closes or reopens it, `closed` otherwise (also
 * when Redis holds nothing for it, or only the state of an origin the endpoint has left: a
 * circuit of an older origin epoch than `originEpoch`). One HMGET, in the endpoint's partition
 * under `partitions`.
 *
 * @param prefix - REDIS_PREFIX (`config.redisPrefix`)
 * @param endpointId - a webhook_endpoints id
 * @param shards - WEBHOOK_QUEUE_PARTITIONS; default 1
 * @param originEpoch - the endpoint's `origin_epoch`; default 0
 */
export async function readCircuitState(redis: RedisClient, prefix: string, endpointId: number, shards = 1, originEpoch = 0): Promise<CircuitState> {
  const gateKey = endpointGateKey(endpointId);
  const [until, epoch] = await redis.hmget(gateKeys(prefix, gateKey, shardOf(gateKey, shards)).circuit, 'until', 'epoch');
  if (Number(epoch ?? 0) < originEpoch) return 'closed';
  return stateAt(Number(until ?? 0), Date.now());
}

/**
 * Closes the circuit of an endpoint that moved to another origin (docs/design.md §6.4): in every
 * partition given, its state is replaced by its new origin epoch alone, so the late answers of
 * the origin it left count for nothing. Should this be lost (Redis away), the worker's first
 * claimed attempt at the new epoch resets the circuit itself. One MULTI per partition.
 *
 * @param shards - every partition that may hold the endpoint's keys (WebhookQueue `shards()`)
 * @param originEpoch - the endpoint's `origin_epoch` after the move
 * @throws the connection's error while Redis is away
 */
export async function closeCircuitOfMovedEndpoint(
  redis: RedisClient,
  prefix: string,
  endpointId: number,
  shards: readonly number[],
  originEpoch: number,
): Promise<void> {
  const gateKey = endpointGateKey(endpointId);
  for (const shard of shards) {
    const keys = gateKeys(prefix, gateKey, shard);
    await redis.multi().del(keys.circuit).hset(keys.circuit, 'epoch', originEpoch).pexpire(keys.circuit, CIRCUIT_MEMORY_MS).zrem(keys.index, gateKey).exec();
  }
}

/**
 * Every circuit that is not closed, for the `webhook_circuit_state` metric: gate key (`e:12`,
 * `o:https://example.com`) and state. Two commands per partition over an index the scripts
 * keep; a gate key found in several partitions (the count changed) reports its worst state.
 *
 * @param shards - the partitions to read (WebhookQueue `shards()`); default [0]
 */
export async function listOpenCircuits(
  redis: RedisClient,
  prefix: string,
  shards: readonly number[] = [0],
): Promise<{ gateKey: string; state: CircuitState }[]> {
  const now = Date.now();
  const worst = new Map<string, number>();
  for (const shard of shards) {
    const index = gateKeys(prefix, '', shard).index;
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
