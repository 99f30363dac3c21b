import { Job, JobType, Queue } from 'bullmq';
import type { RedisClient } from '../redis';
import type { BaseLogger } from 'pino';
import type { Config } from '../config';
import { QueueUnavailableError } from './errors';
import { currentShards, recordShardCount, shardOf, shardQueueName, shardsToDrain } from './shards';

/**
 * What a job carries: the delivery id only. The body, the URL and above all the secret
 * stay in PostgreSQL; the worker loads them per attempt (docs/design.md §6.7).
 */
export interface WebhookJobData {
  deliveryId: string;
  /**
   * The delivery's gate key (`e:<endpoint id>` or `o:<origin>`), so the worker asks the
   * endpoint's cap and circuit before touching PostgreSQL: set by producers that know it
   * (the outbox), else by the worker when the gate first postpones the job. Not a secret.
   */
  gate?: string;
  /**
   * When the endpoint's rate limit reserved this job's slot (ms since the epoch): the job waits
   * in the delayed set until then and goes without asking again (docs/design.md §14.1).
   */
  rateSlot?: number;
  /** The limit that slot was reserved under, attempts a second. */
  rateLimit?: number;
}

/**
 * `deliver`: attempts follow the retry schedule. `redeliver`: exactly one new attempt,
 * asked for by `POST /webhooks/{id}/redeliver`, whatever its outcome.
 */
export type WebhookJobName = 'deliver' | 'redeliver';

/** The BullMQ queue of one partition (shared/queue/shards.ts). */
export type ShardQueue = Queue<WebhookJobData, void, WebhookJobName>;

/** A delivery job as BullMQ hands it over. */
export type WorkerJob = Job<WebhookJobData, void, WebhookJobName>;

/**
 * The `webhooks` queue, split into WEBHOOK_QUEUE_PARTITIONS BullMQ queues (docs/design.md §13.1): the
 * producer side every process uses. A delivery goes to its gate key's partition under this
 * process's count; reads that must see every job (a job by id, counts) look in every
 * partition that may hold jobs, which after a change of the count includes the old ones.
 */
export interface WebhookQueue {
  /** WEBHOOK_QUEUE_PARTITIONS of this process. */
  readonly count: number;
  /** REDIS_PREFIX. */
  readonly prefix: string;
  /** The `client`-role connection every partition's queue uses; its owner closes it. */
  readonly connection: RedisClient;
  /** The partition a gate key's deliveries go to now (0 with one partition, else 1..count). */
  shardOf(gateKey: string): number;
  /** A partition's BullMQ queue, opened on first use and closed by {@link close}. */
  at(shard: number): ShardQueue;
  /**
   * Every partition that may hold jobs (shards.ts `shardsToDrain`: the current ones and
   * every one up to the highest count ever recorded), ascending.
   * @throws the connection's error while Redis is away
   */
  shards(): Promise<number[]>;
  /**
   * A delivery's job: looked for in `first` (a partition) when given, then in every partition
   * (its `queueName` says which: shards.ts `shardOfQueueName`).
   */
  getJob(deliveryId: string, first?: number): Promise<WorkerJob | undefined>;
  /** Removes a delivery's job from every partition that holds it (BullMQ `remove`, for tests and operators). */
  remove(deliveryId: string): Promise<void>;
  /** Job counts by state, summed over every partition; with `byShard`, per partition too. */
  getJobCounts(states: readonly JobType[]): Promise<{ total: Record<string, number>; byShard: Map<number, Record<string, number>> }>;
  /** The jobs in `states` of every partition (tests and operators; BullMQ's getJobs per partition). */
  getJobs(states: JobType[]): Promise<WorkerJob[]>;
  /** Resolves once the current partitions' queues are ready. */
  waitUntilReady(): Promise<void>;
  /** Removes every partition's jobs and keys (BullMQ obliterate), for tests and benchmarks. */
  obliterate(options?: { force?: boolean }): Promise<void>;
  /** Closes every partition's queue; the connection stays open. */
  close(): Promise<void>;
}

/** The logging this module needs; pino loggers and Fastify's `request.log` fit. */
export type QueueLogger = Pick<BaseLogger, 'info' | 'warn' | 'debug'>;

/** One job to add: the delivery id is also the BullMQ job id, so adding twice is harmless. */
export interface JobToAdd {
  deliveryId: string;
  name?: WebhookJobName;
  /** Milliseconds to wait before the job may run; default 0. */
  delayMs?: number;
  /** The delivery already made an attempt: it queues behind first attempts (worker RETRY_PRIORITY). */
  retry?: boolean;
  /**
   * The delivery's gate key (shared/endpoint-gate `gateKeyOf`); it picks the partition, so it is
   * required once the queue has more than one (queueRecordedDeliveries looks it up when missing).
   */
  gate?: string;
}

/**
 * BullMQ priorities (lower runs first; jobs without one run before any prioritized job,
 * BullMQ docs "Prioritized"): fresh first attempts have none, so neither a backlog of
 * retries nor jobs an endpoint's cap or circuit deferred ever queue ahead of them.
 */
export const DEFERRED_PRIORITY = 1;
/** A delivery that already made an attempt; see {@link DEFERRED_PRIORITY}. */
export const RETRY_PRIORITY = 2;

/**
 * Finished jobs are only bookkeeping (the delivery log lives in PostgreSQL): a completed job
 * is removed as it completes, which spares BullMQ's trimming of a kept tail at every
 * completion (six Redis commands a delivery, bench/RESULTS.md); a job added again for a finished
 * delivery finds its row finished and ends without an attempt. Failed jobs (an
 * infrastructure failure ten times over) keep a bounded tail for operators (BullMQ docs,
 * "Auto-removal of jobs"; ages in seconds).
 * `attempts` covers infrastructure failures only (the database away mid-attempt): delivery
 * retries are scheduled by the worker itself and do not count as BullMQ attempts.
 */
const DEFAULT_JOB_OPTIONS = {
  removeOnComplete: true,
  removeOnFail: { age: 7 * 24 * 3_600, count: 5_000 },
  attempts: 10,
  backoff: { type: 'exponential', delay: 1_000 },
} as const;

/** The queue's events stream is trimmed to about this many entries (BullMQ `streams.events.maxLen`). */
export const EVENTS_MAX_LEN = 10_000;

/** How long a producer waits for Redis before leaving the job to the outbox relay, ms. */
const ADD_TIMEOUT_MS = 2_000;

/**
 * Opens the producer side of the `webhooks` queue under `config.redisPrefix`, in
 * `config.webhookQueuePartitions` partitions (default 1: the unpartitioned queue `webhooks`).
 * With more than one, it records the count in Redis each time the connection becomes ready, so
 * workers drain every partition up to the highest count ever used (docs/design.md §13.1).
 *
 * @param connection - a `client`-role ioredis connection (shared/redis): commands fail fast
 *   while Redis is away, so a producer never hangs; the caller owns and closes it. A command
 *   that fails or times out (`commandTimeout`) fails only itself: the queues send no command
 *   of their own while they start, so they work again as soon as Redis answers
 * @param logger - receives the queues' connection errors at debug level (BullMQ emits them as
 *   `error` events); the connection's outages are its owner's to log (shared/redis `logRedisOutages`)
 */
export function createWebhookQueue(
  config: Pick<Config, 'redisPrefix'> & Partial<Pick<Config, 'webhookQueuePartitions'>>,
  connection: RedisClient,
  logger?: QueueLogger,
): WebhookQueue {
  const prefix = config.redisPrefix;
  const count = config.webhookQueuePartitions ?? 1;
  const queues = new Map<number, ShardQueue>();

  function at(shard: number): ShardQueue {
    let queue = queues.get(shard);
    if (queue) return queue;
    queue = new Queue(shardQueueName(shard), {
      connection,
      prefix,
      defaultJobOptions: DEFAULT_JOB_OPTIONS,
      streams: { events: { maxLen: EVENTS_MAX_LEN } },
      // BullMQ starts a queue once, with an INFO for the Redis version; were that one command to
      // fail (a command timeout, a dropped connection), every later command of the queue would
      // reject with that same error until the process restarts. Without the check the start only
      // waits for the connection to be ready, which heals by reconnecting.
      skipVersionCheck: true,
    });
    // The connection's owner logs its outages; each failed reconnect also arrives here.
    queue.on('error', (error) => logger?.debug({ err: error }, 'webhook queue connection error'));
    queues.set(shard, queue);
    return queue;
  }

  const record = () => {
    recordShardCount(connection, prefix, count).catch((error) => logger?.debug({ err: error }, 'could not record the partition count'));
  };
  if (count > 1) {
    connection.on('ready', record);
    if (connection.status === 'ready') record();
  }
  const shards = async () => shardsToDrain(connection, prefix, count);

  return {
    count,
    prefix,
    connection,
    shardOf: (gateKey) => shardOf(gateKey, count),
    at,
    shards,
    async getJob(deliveryId, first) {
      // The given partition first, alone: listing every partition costs a command per
      // possible partition (shards.ts `shardsToDrain`), far more than the lookup, and
      // a worker looks a job up in its own partition at every wake-up.
      if (first !== undefined) {
        const job = await at(first).getJob(deliveryId);
        if (job) return job;
      }
      for (const shard of await shards()) {
        if (shard === first) continue;
        const job = await at(shard).getJob(deliveryId);
        if (job) return job;
      }
      return undefined;
    },
    async remove(deliveryId) {
      for (const shard of await shards()) await at(shard).remove(deliveryId);
    },
    async getJobCounts(states) {
      const total: Record<string, number> = Object.fromEntries(states.map((state) => [state, 0]));
      const byShard = new Map<number, Record<string, number>>();
      for (const shard of await shards()) {
        const counts = await at(shard).getJobCounts(...states);
        byShard.set(shard, counts);
        for (const state of states) total[state] += counts[state] ?? 0;
      }
      return { total, byShard };
    },
    async getJobs(states) {
      const jobs: WorkerJob[] = [];
      for (const shard of await shards()) jobs.push(...(await at(shard).getJobs(states)));
      return jobs;
    },
    async waitUntilReady() {
      await Promise.all(currentShards(count).map(async (shard) => at(shard).waitUntilReady()));
    },
    async obliterate(options) {
      for (const shard of await shards()) await at(shard).obliterate(options);
    },
    async close() {
      connection.off('ready', record);
      await Promise.all([...queues.values()].map(async (queue) => queue.close()));
    },
  };
}

/**
 * Adds delivery jobs, failing fast instead of waiting for Redis: BullMQ itself waits for a
 * connection that is not ready yet, which would hold an api request hostage.
 *
 * @throws QueueUnavailableError when the queue's connection is not ready or Redis does not
 *   answer within 2 s; the rows stay pending and the outbox relay adds them later
 */
export async function addDeliveryJobs(queue: WebhookQueue, jobs: readonly JobToAdd[]): Promise<void> {
  if (jobs.length === 0) return;
  if (!isQueueReady(queue)) throw new QueueUnavailableError('Redis is not connected.');
  // One addBulk per partition: its keys share one slot, as a cluster requires of a MULTI.
  const adding = Promise.all(
    [...jobsByShard(queue, jobs)].map(async ([shard, shardJobs]) =>
      queue.at(shard).addBulk(
        shardJobs.map((job) => ({
          name: job.name ?? 'deliver',
          data: job.gate ? { deliveryId: job.deliveryId, gate: job.gate } : { deliveryId: job.deliveryId },
          opts: {
            jobId: job.deliveryId,
            delay: Math.max(0, Math.round(job.delayMs ?? 0)),
            ...(job.retry ? { priority: RETRY_PRIORITY } : {}),
          },
        })),
      ),
    ),
  );
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new QueueUnavailableError(`Redis did not answer within ${ADD_TIMEOUT_MS} ms.`)), ADD_TIMEOUT_MS);
  });
  try {
    await Promise.race([adding, timeout]);
  } catch (error) {
    // A late success of the abandoned add is harmless: the relay re-adds with the same job id.
    adding.catch(() => undefined);
    if (error instanceof QueueUnavailableError) throw error;
    throw new QueueUnavailableError('Adding delivery jobs failed.', { cause: error });
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The partition a job goes to: its gate key's.
 *
 * @throws TypeError for a job without a gate key when the queue has several partitions: its
 *   endpoint's partition is unknown (a caller's mistake; queueRecordedDeliveries looks gates up)
 */
export function shardOfJob(queue: WebhookQueue, job: Pick<JobToAdd, 'deliveryId' | 'gate'>): number {
  if (job.gate !== undefined) return queue.shardOf(job.gate);
  if (queue.count === 1) return 0;
  throw new TypeError(`Delivery ${job.deliveryId} has no gate key: with ${queue.count} queue partitions it cannot be queued without one.`);
}

/**
 * The jobs grouped by the partition each goes to ({@link shardOfJob}), each group in the
 * order given: what one command of a partition (an addBulk, a pipeline) takes, since a Redis
 * Cluster runs one only over keys of one slot.
 *
 * @throws TypeError as {@link shardOfJob}
 */
export function jobsByShard<J extends Pick<JobToAdd, 'deliveryId' | 'gate'>>(queue: WebhookQueue, jobs: readonly J[]): Map<number, J[]> {
  const byShard = new Map<number, J[]>();
  for (const job of jobs) {
    const shard = shardOfJob(queue, job);
    const group = byShard.get(shard);
    if (group) group.push(job);
    else byShard.set(shard, [job]);
  }
  return byShard;
}

/**
 * True when the queue's own ioredis connection is ready. Producers check it before any
 * command, because BullMQ waits (rather than fails) for a connection that is not ready.
 */
export function isQueueReady(queue: WebhookQueue): boolean {
  const status = (queue.connection as Partial<RedisClient>).status;
  return status === undefined || status === 'ready';
}
