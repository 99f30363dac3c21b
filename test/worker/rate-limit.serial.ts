import type { ChildProcess } from 'node:child_process';
import { addDeliveryJobs } from '../../shared/queue';
import { serializeEnvelope } from '../../shared/webhook';
import { ArrivalRecorder, startArrivalRecorder } from '../support/arrival-recorder';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { idAt } from '../support/partitions';
import { Producer, addEndpoint, createProducer } from './support/harness';
import { exited, spawnWorker } from './support/processes';
import { waitFor } from '../support/wait-for';

const LIMIT = 50;
const QUEUED = 2_000;
const OTHERS = 100;

/** The largest number of requests received within any 1 s window. */
function busiestSecond(times: number[]): number {
  const sorted = [...times].sort((x, y) => x - y);
  let busiest = 0;
  for (let first = 0, last = 0; last < sorted.length; last += 1) {
    while (sorted[last] - sorted[first] >= 1_000) first += 1;
    busiest = Math.max(busiest, last - first + 1);
  }
  return busiest;
}

/**
 * docs/design.md §14.1's measured promise for `rate_limit_per_s`: limit 50, 2,000 deliveries queued, two
 * worker processes: no 1 s window at the endpoint sees more than 55, all arrive within 44 s,
 * and another endpoint's deliveries are not slowed. The endpoints stamp arrivals in a process
 * of their own: this one's event loop, busy adding the jobs, would bunch its stamps.
 */
describe('endpoint rate limit across two worker processes', () => {
  let env: TestEnvironment;
  let producer: Producer;
  let limited: ArrivalRecorder;
  let other: ArrivalRecorder;
  const workers: ChildProcess[] = [];

  beforeAll(async () => {
    env = await createTestEnvironment({}, 'worker');
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
    [limited, other] = await Promise.all([startArrivalRecorder(), startArrivalRecorder()]);
    const workerEnv = { DATABASE_URL: env.databaseUrl, REDIS_URL: env.redisUrl, REDIS_PREFIX: env.redisPrefix, WEBHOOK_PRIVATE_ALLOWLIST: '127.0.0.1' };
    workers.push(spawnWorker(workerEnv), spawnWorker(workerEnv));
  });

  afterAll(async () => {
    for (const worker of workers) worker.kill('SIGKILL');
    await Promise.all(workers.map(exited));
    await producer.queue.obliterate({ force: true });
    await producer.close();
    await Promise.all([limited.close(), other.close()]);
    await env.cleanup();
  });

  /** `count` pending deliveries to the endpoint, added to the queue as the outbox adds them. */
  async function queue(endpointId: number, url: string, count: number): Promise<void> {
    const ids = Array.from({ length: count }, () => idAt('msg_', new Date()));
    const body = serializeEnvelope({ n: 1 }, { event: 'post.created', signable: true });
    await producer.db.sequelize.query(
      `INSERT INTO webhook_deliveries (id, created_at, endpoint_id, url, event, body, enqueued_at)
       SELECT id, webhook_id_time(id), $2, $3, 'post.created', $4, now() FROM unnest($1::text[]) AS id`,
      { bind: [ids, endpointId, url, body] },
    );
    await addDeliveryJobs(producer.queue, ids.map((deliveryId) => ({ deliveryId, gate: `e:${endpointId}` })));
  }

  it('when 2,000 deliveries wait on an endpoint limited to 50/s, then no second sees more than 55, all arrive within 44 s, and another endpoint is not slowed', async () => {
    const slow = await addEndpoint(producer.db, `${limited.url}/hooks`);
    await producer.db.models.WebhookEndpoint.update({ rateLimitPerS: LIMIT }, { where: { id: slow.id } });
    const fast = await addEndpoint(producer.db, `${other.url}/hooks`);

    const started = Date.now();
    await queue(slow.id, `${limited.url}/hooks`, QUEUED);
    await limited.arrivals.waitFor(100, 30_000);
    const othersQueued = Date.now();
    await queue(fast.id, `${other.url}/hooks`, OTHERS);

    const others = await other.arrivals.waitFor(OTHERS, 20_000);
    const all = await limited.arrivals.waitFor(QUEUED, 60_000);
    const finished = Math.max(...all.map((request) => request.receivedAt));

    expect(busiestSecond(all.map((request) => request.receivedAt))).toBeLessThanOrEqual(55);
    expect(finished - started).toBeLessThanOrEqual(44_000);
    // The other endpoint's hundred arrive at once, not behind the limited backlog.
    expect(Math.max(...others.map((request) => request.receivedAt)) - othersQueued).toBeLessThan(5_000);
    expect(new Set(all.map((request) => request.webhookId)).size).toBe(QUEUED);
    await waitFor(
      async () => Number((await producer.db.sequelize.query(`SELECT count(*) AS n FROM webhook_deliveries WHERE status = 'succeeded'`, { plain: true }))?.n) === QUEUED + OTHERS,
      10_000,
      'every delivery recorded',
    );
    // Waiting for a slot uses no attempt.
    const attempts = await producer.db.sequelize.query('SELECT sum(attempts)::int AS attempts FROM webhook_deliveries', { plain: true });
    expect(attempts).toEqual({ attempts: QUEUED + OTHERS });
  }, 90_000);
});
