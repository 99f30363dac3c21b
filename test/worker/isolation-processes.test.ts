import type { ChildProcess } from 'node:child_process';
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readCircuitState } from '../../shared/endpoint-gate';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { Producer, addEndpoint, buildPostData, createProducer, deliveryRows, recordEvent } from './support/harness';
import { exited, spawnWorker } from './support/processes';
import { waitFor } from '../support/wait-for';

const CAP = 3;

/** An endpoint that answers `status` after `delayMs` and counts the requests in flight at once. */
async function startCountingEndpoint(status: number, delayMs: number) {
  let inFlight = 0;
  const stats = { requests: 0, maxInFlight: 0 };
  const server: Server = createServer((request: IncomingMessage, response: ServerResponse) => {
    request.resume();
    stats.requests += 1;
    inFlight += 1;
    stats.maxInFlight = Math.max(stats.maxInFlight, inFlight);
    setTimeout(() => {
      inFlight -= 1;
      response.writeHead(status).end();
    }, delayMs);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    stats,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('isolation across two worker processes', () => {
  let env: TestEnvironment;
  let producer: Producer;
  const workers: ChildProcess[] = [];

  beforeAll(async () => {
    env = await createTestEnvironment({}, 'worker');
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
    const workerEnv = {
      DATABASE_URL: env.databaseUrl,
      REDIS_URL: env.redisUrl,
      REDIS_PREFIX: env.redisPrefix,
      WORKER_CONCURRENCY: '10',
      WEBHOOK_ENDPOINT_CONCURRENCY: String(CAP),
      WEBHOOK_BREAKER_FAILURES: '5',
      WEBHOOK_RETRY_SCHEDULE: '60',
    };
    workers.push(spawnWorker(workerEnv), spawnWorker(workerEnv));
  });

  afterAll(async () => {
    for (const worker of workers) worker.kill('SIGKILL');
    await Promise.all(workers.map(exited));
    await producer.queue.obliterate({ force: true });
    await producer.close();
    await env.cleanup();
  });

  it('When two workers deliver to one slow endpoint, then no more than the cap are ever in flight to it', async () => {
    const slow = await startCountingEndpoint(200, 300);
    try {
      const endpoint = await addEndpoint(producer.db, `${slow.url}/hooks`, { events: ['post.created'] });
      for (let pid = 1; pid <= 24; pid += 1) await recordEvent(producer, 'post.created', buildPostData({ pid }));

      const rows = await waitFor(async () => {
        const all = (await deliveryRows(producer.db)).filter((row) => row.endpointId === endpoint.id);
        return all.every((row) => row.status === 'succeeded') && all;
      }, 30_000, 'every delivery succeeded');

      expect(rows).toHaveLength(24);
      expect(rows.every((row) => row.attempts === 1)).toBe(true);
      expect(slow.stats.maxInFlight).toBe(CAP);
    } finally {
      await slow.close();
    }
  });

  it('When an endpoint keeps failing, then its circuit opens for both workers after 5 failed attempts in all', async () => {
    const failing = await startCountingEndpoint(503, 50);
    try {
      const endpoint = await addEndpoint(producer.db, `${failing.url}/hooks`, { events: ['post.updated'] });
      for (let pid = 1; pid <= 20; pid += 1) await recordEvent(producer, 'post.updated', buildPostData({ pid }));

      await waitFor(async () => (await readCircuitState(producer.connection, env.redisPrefix, endpoint.id, env.config.webhookQueuePartitions)) === 'open', 15_000, 'open');
      // Attempts the gate admitted before it opened may still be on their way: at most the cap
      // minus one, and each is answered in 50 ms, so after 500 ms no attempt is left in flight.
      await new Promise((resolve) => setTimeout(resolve, 500));
      const atOpening = failing.stats.requests;
      await new Promise((resolve) => setTimeout(resolve, 2_000));

      expect(atOpening).toBeGreaterThanOrEqual(5);
      expect(atOpening).toBeLessThanOrEqual(5 + CAP - 1);
      expect(failing.stats.requests).toBe(atOpening);
      const rows = (await deliveryRows(producer.db)).filter((row) => row.endpointId === endpoint.id);
      expect(rows.reduce((sum, row) => sum + row.attempts, 0)).toBe(atOpening);
      expect(rows.filter((row) => row.attempts === 0).every((row) => row.status === 'pending')).toBe(true);
    } finally {
      await failing.close();
    }
  });
});
