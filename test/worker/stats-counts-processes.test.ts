import type { ChildProcess } from 'node:child_process';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { countsFromLog, countsKept } from '../support/stats-counts';
import { waitFor } from '../support/wait-for';
import { Producer, addEndpoint, buildPostData, createProducer, deliveryRows, recordEvent } from './support/harness';
import { exited, spawnWorker } from './support/processes';

const EVENTS = 40;

/**
 * docs/design.md §14: the stats counts stay exact across worker processes: two recording the same
 * endpoint at once, and one killed with SIGKILL between sending attempts and recording them.
 */
describe('stats counts across worker processes', () => {
  let env: TestEnvironment;
  let producer: Producer;
  let receiver: RecordingServer;
  const workers: ChildProcess[] = [];
  let workerEnv: Record<string, string>;

  beforeAll(async () => {
    env = await createTestEnvironment({}, 'worker');
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
    // Slow answers keep attempts in flight; every third one fails, so retries and exhaustion mix in.
    let answered = 0;
    receiver = await startRecordingServer();
    receiver.setReply(() => {
      answered += 1;
      return { status: answered % 3 === 0 ? 500 : 200, delayMs: 150 };
    });
    workerEnv = {
      DATABASE_URL: env.databaseUrl,
      REDIS_URL: env.redisUrl,
      REDIS_PREFIX: env.redisPrefix,
      WORKER_CONCURRENCY: '5',
      WORKER_LOCK_DURATION_MS: '1000',
      WEBHOOK_RETRY_SCHEDULE: '0.1,0.1',
      WEBHOOK_BREAKER_FAILURES: '1000',
    };
  });

  afterAll(async () => {
    for (const worker of workers) worker.kill('SIGKILL');
    await Promise.all(workers.map(exited));
    await producer.queue.obliterate({ force: true });
    await producer.close();
    await receiver.close();
    await env.cleanup();
  });

  const start = () => {
    const worker = spawnWorker(workerEnv);
    workers.push(worker);
    return worker;
  };
  const allSettled = () =>
    waitFor(async () => {
      const rows = await deliveryRows(producer.db);
      return rows.length > 0 && rows.every((row) => row.status === 'succeeded' || row.status === 'failed') && rows;
    }, 30_000, 'every delivery settled');

  it('when two workers record attempts of the same endpoint at once, then the counts equal the attempt log', async () => {
    await addEndpoint(producer.db, `${receiver.url}/hooks`);
    start();
    start();
    for (let pid = 1; pid <= EVENTS; pid += 1) await recordEvent(producer, 'post.created', buildPostData({ pid }));

    await allSettled();

    const log = await countsFromLog(producer.db.sequelize);
    expect(log.reduce((sum, row) => sum + row.retried, 0)).toBeGreaterThan(0);
    expect(await countsKept(producer.db.sequelize)).toEqual(log);
  });

  it('when a worker is killed with attempts sent and not recorded, and another takes its jobs, then the counts equal the attempt log', async () => {
    for (let pid = EVENTS + 1; pid <= 2 * EVENTS; pid += 1) await recordEvent(producer, 'post.created', buildPostData({ pid }));
    const before = receiver.requests.length;
    await receiver.waitForRequests(before + 6, 15_000);
    const victim = workers.shift() as ChildProcess;
    victim.kill('SIGKILL');
    await exited(victim);
    start();

    await allSettled();

    expect(await countsKept(producer.db.sequelize)).toEqual(await countsFromLog(producer.db.sequelize));
  });
});
