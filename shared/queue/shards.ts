import { isCluster, type RedisClient } from '../redis';

/**
 * The queue's partitions (docs/design.md §13.1). Partition 0 is the unpartitioned queue
 * `webhooks` of a system with WEBHOOK_QUEUE_PARTITIONS=1, whose keys (`<prefix>:webhooks:*`)
 * are today's; partitions 1..N of a system with N > 1 are the queues `{webhooks-<i>}`, each
 * its own hash tag, so a Redis Cluster spreads them over its masters. An endpoint's own keys
 * (cap, circuit, rate limit, parked jobs) live under its partition's key base, so every script
 * that touches them stays in one slot.
 */

/** The most partitions WEBHOOK_QUEUE_PARTITIONS admits. */
export const MAX_QUEUE_SHARDS = 64;

/** Name of the BullMQ queue of an unpartitioned system (docs/design.md §1): partition 0. */
export const WEBHOOK_QUEUE_NAME = 'webhooks';

/**
 * FNV-1a, 32 bits, over the UTF-16 code units of `text`: stable across processes, Node
 * versions and restarts, which is all a partition's choice needs (it is no security boundary).
 */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i += 1) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/**
 * The partition a delivery goes to: 0 with one partition, else 1 + a stable hash of its gate
 * key (shared/endpoint-gate `gateKeyOf`: `e:<endpoint id>`, ad-hoc `o:<origin>`) modulo `count`,
 * so every delivery to one endpoint shares a partition, and the endpoint's keys with it.
 *
 * @param count - WEBHOOK_QUEUE_PARTITIONS, 1..64
 */
export function shardOf(gateKey: string, count: number): number {
  if (count <= 1) return 0;
  return 1 + (fnv1a(gateKey) % count);
}

/** The BullMQ queue name of a partition: `webhooks` for 0, else `{webhooks-<i>}`. */
export function shardQueueName(shard: number): string {
  return shard === 0 ? WEBHOOK_QUEUE_NAME : `{${WEBHOOK_QUEUE_NAME}-${shard}}`;
}

/**
 * The partition of a BullMQ queue name (a job's `queueName`).
 *
 * @throws Error for a name that is no partition's
 */
export function shardOfQueueName(name: string): number {
  if (name === WEBHOOK_QUEUE_NAME) return 0;
  const match = /^\{webhooks-(\d+)\}$/.exec(name);
  if (!match) throw new Error(`${name} is not a webhook queue partition`);
  return Number(match[1]);
}

/**
 * What every key of a partition starts with, as BullMQ spells it: `<prefix>:<queue name>`
 * (`pw:webhooks`, `pw:{webhooks-3}`). The endpoint gate's keys (shared/endpoint-gate) hang off it.
 */
export function shardKeyBase(prefix: string, shard: number): string {
  return `${prefix}:${shardQueueName(shard)}`;
}

/** The partitions producers use under `count`: [0], or 1..count. */
export function currentShards(count: number): number[] {
  return count <= 1 ? [0] : Array.from({ length: count }, (_, i) => i + 1);
}

/** Where the highest partition count ever used is recorded (one string key; no hash tag needed). */
export function shardRecordKey(prefix: string): string {
  return `${prefix}:webhook-partitions`;
}

// Keeps the larger of the recorded count and ARGV[1]; answers the result.
const RECORD_SCRIPT = `
local recorded = tonumber(redis.call('GET', KEYS[1]) or '0')
local count = tonumber(ARGV[1])
if count > recorded then redis.call('SET', KEYS[1], count) return count end
return recorded`;

type RecordClient = RedisClient & { webhookShardsRecord(keys: number, key: string, count: number): Promise<number> };

/**
 * Records that `count` partitions are in use, keeping the highest count ever recorded, and
 * answers that highest count. One script call.
 */
export async function recordShardCount(redis: RedisClient, prefix: string, count: number): Promise<number> {
  const client = redis as RecordClient;
  if (typeof client.webhookShardsRecord !== 'function') redis.defineCommand('webhookShardsRecord', { lua: RECORD_SCRIPT });
  return Number(await client.webhookShardsRecord(1, shardRecordKey(prefix), count));
}

/**
 * Every partition that may hold jobs, for workers to drain and for views over the whole
 * queue (metrics, Bull Board): the current ones, every numbered partition up to the highest
 * count ever recorded, and partition 0 while it is current or its queue still exists. The
 * record is re-derived from the queues themselves (one EXISTS of each numbered partition's
 * `meta` key, which BullMQ writes when a queue opens) and written back, so a record lost with
 * Redis data, or never written, is rebuilt from what Redis holds.
 *
 * @param redis - a `client`-role connection or a Cluster
 * @param count - this process's WEBHOOK_QUEUE_PARTITIONS
 * @returns partitions in ascending order
 * @throws the connection's error while Redis is away
 */
export async function shardsToDrain(redis: RedisClient, prefix: string, count: number): Promise<number[]> {
  const numbered = Array.from({ length: MAX_QUEUE_SHARDS }, (_, i) => i + 1);
  // Single commands, not a pipeline: in a cluster these keys live on different masters.
  const exists = await Promise.all(numbered.map(async (shard) => redis.exists(`${shardKeyBase(prefix, shard)}:meta`)));
  const found = numbered.filter((_, i) => exists[i] === 1);
  const highest = await recordShardCount(redis, prefix, Math.max(count > 1 ? count : 0, ...found));
  const out = new Set<number>();
  // Partition 0's keys share no tag on a cluster with a braces-free prefix, so none can exist there.
  const legacyPossible = !isCluster(redis) || /^\{[^{}]+\}$/.test(prefix);
  if (count <= 1 || (legacyPossible && (await redis.exists(`${shardKeyBase(prefix, 0)}:meta`)) === 1)) out.add(0);
  if (highest > 1) for (let shard = 1; shard <= highest; shard += 1) out.add(shard);
  return [...out].sort((a, b) => a - b);
}
