import type { ChildProcess } from 'node:child_process';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { Producer, addEndpoint, buildPostData, createProducer, deliveryRows, startWorker } from './support/harness';
import { exited, freePort, startRedisServer } from './support/processes';
import { waitFor } from '../support/wait-for';

const EVENTS = 80;
/** OUTBOX_REVIVE_AFTER_MS's default, and the slack the promise allows on top. */
const REVIVE_AFTER_MS = 2_000;
const SLACK_MS = 3_000;

describe('fault: Redis restarts empty mid-load (no persistence)', () => {
  let env: TestEnvironment;
  let redisPort: number;
  let redis: ChildProcess;
  let producer: Producer;
  let receiver: RecordingServer;
  let worker: ReturnType<typeof startWorker> | undefined;

  beforeAll(async () => {
    redisPort = await freePort();
    redis = await startRedisServer(redisPort);
    // Defaults otherwise: OUTBOX_REVIVE_AFTER_MS 2000, OUTBOX_RELAY_INTERVAL_MS 5000.
    env = await createTestEnvironment({ REDIS_URL: `redis://127.0.0.1:${redisPort}` }, 'worker');
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
    // A slow endpoint keeps a backlog of waiting jobs in Redis when it dies.
    receiver = await startRecordingServer({ status: 200, delayMs: 1_000 });
  });

  afterAll(async () => {
    await worker?.close();
    await producer.close();
    await receiver.close();
    redis.kill('SIGKILL');
    await exited(redis);
    await env.cleanup();
  });

  it('When Redis loses every queued job, then the lost deliveries arrive within OUTBOX_REVIVE_AFTER_MS of Redis being back', async () => {
    await addEndpoint(producer.db, `${receiver.url}/hooks`);
    worker = startWorker(env.config, producer.db, { watchdog: { intervalMs: 200, graceMs: 2_000 } });
    await worker.worker.waitUntilReady();
    await producer.db.sequelize.transaction(async (transaction) => {
      for (let pid = 1; pid <= EVENTS; pid += 1) await producer.events.record(transaction, 'post.created', buildPostData({ pid }));
    });
    await receiver.waitForRequests(12, 10_000);

    redis.kill('SIGKILL');
    await exited(redis);
    const receivedBefore = new Set(receiver.requests.map((request) => String(request.headers['webhook-id'])));
    redis = await startRedisServer(redisPort);
    const back = Date.now();
    // The endpoint is fast now: what remains to measure is how soon the lost jobs come back.
    receiver.setReply({ status: 200 });

    const rows = await waitFor(async () => {
      const all = await deliveryRows(producer.db);
      return all.every((row) => row.status === 'succeeded') && all;
    }, REVIVE_AFTER_MS + SLACK_MS + 10_000, 'every delivery succeeded');

    expect(rows).toHaveLength(EVENTS);
    const lost = rows.filter((row) => !receivedBefore.has(row.id));
    expect(lost.length).toBeGreaterThan(EVENTS / 4);
    const firstArrival = new Map<string, number>();
    for (const request of receiver.requests) {
      const id = String(request.headers['webhook-id']);
      if (!firstArrival.has(id)) firstArrival.set(id, request.receivedAt);
    }
    expect(new Set(firstArrival.keys())).toEqual(new Set(rows.map((row) => row.id)));
    const latest = Math.max(...lost.map((row) => firstArrival.get(row.id) ?? Infinity));
    expect(latest - back).toBeLessThan(REVIVE_AFTER_MS + SLACK_MS);
  });
});
