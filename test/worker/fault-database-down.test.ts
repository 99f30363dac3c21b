import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { Database, createDatabase } from '../../shared/db';
import { Tracing, startTracing } from '../../shared/tracing';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { Producer, addEndpoint, buildPostData, createProducer, deliveryRows, recordEvent, startWorker } from './support/harness';
import { TcpProxy, startTcpProxy } from './support/tcp-proxy';
import { waitFor } from '../support/wait-for';

const EVENTS = 10;

/** A test's own database, queue and receiver, with the worker's PostgreSQL reached through a proxy the test cuts. */
interface BehindProxy {
  env: TestEnvironment;
  producer: Producer;
  receiver: RecordingServer;
  proxy: TcpProxy;
  workerDb: Database;
  worker?: ReturnType<typeof startWorker>;
}

async function startBehindProxy(): Promise<BehindProxy> {
  const env = await createTestEnvironment({}, 'worker');
  const producer = createProducer(env.config);
  await producer.queue.waitUntilReady();
  const receiver = await startRecordingServer();
  const target = new URL(env.databaseUrl);
  const proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
  target.host = `127.0.0.1:${proxy.port}`;
  return { env, producer, receiver, proxy, workerDb: createDatabase(target.toString(), { poolMax: 5 }) };
}

async function stopBehindProxy({ env, producer, receiver, proxy, workerDb, worker }: BehindProxy): Promise<void> {
  await worker?.close();
  await workerDb.close().catch(() => undefined);
  await proxy.close();
  await producer.queue.obliterate({ force: true });
  await producer.close();
  await receiver.close();
  await env.cleanup();
}

// With tracing on, each job first reads its trace context from PostgreSQL: that read must not
// turn an outage into failed jobs either.
describe.each([['off'], ['on']])('fault: PostgreSQL unreachable from the worker, then back (tracing %s)', (tracingMode) => {
  let tracing: Tracing | undefined;
  let setup: BehindProxy;

  beforeAll(async () => {
    if (tracingMode === 'on') {
      tracing = await startTracing({ serviceName: 'test', spanProcessors: [new SimpleSpanProcessor(new InMemorySpanExporter())] });
    }
    setup = await startBehindProxy();
  });

  afterAll(async () => {
    await stopBehindProxy(setup);
    await tracing?.shutdown();
  });

  it('When the worker cannot reach PostgreSQL, then jobs wait without using attempts, and every delivery goes out once it is back', async () => {
    const { env, producer, receiver, proxy, workerDb } = setup;
    await addEndpoint(producer.db, `${receiver.url}/hooks`);
    setup.worker = startWorker(env.config, workerDb);
    await setup.worker.worker.waitUntilReady();
    proxy.cut();

    for (let pid = 1; pid <= EVENTS; pid += 1) await recordEvent(producer, 'post.created', buildPostData({ pid }));
    // Every job was taken and postponed at least once while the database was away.
    await waitFor(async () => (await producer.queue.getJobCounts(['delayed'])).total.delayed === EVENTS, 10_000, 'jobs postponed');
    await new Promise((resolve) => setTimeout(resolve, 1_000));

    const whileDown = await deliveryRows(producer.db);
    expect(receiver.requests).toHaveLength(0);
    expect(whileDown.map((row) => row.attempts)).toEqual(new Array(EVENTS).fill(0));
    expect(await producer.db.models.WebhookAttempt.count()).toBe(0);
    expect((await producer.queue.getJobCounts(['failed'])).total.failed).toBe(0);

    proxy.restore();

    const rows = await waitFor(async () => {
      const all = await deliveryRows(producer.db);
      return all.every((row) => row.status === 'succeeded') && all;
    }, 30_000, 'every delivery succeeded');
    expect(rows.map((row) => row.attempts)).toEqual(new Array(EVENTS).fill(1));
    expect(new Set(receiver.requests.map((request) => String(request.headers['webhook-id'])))).toEqual(new Set(rows.map((row) => row.id)));
  });
});

// docs/design.md §13.3: an attempt the endpoint answered is recorded once PostgreSQL is back,
// not sent again; only a worker that dies meanwhile leaves it to be sent again. A FIFO line
// with a rate limit (§6.5, §14.1) waits on its head's record, then goes on in order.
describe.each([
  ['an unordered endpoint', {}],
  ['a FIFO endpoint with a rate limit of 5 a second', { ordering: 'fifo' as const, rateLimitPerS: 5 }],
])('fault: PostgreSQL goes away between an attempt and its record, at %s', (_name, controls) => {
  let setup: BehindProxy;

  beforeAll(async () => {
    setup = await startBehindProxy();
  });

  afterAll(async () => stopBehindProxy(setup));

  it('When the endpoint answered and PostgreSQL is then unreachable for 3 s, then each attempt is recorded once it is back and no webhook is sent twice', async () => {
    const { env, producer, receiver, proxy, workerDb } = setup;
    const endpoint = await addEndpoint(producer.db, `${receiver.url}/hooks`);
    await producer.db.models.WebhookEndpoint.update(controls, { where: { id: endpoint.id } });
    // The first request the endpoint gets cuts the worker off PostgreSQL before it is answered.
    let cutAt = 0;
    receiver.setReply(() => {
      if (cutAt === 0) {
        cutAt = Date.now();
        proxy.cut();
      }
      return { status: 200 };
    });
    setup.worker = startWorker(env.config, workerDb);
    await setup.worker.worker.waitUntilReady();

    for (let pid = 1; pid <= EVENTS; pid += 1) await recordEvent(producer, 'post.created', buildPostData({ pid }));
    await waitFor(async () => cutAt > 0, 10_000, 'the first attempt to reach the endpoint');
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const sentWhileDown = receiver.requests.length;
    expect(sentWhileDown).toBeGreaterThanOrEqual(1);
    expect(await producer.db.models.WebhookAttempt.count()).toBe(0);

    proxy.restore();

    const rows = await waitFor(async () => {
      const all = await deliveryRows(producer.db);
      return all.length === EVENTS && all.every((row) => row.status === 'succeeded') && all;
    }, 30_000, 'every delivery succeeded');
    const ids = receiver.requests.map((request) => String(request.headers['webhook-id']));
    expect(ids.filter((id, index) => ids.indexOf(id) !== index)).toEqual([]);
    expect(new Set(ids)).toEqual(new Set(rows.map((row) => row.id)));
    expect(rows.map((row) => row.attempts)).toEqual(new Array(EVENTS).fill(1));
    expect(await producer.db.models.WebhookAttempt.count({ where: { attemptNumber: 1 } })).toBe(EVENTS);
    expect(rows.every((row) => row.endpointId === endpoint.id)).toBe(true);
    if ('ordering' in controls) {
      // Only the line's head was in flight at the cut, and the line kept its order.
      expect(sentWhileDown).toBe(1);
      expect(ids).toEqual([...rows].sort((a, b) => Number(a.sequence) - Number(b.sequence)).map((row) => row.id));
    }
  });
});
