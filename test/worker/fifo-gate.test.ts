import type { Config } from '../../shared/config';
import { createDeliveryGate, createEndpointRateLimiter } from '../../shared/endpoint-gate';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { Producer, addEndpoint, buildPostData, createProducer, deliveryRows, recordEvent, resetAndClose, startWorker } from './support/harness';
import { waitFor } from '../support/wait-for';

/**
 * docs/design.md §6.5: only the head of a FIFO
 * endpoint's line asks the endpoint's gate; the deliveries waiting behind it take no rate
 * slot, no lease and no probe. Each test holds the head's attempt in flight (the endpoint
 * answers after 2 s) while the deliveries behind it run once and wait, then reads the gate.
 */
describe('FIFO endpoints behind the endpoint gate', () => {
  let env: TestEnvironment;
  let producer: Producer;
  let receiver: RecordingServer;
  let running: ReturnType<typeof startWorker> | undefined;

  beforeAll(async () => {
    env = await createTestEnvironment({ WEBHOOK_TIMEOUT_MS: '5000' }, 'worker');
  });

  beforeEach(async () => {
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
    receiver = await startRecordingServer();
  });

  afterEach(async () => {
    await receiver.close();
    await running?.close();
    running = undefined;
    await resetAndClose(producer);
  });

  afterAll(async () => {
    await env.cleanup();
  });

  async function fifoEndpoint(rateLimitPerS: number | null): Promise<string> {
    const endpoint = await addEndpoint(producer.db, `${receiver.url}/fifo`);
    await producer.db.models.WebhookEndpoint.update({ ordering: 'fifo', rateLimitPerS }, { where: { id: endpoint.id } });
    return `e:${endpoint.id}`;
  }

  /** Records `count` events, holds the first one's attempt at the endpoint, and resolves once the others all wait. */
  async function headInFlight(count: number, config: Config = env.config): Promise<void> {
    running ??= startWorker(config, producer.db);
    const before = receiver.requests.length;
    receiver.setReply({ status: 200, delayMs: 2_000 });
    for (let pid = 1; pid <= count; pid += 1) await recordEvent(producer, 'post.created', buildPostData({ pid }));
    await receiver.waitForRequests(before + 1);
    await waitFor(async () => (await producer.queue.getJobCounts(['delayed'])).total.delayed === count - 1, 10_000, 'the deliveries behind the head waiting');
  }

  it('when a rate-limited FIFO endpoint has deliveries waiting behind its head, then they reserve no rate slot: the next slot is one interval away, not one per waiting delivery', async () => {
    const gateKey = await fifoEndpoint(2);
    running = startWorker(env.config, producer.db);
    // One delivery first, so the gate knows the endpoint's limit when the others ask.
    await recordEvent(producer, 'post.created', buildPostData({ pid: 0 }));
    await waitFor(async () => (await deliveryRows(producer.db))[0]?.status === 'succeeded', 10_000, 'the first delivery');

    await headInFlight(6);

    const limiter = createEndpointRateLimiter(producer.connection, env.redisPrefix);
    // The head's slot is the only one taken at 2 a second: the next is at most 500 ms away.
    expect(await limiter.reserve(gateKey, 2)).toBeLessThanOrEqual(500);
  });

  it('when a FIFO endpoint at its cap has deliveries waiting behind its head, then none of them asked for a lease: none is parked with the gate', async () => {
    const gateKey = await fifoEndpoint(null);

    await headInFlight(6, { ...env.config, webhookEndpointConcurrency: 1 });

    const gate = createDeliveryGate(producer.connection, { prefix: env.redisPrefix, concurrency: 1, breakerFailures: 5, leaseTtlMs: 10_000 });
    const waiting = await producer.queue.getJobs(['delayed']);
    expect(waiting).toHaveLength(5);
    for (const job of waiting) expect(await gate.isParked(gateKey, job.id!)).toBe(false);
  });
});
