import type { ChildProcess } from 'node:child_process';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { Producer, addEndpoint, buildPostData, createProducer, deliveryRows, recordEvent } from './support/harness';
import { exited, freePort, spawnWorker } from './support/processes';
import { waitFor } from '../support/wait-for';

const EVENTS = 40;

describe('fault: a worker process killed with SIGKILL mid-batch', () => {
  let env: TestEnvironment;
  let producer: Producer;
  let receiver: RecordingServer;
  const workers: ChildProcess[] = [];

  beforeAll(async () => {
    env = await createTestEnvironment({}, 'worker');
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
    // Slow answers keep several deliveries in flight when the kill lands.
    receiver = await startRecordingServer({ status: 200, delayMs: 150 });
  });

  afterAll(async () => {
    for (const worker of workers) worker.kill('SIGKILL');
    await Promise.all(workers.map(exited));
    await producer.queue.obliterate({ force: true });
    await producer.close();
    await receiver.close();
    await env.cleanup();
  });

  it('When the worker dies mid-batch and a new one starts, then every event arrives, duplicates only with the same webhook-id', async () => {
    await addEndpoint(producer.db, `${receiver.url}/hooks`);
    for (let pid = 1; pid <= EVENTS; pid += 1) await recordEvent(producer, 'post.created', buildPostData({ pid }));
    const sent = await deliveryRows(producer.db);
    const workerEnv = {
      DATABASE_URL: env.databaseUrl,
      REDIS_URL: env.redisUrl,
      REDIS_PREFIX: env.redisPrefix,
      WORKER_CONCURRENCY: '5',
      WORKER_LOCK_DURATION_MS: '1000',
      WEBHOOK_RETRY_SCHEDULE: '0.1,0.1,0.1',
    };

    const first = spawnWorker(workerEnv);
    workers.push(first);
    await receiver.waitForRequests(8, 15_000);
    first.kill('SIGKILL');
    await exited(first);
    const receivedBeforeKill = receiver.requests.length;
    const metricsPort = await freePort();
    workers.push(spawnWorker({ ...workerEnv, WORKER_METRICS_PORT: String(metricsPort), HOST: '127.0.0.1' }));

    const rows = await waitFor(async () => {
      const all = await deliveryRows(producer.db);
      return all.every((row) => row.status === 'succeeded') && all;
    }, 20_000, 'every delivery succeeded');

    const bodies = new Map(sent.map((row) => [row.id, row.body]));
    const receivedIds = receiver.requests.map((request) => String(request.headers['webhook-id']));
    expect(receivedBeforeKill).toBeLessThan(EVENTS);
    expect(rows).toHaveLength(EVENTS);
    expect(new Set(receivedIds)).toEqual(new Set(bodies.keys()));
    for (const request of receiver.requests) {
      expect(request.body.toString('utf8')).toBe(bodies.get(String(request.headers['webhook-id'])));
    }
    expect(receivedIds.length - new Set(receivedIds).size).toBeLessThanOrEqual(5);
    const ready = await fetch(`http://127.0.0.1:${metricsPort}/ready`);
    expect(ready.status).toBe(200);
    const scrape = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(scrape).toMatch(/webhook_deliveries_total\{[^}]*outcome="succeeded"[^}]*\} \d+/);
  });
});
