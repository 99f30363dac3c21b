import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Job, Processor, Queue, Worker, WorkerOptions } from 'bullmq';
import Redis from 'ioredis';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { ROOT } from '../support/processes';
import { waitFor } from '../support/wait-for';

/**
 * services/webhook-worker/src/shard-worker.ts subclasses BullMQ's Worker and relies on parts
 * of it that are not its public API: the protected `moveToActive(token, name)` the main loop
 * fetches through, `processJob(job, token, fetchNextCallback)` consulting the callback before it
 * fetches the next job, the `drained` flag that sends the loop to wait on the queue's marker,
 * `waiting` (the promise of that wait), `keys.marker` (adding to it wakes the wait), `closing`,
 * `opts.connection`, and worker.ts reads `getBackend().blockingClient`. BullMQ is pinned to an
 * exact version for that; this test fails when an upgrade changes any of them.
 */
describe('the BullMQ internals the partition worker relies on', () => {
  let env: TestEnvironment;
  let connection: Redis;
  let queue: Queue;
  let worker: Probe | undefined;
  let name = 'bullmq-internals';

  /** A Worker that counts what shard-worker.ts overrides: fetches, and consulted fetch-next callbacks. */
  class Probe extends Worker {
    fetches = 0;
    fetchNextAsked = 0;

    constructor(queueName: string, processor: Processor, options: WorkerOptions) {
      super(queueName, processor, options);
    }

    protected override async moveToActive(token: string, jobName?: string): Promise<Job> {
      this.fetches += 1;
      return super.moveToActive(token, jobName);
    }

    override async processJob(job: Job, token: string, fetchNextCallback: () => boolean = () => true): Promise<void | Job> {
      return super.processJob(job, token, () => {
        this.fetchNextAsked += 1;
        return fetchNextCallback();
      });
    }
  }

  /** The worker's fields shard-worker.ts reads or writes by name. */
  const internals = (probe: Probe) => probe as unknown as { drained: boolean; waiting: Promise<number> | null; closing: Promise<void> | undefined };

  beforeAll(async () => {
    env = await createTestEnvironment({}, 'worker');
    connection = new Redis(env.redisUrl, { maxRetriesPerRequest: null });
  });

  beforeEach(async () => {
    name = `bullmq-internals-${Date.now()}`;
    queue = new Queue(name, { connection, prefix: env.redisPrefix });
    await queue.waitUntilReady();
  });

  afterEach(async () => {
    await worker?.close();
    worker = undefined;
    await queue.obliterate({ force: true });
    await queue.close();
  });

  afterAll(async () => {
    connection.disconnect();
    await env.cleanup();
  });

  it('when installed, then BullMQ is the exact version package.json pins and package-lock.json records', () => {
    const pinned = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> }).dependencies.bullmq;
    const lock = JSON.parse(readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version?: string; dependencies?: Record<string, string> }> };
    const installed = (JSON.parse(readFileSync(require.resolve('bullmq/package.json'), 'utf8')) as { version: string }).version;

    expect(pinned).toMatch(/^\d+\.\d+\.\d+$/);
    expect([lock.packages[''].dependencies?.bullmq, lock.packages['node_modules/bullmq'].version, installed]).toEqual([pinned, pinned, pinned]);
  });

  it('when jobs come and the queue empties, then the loop fetches through moveToActive, asks processJob\'s callback before fetching the next, and sets drained and waiting', async () => {
    const done: string[] = [];
    worker = new Probe(name, async (job) => void done.push(job.id!), { connection, prefix: env.redisPrefix, concurrency: 2 });
    await worker.waitUntilReady();
    await queue.addBulk([1, 2, 3].map((n) => ({ name: 'job', data: {}, opts: { jobId: `job-${n}` } })));

    await waitFor(() => done.length === 3, 10_000, 'three jobs processed');
    expect(worker.fetches).toBeGreaterThan(0);
    expect(worker.fetchNextAsked).toBeGreaterThanOrEqual(3);
    // Wrapped: `waitFor` would await the wait itself.
    const { waiting } = await waitFor(() => internals(worker!).drained && internals(worker!).waiting !== null && { waiting: internals(worker!).waiting }, 10_000, 'the worker waiting on the marker');
    expect(waiting).toBeInstanceOf(Promise);
    expect(internals(worker).closing).toBeFalsy();
  });

  it("when the loop waits on the queue's marker, then a member added to keys.marker on the worker's command connection wakes it to fetch again", async () => {
    worker = new Probe(name, async () => undefined, { connection, prefix: env.redisPrefix, drainDelay: 30 });
    await worker.waitUntilReady();
    await waitFor(() => internals(worker!).waiting !== null, 10_000, 'the worker waiting on the marker');
    const fetches = worker.fetches;

    expect(worker.keys.marker).toBe(`${env.redisPrefix}:${name}:marker`);
    expect(worker.opts.connection).toBe(connection);
    await (worker.opts.connection as Redis).zadd(worker.keys.marker, 0, '0');

    await waitFor(() => worker!.fetches > fetches, 5_000, 'a fetch after the marker');
  });

  it("when the worker is ready, then its backend's blocking client is a ready ioredis connection, and closing is set while it closes", async () => {
    worker = new Probe(name, async () => undefined, { connection, prefix: env.redisPrefix });
    await worker.waitUntilReady();

    const blocking = await worker.getBackend().blockingClient;
    expect((blocking as { status: string }).status).toBe('ready');
    const closed = worker.close();
    expect(internals(worker).closing).toBeInstanceOf(Promise);
    await closed;
  });
});
