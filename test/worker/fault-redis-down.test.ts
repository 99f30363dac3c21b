import type { ChildProcess } from 'node:child_process';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { Producer, addEndpoint, buildPostData, createProducer, deliveryRows, recordEvent, startWorker } from './support/harness';
import { exited, freePort, startRedisServer } from './support/processes';
import { waitFor } from '../support/wait-for';

const PER_BATCH = 10;

describe('fault: Redis stopped while deliveries are recorded, then started again empty', () => {
  let env: TestEnvironment;
  let redisPort: number;
  let redis: ChildProcess;
  let producer: Producer;
  let receiver: RecordingServer;
  let worker: ReturnType<typeof startWorker>;

  beforeAll(async () => {
    redisPort = await freePort();
    redis = await startRedisServer(redisPort);
    env = await createTestEnvironment(
      {
        REDIS_URL: `redis://127.0.0.1:${redisPort}`,
        WEBHOOK_RETRY_SCHEDULE: '1,0.2,0.2,0.2,0.5,0.5,1,1',
        // Every first attempt fails on purpose; an open circuit would hold the retries for 30 s.
        WEBHOOK_BREAKER_FAILURES: '1000',
      },
      'worker',
    );
    producer = createProducer(env.config, { reviveAfterMs: 500 });
    await producer.queue.waitUntilReady();
    const seen = new Set<string>();
    // Each delivery's first attempt gets 503, so batch A sits in Redis's delayed set when Redis dies.
    receiver = await startRecordingServer();
    receiver.setReply((request) => {
      const id = String(request.headers['webhook-id']);
      if (seen.has(id)) return { status: 200 };
      seen.add(id);
      return { status: 503 };
    });
  });

  afterAll(async () => {
    await worker?.close();
    await producer.close();
    await receiver.close();
    redis.kill('SIGKILL');
    await exited(redis);
    await env.cleanup();
  });

  it('When Redis loses every job and misses new ones, then the outbox relay and the worker still deliver every event', async () => {
    await addEndpoint(producer.db, `${receiver.url}/hooks`);
    worker = startWorker(env.config, producer.db, { watchdog: { intervalMs: 200, graceMs: 2_000 } });
    producer.outbox.startRelay();

    for (let pid = 1; pid <= PER_BATCH; pid += 1) await recordEvent(producer, 'post.created', buildPostData({ pid }));
    await waitFor(async () => (await deliveryRows(producer.db)).every((row) => row.attempts === 1), 10_000, 'batch A tried once');
    redis.kill('SIGTERM');
    await exited(redis);

    for (let pid = PER_BATCH + 1; pid <= 2 * PER_BATCH; pid += 1) {
      await recordEvent(producer, 'post.updated', buildPostData({ pid }));
    }
    const whileDown = await deliveryRows(producer.db);
    redis = await startRedisServer(redisPort);

    const rows = await waitFor(async () => {
      const all = await deliveryRows(producer.db);
      return all.every((row) => row.status === 'succeeded') && all;
    }, 20_000, 'every delivery succeeded');

    expect(whileDown.filter((row) => row.enqueuedAt === null)).toHaveLength(PER_BATCH);
    expect(rows).toHaveLength(2 * PER_BATCH);
    const delivered = receiver.requests.map((request) => String(request.headers['webhook-id']));
    expect(new Set(delivered)).toEqual(new Set(rows.map((row) => row.id)));
  });
});
