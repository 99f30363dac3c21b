import { Queue } from 'bullmq';
import type { RedisClient } from '../redis';
import type { BaseLogger } from 'pino';
import type { Config } from '../config';
import { QueueUnavailableError } from './errors';

/** Name of the BullMQ queue every webhook delivery goes through (DESIGN §1). */
export const WEBHOOK_QUEUE_NAME = 'webhooks';

/**
 * What a job carries: the delivery id only. The body, the URL and above all the secret
 * stay in PostgreSQL; the worker loads them per attempt (DESIGN §6).
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
   * in the delayed set until then and goes without asking again (DESIGN §14).
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

export type WebhookQueue = Queue<WebhookJobData, void, WebhookJobName>;

/** The logging this module needs; pino loggers and Fastify's `request.log` fit. */
export type QueueLogger = Pick<BaseLogger, 'info' | 'warn' | 'debug'>;

/** One job to add: the delivery id is also the BullMQ job id, so adding twice is harmless. */
export interface DeliveryJob {
  deliveryId: string;
  name?: WebhookJobName;
  /** Milliseconds to wait before the job may run; default 0. */
  delayMs?: number;
  /** The delivery already made an attempt: it queues behind first attempts (worker RETRY_PRIORITY). */
  retry?: boolean;
  /** The delivery's gate key (circuit-breaker.ts `gateKeyOf`), when the producer knows it. */
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
 * Finished jobs are only bookkeeping (the delivery log lives in PostgreSQL), so Redis keeps
 * a bounded tail of them (BullMQ docs, "Auto-removal of jobs"; ages in seconds).
 * `attempts` covers infrastructure failures only (the database away mid-attempt): delivery
 * retries are scheduled by the worker itself and do not count as BullMQ attempts.
 */
const DEFAULT_JOB_OPTIONS = {
  removeOnComplete: { age: 3_600, count: 1_000 },
  removeOnFail: { age: 7 * 24 * 3_600, count: 5_000 },
  attempts: 10,
  backoff: { type: 'exponential', delay: 1_000 },
} as const;

/** The queue's events stream is trimmed to about this many entries (BullMQ `streams.events.maxLen`). */
export const EVENTS_MAX_LEN = 10_000;

/** How long a producer waits for Redis before leaving the job to the outbox relay, ms. */
const ADD_TIMEOUT_MS = 2_000;

/**
 * Opens the producer side of the `webhooks` queue under `config.redisPrefix`.
 *
 * @param connection - a `client`-role ioredis connection (shared/redis): commands fail fast
 *   while Redis is away, so a producer never hangs; the caller owns and closes it. A command
 *   that fails or times out (`commandTimeout`) fails only itself: the queue sends no command
 *   of its own while it starts, so it works again as soon as Redis answers
 * @param logger - receives the queue's connection errors at debug level (BullMQ emits them as
 *   `error` events); the connection's outages are its owner's to log (shared/redis `logRedisOutages`)
 */
export function createWebhookQueue(
  config: Pick<Config, 'redisPrefix'>,
  connection: RedisClient,
  logger?: QueueLogger,
): WebhookQueue {
  const queue: WebhookQueue = new Queue(WEBHOOK_QUEUE_NAME, {
    connection,
    prefix: config.redisPrefix,
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
  return queue;
}

/**
 * Adds delivery jobs, failing fast instead of waiting for Redis: BullMQ itself waits for a
 * connection that is not ready yet, which would hold an api request hostage.
 *
 * @throws QueueUnavailableError when the queue's connection is not ready or Redis does not
 *   answer within 2 s; the rows stay pending and the outbox relay adds them later
 */
export async function addDeliveryJobs(queue: WebhookQueue, jobs: readonly DeliveryJob[]): Promise<void> {
  if (jobs.length === 0) return;
  if (!isQueueReady(queue)) throw new QueueUnavailableError('Redis is not connected.');
  const adding = queue.addBulk(
    jobs.map((job) => ({
      name: job.name ?? 'deliver',
      data: job.gate ? { deliveryId: job.deliveryId, gate: job.gate } : { deliveryId: job.deliveryId },
      opts: {
        jobId: job.deliveryId,
        delay: Math.max(0, Math.round(job.delayMs ?? 0)),
        ...(job.retry ? { priority: RETRY_PRIORITY } : {}),
      },
    })),
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
 * True when the queue's own ioredis connection is ready. Producers check it before any
 * command, because BullMQ waits (rather than fails) for a connection that is not ready.
 */
export function isQueueReady(queue: WebhookQueue): boolean {
  const status = (queue.opts.connection as Partial<RedisClient>).status;
  return status === undefined || status === 'ready';
}
