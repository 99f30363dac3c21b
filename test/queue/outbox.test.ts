import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from 'pg';
import { QueryTypes } from 'sequelize';
import Redis from 'ioredis';
import { claimStatement } from '../../shared/deliveries/claim';
import { markEnqueued } from '../../shared/deliveries/enqueued-mark';
import { createWebhookQueue } from '../../shared/queue';
import { enqueueWebhook } from '../../shared/deliveries/enqueue';
import { createOutbox } from '../../shared/deliveries/outbox';
import { insertPostEventJobs } from '../../shared/posts/post-events';
import { createRedis } from '../../shared/redis';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { idAt } from '../support/partitions';
import { addEndpoint, buildPostData, createProducer, deliveryRows, Producer, recordEvent, resetAndClose, silentLogger } from '../worker/support/harness';
import { waitFor } from '../support/wait-for';

describe('outbox', () => {
  let env: TestEnvironment;
  let producer: Producer;

  beforeAll(async () => {
    env = await createTestEnvironment({}, 'api');
  });

  beforeEach(async () => {
    producer = createProducer(env.config, { reviveAfterMs: 200 });
    await producer.queue.waitUntilReady();
    await addEndpoint(producer.db, 'http://127.0.0.1:9/hooks');
  });

  afterEach(async () => {
    await resetAndClose(producer);
  });

  afterAll(async () => {
    await env.cleanup();
  });

  it('When the transaction commits, then each row is queued under its delivery id with only the id and its endpoint gate as job data', async () => {
    await addEndpoint(producer.db, 'http://127.0.0.1:9/second');

    await recordEvent(producer, 'post.created');

    // The enqueue runs after commit without holding up the committer.
    const rows = await waitFor(async () => {
      const found = await deliveryRows(producer.db);
      return found.every((row) => row.enqueuedAt !== null) && found;
    });
    expect(rows).toHaveLength(2);
    for (const row of rows) {
      expect(row.status).toBe('pending');
      const job = await producer.queue.getJob(row.id);
      expect(job?.name).toBe('deliver');
      expect(job?.data).toEqual({ deliveryId: row.id, gate: `e:${row.endpointId}` });
    }
  });

  it('When the transaction rolls back, then no row and no job exist', async () => {
    const rollback = producer.db.sequelize.transaction(async (transaction) => {
      await producer.events.record(transaction, 'post.created', buildPostData());
      throw new Error('post insert failed');
    });

    await expect(rollback).rejects.toThrow('post insert failed');
    expect(await deliveryRows(producer.db)).toHaveLength(0);
    expect((await producer.queue.getJobCounts(['waiting', 'delayed', 'prioritized'])).total).toEqual({ waiting: 0, delayed: 0, prioritized: 0 });
  });

  it('When Redis is unreachable at commit, then the commit succeeds and the relay queues the row later', async () => {
    // A producer whose Redis connection can never be ready, as when Redis is down.
    // ioredis's disconnect of a connection whose socket already closed arms a timer of
    // disconnectTimeout (2 s by default) that nothing clears: keep it short, or it holds the
    // test process open past jest's exit.
    const deadConnection = createRedis({ redisUrl: 'redis://127.0.0.1:1' }, 'client', { retryStrategy: () => null, disconnectTimeout: 50 });
    deadConnection.on('error', () => undefined);
    const deadQueue = createWebhookQueue(env.config, deadConnection, silentLogger);
    const deadOutbox = createOutbox({ db: producer.db, queue: deadQueue, logger: silentLogger });

    await producer.db.sequelize.transaction(async (transaction) => deadOutbox.queueAfterCommit(transaction, await insertPostEventJobs(producer.db.sequelize, transaction, 'post.updated', buildPostData())));

    const [row] = await deliveryRows(producer.db);
    expect(row.enqueuedAt).toBeNull();
    expect(await producer.queue.getJob(row.id)).toBeUndefined();
    const result = await waitFor(async () => {
      const pass = await producer.outbox.relayOnce();
      return pass.enqueued > 0 && pass;
    }, 5_000, 'relay');
    expect(result.enqueued).toBe(1);
    expect((await row.reload()).enqueuedAt).not.toBeNull();
    expect((await producer.queue.getJob(row.id))?.data).toEqual({ deliveryId: row.id, gate: `e:${row.endpointId}` });
    await deadQueue.close().catch(() => undefined);
    deadConnection.disconnect();
  });

  it('When several relays run at once, then each pending row is queued by exactly one of them', async () => {
    const created = new Date(Date.now() - 5_000);
    const ids = [0, 1, 2, 3].map(() => idAt('msg_', created)).sort();
    await producer.db.models.WebhookDelivery.bulkCreate(
      ids.map((id) => ({ id, endpointId: null, url: 'http://127.0.0.1:9/x', event: 'post.created', body: '{}', createdAt: created })),
    );
    const second = createOutbox({ db: producer.db, queue: producer.queue, logger: silentLogger, batchSize: 2 });

    const results = await Promise.all([producer.outbox.relayOnce(), second.relayOnce(), second.relayOnce()]);

    expect(results.reduce((sum, pass) => sum + pass.enqueued, 0)).toBe(ids.length);
    expect((await producer.queue.getJobs(['wait'])).map((job) => job.id).sort()).toEqual(ids);
  });

  it('When a worker claims rows of a batch the api is marking enqueued, then neither waits for the other and every row ends marked', async () => {
    const created = new Date();
    const [first, second] = [idAt('msg_', created), idAt('msg_', created)];
    await producer.db.models.WebhookDelivery.bulkCreate(
      [first, second].map((id) => ({ id, endpointId: null, url: 'http://127.0.0.1:9/x', event: 'post.created', body: '{}', createdAt: created })),
    );
    const worker = new Client({ connectionString: env.config.databaseUrl });
    await worker.connect();
    try {
      // A worker's claim batch takes the second row; its jobs were in Redis before the api's mark ran.
      await worker.query('BEGIN');
      expect((await worker.query(claimStatement([{ deliveryId: second, oneShot: false }]))).rows).toHaveLength(1);
      const mark = markEnqueued(producer.db.sequelize, [first, second]);
      const settled = await Promise.race([mark.then(() => 'marked'), sleep(2_000).then(() => 'waiting')]);
      // The same batch goes on to the first row. A mark holding it while waiting for the second
      // is a deadlock, which PostgreSQL ends after deadlock_timeout by failing one statement.
      expect((await worker.query(claimStatement([{ deliveryId: first, oneShot: false }]))).rows).toHaveLength(1);
      await worker.query('COMMIT');
      await mark;
      expect(settled).toBe('marked');
    } finally {
      await worker.end();
    }

    const rows = await deliveryRows(producer.db);
    const states = Object.fromEntries(rows.map((row) => [row.id, { status: row.status, marked: row.enqueuedAt !== null }]));
    expect(states).toEqual({ [first]: { status: 'delivering', marked: true }, [second]: { status: 'delivering', marked: true } });
  });

  it('When a worker claims a committed row before its enqueued mark is due, then the claim alone marks it and the row still waiting is marked within the relay grace', async () => {
    await addEndpoint(producer.db, 'http://127.0.0.1:9/second');
    await recordEvent(producer, 'post.created');
    const [claimed, waiting] = await waitFor(async () => {
      const rows = await deliveryRows(producer.db);
      const queued = await Promise.all(rows.map(async (row) => (await producer.queue.getJob(row.id)) !== undefined));
      return rows.length === 2 && queued.every(Boolean) && rows;
    });
    const worker = new Client({ connectionString: env.config.databaseUrl });
    await worker.connect();
    let atClaim: { enqueued_at: Date; updated_at: Date };
    try {
      expect((await worker.query(claimStatement([{ deliveryId: claimed.id, oneShot: false }]))).rows).toHaveLength(1);
      [atClaim] = (await worker.query('SELECT enqueued_at, updated_at FROM webhook_deliveries WHERE id = $1', [claimed.id])).rows;
    } finally {
      await worker.end();
    }
    // The claim is the row's only mark: one the api wrote before it would be older, one after it newer.
    expect(atClaim.enqueued_at).toEqual(atClaim.updated_at);

    await sleep(600);

    const rows = Object.fromEntries((await deliveryRows(producer.db)).map((row) => [row.id, row]));
    expect({ enqueuedAt: rows[claimed.id].enqueuedAt, updatedAt: rows[claimed.id].updatedAt }).toEqual({ enqueuedAt: atClaim.enqueued_at, updatedAt: atClaim.updated_at });
    expect(rows[waiting.id].status).toBe('pending');
    expect(rows[waiting.id].enqueuedAt).not.toBeNull();
  });

  it('When a queued job vanished from Redis, then the relay adds it again', async () => {
    await recordEvent(producer, 'post.created');
    const [row] = await deliveryRows(producer.db);
    await producer.queue.remove(row.id);

    const pass = await waitFor(async () => {
      const result = await producer.outbox.relayOnce();
      return result.revived > 0 && result;
    }, 5_000, 'revival');

    expect(pass.revived).toBe(1);
    expect((await producer.queue.getJob(row.id))?.data).toEqual({ deliveryId: row.id, gate: `e:${row.endpointId}` });
  });

  it('When a service enqueues a webhook with a secret, then the row holds it and Redis never does', async () => {
    const secret = 'whsec_c2VjcmV0LW5ldmVyLWluLXJlZGlzLWF0LWFsbA==';

    const id = await enqueueWebhook(
      { url: 'http://127.0.0.1:9/hook', event: 'user.created', payload: { id: 7 }, secret },
      producer,
    );

    const row = await producer.db.models.WebhookDelivery.findByPk(id);
    expect(row?.secret).toBe(secret);
    expect(row?.enqueuedAt).not.toBeNull();
    const [event] = await producer.db.sequelize.query('SELECT kind, body FROM webhook_events WHERE id = $1', { bind: [row?.eventId], type: QueryTypes.SELECT });
    expect(event).toEqual({ kind: 'send', body: '{"_data":{"id":7},"_config":{"app.webhook.event":"user.created","app.webhook.signable":1}}' });
    expect(await redisHolds(env.redisUrl, env.redisPrefix, 'c2VjcmV0LW5ldmVyLWluLXJlZGlz')).toBe(false);
    expect(await redisHolds(env.redisUrl, env.redisPrefix, id)).toBe(true);
  });
});

/** True when any key under `prefix` has `needle` in its name or in one of its values. */
async function redisHolds(url: string, prefix: string, needle: string): Promise<boolean> {
  const redis = new Redis(url);
  try {
    const keys: string[] = [];
    for await (const batch of redis.scanStream({ match: `${prefix}*`, count: 1000 })) keys.push(...(batch as string[]));
    for (const key of keys) {
      if (key.includes(needle)) return true;
      const type = await redis.type(key);
      const dump =
        type === 'hash'
          ? JSON.stringify(await redis.hgetall(key))
          : type === 'string'
            ? await redis.get(key)
            : type === 'list'
              ? JSON.stringify(await redis.lrange(key, 0, -1))
              : type === 'zset'
                ? JSON.stringify(await redis.zrange(key, 0, -1))
                : '';
      if (dump?.includes(needle)) return true;
    }
    return false;
  } finally {
    redis.disconnect();
  }
}
