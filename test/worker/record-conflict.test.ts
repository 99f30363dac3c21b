import { Client } from 'pg';
import { Database, createDatabase } from '../../shared/db';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { Producer, addEndpoint, buildPostData, createProducer, deliveryRows, recordEvent, startWorker } from './support/harness';
import { waitFor } from '../support/wait-for';

/**
 * docs/design.md §13.3: an attempt the endpoint answered is recorded, not sent again, also when
 * its record loses a deadlock to another transaction (PostgreSQL aborts one side of a cycle,
 * and the manual's advice is to run it again). The test's own transaction makes the cycle:
 * it holds the endpoint's row while the record of a failed attempt, which updates the
 * delivery and then the endpoint's failure count, waits for it, then asks for the delivery's.
 */
describe('an attempt record that loses a deadlock', () => {
  let env: TestEnvironment;
  let producer: Producer;
  let receiver: RecordingServer;
  let workerDb: Database;
  let locker: Client;
  /** Reads the statistics: inside the locker's transaction they would be one snapshot. */
  let monitor: Client;
  let worker: ReturnType<typeof startWorker> | undefined;

  beforeAll(async () => {
    // The failed attempt's retry is due long after this test looks.
    env = await createTestEnvironment({ WEBHOOK_RETRY_SCHEDULE: '600' }, 'worker');
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
    receiver = await startRecordingServer();
    workerDb = createDatabase(env.databaseUrl, { poolMax: 5 });
    locker = new Client({ connectionString: env.databaseUrl });
    monitor = new Client({ connectionString: env.databaseUrl });
    await Promise.all([locker.connect(), monitor.connect()]);
  });

  afterAll(async () => {
    await worker?.close();
    await Promise.all([locker.end(), monitor.end()]);
    await workerDb.close();
    await producer.queue.obliterate({ force: true });
    await producer.close();
    await receiver.close();
    await env.cleanup();
  });

  const deadlocks = async () =>
    Number((await monitor.query<{ deadlocks: string }>('SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()')).rows[0].deadlocks);

  it('When the record of an attempt is the side PostgreSQL aborts, then it is recorded again and the webhook is not sent twice', async () => {
    const endpoint = await addEndpoint(producer.db, `${receiver.url}/hooks`);
    const before = await deadlocks();
    let locked: Promise<unknown> | undefined;
    receiver.setReply(() => {
      // Before the endpoint answers, the test takes the endpoint's row.
      locked ??= locker.query('BEGIN').then(() => locker.query('UPDATE webhook_endpoints SET description = description WHERE id = $1', [endpoint.id]));
      return { status: 500, delayMs: 300 };
    });
    worker = startWorker(env.config, workerDb);
    await worker.worker.waitUntilReady();
    await recordEvent(producer, 'post.created', buildPostData({ pid: 1 }));

    await waitFor(async () => locked !== undefined, 10_000, 'the attempt to reach the endpoint');
    await locked;
    // The record waits for the endpoint's row, holding the delivery's.
    await waitFor(
      async () =>
        Number(
          (
            await monitor.query<{ count: string }>(
              `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%WITH delivery AS%'`,
            )
          ).rows[0].count,
        ) === 1,
      10_000,
      'the record to wait for the endpoint row',
    );
    const [delivery] = await deliveryRows(producer.db);
    // Waiting for the delivery's row closes the cycle; the record, waiting longer, is aborted.
    await locker.query('UPDATE webhook_deliveries SET updated_at = updated_at WHERE id = $1', [delivery.id]);
    await locker.query('COMMIT');

    const [row] = await waitFor(async () => {
      const rows = await deliveryRows(producer.db);
      return rows[0]?.attempts === 1 && rows;
    }, 10_000, 'the attempt recorded');
    await waitFor(async () => (await deadlocks()) > before, 5_000, 'PostgreSQL to count the deadlock');
    // BullMQ would have run a failed job again after 1 s; the outbox relay revives after 2 s.
    await new Promise((resolve) => setTimeout(resolve, 4_000));
    expect(receiver.requests.map((request) => String(request.headers['webhook-id']))).toEqual([row.id]);
    expect(await producer.db.models.WebhookAttempt.count()).toBe(1);
    const [after] = await deliveryRows(producer.db);
    expect({ status: after.status, attempts: after.attempts, lastStatusCode: after.lastStatusCode }).toEqual({ status: 'pending', attempts: 1, lastStatusCode: 500 });
  });
});
