import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { Database, createDatabase } from '../../shared/db';
import { Tracing, startTracing } from '../../shared/tracing';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { Producer, addEndpoint, buildPostData, createProducer, deliveryRows, eventually, recordEvent, startWorker } from './support/harness';
import { TcpProxy, startTcpProxy } from './support/tcp-proxy';

const EVENTS = 10;

// With tracing on, each job first reads its trace context from PostgreSQL: that read must not
// turn an outage into failed jobs either.
describe.each([['off'], ['on']])('fault: PostgreSQL unreachable from the worker, then back (tracing %s)', (tracingMode) => {
  let tracing: Tracing | undefined;
  let env: TestEnvironment;
  let producer: Producer;
  let receiver: RecordingServer;
  let proxy: TcpProxy;
  let workerDb: Database;
  let worker: ReturnType<typeof startWorker> | undefined;

  beforeAll(async () => {
    if (tracingMode === 'on') {
      tracing = await startTracing({ serviceName: 'test', spanProcessors: [new SimpleSpanProcessor(new InMemorySpanExporter())] });
    }
    env = await createTestEnvironment({}, 'worker');
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
    receiver = await startRecordingServer();
    const target = new URL(env.databaseUrl);
    proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
    target.host = `127.0.0.1:${proxy.port}`;
    workerDb = createDatabase(target.toString(), { poolMax: 5 });
  });

  afterAll(async () => {
    await worker?.close();
    await workerDb.close().catch(() => undefined);
    await proxy.close();
    await producer.queue.obliterate({ force: true });
    await producer.close();
    await receiver.close();
    await env.cleanup();
    await tracing?.shutdown();
  });

  it('When the worker cannot reach PostgreSQL, then jobs wait without using attempts, and every delivery goes out once it is back', async () => {
    await addEndpoint(producer.db, `${receiver.url}/hooks`);
    worker = startWorker(env.config, workerDb);
    await worker.worker.waitUntilReady();
    proxy.cut();

    for (let pid = 1; pid <= EVENTS; pid += 1) await recordEvent(producer, 'post.created', buildPostData({ pid }));
    // Every job was taken and postponed at least once while the database was away.
    await eventually(async () => (await producer.queue.getJobCounts(['delayed'])).total.delayed === EVENTS, 10_000, 'jobs postponed');
    await new Promise((resolve) => setTimeout(resolve, 1_000));

    const whileDown = await deliveryRows(producer.db);
    expect(receiver.requests).toHaveLength(0);
    expect(whileDown.map((row) => row.attempts)).toEqual(new Array(EVENTS).fill(0));
    expect(await producer.db.models.WebhookAttempt.count()).toBe(0);
    expect((await producer.queue.getJobCounts(['failed'])).total.failed).toBe(0);

    proxy.restore();

    const rows = await eventually(async () => {
      const all = await deliveryRows(producer.db);
      return all.every((row) => row.status === 'succeeded') && all;
    }, 30_000, 'every delivery succeeded');
    expect(rows.map((row) => row.attempts)).toEqual(new Array(EVENTS).fill(1));
    expect(new Set(receiver.requests.map((request) => String(request.headers['webhook-id'])))).toEqual(new Set(rows.map((row) => row.id)));
  });
});
