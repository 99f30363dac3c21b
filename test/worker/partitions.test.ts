import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadConfig } from '../../shared/config';
import { shardOf, shardOfQueueName } from '../../shared/queue';
import { deleteKeysByPrefix } from '../../shared/redis';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { Producer, addEndpoint, buildPostData, createProducer, deliveryRows, resetAndClose, startWorker } from './support/harness';
import { waitFor } from '../support/wait-for';

const CONCURRENCY = 4;

/** A receiver that answers each request after `delayMs`, counting requests in flight. */
async function startSlowReceiver(delayMs: number) {
  const stats = { inFlight: 0, maxInFlight: 0, requests: 0, paths: new Set<string>() };
  const server: Server = createServer((request: IncomingMessage, response: ServerResponse) => {
    request.resume();
    stats.requests += 1;
    stats.inFlight += 1;
    stats.maxInFlight = Math.max(stats.maxInFlight, stats.inFlight);
    stats.paths.add(request.url ?? '');
    setTimeout(() => {
      stats.inFlight -= 1;
      response.writeHead(200).end();
    }, delayMs);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    stats,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Records one post.created event per pid in one committed transaction. */
async function recordPosts(producer: Producer, pids: number[]): Promise<void> {
  await producer.db.sequelize.transaction(async (transaction) => {
    for (const pid of pids) await producer.events.record(transaction, 'post.created', buildPostData({ pid }));
  });
}

describe('webhook worker over a partitioned queue (docs/design.md §13.1)', () => {
  let env: TestEnvironment;
  let producer: Producer;
  let running: ReturnType<typeof startWorker> | undefined;

  beforeAll(async () => {
    env = await createTestEnvironment(
      { WORKER_CONCURRENCY: String(CONCURRENCY), WEBHOOK_QUEUE_PARTITIONS: '6', WEBHOOK_ENDPOINT_CONCURRENCY: '100' },
      'worker',
    );
  });

  beforeEach(async () => {
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
  });

  afterEach(async () => {
    await running?.close();
    running = undefined;
    await resetAndClose(producer);
    await deleteKeysByPrefix(env.config, env.redisPrefix);
  });

  afterAll(async () => {
    await env.cleanup();
  });

  it('When 12 endpoints spread over 6 partitions are slow, then one worker has WORKER_CONCURRENCY attempts in flight, never more', async () => {
    const slow = await startSlowReceiver(300);
    try {
      const endpoints = [];
      for (let i = 0; i < 12; i += 1) endpoints.push(await addEndpoint(producer.db, `${slow.url}/hooks/${i}`));
      expect(new Set(endpoints.map(({ id }) => shardOf(`e:${id}`, 6))).size).toBeGreaterThanOrEqual(4);
      await recordPosts(producer, [1, 2, 3]);

      running = startWorker(env.config, producer.db);
      await waitFor(() => slow.stats.requests >= 36, 30_000, 'every delivery sent');

      expect(slow.stats.maxInFlight).toBe(CONCURRENCY);
      expect(slow.stats.paths.size).toBe(12);
    } finally {
      await slow.close();
    }
  });

  it('When only one partition has work, then it gets every slot of the worker', async () => {
    const slow = await startSlowReceiver(300);
    try {
      await addEndpoint(producer.db, `${slow.url}/hooks/only`);
      running = startWorker(env.config, producer.db);
      await running.worker.waitUntilReady();
      await recordPosts(producer, Array.from({ length: 12 }, (_, i) => i + 1));

      await waitFor(() => slow.stats.requests >= 12, 20_000, 'every delivery sent');
      expect(slow.stats.maxInFlight).toBe(CONCURRENCY);
    } finally {
      await slow.close();
    }
  });

  it('When a busy partition holds every slot, then another partition deliveries still go out within a few attempts', async () => {
    const slow = await startSlowReceiver(500);
    const fast: RecordingServer = await startRecordingServer();
    try {
      const busy = await addEndpoint(producer.db, `${slow.url}/hooks/busy`, { events: ['post.created'] });
      running = startWorker(env.config, producer.db);
      await running.worker.waitUntilReady();
      await recordPosts(producer, Array.from({ length: 40 }, (_, i) => i + 1));
      await waitFor(() => slow.stats.inFlight === CONCURRENCY, 10_000, 'the busy partition holding every slot');
      // An endpoint of another partition, for post.updated only.
      for (;;) {
        const other = await addEndpoint(producer.db, `${fast.url}/hooks/other`, { events: ['post.updated'] });
        if (shardOf(`e:${other.id}`, 6) !== shardOf(`e:${busy.id}`, 6)) break;
        await producer.db.models.WebhookEndpoint.destroy({ where: { id: other.id } });
      }

      const started = Date.now();
      await producer.db.sequelize.transaction(async (transaction) => producer.events.record(transaction, 'post.updated', buildPostData({ pid: 100 })));
      await fast.waitForRequests(1, 10_000);

      // 40 jobs of 500 ms on 4 slots take 5 s: the other partition waits for one attempt at most.
      expect(Date.now() - started).toBeLessThan(1_500);
    } finally {
      await slow.close();
      await fast.close();
    }
  });

  it('When the count goes from 4 to 2 with jobs waiting in partitions 3 and 4, then every delivery arrives, and a Redis loss re-queues into the new partitions', async () => {
    const receiver = await startRecordingServer();
    const four = loadConfig({ ...process.env, ...configEnv(env), WEBHOOK_QUEUE_PARTITIONS: '4' }, 'worker');
    const two = loadConfig({ ...process.env, ...configEnv(env), WEBHOOK_QUEUE_PARTITIONS: '2' }, 'worker');
    const before = createProducer(four);
    try {
      // Endpoints whose partition under 4 is 3 or 4.
      const endpoints: { id: number }[] = [];
      for (let i = 0; endpoints.length < 4; i += 1) {
        const endpoint = await addEndpoint(before.db, `${receiver.url}/hooks/${i}`);
        if (shardOf(`e:${endpoint.id}`, 4) >= 3) endpoints.push(endpoint);
        else await before.db.models.WebhookEndpoint.destroy({ where: { id: endpoint.id } });
      }
      await recordPosts(before, [1, 2, 3, 4, 5]);
      const waiting = await waitFor(async () => {
        const jobs = await before.queue.getJobs(['waiting']);
        return jobs.length === 20 && jobs;
      }, 10_000, '20 jobs queued');
      expect(new Set(waiting.map((job) => shardOfQueueName(job.queueName)))).toEqual(new Set([3, 4]));

      // Without its relay, which would also queue the deliveries again into partitions 1 and 2.
      running = startWorker(two, before.db, { relay: false });
      const delivered = () => new Set(receiver.requests.map((request) => request.headers['webhook-id'])).size;
      await waitFor(() => delivered() === 20, 20_000, 'every delivery sent');
      expect(running.worker.shards).toEqual([1, 2, 3, 4]);
      await waitFor(async () => (await deliveryRows(before.db)).every((row) => row.status === 'succeeded'), 10_000, 'every delivery succeeded');
      await running.close();
      running = undefined;

      // Redis loses its data with deliveries still queued: the relay of a count-2 producer re-queues them, into partitions 1 and 2.
      await before.db.models.WebhookDelivery.update({ status: 'pending', attempts: 0, nextAttemptAt: null }, { where: {} });
      await deleteKeysByPrefix(env.config, env.redisPrefix);
      const after = createProducer(two);
      try {
        await after.queue.waitUntilReady();
        expect((await after.outbox.relayOnce()).swept).toBe(true);
        const requeued = await after.queue.getJobs(['waiting']);
        expect(requeued).toHaveLength(20);
        for (const job of requeued) expect(shardOfQueueName(job.queueName)).toBe(shardOf(job.data.gate ?? '', 2));
      } finally {
        await after.close();
      }
      expect((await deliveryRows(before.db)).length).toBe(20);
    } finally {
      await before.close();
      await receiver.close();
    }
  });
});

/** The test environment's database, under a prefix of its own (no other count recorded there), for configs of another count. */
function configEnv(env: TestEnvironment): Record<string, string> {
  return {
    NODE_ENV: 'test',
    LOG_LEVEL: env.config.logLevel,
    DATABASE_URL: env.databaseUrl,
    REDIS_URL: env.redisUrl,
    REDIS_PREFIX: `${env.redisPrefix}count`,
    HOST: '127.0.0.1',
    PORT: '0',
    WORKER_CONCURRENCY: String(CONCURRENCY),
    WEBHOOK_ENDPOINT_CONCURRENCY: '100',
  };
}
