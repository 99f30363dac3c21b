import type { ChildProcess } from 'node:child_process';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { Producer, addEndpoint, buildPostData, createProducer, deliveryRows, recordEvent } from './support/harness';
import { exited, spawnWorker } from './support/processes';
import { waitFor } from '../support/wait-for';

/** A seeded PRNG (mulberry32), so a failing run's 503 pattern can be replayed from its seed. */
function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('FIFO endpoints (docs/design.md §6.5)', () => {
  let env: TestEnvironment;
  let producer: Producer;
  let receiver: RecordingServer;
  const workers: ChildProcess[] = [];

  beforeAll(async () => {
    env = await createTestEnvironment({}, 'worker');
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
    receiver = await startRecordingServer({ status: 200 });
  });

  afterAll(async () => {
    for (const worker of workers) worker.kill('SIGKILL');
    await Promise.all(workers.map(exited));
    await producer.queue.obliterate({ force: true });
    await producer.close();
    await receiver.close();
    await env.cleanup();
  });

  afterEach(async () => {
    await producer.queue.obliterate({ force: true });
    await producer.db.models.WebhookDelivery.destroy({ where: {} });
    await producer.db.models.WebhookEndpoint.destroy({ where: {} });
    receiver.reset();
  });

  it('When two transactions write deliveries to a FIFO endpoint at once, then the later commit takes the later number, and other endpoints take none', async () => {
    const fifo = await addEndpoint(producer.db, `${receiver.url}/fifo`);
    await producer.db.models.WebhookEndpoint.update({ ordering: 'fifo' }, { where: { id: fifo.id } });
    const unordered = await addEndpoint(producer.db, `${receiver.url}/unordered`);
    const { sequelize } = producer.db;

    let releaseFirst!: () => void;
    const firstHolds = new Promise<void>((resolve) => (releaseFirst = resolve));
    let firstRecorded!: () => void;
    const recorded = new Promise<void>((resolve) => (firstRecorded = resolve));
    const first = sequelize.transaction(async (transaction) => {
      await producer.events.record(transaction, 'post.created', buildPostData({ pid: 1 }));
      firstRecorded();
      await firstHolds;
    });
    await recorded;
    let secondDone = false;
    const second = recordEvent(producer, 'post.created', buildPostData({ pid: 2 })).then(() => (secondDone = true));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(secondDone).toBe(false);
    releaseFirst();
    await Promise.all([first, second]);

    const rows = await deliveryRows(producer.db);
    const pidOf = (row: (typeof rows)[number]) => (JSON.parse(row.body) as { _data: { pid: number } })._data.pid;
    const fifoRows = rows.filter((row) => row.endpointId === fifo.id).sort((a, b) => Number(a.sequence) - Number(b.sequence));
    expect(fifoRows.map(pidOf)).toEqual([1, 2]);
    expect(fifoRows.map((row) => Number(row.sequence))).toEqual([1, 2]);
    expect(rows.filter((row) => row.endpointId === unordered.id).map((row) => row.sequence)).toEqual([null, null]);
  });

  it(
    'When 1,000 events go to a FIFO endpoint answering 503 to 10% of attempts, with two workers and one killed mid-run, then the first 2xx of each webhook-id arrives in creation order, none missing',
    async () => {
      const EVENTS = 1_000;
      const seed = Date.now() % 2 ** 31;
      const random = seededRandom(seed);
      const firstOk: string[] = [];
      receiver.setReply((request) => {
        if (random() < 0.1) return { status: 503 };
        const id = String(request.headers['webhook-id']);
        if (!firstOk.includes(id)) firstOk.push(id);
        return { status: 200 };
      });
      const endpoint = await addEndpoint(producer.db, `${receiver.url}/fifo`);
      await producer.db.models.WebhookEndpoint.update({ ordering: 'fifo' }, { where: { id: endpoint.id } });
      for (let pid = 1; pid <= EVENTS; pid += 1) await recordEvent(producer, 'post.created', buildPostData({ pid }));
      const created = (await deliveryRows(producer.db)).sort((a, b) => Number(a.sequence) - Number(b.sequence));
      expect(created).toHaveLength(EVENTS);

      const workerEnv = {
        DATABASE_URL: env.databaseUrl,
        REDIS_URL: env.redisUrl,
        REDIS_PREFIX: env.redisPrefix,
        WORKER_CONCURRENCY: '10',
        WORKER_LOCK_DURATION_MS: '1000',
        WEBHOOK_RETRY_SCHEDULE: '1,1,1,1,1,1,1',
      };
      const doomed = spawnWorker(workerEnv);
      workers.push(doomed, spawnWorker(workerEnv));
      await waitFor(() => firstOk.length >= EVENTS / 4, 120_000, 'a quarter of the events delivered');
      doomed.kill('SIGKILL');
      await exited(doomed);

      await waitFor(() => firstOk.length >= EVENTS, 300_000, `every event delivered (seed ${seed})`);
      expect({ seed, order: firstOk }).toEqual({ seed, order: created.map((row) => row.id) });
      const rows = await waitFor(async () => {
        const all = await deliveryRows(producer.db);
        return all.every((row) => row.status === 'succeeded') && all;
      }, 30_000, 'every delivery recorded as succeeded');
      expect(rows).toHaveLength(EVENTS);
    },
    480_000,
  );
});
