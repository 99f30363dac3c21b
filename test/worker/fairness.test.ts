import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gateKeyOf } from '../../shared/endpoint-gate';
import { addDeliveryJobs } from '../../shared/queue';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { idAt } from '../support/partitions';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { Producer, addEndpoint, buildPostData, createProducer, recordEvent, resetAndClose, startWorker } from './support/harness';
import { waitFor } from '../support/wait-for';

const CONCURRENCY = 10;
const RETRY_SLOTS = 8;

describe('webhook worker: first attempts are never held back by a backlog of retries', () => {
  let env: TestEnvironment;
  let producer: Producer;
  let healthy: RecordingServer;
  let slow: Server;
  let slowUrl: string;
  const slowStats = { inFlight: 0, maxInFlight: 0, requests: 0 };
  let running: ReturnType<typeof startWorker> | undefined;

  beforeAll(async () => {
    env = await createTestEnvironment(
      { WORKER_CONCURRENCY: String(CONCURRENCY), WEBHOOK_ENDPOINT_CONCURRENCY: '100', WEBHOOK_BREAKER_FAILURES: '1000' },
      'worker',
    );
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
    healthy = await startRecordingServer();
    // Retries go to a receiver that takes 2 s per answer.
    slow = createServer((request: IncomingMessage, response: ServerResponse) => {
      request.resume();
      slowStats.requests += 1;
      slowStats.inFlight += 1;
      slowStats.maxInFlight = Math.max(slowStats.maxInFlight, slowStats.inFlight);
      setTimeout(() => {
        slowStats.inFlight -= 1;
        response.writeHead(200).end();
      }, 2_000);
    });
    await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
    slowUrl = `http://127.0.0.1:${(slow.address() as AddressInfo).port}/slow`;
  });

  afterAll(async () => {
    await running?.close();
    await resetAndClose(producer);
    await healthy.close();
    slow.closeAllConnections();
    await new Promise<void>((resolve) => slow.close(() => resolve()));
    await env.cleanup();
  });

  it('When 40 retries to a slow receiver are due, then new first attempts to a healthy endpoint still go out at once', async () => {
    await addEndpoint(producer.db, `${healthy.url}/hooks`);
    const retries = Array.from({ length: 40 }, (_, index) => ({
      id: idAt('msg_', new Date(Date.now() + index)),
      endpointId: null,
      url: slowUrl,
      event: 'user.updated',
      body: '{"_data":{"id":1},"_config":{"app.webhook.event":"user.updated","app.webhook.signable":1}}',
      secret: 'whsec_c2VjcmV0LWZvci1yZXRyaWVz',
      attempts: 1,
      enqueuedAt: new Date(),
    }));
    await producer.db.models.WebhookDelivery.bulkCreate(retries);
    await addDeliveryJobs(producer.queue, retries.map((row) => ({ deliveryId: row.id, retry: true, gate: gateKeyOf(row) })));
    running = startWorker(env.config, producer.db);
    await waitFor(() => slowStats.inFlight >= RETRY_SLOTS, 10_000, 'retries in flight');

    const started = Date.now();
    for (let pid = 1; pid <= 5; pid += 1) await recordEvent(producer, 'post.created', buildPostData({ pid }));
    const requests = await healthy.waitForRequests(5, 10_000);

    // Every slot held by a 2 s retry would have made them wait 2 s or more.
    expect(Math.max(...requests.map((request) => request.receivedAt)) - started).toBeLessThan(1_500);
    expect(slowStats.maxInFlight).toBe(RETRY_SLOTS);
  });
});
