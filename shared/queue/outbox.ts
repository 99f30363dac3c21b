import { QueryTypes, Sequelize, Transaction } from 'sequelize';
import type { Database } from '../db';
import { markEnqueued, queueRecordedDeliveries } from './deliveries';
import { insertEventDeliveries } from './fan-out';
import { DeliveryJob, QueueLogger, WebhookQueue, addDeliveryJobs, isQueueReady } from './webhook-queue';

/** The post events of DESIGN §6. */
export type PostEvent = 'post.created' | 'post.updated' | 'post.deleted';

/** Dependencies and tuning of {@link createOutbox}. */
export interface OutboxOptions {
  db: Database;
  queue: WebhookQueue;
  logger: QueueLogger;
  /** How often the relay runs, ms; pass `config.outboxRelayIntervalMs`. Default 5000. */
  relayIntervalMs?: number;
  /**
   * A queued delivery untouched for this long, whose job is missing from Redis (Redis lost
   * its data) or already finished there, is added again, ms. Default 120000: well above
   * BullMQ's lock duration plus stalled-check interval, so a job merely waiting for a worker
   * is never mistaken for a lost one.
   */
  stuckAfterMs?: number;
  /** Rows handled per relay pass and sweep. Default 500. */
  batchSize?: number;
}

/** What one relay pass did. */
export interface RelayResult {
  /** Rows that had never reached the queue and were added now. */
  enqueued: number;
  /** Queued rows whose job had vanished from Redis and was added again. */
  revived: number;
}

export interface Outbox {
  /**
   * Writes one `webhook_deliveries` row per active endpoint subscribed to `event` (an
   * endpoint with no events takes every event), inside the caller's transaction, so the
   * rows commit or roll back with the post change. The body is the DESIGN §7 envelope
   * `{"_data":<data>,"_config":{"app.webhook.event":"<event>","app.webhook.signable":1}}`,
   * serialised once. Only operator endpoints and those of the post's owner (`data.user_id`)
   * receive it (DESIGN §6 ownership). After commit, without holding up the
   * caller, the rows are added to the queue and marked `enqueued_at`; when Redis is away
   * that is logged and left to the relay, and the caller's commit still succeeds.
   *
   * @param data - the event data of DESIGN §6 (`pid`, `uuid`, `user_id`, ...)
   * @throws EncryptionError (shared/webhook) when `data` is empty or not serialisable
   */
  record(transaction: Transaction, event: PostEvent, data: object): Promise<void>;
  /** Starts the relay timer; safe to run in several api processes at once. */
  startRelay(): void;
  /** Stops the relay timer and waits for a pass, and post-commit enqueues, in progress. */
  stop(): Promise<void>;
  /**
   * One relay pass: adds pending rows that never reached the queue (`enqueued_at` NULL,
   * older than 1 s so a commit's own enqueue wins the race), then re-adds queued rows whose
   * job is gone from Redis. Rows are claimed with `FOR UPDATE SKIP LOCKED`, so concurrent
   * relays never handle the same row. Does nothing while Redis is disconnected.
   */
  relayOnce(): Promise<RelayResult>;
}

interface PendingRow {
  id: string;
  next_attempt_at: Date | null;
}

/**
 * Creates the transactional outbox of DESIGN §6 and its relay.
 * Delivery is at-least-once: a row can reach the queue twice, and the BullMQ job id (the
 * delivery id) plus the worker's status check absorb the duplicate.
 */
export function createOutbox(options: OutboxOptions): Outbox {
  const { db, queue, logger } = options;
  const { sequelize } = db;
  const relayIntervalMs = options.relayIntervalMs ?? 5_000;
  const stuckAfterMs = options.stuckAfterMs ?? 120_000;
  const batchSize = options.batchSize ?? 500;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> | undefined;
  const inFlight = new Set<Promise<void>>();

  async function relayPending(): Promise<number> {
    return sequelize.transaction(async (transaction) => {
      const rows = await sequelize.query<PendingRow>(
        `SELECT id, next_attempt_at FROM webhook_deliveries
          WHERE status = 'pending' AND enqueued_at IS NULL AND created_at < now() - interval '1 second'
          ORDER BY created_at LIMIT $1 FOR UPDATE SKIP LOCKED`,
        { bind: [batchSize], type: QueryTypes.SELECT, transaction },
      );
      if (rows.length === 0) return 0;
      await addDeliveryJobs(queue, rows.map(toJob));
      await markEnqueued(sequelize, rows.map((row) => row.id), transaction);
      return rows.length;
    });
  }

  async function reviveLost(): Promise<number> {
    return sequelize.transaction(async (transaction) => {
      const rows = await sequelize.query<PendingRow>(
        `SELECT id, next_attempt_at FROM webhook_deliveries
          WHERE status IN ('pending', 'delivering') AND enqueued_at IS NOT NULL
            AND updated_at < now() - $1 * interval '1 millisecond'
            AND (next_attempt_at IS NULL OR next_attempt_at < now() - $1 * interval '1 millisecond')
          ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED`,
        { bind: [stuckAfterMs, batchSize], type: QueryTypes.SELECT, transaction },
      );
      const lost: PendingRow[] = [];
      for (const row of rows) {
        const state = await queue.getJobState(row.id);
        if (state === 'completed' || state === 'failed') await queue.remove(row.id);
        if (state === 'unknown' || state === 'completed' || state === 'failed') lost.push(row);
      }
      await addDeliveryJobs(queue, lost.map(toJob));
      // Touching the live ones too moves them to the back of the sweep order, so one
      // long backlog of waiting jobs never hides a lost row behind it.
      if (rows.length > 0) await markEnqueued(sequelize, rows.map((row) => row.id), transaction);
      return lost.length;
    });
  }

  async function relayOnce(): Promise<RelayResult> {
    if (!isQueueReady(queue)) return { enqueued: 0, revived: 0 };
    const enqueued = await relayPending();
    const revived = await reviveLost();
    if (enqueued > 0 || revived > 0) logger.info({ enqueued, revived }, 'outbox relay added deliveries to the queue');
    return { enqueued, revived };
  }

  return {
    async record(transaction, event, data) {
      const ids = await insertDeliveries(sequelize, transaction, event, data);
      if (ids.length === 0) return;
      // Sequelize awaits afterCommit hooks inside commit(): starting the enqueue without
      // awaiting it keeps Redis off the caller's response time. stop() waits for it.
      transaction.afterCommit(() => {
        const enqueuing = queueRecordedDeliveries({ db, queue, logger }, ids).finally(() => inFlight.delete(enqueuing));
        inFlight.add(enqueuing);
      });
    },

    startRelay() {
      if (timer) return;
      timer = setInterval(() => {
        if (running) return;
        running = relayOnce()
          .catch((error) => logger.warn({ err: error }, 'outbox relay pass failed'))
          .finally(() => {
            running = undefined;
          });
      }, relayIntervalMs);
      timer.unref();
    },

    async stop() {
      clearInterval(timer);
      timer = undefined;
      await Promise.all([running, ...inFlight]);
    },

    relayOnce,
  };
}

/**
 * The outbox's write without the enqueue: one `webhook_deliveries` row per active endpoint
 * subscribed to `event`, among the operator endpoints and those of the post's owner
 * (`data.user_id`; DESIGN §6 ownership), inside `transaction`, with `enqueued_at` NULL. A
 * process without a queue (the receiver) records events this way and the api's relay queues
 * them within OUTBOX_RELAY_INTERVAL_MS; {@link Outbox.record} adds the immediate enqueue after commit.
 *
 * @param data - the event data of DESIGN §6 (`pid`, `uuid`, `user_id`, ...)
 * @returns the new delivery ids (webhook-ids), none when no endpoint subscribes
 * @throws EncryptionError (shared/webhook) when `data` is empty or not serialisable
 */
export async function insertDeliveries(
  sequelize: Sequelize,
  transaction: Transaction,
  event: PostEvent,
  data: object,
): Promise<string[]> {
  const owner = (data as { user_id?: unknown }).user_id;
  return insertEventDeliveries(sequelize, transaction, { event, data, ownerUserId: typeof owner === 'number' ? owner : null });
}

function toJob(row: PendingRow): DeliveryJob {
  const delayMs = row.next_attempt_at ? new Date(row.next_attempt_at).getTime() - Date.now() : 0;
  return { deliveryId: row.id, delayMs };
}
