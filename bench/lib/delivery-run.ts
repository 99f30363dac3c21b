import { Queue } from 'bullmq';
import { createdAtOf } from '../../shared/db/partitions';
import * as webhookQueue from '../../shared/queue/webhook-queue';
import { createRedis } from '../../shared/redis';
import { serializeEnvelope } from '../../shared/webhook/envelope';
import { newEventId } from '../../shared/webhook/ids';
import { newWebhookId } from '../../shared/webhook/signing';
import type { BareJobData } from '../bare-worker';
import type { SinkStats } from '../sink-receiver';
import { BenchDatabase, withClient } from './bench-database';
import { Build, Child, requireFrom, sleep, THIS_BUILD } from './children';
import { Sink } from './services';
import { BenchSettings } from './settings';

/** What one delivery run measured. */
export interface DeliveryRun {
  events: number;
  /** From the first job added to the last webhook received (and, for ours, recorded), seconds. */
  seconds: number;
  perSecond: number;
  sink: SinkStats;
  /** Runs that record in PostgreSQL only: deliveries recorded as succeeded, and attempt rows written. */
  succeeded?: number;
  attempts?: number;
}

/** A delivery run and what the worker processes spent on it. */
export interface WorkerMeasurement {
  run: DeliveryRun;
  /** Sum of the workers' RSS after the run, bytes. */
  rssBytes: number;
  /** CPU time of the worker processes (not PostgreSQL, Redis or the sink) per webhook, ms. */
  cpuMsPerWebhook: number;
}

/** Runs `measured` and reads the workers' CPU time around it and their RSS after it. */
export async function measureWorkers(workers: readonly Child[], measured: () => Promise<DeliveryRun>): Promise<WorkerMeasurement> {
  const cpu = () => workers.reduce((sum, worker) => sum + worker.cpuSeconds(), 0);
  const before = cpu();
  const run = await measured();
  return {
    run,
    rssBytes: workers.reduce((sum, worker) => sum + worker.rssBytes(), 0),
    cpuMsPerWebhook: ((cpu() - before) * 1000) / run.events,
  };
}

/** The figures of a measurement, for the detail column. */
export function describeMeasurement(measured: WorkerMeasurement): string {
  const { run } = measured;
  const parts = [
    `${run.seconds.toFixed(1)} s`,
    `worker CPU ${measured.cpuMsPerWebhook.toFixed(2)} ms/webhook`,
    `RSS ${Math.round(measured.rssBytes / 2 ** 20)} MB`,
  ];
  if (run.succeeded !== undefined) parts.push(`${run.succeeded} recorded, ${run.attempts ?? 0} attempts`);
  if (run.sink.duplicates > 0) parts.push(`${run.sink.duplicates} duplicates`);
  if (run.sink.badSignatures > 0) parts.push(`${run.sink.badSignatures} bad signatures`);
  return parts.join(', ');
}

/** Jobs per `addBulk` call: large enough to be cheap, small enough to stay well inside the producer's 2 s timeout. */
const ADD_CHUNK = 1_000;

/**
 * A `post.created` body as the api's outbox writes it (docs/design.md §6.1, §7), about 500 bytes;
 * every delivery of a run sends these bytes.
 */
export const EVENT_BODY = serializeEnvelope(
  {
    pid: 100_123,
    uuid: '0b6f3f4e-6c5a-4d0e-9a38-6f0f3c1d2e4b',
    user_id: 1,
    title: 'Benchmark post',
    content: 'Lorem ipsum dolor sit amet, consectetur adipiscing elit. '.repeat(5).trim(),
    image: null,
    created_at: '2026-01-01T00:00:00.000Z',
    updated_at: '2026-01-01T00:00:00.000Z',
  },
  { event: 'post.created', signable: true },
);

/**
 * Subscribes an endpoint at `url` to every event, with `secret`, and deactivates every other
 * endpoint, so the api's outbox writes exactly one delivery per post event.
 *
 * @returns the endpoint id
 */
export async function subscribeOnly(db: BenchDatabase, url: string, secret: string): Promise<number> {
  return withClient(db.url, async (client) => {
    await client.query('UPDATE webhook_endpoints SET active = false');
    const { rows } = await client.query<{ id: number }>('INSERT INTO webhook_endpoints (url, secret) VALUES ($1, $2) RETURNING id', [url, secret]);
    return rows[0].id;
  });
}

/**
 * Delivers `events` webhooks through our worker(s), already running on `redisPrefix`: writes
 * the delivery rows as the outbox does (committed, marked enqueued), then adds their jobs as
 * the outbox does after commit, and waits until the sink has received every one and the
 * worker has recorded every one as succeeded.
 *
 * @param endpoints - the endpoint id, or several: deliveries go to them in turn, each job
 *   with its gate key, so a partitioned queue spreads them over its partitions
 * @param shards - WEBHOOK_QUEUE_PARTITIONS of the worker; default 1
 * @param build - whose worker runs (another checkout's, for the versus section): its queue
 *   module adds the jobs, as its outbox would
 * @throws Error when deliveries stop progressing for 60 s
 */
export async function deliverThroughOurWorker(
  settings: BenchSettings,
  db: BenchDatabase,
  redisPrefix: string,
  sink: Sink,
  endpoints: number | readonly number[],
  events: number,
  shards = 1,
  build: Build = THIS_BUILD,
): Promise<DeliveryRun> {
  const endpointIds = typeof endpoints === 'number' ? [endpoints] : endpoints;
  const ids = await insertDeliveries(db, sink, endpointIds, events);
  await sink.reset();
  const connection = createRedis(settings, 'client');
  const { createWebhookQueue, addDeliveryJobs } = build === THIS_BUILD ? webhookQueue : requireFrom<typeof webhookQueue>(build, 'shared', 'queue', 'webhook-queue.js');
  const queue = createWebhookQueue({ redisPrefix, webhookQueuePartitions: shards }, connection);
  try {
    await queue.waitUntilReady();
    const started = Date.now();
    for (let i = 0; i < ids.length; i += ADD_CHUNK) {
      await addDeliveryJobs(
        queue,
        ids.slice(i, i + ADD_CHUNK).map((deliveryId, j) => ({ deliveryId, gate: `e:${endpointIds[(i + j) % endpointIds.length]}` })),
      );
    }
    return await finishRecordedRun(db, sink, ids, events, started);
  } finally {
    await queue.close();
    connection.disconnect();
  }
}

/**
 * Delivers `events` webhooks through the bare BullMQ worker listening on `queueName`, and
 * waits until the sink has received every one. Without `recorded`, the jobs carry the URL
 * and body. With it, delivery rows are written first and the jobs carry their ids, for the
 * bare worker's bookkeeping mode, and the run also waits until every row is recorded.
 *
 * @throws Error when deliveries stop progressing for 60 s
 */
export async function deliverThroughBareWorker(
  settings: BenchSettings,
  redisPrefix: string,
  queueName: string,
  sink: Sink,
  events: number,
  tag: string,
  recorded?: { db: BenchDatabase; endpointId: number },
): Promise<DeliveryRun> {
  const ids = recorded ? await insertDeliveries(recorded.db, sink, [recorded.endpointId], events, { inlineBody: true }) : undefined;
  await sink.reset();
  const connection = createRedis(settings, 'client');
  const queue = new Queue<BareJobData>(queueName, { connection, prefix: redisPrefix });
  try {
    await queue.waitUntilReady();
    const data = (i: number): BareJobData => (ids ? { deliveryId: ids[i] } : { url: `${sink.url}/webhooks/posts`, body: EVENT_BODY });
    const started = Date.now();
    for (let i = 0; i < events; i += ADD_CHUNK) {
      const count = Math.min(ADD_CHUNK, events - i);
      await queue.addBulk(Array.from({ length: count }, (_, k) => ({ name: 'deliver', data: data(i + k), opts: { jobId: `${tag}_${i + k}` } })));
    }
    if (recorded && ids) return await finishRecordedRun(recorded.db, sink, ids, events, started);
    const received = await waitForReceipts(sink, events);
    const seconds = ((received.lastAt ?? 0) - started) / 1000;
    return { events, seconds, perSecond: events / seconds, sink: received };
  } finally {
    await queue.close();
    connection.disconnect();
  }
}

/**
 * Writes `events` pending delivery rows as the outbox of the database's schema writes them and
 * returns their ids: with events stored once (docs/design.md §3.2), an event row per delivery
 * holding the body, the delivery referencing it in the same day partition (`created_at` its
 * id's time); on an older schema, and with `inlineBody` (the bare worker's rows), the body in
 * the delivery row.
 */
async function insertDeliveries(
  db: BenchDatabase,
  sink: Sink,
  endpointIds: readonly number[],
  events: number,
  { inlineBody = false }: { inlineBody?: boolean } = {},
): Promise<string[]> {
  const ids = Array.from({ length: events }, () => newWebhookId());
  const endpointOf = ids.map((_, i) => endpointIds[i % endpointIds.length]);
  const url = `${sink.url}/webhooks/posts`;
  await withClient(db.url, async (client) => {
    const { rows } = await client.query<{ events: boolean; days: boolean }>(
      `SELECT to_regclass('webhook_events') IS NOT NULL AS events, to_regproc('webhook_id_time') IS NOT NULL AS days`,
    );
    const createdAt = (alias: string) => (rows[0].days ? `webhook_id_time(${alias}.id)` : 'now()');
    if (rows[0].events && !inlineBody) {
      const eventIds = ids.map((id) => newEventId(createdAtOf(id).getTime()));
      await client.query(
        `WITH ev AS (
           INSERT INTO webhook_events (id, created_at, kind, event, body)
           SELECT e.id, ${createdAt('e')}, 'post', 'post.created', $2 FROM unnest($1::text[]) AS e(id)
         )
         INSERT INTO webhook_deliveries (id, created_at, event_id, endpoint_id, url, event, enqueued_at)
         SELECT d.id, ${createdAt('d')}, d.event_id, d.endpoint_id, $5, 'post.created', now() FROM unnest($3::text[], $1::text[], $4::int[]) AS d(id, event_id, endpoint_id)`,
        [eventIds, EVENT_BODY, ids, endpointOf, url],
      );
    } else {
      await client.query(
        `INSERT INTO webhook_deliveries (id, created_at, endpoint_id, url, event, body, enqueued_at)
         SELECT d.id, ${createdAt('d')}, d.endpoint_id, $3, 'post.created', $4, now() FROM unnest($1::text[], $2::int[]) AS d(id, endpoint_id)`,
        [ids, endpointOf, url, EVENT_BODY],
      );
    }
  });
  return ids;
}

/** Waits for every receipt and every record of a run whose rows are `ids`; the clock stops at the later of the two. */
async function finishRecordedRun(db: BenchDatabase, sink: Sink, ids: readonly string[], events: number, started: number): Promise<DeliveryRun> {
  const received = await waitForReceipts(sink, events);
  const recorded = await waitForRecords(db, ids, events);
  const seconds = (Math.max(received.lastAt ?? 0, recorded.lastUpdatedAt) - started) / 1000;
  return { events, seconds, perSecond: events / seconds, sink: received, succeeded: recorded.succeeded, attempts: recorded.attempts };
}

/** Polls the sink until it has `events` distinct webhooks. */
export async function waitForReceipts(sink: Sink, events: number): Promise<SinkStats> {
  let last = -1;
  let progressAt = Date.now();
  for (;;) {
    const stats = await sink.stats();
    if (stats.received >= events) return stats;
    if (stats.received !== last) {
      last = stats.received;
      progressAt = Date.now();
    } else if (Date.now() - progressAt > 60_000) {
      throw new Error(`deliveries stalled at ${stats.received} of ${events} (bad signatures: ${stats.badSignatures})`);
    }
    await sleep(100);
  }
}

async function waitForRecords(
  db: BenchDatabase,
  ids: readonly string[],
  events: number,
): Promise<{ succeeded: number; attempts: number; lastUpdatedAt: number }> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const { rows } = await withClient(db.url, (client) =>
      client.query<{ succeeded: string; last: Date | null }>(
        `SELECT count(*) FILTER (WHERE status = 'succeeded') AS succeeded, max(updated_at) AS last
           FROM webhook_deliveries WHERE id = ANY($1::text[])`,
        [ids],
      ),
    );
    const succeeded = Number(rows[0].succeeded);
    if (succeeded >= events || Date.now() > deadline) {
      const attempts = await withClient(db.url, async (client) =>
        Number((await client.query('SELECT count(*) AS n FROM webhook_attempts WHERE delivery_id = ANY($1::text[])', [ids])).rows[0].n),
      );
      return { succeeded, attempts, lastUpdatedAt: rows[0].last?.getTime() ?? 0 };
    }
    await sleep(100);
  }
}
