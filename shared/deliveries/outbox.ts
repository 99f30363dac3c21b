import type { RedisClient } from '../redis';
import type { Transaction } from 'sequelize';
import type { Database } from '../db';
import { gateKeyOf } from '../endpoint-gate/gate-keys';
import { createDeferredEnqueuedMarks, markEnqueued } from './enqueued-mark';
import { lockStaleQueued, lockUnqueued, queuedAfter, type RelayRow } from './relay-rows';
import { queueRecordedDeliveries } from './enqueue';
import { currentShards, shardKeyBase } from '../queue/shards';
import { JobToAdd, QueueLogger, WebhookQueue, addDeliveryJobs, isQueueReady, jobsByShard, shardOfJob } from '../queue/webhook-queue';

/** Dependencies and tuning of {@link createOutbox}. */
export interface OutboxOptions {
  db: Database;
  queue: WebhookQueue;
  logger: QueueLogger;
  /** How often the relay runs, ms; pass `config.outboxRelayIntervalMs`. Default 5000. */
  relayIntervalMs?: number;
  /**
   * A queued delivery untouched for this long, whose job is missing from Redis or already
   * finished there (a partial loss, such as a failover that dropped the last writes), is
   * added again, ms; pass `config.outboxReviveAfterMs`. Default 2000. A whole loss (Redis
   * restarted empty) is found sooner: see {@link Outbox.relayOnce}.
   */
  reviveAfterMs?: number;
  /** Rows handled per relay pass and per batch of a sweep. Default 500. */
  batchSize?: number;
}

/** What one relay pass did. */
export interface RelayResult {
  /** Rows that had never reached the queue and were added now. */
  enqueued: number;
  /** Queued rows whose job had vanished from Redis and was added again. */
  revived: number;
  /** Redis had lost its data (the sentinel key was missing), so every queued row was added again. */
  swept: boolean;
}

export interface Outbox {
  /**
   * For writers that inserted outbox rows inside `transaction` (a post's update or delete, see
   * shared/posts/post-events.ts): after commit, without holding up the caller, adds the jobs
   * and marks those no claim marked first `enqueued_at` within 250 ms; when Redis is away that
   * is logged and left to the relay, and the caller's commit still succeeds.
   */
  queueAfterCommit(transaction: Transaction, jobs: readonly JobToAdd[]): void;
  /**
   * For writers that put the outbox rows in their own statement (a batch of post creates,
   * shared/posts/create-batch.ts): once that statement committed, adds
   * the jobs and marks the rows `enqueued_at` as {@link record} does after commit, without
   * holding up the caller; when Redis is away, the relay adds them later.
   */
  queueCommitted(jobs: readonly JobToAdd[]): void;
  /** Starts the relay timer; safe to run in several api processes at once. */
  startRelay(): void;
  /** Stops the relay timer and waits for a pass, and post-commit enqueues, in progress. */
  stop(): Promise<void>;
  /**
   * One relay pass, also run at once whenever the queue's Redis connection becomes ready:
   * 1. Loss check, one command per current partition: `SET <partition key base>:outbox-sentinel
   *    NX` (so each master of a cluster holds the sentinels of its own partitions). When a key
   *    was missing, Redis lost its data (a restart without persistence, a failover to an
   *    empty replica), so every queued delivery is added again at once to its partition, in
   *    batches walked by primary key over a partial index (adding a job id that exists is a
   *    no-op in BullMQ). A partition new after a change of the count also lacks its sentinel:
   *    the sweep then re-adds every queued delivery to its new partition, and a job still
   *    waiting in an old one is absorbed by the worker's status check (at-least-once).
   * 2. Adds pending rows that never reached the queue (`enqueued_at` NULL, older than 1 s so
   *    a commit's own enqueue wins the race).
   * 3. Re-adds queued rows untouched for `reviveAfterMs` whose job is missing or finished
   *    (one pipelined HMGET per partition and batch; a job missing from the row's partition is
   *    looked for in the others, where a change of the count may have left it), and touches
   *    the rest so the next pass looks further.
   * Rows are claimed with `FOR UPDATE SKIP LOCKED`, so concurrent relays never handle the
   * same row. A redelivery is revived as one (`redeliver` job), a retry behind first attempts.
   * Does nothing while Redis is disconnected.
   */
  relayOnce(): Promise<RelayResult>;
}

/**
 * Creates the transactional outbox of docs/design.md §6.1 and its relay.
 * Delivery is at-least-once: a row can reach the queue twice, and the BullMQ job id (the
 * delivery id) plus the worker's status check absorb the duplicate.
 */
export function createOutbox(options: OutboxOptions): Outbox {
  const { db, queue, logger } = options;
  const { sequelize } = db;
  const relayIntervalMs = options.relayIntervalMs ?? 5_000;
  const reviveAfterMs = options.reviveAfterMs ?? 2_000;
  const batchSize = options.batchSize ?? 500;
  const connection: RedisClient = queue.connection;
  const sentinelKeys = currentShards(queue.count).map((shard) => `${shardKeyBase(queue.prefix, shard)}:outbox-sentinel`);
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> | undefined;
  const inFlight = new Set<Promise<void>>();
  const marks = createDeferredEnqueuedMarks(sequelize, MARK_DELAY_MS, (error, ids) =>
    logger.warn({ err: error, deliveryIds: ids }, 'enqueued mark failed; the outbox relay will mark the rows'),
  );

  async function relayPending(): Promise<number> {
    return sequelize.transaction(async (transaction) => {
      const rows = await lockUnqueued(sequelize, transaction, batchSize);
      if (rows.length === 0) return 0;
      await addDeliveryJobs(queue, rows.map(toJob));
      await markEnqueued(sequelize, rows.map((row) => row.id), transaction);
      return rows.length;
    });
  }

  /** Redis lost (some of) its data when a sentinel is gone; setting it again claims the sweep. */
  async function lossDetected(): Promise<boolean> {
    const now = new Date().toISOString();
    // One command per key: in a cluster the sentinels live on different masters.
    const set = await Promise.all(sentinelKeys.map(async (key) => connection.set(key, now, 'NX')));
    return set.some((answer) => answer === 'OK');
  }

  /** Adds every queued row's job again, batch by batch, in primary-key order (no row locks held). */
  async function sweepQueued(): Promise<number> {
    let after = '';
    let added = 0;
    for (;;) {
      const rows = await queuedAfter(sequelize, after, batchSize);
      if (rows.length === 0) return added;
      await addDeliveryJobs(queue, rows.map(toJob));
      added += rows.length;
      after = rows[rows.length - 1].id;
    }
  }

  async function reviveLost(): Promise<number> {
    return sequelize.transaction(async (transaction) => {
      const rows = await lockStaleQueued(sequelize, transaction, reviveAfterMs, batchSize);
      if (rows.length === 0) return 0;
      const jobs = rows.map(toJob);
      const lost: JobToAdd[] = [];
      const finished: JobToAdd[] = [];
      const missing: JobToAdd[] = [];
      // One pipeline per partition: its keys share one slot, as a cluster pipeline requires.
      for (const [shard, shardJobs] of jobsByShard(queue, jobs)) {
        const pipeline = connection.pipeline();
        for (const job of shardJobs) pipeline.hmget(queue.at(shard).toKey(job.deliveryId), 'timestamp', 'finishedOn');
        const states = (await pipeline.exec()) ?? [];
        shardJobs.forEach((job, index) => {
          const [error, fields] = states[index] ?? [null, null];
          if (error) return;
          const [created, finishedOn] = fields as [string | null, string | null];
          if (created === null) missing.push(job);
          else if (finishedOn !== null) finished.push(job);
        });
      }
      // A job missing from its partition may wait in another one the count used before.
      const others = missing.length > 0 && (await queue.shards()).length > 1;
      for (const job of missing) {
        const found = others ? await queue.getJob(job.deliveryId) : undefined;
        // A finished one there blocks nothing: the new job goes to the row's own partition.
        if (!found || found.finishedOn !== undefined) lost.push(job);
      }
      // A finished job kept in Redis under this id would make the new add a no-op.
      for (const job of finished) await queue.at(shardOfJob(queue, job)).remove(job.deliveryId);
      lost.push(...finished);
      await addDeliveryJobs(queue, lost);
      // Touching the live ones too moves them to the back of the sweep order, so one
      // long backlog of waiting jobs never hides a lost row behind it.
      await markEnqueued(sequelize, rows.map((row) => row.id), transaction);
      return lost.length;
    });
  }

  async function relayOnce(): Promise<RelayResult> {
    if (!isQueueReady(queue)) return { enqueued: 0, revived: 0, swept: false };
    let revived = 0;
    const swept = await lossDetected();
    if (swept) {
      try {
        revived += await sweepQueued();
      } catch (error) {
        // The next pass sweeps again.
        await Promise.all(sentinelKeys.map(async (key) => connection.del(key))).catch(() => undefined);
        throw error;
      }
      // A first start on an empty Redis also lands here, with nothing to revive.
      if (revived > 0) logger.warn({ revived }, 'Redis lost its data: every queued delivery was added to the queue again');
    }
    const enqueued = await relayPending();
    revived += await reviveLost();
    if (enqueued > 0 || revived > 0) logger.info({ enqueued, revived }, 'outbox relay added deliveries to the queue');
    return { enqueued, revived, swept };
  }

  function enqueueAfterCommit(transaction: Transaction, jobs: readonly JobToAdd[]): void {
    if (jobs.length === 0) return;
    // Sequelize awaits afterCommit hooks inside commit(): starting the enqueue without
    // awaiting it keeps Redis off the caller's response time. stop() waits for it.
    transaction.afterCommit(() => enqueueCommitted(jobs));
  }

  function enqueueCommitted(jobs: readonly JobToAdd[]): void {
    if (jobs.length === 0) return;
    const enqueuing = queueRecordedDeliveries({ db, queue, logger }, jobs, (ids) => marks.add(ids)).finally(() => inFlight.delete(enqueuing));
    inFlight.add(enqueuing);
  }

  function pass(): void {
    if (running) return;
    running = relayOnce()
      .catch((error) => logger.warn({ err: error }, 'outbox relay pass failed'))
      .finally(() => {
        running = undefined;
      });
  }

  return {
    queueAfterCommit: enqueueAfterCommit,

    queueCommitted: enqueueCommitted,

    startRelay() {
      if (timer) return;
      timer = setInterval(pass, relayIntervalMs);
      timer.unref();
      // Redis back after an outage: check for a loss now rather than at the next tick.
      connection.on('ready', pass);
    },

    async stop() {
      clearInterval(timer);
      timer = undefined;
      connection.off('ready', pass);
      await Promise.all([running, ...inFlight]);
      await marks.flush().catch(() => undefined);
    },

    relayOnce,
  };
}

/**
 * How long the enqueued mark of a commit's rows waits, ms: long enough for the worker's claim
 * to mark most of them first, well under the relay's 1 s grace for unmarked rows.
 */
const MARK_DELAY_MS = 250;

function toJob(row: RelayRow): JobToAdd {
  const delayMs = row.next_attempt_at && !row.one_shot ? new Date(row.next_attempt_at).getTime() - Date.now() : 0;
  return {
    deliveryId: row.id,
    delayMs,
    name: row.one_shot ? 'redeliver' : 'deliver',
    retry: row.attempts > 0,
    gate: gateKeyOf({ endpointId: row.endpoint_id, url: row.url }),
  };
}
