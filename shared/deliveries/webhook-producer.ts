import { type Config, loadConfig } from '../config';
import { type Database, createDatabase } from '../db';
import { type WebhookMethod, enqueueWebhook } from './enqueue';
import { type QueueLogger, type WebhookQueue, createWebhookQueue } from '../queue/webhook-queue';
import { closeRedis, createRedis, describeRedisTarget, logRedisOutages, RedisClient, RedisTarget, whenReady } from '../redis';
import type { WebhookToEnqueue } from '../webhook/queue-binding';
import { WebhookRequest } from '../webhook/webhook-request';

/**
 * How long a new producer's first enqueue waits for Redis, ms. Past it the delivery row is
 * still written and the api's outbox relay queues it once Redis answers.
 */
const FIRST_READY_TIMEOUT_MS = 2_000;

/**
 * What `WebhookRequest.enqueue()` writes to and queues on: a database (PostgreSQL, where the
 * delivery row and its secret live) and the producer side of the `webhooks` queue.
 * `{ db, queue }` from any source fits; the api passes its own.
 */
export interface WebhookProducerDeps {
  db: Database;
  queue: WebhookQueue;
  /** Receives a warning when a delivery missed the queue and was left to the outbox relay. */
  logger?: QueueLogger;
  /**
   * Resolves once the queue's connection was ready once, or after a bound; never rejects.
   * `enqueue()` awaits it, so the first call of a fresh producer does not miss the queue.
   */
  ready?: Promise<void>;
}

/** A producer this module opened; the caller closes it. */
export interface WebhookProducer extends WebhookProducerDeps {
  connection: RedisClient;
  ready: Promise<void>;
  /** Closes the queue, then Redis, then the database (reverse order of opening). */
  close(): Promise<void>;
}

/**
 * Opens a database pool and a `client`-role Redis connection (commands fail fast while
 * Redis is away) with the `webhooks` queue on it. Importing this module loads Sequelize and
 * BullMQ.
 *
 * @param config - DATABASE_URL, REDIS_URL, REDIS_CLUSTER_NODES, REDIS_PREFIX and
 *   WEBHOOK_QUEUE_PARTITIONS (default 1) as `loadConfig` reads them; prefix and count must be
 *   the system's, so each delivery lands in its endpoint's partition
 * @param logger - receives queue connection errors and enqueue warnings; default: none
 * @returns the producer; connecting is lazy, and nothing fails until the first enqueue
 */
export function createWebhookProducer(
  config: Pick<Config, 'databaseUrl' | 'redisPrefix'> & Partial<Pick<Config, 'webhookQueuePartitions'>> & RedisTarget,
  logger?: QueueLogger,
): WebhookProducer {
  const db = createDatabase(config.databaseUrl, { poolMax: 5 });
  const connection = createRedis(config, 'client');
  // ioredis emits an error per failed reconnect; without a listener each one is printed.
  if (logger) logRedisOutages(connection, logger, `Redis at ${describeRedisTarget(config)}`, 'enqueued webhooks wait in the outbox');
  else connection.on('error', () => undefined);
  const queue = createWebhookQueue(config, connection, logger);
  const first = whenReady(connection, FIRST_READY_TIMEOUT_MS);
  return {
    db,
    queue,
    connection,
    logger,
    ready: first.ready.then(() => undefined),
    async close() {
      // A pending wait would hold the process open for the rest of its bound.
      first.cancel();
      await queue.close();
      await closeRedis(connection);
      await db.close();
    },
  };
}


declare module '../webhook/queue-binding' {
  /** `WebhookRequest.enqueue(producer)` takes what `enqueueWebhook()` writes to and queues on. */
  interface EnqueueTarget extends WebhookProducerDeps {}
}

/** The process-wide producer of `enqueue()` without an argument, opened on first use. */
let defaultProducer: Promise<WebhookProducer> | null = null;

function openDefaultProducer(): Promise<WebhookProducer> {
  if (!defaultProducer) {
    const opening = Promise.resolve().then(() => createWebhookProducer(loadConfig(process.env, 'cli')));
    // A bad environment must not stick: the next call reads it again.
    opening.catch(() => {
      if (defaultProducer === opening) defaultProducer = null;
    });
    defaultProducer = opening;
  }
  return defaultProducer;
}

/**
 * Records and queues what `WebhookRequest.enqueue()` hands over, on the caller's producer or
 * the default one (built from `loadConfig(process.env, 'cli')`).
 * @returns the delivery id
 * @throws what `enqueueWebhook()` throws; ConfigError when the default producer's environment is invalid
 */
async function enqueueRequest(webhook: WebhookToEnqueue, producer: WebhookProducerDeps | undefined): Promise<string> {
  const deps = producer ?? (await openDefaultProducer());
  await deps.ready;
  // Any other method is refused there with InvalidWebhookError.
  return enqueueWebhook({ ...webhook, method: webhook.method as WebhookMethod }, deps);
}

async function closeDefaultProducer(): Promise<void> {
  const opening = defaultProducer;
  defaultProducer = null;
  const producer = await opening?.catch(() => null);
  await producer?.close();
}

WebhookRequest.bindQueue({ enqueue: enqueueRequest, closeDefaultProducer });
