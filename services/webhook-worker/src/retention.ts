import { Queue, Worker } from 'bullmq';
import type { Logger } from 'pino';
import { QueryTypes, Sequelize } from 'sequelize';
import type { Config } from '../../../shared/config';
import { countOf, holdsUnfinished } from '../../../shared/deliveries/retention-checks';
import { DAY_MS, dayPartitionName, dayPartitionsBefore, detachedDayTables, ensureDayPartitions, pruneLegacyPartition } from '../../../shared/db/partitions';
import type { Metrics } from '../../../shared/metrics';
import { createRedis } from '../../../shared/redis';
import { pruneStatsAndPortal } from '../../../shared/stats/fold';

/** A day's deliveries held an unfinished row when read again under the detach's locks: roll the detach back. */
class DayKept extends Error {}

/** A statement gave up waiting for a lock (`lock_timeout`, SQLSTATE 55P03). */
function isLockTimeout(error: unknown): boolean {
  const parent = (error as { parent?: { code?: string } }).parent;
  return parent?.code === '55P03' || (error as { code?: string }).code === '55P03';
}

/** The queue of the worker's own housekeeping jobs (one BullMQ job scheduler: the daily prune). */
export const MAINTENANCE_QUEUE_NAME = 'webhook-maintenance';

/**
 * The maintenance queue's name for a configuration: {@link MAINTENANCE_QUEUE_NAME}, or with a
 * partitioned queue and a prefix that is no hash tag (docs/design.md §13.1) `{webhook-maintenance}`, a
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
/**
 * How long detaching a day may wait for the tables' locks, ms (docs/design.md §3.5: 2 s). While it
 * waits, every statement on the table queues behind it, so it gives up soon and tries again
 * next run.
 */
const DEFAULT_LOCK_TIMEOUT_MS = 2_000;
/** The order days are dropped in: what references first (docs/design.md §3.4). */
const DAY_TABLES = ['webhook_attempts', 'webhook_deliveries', 'webhook_events'] as const;

/** What one prune removed and kept. */
export interface PruneResult {
  /** Day partitions dropped (each day: its attempts, deliveries and events). */
  days: number;
  /** Days past the window kept because their deliveries still hold pending or delivering rows. */
  daysKept: number;
  /** Deliveries dropped with their days, and succeeded ones deleted from the legacy partition. */
  deliveries: number;
  /** Failed deliveries among those dropped with their days (docs/design.md §11.7: recoverable only within the window). */
  failedDropped: number;
  /** webhook_events rows deleted from the legacy partition: past the window and no longer delivered by any row. */
  events: number;
  /** webhook_inbox rows removed. */
  inbox: number;
}

export interface Retention {
  /**
   * Keeps the day partitions through today + 7 (docs/design.md §3.4), drops the day tables an earlier
   * pass detached and left (counted as days dropped), then prunes what is older than
   * WEBHOOK_RETENTION_DAYS: each whole day partition (attempts, then deliveries, then events,
   * detached in one transaction under the lock timeout), unless its deliveries hold pending or
   * delivering rows, looked for before and again under the detach's locks; in the legacy
   * partition, in batches of `batchSize` rows, succeeded deliveries with their attempts and
   * the events no delivery references any more; webhook_inbox rows received before then; the
   * stats counts of the UTC days before the window (the last success and failure stay); and
   * the expired portal sessions and links.
   * A day whose lock does not come in time is logged and left for the next run.
   */
  prune(): Promise<PruneResult>;
  /** Stops the maintenance worker and closes its connections. */
  close(): Promise<void>;
}

export interface RetentionOptions {
  config: Pick<Config, 'webhookRetentionDays' | 'redisPrefix' | 'redisUrl' | 'redisClusterNodes' | 'webhookQueuePartitions' | 'maintenanceIntervalMs'>;
  sequelize: Sequelize;
  logger: Logger;
  /** Counts of kept days and dropped failed deliveries (docs/design.md §3.4, §11.7). */
  metrics?: Pick<Metrics, 'retentionDaysKept' | 'retentionFailedDropped'>;
  /** Rows per statement; default 1000. */
  batchSize?: number;
  /** How long detaching a day waits for its locks, ms; default 2000. */
  lockTimeoutMs?: number;
  /**
   * Schedule the daily prune, run it when due, and schedule it again within
   * `maintenanceIntervalMs` whenever Redis lost it (default true); tests call prune() directly.
   */
  schedule?: boolean;
}

/**
 * The retention of docs/design.md §11.7: a BullMQ job scheduler (`upsertJobScheduler`, so however many
 * workers start, one scheduler exists and one of them runs each day's job) on the
 * `webhook-maintenance` queue, and the prune it runs. The scheduler is upserted at start and
 * again whenever a check (every `maintenanceIntervalMs`, and when the connection is back)
 * finds Redis without it (docs/design.md §15). The day partitions ahead are the process's partition
 * keeper's (shared/db/partition-keeper.ts).
 */
export function createRetention(options: RetentionOptions): Retention {
  const { config, sequelize, logger, metrics } = options;
  const batchSize = options.batchSize ?? DEFAULT_BATCH_SIZE;
  const lockTimeoutMs = options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS;

  async function inBatches(sql: string): Promise<number> {
    let total = 0;
    for (;;) {
      const rows = await sequelize.query<{ n: number }>(sql, { bind: [config.webhookRetentionDays, batchSize], type: QueryTypes.SELECT });
      const deleted = Number(rows[0]?.n ?? 0);
      total += deleted;
      if (deleted < batchSize) return total;
    }
  }

  /**
   * Drops one day's partitions. Kept (null) while its deliveries hold unfinished rows. A younger
   * delivery of one of its events (a replay) gets the event's body first, so no reference
   * breaks. The three detaches commit together, under the lock timeout, and only when the
   * day's deliveries, read again under those locks, still hold no pending or delivering row: a
   * redeliver or recover may have made one pending after the first look (docs/design.md §3.5).
   *
   * @returns the deliveries and failed deliveries dropped, or null when the day is kept
   * @throws a lock timeout (SQLSTATE 55P03) when the tables stayed busy
   */
  async function dropDay(day: Date): Promise<{ deliveries: number; failed: number } | null> {
    const deliveries = dayPartitionName('webhook_deliveries', day);
    if (await holdsUnfinished(sequelize, deliveries)) return null;
    await sequelize.query(
      `UPDATE webhook_deliveries d SET body = e.body
         FROM ${dayPartitionName('webhook_events', day)} e
        WHERE d.event_id = e.id AND d.created_at >= $1 AND d.body IS NULL`,
      { bind: [new Date(day.getTime() + DAY_MS)] },
    );
    const counts = await sequelize
      .transaction(async (transaction) => {
        await sequelize.query(`SET LOCAL lock_timeout = ${Math.max(1, Math.round(lockTimeoutMs))}`, { transaction });
        for (const table of DAY_TABLES) {
          await sequelize.query(`ALTER TABLE ${table} DETACH PARTITION ${dayPartitionName(table, day)}`, { transaction });
        }
        // The detached table is out of every statement's reach now: what it holds is final.
        if (await holdsUnfinished(sequelize, deliveries, transaction)) throw new DayKept();
        return countOf(sequelize, deliveries, transaction);
      })
      .catch((error: unknown) => {
        if (error instanceof DayKept) return null;
        throw error;
      });
    if (!counts) return null;
    for (const table of DAY_TABLES) await sequelize.query(`DROP TABLE IF EXISTS ${dayPartitionName(table, day)}`);
    return counts;
  }

  /**
   * Drops the day tables a pass detached and did not drop (the process died between the two,
   * docs/design.md §3.5): no statement reaches them any more, they only hold disk.
   *
   * @returns the days found and the deliveries and failed deliveries they held
   */
  async function dropDetached(): Promise<{ days: number; deliveries: number; failed: number }> {
    const leftover = await detachedDayTables(sequelize);
    const dropped = { days: 0, deliveries: 0, failed: 0 };
    for (const name of leftover) {
      if (name.startsWith('webhook_deliveries_')) {
        const counts = await countOf(sequelize, name);
        dropped.days += 1;
        dropped.deliveries += counts.deliveries;
        dropped.failed += counts.failed;
      }
      await sequelize.query(`DROP TABLE IF EXISTS ${name}`);
    }
    if (leftover.length > 0) logger.warn({ tables: leftover }, 'retention: dropped day tables an earlier pass detached and left');
    return dropped;
  }

  async function prune(): Promise<PruneResult> {
    await ensureDayPartitions(sequelize);
    const detached = await dropDetached();
    const result: PruneResult = { days: detached.days, daysKept: 0, deliveries: detached.deliveries, failedDropped: detached.failed, events: 0, inbox: 0 };
    const windowStart = new Date(Date.now() - config.webhookRetentionDays * DAY_MS);
    for (const day of await dayPartitionsBefore(sequelize, windowStart)) {
      const dayLabel = day.toISOString().slice(0, 10);
      let dropped: { deliveries: number; failed: number } | null;
      try {
        dropped = await dropDay(day);
      } catch (error) {
        if (!isLockTimeout(error)) throw error;
        logger.warn({ day: dayLabel }, 'retention: the day partitions stayed locked; the next run drops them');
        continue;
      }
      if (!dropped) {
        result.daysKept += 1;
        logger.info({ day: dayLabel }, 'retention: day kept, it still holds pending or delivering deliveries');
        continue;
      }
      result.days += 1;
      result.deliveries += dropped.deliveries;
      result.failedDropped += dropped.failed;
      if (dropped.failed > 0) logger.warn({ day: dayLabel, failed: dropped.failed }, 'retention: failed deliveries dropped with their day');
    }
    const legacy = await pruneLegacyPartition(inBatches);
    result.deliveries += legacy.deliveries;
    result.events = legacy.events;
    result.inbox = await inBatches(`
      WITH doomed AS (
        SELECT webhook_id FROM webhook_inbox WHERE received_at < now() - $1 * interval '1 day'
         ORDER BY received_at LIMIT $2 FOR UPDATE SKIP LOCKED
      ), gone AS (DELETE FROM webhook_inbox i USING doomed WHERE i.webhook_id = doomed.webhook_id RETURNING 1)
      SELECT count(*)::int AS n FROM gone`);
    const removed = await pruneStatsAndPortal(sequelize, windowStart);
    if (removed.stats + removed.portalLinks + removed.portalSessions > 0) logger.info(removed, 'retention: stats counts and expired portal links removed');
    metrics?.retentionDaysKept.set(result.daysKept);
    metrics?.retentionFailedDropped.inc(result.failedDropped);
    return result;
  }

  if (options.schedule === false) {
    return {
      prune,
      async close() {},
    };
  }

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
  const schedule = () => queue.upsertJobScheduler(RETENTION_SCHEDULER_ID, { pattern: RETENTION_PATTERN, tz: 'UTC' }, { name: 'prune' });

  let closing = false;
  let checking: Promise<void> | undefined;
  /**
   * Schedules the daily prune again when Redis no longer holds its scheduler: Redis restarted
   * empty, or failed over to a replica without it (docs/design.md §3.5, §15.1: back within a minute).
   */
  const checkSchedule = () => {
    checking ??= queue
      .getJobScheduler(RETENTION_SCHEDULER_ID)
      .then(async (found) => {
        if (found || closing) return;
        await schedule();
        logger.warn('retention: the daily job scheduler was missing from Redis; scheduled it again');
      })
      .catch((error: unknown) => {
        if (!closing) logger.warn({ err: error }, 'could not check the retention schedule; the next check tries again');
      })
      .finally(() => {
        checking = undefined;
      });
  };
  let timer: NodeJS.Timeout | undefined;
  // Upserted at every start, so a new pattern replaces the old; then checked on the process's
  // own timer, and at once whenever the connection is back.
  const started = schedule()
    .catch((error: unknown) => logger.warn({ err: error }, 'could not schedule the retention prune; the next check retries'))
    .then(() => {
      if (closing) return;
      connection.on('ready', checkSchedule);
      timer = setInterval(checkSchedule, config.maintenanceIntervalMs);
      timer.unref();
    });

  return {
    prune,
    async close() {
      closing = true;
      clearInterval(timer);
      connection.off('ready', checkSchedule);
      await worker.close().catch(() => undefined);
      await queue.close().catch(() => undefined);
      await connection.quit().catch(() => connection.disconnect());
      await started;
    },
  };
}
