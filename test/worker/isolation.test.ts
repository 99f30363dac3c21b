import { createServer, Server, Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { createMetrics } from '../../shared/metrics';
import { readCircuitState } from '../../shared/endpoint-gate';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { Producer, addEndpoint, buildPostData, createProducer, recordEvent, resetAndClose, startWorker } from './support/harness';
import { waitFor } from '../support/wait-for';

/** A TCP server that accepts connections, reads whatever comes, and never answers. */
async function startSilentServer(): Promise<{ url: string; connections: () => number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let total = 0;
  const server: Server = createServer((socket) => {
    total += 1;
    sockets.add(socket);
    socket.on('data', () => undefined);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    connections: () => total,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('webhook worker: isolation between endpoints (docs/design.md §6.4)', () => {
  let env: TestEnvironment;
  let producer: Producer;
  let healthy: RecordingServer;
  let running: ReturnType<typeof startWorker> | undefined;

  beforeAll(async () => {
    // Default settings: WEBHOOK_TIMEOUT_MS 15000, WORKER_CONCURRENCY 50, cap 10, breaker 5.
    env = await createTestEnvironment({}, 'worker');
  });

  beforeEach(async () => {
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
    healthy = await startRecordingServer();
  });

  afterEach(async () => {
    await running?.close();
    running = undefined;
    await resetAndClose(producer);
    await healthy.close();
  });

  afterAll(async () => {
    await env.cleanup();
  });

  it('When 300 deliveries wait on an endpoint that never answers, then each of 20 deliveries to a healthy endpoint arrives within 3 s', async () => {
    const silent = await startSilentServer();
    try {
      await addEndpoint(producer.db, `${silent.url}/hooks`, { events: ['post.created'] });
      await addEndpoint(producer.db, `${healthy.url}/hooks`, { events: ['post.updated'] });
      await producer.db.sequelize.transaction(async (transaction) => {
        for (let pid = 1; pid <= 300; pid += 1) await producer.events.record(transaction, 'post.created', buildPostData({ pid }));
      });
      await waitFor(async () => (await producer.queue.getJobCounts(['waiting'])).total.waiting === 300, 10_000, '300 jobs queued');
      running = startWorker(env.config, producer.db);
      // Every slot the dead endpoint may hold is held.
      await waitFor(() => silent.connections() >= 10, 10_000, 'the silent endpoint holds its cap');

      const recorded = new Map<string, number>();
      for (let pid = 1; pid <= 20; pid += 1) {
        await recordEvent(producer, 'post.updated', buildPostData({ pid: 1000 + pid }));
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      const rows = await producer.db.models.WebhookDelivery.findAll({ where: { event: 'post.updated' } });
      for (const row of rows) recorded.set(row.id, row.createdAt.getTime());

      const requests = await healthy.waitForRequests(20, 15_000);
      const latencies = requests.map((request) => request.receivedAt - (recorded.get(String(request.headers['webhook-id'])) ?? 0));
      expect(latencies).toHaveLength(20);
      if (process.env.SHOW_LATENCY) process.stdout.write(`healthy latencies ms: ${latencies.join(' ')}\n`);
      expect(Math.max(...latencies)).toBeLessThan(3_000);
      // The dead endpoint never had more than its cap in flight, and no attempt was used waiting.
      expect(silent.connections()).toBeLessThanOrEqual(10);
      const [attempted] = await producer.db.sequelize.query<{ n: string }>(
        `SELECT count(*) AS n FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.event = 'post.created'`,
        { type: 'SELECT' as never },
      );
      expect(Number(attempted.n)).toBe(0);
    } finally {
      await running?.close();
      running = undefined;
      await silent.close();
    }
    // Setting up 300 deliveries takes a while on a loaded machine; the promise measured is the 3 s.
  }, 90_000);

  it('When an endpoint keeps answering 503, then its circuit opens after 5 attempts and later deliveries wait without using attempts', async () => {
    const failing = await startRecordingServer({ status: 503 });
    const metrics = createMetrics('webhook-worker');
    try {
      const endpoint = await addEndpoint(producer.db, `${failing.url}/hooks`);
      running = startWorker({ ...env.config, webhookEndpointConcurrency: 1, webhookRetrySchedule: [60] }, producer.db, { metrics });

      for (let pid = 1; pid <= 8; pid += 1) await recordEvent(producer, 'post.created', buildPostData({ pid }));

      await waitFor(async () => (await readCircuitState(producer.connection, env.redisPrefix, endpoint.id, env.config.webhookQueuePartitions)) === 'open', 10_000, 'open');
      // Three deliveries stay pending with no attempt: they wait for the reopening.
      await new Promise((resolve) => setTimeout(resolve, 500));
      const rows = await producer.db.models.WebhookDelivery.findAll();
      expect(failing.requests).toHaveLength(5);
      expect(rows.filter((row) => row.attempts === 0).map((row) => row.status)).toEqual(['pending', 'pending', 'pending']);
      expect(rows.reduce((sum, row) => sum + row.attempts, 0)).toBe(5);
      const waiting = await producer.queue.getJobs(['delayed']);
      expect(waiting.length).toBe(8);
      await running.worker.refreshMetrics();
      expect(await metrics.registry.getSingleMetricAsString('webhook_circuit_state')).toMatch(new RegExp(`webhook_circuit_state\\{gate="e:${endpoint.id}",state="open"[^}]*\\} 1`));
    } finally {
      await running?.close();
      running = undefined;
      await failing.close();
    }
  });
});
