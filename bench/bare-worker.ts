import axios from 'axios';
import { Worker } from 'bullmq';
import Redis from 'ioredis';
import { Pool } from 'pg';

/**
 * The delivery baseline, run as its own process: what a user would write without this
 * system, a plain BullMQ worker that POSTs unsigned with axios (a non-2xx answer fails the
 * job). Without BARE_DATABASE_URL the job carries the URL and body and nothing touches
 * PostgreSQL. With it, the job carries a delivery id and the worker does the least
 * bookkeeping our design needs, with plain pg: one statement to claim and load the delivery
 * row, one to record the attempt and the outcome. Environment: REDIS_URL, REDIS_PREFIX,
 * BARE_QUEUE, WORKER_CONCURRENCY, BARE_DATABASE_URL. It tells its parent over IPC when it is ready.
 */

/** A baseline job: the URL and body, or (with BARE_DATABASE_URL) the id of a delivery row holding them. */
export type BareJobData = { url: string; body: string } | { deliveryId: string };

const concurrency = Number(process.env.WORKER_CONCURRENCY ?? 50);
const pool = process.env.BARE_DATABASE_URL ? new Pool({ connectionString: process.env.BARE_DATABASE_URL, max: Math.min(concurrency, 20) }) : undefined;
const connection = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null });

async function post(url: string, body: string, id: string | undefined): Promise<number> {
  const response = await axios.post(url, body, {
    headers: { 'content-type': 'application/json', 'x-bench-id': id },
    timeout: 15_000,
  });
  return response.status;
}

async function deliverRecorded(db: Pool, deliveryId: string): Promise<void> {
  const { rows } = await db.query<{ url: string; body: string }>(
    `UPDATE webhook_deliveries SET status = 'delivering', updated_at = now() WHERE id = $1 AND created_at = webhook_id_time($1) RETURNING url, body`,
    [deliveryId],
  );
  const started = performance.now();
  const status = await post(rows[0].url, rows[0].body, deliveryId);
  await db.query(
    `WITH attempt AS (
       INSERT INTO webhook_attempts (delivery_id, delivery_created_at, attempt_number, status_code, duration_ms) VALUES ($1, webhook_id_time($1), 1, $2, $3)
     )
     UPDATE webhook_deliveries SET status = 'succeeded', attempts = 1, last_status_code = $2, delivered_at = now(), updated_at = now()
      WHERE id = $1 AND created_at = webhook_id_time($1)`,
    [deliveryId, status, Math.round(performance.now() - started)],
  );
}

const worker = new Worker<BareJobData>(
  process.env.BARE_QUEUE ?? 'bare-webhooks',
  async (job) => {
    if ('deliveryId' in job.data) {
      if (!pool) throw new Error('a delivery-id job needs BARE_DATABASE_URL');
      await deliverRecorded(pool, job.data.deliveryId);
    } else {
      await post(job.data.url, job.data.body, job.id);
    }
  },
  {
    connection,
    prefix: process.env.REDIS_PREFIX,
    concurrency,
    // The same removal and bounded tail as our queue, so Redis does the same bookkeeping for both.
    removeOnComplete: { count: 0 },
    removeOnFail: { age: 7 * 24 * 3_600, count: 5_000 },
  },
);

void worker.waitUntilReady().then(() => process.send?.({ ready: true }));
process.once('SIGTERM', () => {
  void worker
    .close()
    .then(() => connection.quit())
    .then(() => pool?.end())
    .finally(() => process.exit(0));
});
