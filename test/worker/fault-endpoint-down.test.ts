import { IncomingMessage, Server, ServerResponse, createServer } from 'node:http';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { Producer, addEndpoint, buildPostData, createProducer, deliveryRows, recordEvent, startWorker } from './support/harness';
import { freePort } from './support/processes';
import { waitFor } from '../support/wait-for';

const EVENTS = 20;

/** The endpoint coming back on the port it had: a plain server that records webhook-ids. */
async function startEndpoint(port: number, received: string[]): Promise<Server> {
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    request.resume();
    request.on('end', () => {
      received.push(String(request.headers['webhook-id']));
      response.writeHead(200, { 'Content-Type': 'application/json' }).end('{"ok":true}');
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return server;
}

describe('fault: the endpoint is down for a while, then back', () => {
  let env: TestEnvironment;
  let producer: Producer;
  let worker: { close(): Promise<void> };
  let endpoint: Server | undefined;

  beforeAll(async () => {
    // The circuit breaker would hold the retries for 30 s; this test is about the retry schedule.
    env = await createTestEnvironment(
      { WEBHOOK_RETRY_SCHEDULE: '0.2,0.2,0.3,0.3,0.5,0.5,1,1,1,1', WEBHOOK_BREAKER_FAILURES: '1000' },
      'worker',
    );
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
  });

  afterAll(async () => {
    await worker?.close();
    endpoint?.closeAllConnections();
    await new Promise((resolve) => (endpoint ? endpoint.close(resolve) : resolve(undefined)));
    await producer.queue.obliterate({ force: true });
    await producer.close();
    await env.cleanup();
  });

  it('When deliveries fail with connection refused until the endpoint returns, then every event arrives once it is back', async () => {
    const port = await freePort();
    await addEndpoint(producer.db, `http://127.0.0.1:${port}/hooks`);
    worker = startWorker(env.config, producer.db);

    for (let pid = 1; pid <= EVENTS; pid += 1) await recordEvent(producer, 'post.created', buildPostData({ pid }));
    await waitFor(async () => (await deliveryRows(producer.db)).every((row) => row.attempts >= 1), 10_000, 'a refused attempt each');
    const whileDown = await deliveryRows(producer.db);
    const received: string[] = [];
    endpoint = await startEndpoint(port, received);

    const rows = await waitFor(async () => {
      const all = await deliveryRows(producer.db);
      return all.every((row) => row.status === 'succeeded') && all;
    }, 20_000, 'every delivery succeeded');

    expect(whileDown.every((row) => row.status !== 'succeeded' && /ECONNREFUSED/.test(row.lastError ?? ''))).toBe(true);
    expect(rows).toHaveLength(EVENTS);
    expect(new Set(received)).toEqual(new Set(rows.map((row) => row.id)));
    expect(received).toHaveLength(EVENTS);
  });
});
