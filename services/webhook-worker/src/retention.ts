import { Queue, Worker } from 'bullmq';
import type { Logger } from 'pino';
import { QueryTypes, Sequelize } from 'sequelize';
import type { Config } from '../../../shared/config';
import { createRedis } from '../../../shared/redis';

/** The queue of the worker's own housekeeping jobs (one BullMQ job scheduler: the daily prune). */
export const MAINTENANCE_QUEUE_NAME = 'webhook-maintenance';

/**
 * The maintenance queue's name for a configuration: {@link MAINTENANCE_QUEUE_NAME}, or with a
 * partitioned queue and a prefix that is no hash tag (DESIGN §13) `{webhook-maintenance}`, a
 * hash tag of its own, since a Redis Cluster runs BullMQ's scripts only within one slot.
 */
export function maintenanceQueueName(config: Pick<Config, 'redisPrefix' | 'webhookQueuePartitions'>): string {
  const prefixIsTag = /^\{[^{}]+\}$/.test(config.redisPrefix);
  return config.webhookQueuePartitions > 1 && !prefixIsTag ? `{${MAINTENANCE_QUEUE_NAME}}` : MAINTENANCE_QUEUE_NAME;
}
/** The job scheduler's id: upserting it again from every worker keeps exactly one. */
export const RETENTION_SCHEDULER_ID = 'retention';
/** Every day at 03:17 UTC, off the hour when other jobs tend to run. */
const RETENTION_PATTERN = '17 3 * * *';
/** Rows deleted per statement, so a large table is never locked for long. */
const DEFAULT_BATCH_SIZE = 1_000;

/** Rows one prune removed. */
export interface PruneResult {
  /** Succeeded deliveries removed, with their webhook_attempts rows (ON DELETE CASCADE). */
  deliveries: number;
  /** webhook_events rows removed: past the window and no longer delivered by any row. */
  events: number;
  /** webhook_inbox rows removed. */
  inbox: number;
}

export interface Retention {
  /**
   * Prunes, in batches of `batchSize` rows per statement until none is left: succeeded
   * deliveries created more than WEBHOOK_RETENTION_DAYS ago (their attempts go with them),
   * the events made before then that no delivery references any more, and webhook_inbox
   * rows received before then. Failed and unfinished deliveries are kept
   * (DESIGN §11), also when their endpoint is deleted.
   */
  prune(): Promise<PruneResult>;
  /** Stops the maintenance worker and closes its connections. */
  close(): Promise<void>;
}

export interface RetentionOptions {
  config: Pick<Config, 'webhookRetentionDays' | 'redisPrefix' | 'redisUrl' | 'redisClusterNodes' | 'webhookQueuePartitions'>;
  sequelize: Sequelize;
  logger: Logger;
  /** Rows per statement; default 1000. */
  batchSize?: number;
  /** Schedule the daily prune and run it when due (default true); tests call prune() directly. */
  schedule?: boolean;
}

/**
 * The retention of DESIGN §11: a BullMQ job scheduler (`upsertJobScheduler`, so however many
 * workers start, one scheduler exists and one of them runs each day's job) on the
 * `webhook-maintenance` queue, and the prune it runs.
 */
export function createRetention(options: RetentionOptions): Retention {
  const { config, sequelize, logger } = options;
  const batchSize = options.batchSize ?? DEFAULT_BATCH_SIZE;

  async function inBatches(sql: string): Promise<number> {
    let total = 0;
    for (;;) {
      const rows = await sequelize.query<{ n: number }>(sql, { bind: [config.webhookRetentionDays, batchSize], type: QueryTypes.SELECT });
      const deleted = Number(rows[0]?.n ?? 0);
      total += deleted;
      if (deleted < batchSize) return total;
    }
  }

  async function prune(): Promise<PruneResult> {
    const deliveries = await inBatches(`
      WITH doomed AS (
        SELECT id FROM webhook_deliveries
         WHERE status = 'succeeded' AND created_at < now() - $1 * interval '1 day'
         ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED
      ), gone AS (DELETE FROM webhook_deliveries d USING doomed WHERE d.id = doomed.id RETURNING 1)
      SELECT count(*)::int AS n FROM gone`);
    const events = await inBatches(`
      WITH doomed AS (
        SELECT id FROM webhook_events e
         WHERE created_at < now() - $1 * interval '1 day'
           AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = e.id)
         ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED
      ), gone AS (DELETE FROM webhook_events e USING doomed WHERE e.id = doomed.id RETURNING 1)
      SELECT count(*)::int AS n FROM gone`);
    const inbox = await inBatches(`
      WITH doomed AS (
        SELECT webhook_id FROM webhook_inbox WHERE received_at < now() - $1 * interval '1 day'
         ORDER BY received_at LIMIT $2 FOR UPDATE SKIP LOCKED
      ), gone AS (DELETE FROM webhook_inbox i USING doomed WHERE i.webhook_id = doomed.webhook_id RETURNING 1)
      SELECT count(*)::int AS n FROM gone`);
    return { deliveries, events, inbox };
  }

  if (options.schedule === false) return { prune, close: async () => undefined };

  const connection = createRedis(config, 'worker');
  connection.on('error', (error) => logger.debug({ err: error }, 'maintenance redis connection error'));
  const queueName = maintenanceQueueName(config);
  const queue = new Queue(queueName, {
    connection,
    prefix: config.redisPrefix,
    defaultJobOptions: { removeOnComplete: { count: 10 }, removeOnFail: { count: 50 } },
    streams: { events: { maxLen: 100 } },
  });
  queue.on('error', (error) => logger.debug({ err: error }, 'maintenance queue error'));
  const worker = new Worker(
    queueName,
    async () => {
      const result = await prune();
      logger.info({ ...result, retentionDays: config.webhookRetentionDays }, 'retention prune done');
      return result;
    },
    { connection, prefix: config.redisPrefix, concurrency: 1 },
  );
  worker.on('error', (error) => logger.debug({ err: error }, 'maintenance worker error'));
  queue
    .upsertJobScheduler(RETENTION_SCHEDULER_ID, { pattern: RETENTION_PATTERN, tz: 'UTC' }, { name: 'prune' })
    .catch((error) => logger.warn({ err: error }, 'could not schedule the retention prune; the next start retries'));

  return {
    prune,
    async close() {
      await worker.close().catch(() => undefined);
      await queue.close().catch(() => undefined);
      await connection.quit().catch(() => connection.disconnect());
    },
  };
}
