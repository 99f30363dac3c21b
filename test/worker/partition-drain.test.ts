import type { ChildProcess } from 'node:child_process';
import { addDeliveryJobs, shardOf } from '../../shared/queue';
import { serializeEnvelope } from '../../shared/webhook';
import { ArrivalRecorder, startArrivalRecorder } from '../support/arrival-recorder';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { idAt } from '../support/partitions';
import { Producer, addEndpoint, createProducer } from './support/harness';
import { exited, spawnWorker } from './support/processes';

const PARTITIONS = 12;
const ENDPOINTS = 24;
const DELIVERIES = 3_000;
const CHUNK = 500;

/**
 * docs/design.md §13.1: a worker drains every partition within one WORKER_CONCURRENCY. A partition whose
 * finished job handed its slot to another partition fetched no next job, which BullMQ reads as
 * a drained queue: its loop then waited for a marker, up to the 5 s drain delay, with its jobs
 * still queued, and deliveries stopped while the others ran dry.
 */
describe('partitioned queue: partitions taking turns with the slots', () => {
  let env: TestEnvironment;
  let producer: Producer;
  let receiver: ArrivalRecorder;
  let worker: ChildProcess | undefined;

  beforeAll(async () => {
    env = await createTestEnvironment({ WEBHOOK_QUEUE_PARTITIONS: String(PARTITIONS) }, 'worker');
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
    receiver = await startArrivalRecorder();
  });

  afterAll(async () => {
    worker?.kill('SIGKILL');
    if (worker) await exited(worker);
    await producer.queue.obliterate({ force: true });
    await producer.close();
    await receiver.close();
    await env.cleanup();
  });

  it('when 3,000 deliveries to 24 endpoints over 12 partitions are queued in chunks, then they arrive without a pause of a second', async () => {
    const endpoints: number[] = [];
    for (let i = 0; i < ENDPOINTS; i += 1) endpoints.push((await addEndpoint(producer.db, `${receiver.url}/hooks/${i}`)).id);
    expect(new Set(endpoints.map((id) => shardOf(`e:${id}`, PARTITIONS))).size).toBeGreaterThanOrEqual(8);
    worker = spawnWorker({
      DATABASE_URL: env.databaseUrl,
      REDIS_URL: env.redisUrl,
      REDIS_PREFIX: env.redisPrefix,
      WEBHOOK_PRIVATE_ALLOWLIST: '127.0.0.1',
      WEBHOOK_QUEUE_PARTITIONS: String(PARTITIONS),
      WORKER_CONCURRENCY: '50',
      WEBHOOK_ENDPOINT_CONCURRENCY: '1000',
    });

    const ids = Array.from({ length: DELIVERIES }, () => idAt('msg_', new Date()));
    const body = serializeEnvelope({ n: 1 }, { event: 'post.created', signable: true });
    await producer.db.sequelize.query(
      `INSERT INTO webhook_deliveries (id, created_at, endpoint_id, url, event, body, enqueued_at)
       SELECT d.id, webhook_id_time(d.id), d.endpoint_id, $3 || '/hooks', 'post.created', $4, now() FROM unnest($1::text[], $2::int[]) AS d(id, endpoint_id)`,
      { bind: [ids, ids.map((_, i) => endpoints[i % ENDPOINTS]), receiver.url, body] },
    );
    for (let i = 0; i < DELIVERIES; i += CHUNK) {
      await addDeliveryJobs(
        producer.queue,
        ids.slice(i, i + CHUNK).map((deliveryId, j) => ({ deliveryId, gate: `e:${endpoints[(i + j) % ENDPOINTS]}` })),
      );
    }

    const arrivals = (await receiver.arrivals.waitFor(DELIVERIES, 60_000)).map((arrival) => arrival.receivedAt).sort((a, b) => a - b);
    const longestPause = Math.max(...arrivals.slice(1).map((at, i) => at - arrivals[i]));
    expect(longestPause).toBeLessThan(1_000);
  }, 90_000);
});
