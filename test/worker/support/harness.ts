import pino from 'pino';
import { QueryTypes, type Transaction } from 'sequelize';
import type { Config } from '../../../shared/config';
import { Database, createDatabase } from '../../../shared/db';
import { type PostEventName, insertPostEventJobs } from '../../../shared/posts/post-events';
import { WebhookQueue, createWebhookQueue } from '../../../shared/queue';
import { Outbox, createOutbox } from '../../../shared/deliveries/outbox';
import { createRedis, RedisClient } from '../../../shared/redis';
import { WebhookWorker, WebhookWorkerOptions, createWebhookWorker } from '../../../services/webhook-worker/src/worker';

export const silentLogger = pino({ level: process.env.LOG_LEVEL ?? 'silent' });

/** A test file's producer side: database, a client-role Redis connection, the queue and the outbox. */
export interface Producer {
  db: Database;
  connection: RedisClient;
  queue: WebhookQueue;
  outbox: Outbox;
  /** Post events over the outbox, as the api records them; `data` of any shape, for the tests' own payloads. */
  events: { record(transaction: Transaction, event: PostEventName, data: object): Promise<void> };
  close(): Promise<void>;
}

export function createProducer(config: Config, outboxOptions: { reviveAfterMs?: number } = {}): Producer {
  const db = createDatabase(config.databaseUrl, { poolMax: 5 });
  const connection = createRedis(config, 'client');
  connection.on('error', () => undefined);
  const queue = createWebhookQueue(config, connection, silentLogger);
  const outbox = createOutbox({ db, queue, logger: silentLogger, relayIntervalMs: 100, ...outboxOptions });
  return {
    db,
    connection,
    queue,
    outbox,
    events: { record: async (transaction, event, data) => outbox.queueAfterCommit(transaction, await insertPostEventJobs(db.sequelize, transaction, event, data)) },
    async close() {
      await outbox.stop();
      await queue.close();
      connection.disconnect();
      await db.close();
    },
  };
}

/**
 * The teardown of a delivery test: empties the queue and the delivery and endpoint tables,
 * so the next test starts from nothing, then closes the producer's connections.
 */
export async function resetAndClose(producer: Producer): Promise<void> {
  await producer.queue.obliterate({ force: true });
  await producer.db.models.WebhookDelivery.destroy({ where: {} });
  await producer.db.models.WebhookEndpoint.destroy({ where: {} });
  await producer.close();
}

/**
 * An in-process worker over the producer's database handle, as one worker process holds one.
 */
export function startWorker(
  config: Config,
  db: Database,
  overrides: Partial<Omit<WebhookWorkerOptions, 'config' | 'db' | 'logger'>> = {},
): { worker: WebhookWorker; close(): Promise<void> } {
  const worker = createWebhookWorker({ config, db, logger: silentLogger, ...overrides });
  return {
    worker,
    async close() {
      await worker.close(5_000);
    },
  };
}

/** Adds an endpoint the way the endpoints CLI does; returns its id and secret. */
export async function addEndpoint(
  db: Database,
  url: string,
  options: { events?: string[]; secret?: string; active?: boolean } = {},
): Promise<{ id: number; secret: string }> {
  const secret = options.secret ?? 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
  const endpoint = await db.models.WebhookEndpoint.create({
    url,
    secret,
    events: options.events ?? [],
    active: options.active ?? true,
    description: null,
  });
  return { id: endpoint.id, secret };
}

/** Post event data as docs/design.md §6.1 shapes it. */
export function buildPostData(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    pid: 100001,
    uuid: '5f1c1b8e-6a4e-4c39-9d0a-2b7c3f1e9a10',
    user_id: 1,
    title: 'Hello / world',
    content: 'Post body with ünïcode',
    image: null,
    created_at: '2026-11-21T10:00:00.000Z',
    updated_at: '2026-11-21T10:00:00.000Z',
    ...overrides,
  };
}

/** Records a post event in its own committed transaction, as the posts repository does. */
export async function recordEvent(producer: Producer, event: PostEventName, data: object = buildPostData()): Promise<void> {
  await producer.db.sequelize.transaction((transaction) => producer.events.record(transaction, event, data));
}


/** Delivery rows as the tests look at them. */
/** Every delivery row, oldest first, its `body` read from its event (docs/design.md §3.2: stored once). */
export async function deliveryRows(db: Database) {
  const rows = await db.models.WebhookDelivery.findAll({ order: [['createdAt', 'ASC']] });
  const events = await db.sequelize.query<{ id: string; body: string }>('SELECT id, body FROM webhook_events WHERE id = ANY($1::text[])', {
    bind: [rows.map((row) => row.eventId).filter((id) => id !== null)],
    type: QueryTypes.SELECT,
  });
  const bodies = new Map(events.map((event) => [event.id, event.body]));
  return rows.map((row) => Object.assign(row, { body: row.body ?? bodies.get(row.eventId ?? '') ?? '' }) as typeof row & { body: string });
}
