import { randomBytes } from 'node:crypto';
import { createDatabase, Database } from '../../shared/db';
import { createMigrator } from '../../shared/db/migrate';
import { idTime } from '../../shared/webhook/ids';
import { ApiClient, ApiHarness, createApiHarness } from '../api/support/api-harness';
import { createServiceKey, TestServiceKey } from '../api/support/operations';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { startWorker } from './support/harness';
import { waitFor } from '../support/wait-for';

const DAY_MIGRATION = '20261126000100-day-partitions.js';
const DAY_MS = 86_400_000;
const BODY = '{"_data":{"legacy":"é"},"_config":{"app.webhook.event":"post.created","app.webhook.signable":1}}';

/**
 * A legacy id (16 random bytes) of the one in 64 whose version and
 * variant bits happen to read as a UUIDv7: its "time" lies after the migration, in a day no
 * partition holds.
 */
function legacyIdLikeV7(prefix: 'msg_' | 'evt_'): string {
  for (;;) {
    const bytes = randomBytes(16);
    bytes[6] = (bytes[6] & 0x0f) | 0x70;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    const id = `${prefix}${bytes.toString('base64url')}`;
    if ((idTime(id)?.getTime() ?? 0) > Date.now() + 365 * DAY_MS) return id;
  }
}

/** docs/design.md §3.5: every lookup by id finds a legacy row whose random id reads as a UUIDv7. */
describe('legacy ids that read as UUIDv7', () => {
  let harness: ApiHarness;
  let workerDb: Database;
  let api: ApiClient;
  let operator: TestServiceKey;
  let receiver: RecordingServer;
  let worker: ReturnType<typeof startWorker>;
  let endpointId: number;
  const pending = legacyIdLikeV7('msg_');
  const failed = legacyIdLikeV7('msg_');
  const recoverable = legacyIdLikeV7('msg_');

  beforeAll(async () => {
    harness = await createApiHarness();
    receiver = await startRecordingServer();
    // The rows as they stood before the day partitions, then the migration.
    const migrator = createMigrator(harness.db.sequelize);
    await migrator.down({ to: DAY_MIGRATION });
    // Plain SQL, not the model: the model knows the columns of later migrations.
    const insert = (sql: string, bind: unknown[]) => harness.db.sequelize.query(sql, { bind });
    const [[endpoint]] = (await insert(`INSERT INTO webhook_endpoints (url, secret, events, active) VALUES ($1, $2, '{}', true) RETURNING id`, [
      `${receiver.url}/hooks`,
      'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    ])) as [{ id: number }[], unknown];
    endpointId = endpoint.id;
    const event = legacyIdLikeV7('evt_');
    await insert(`INSERT INTO webhook_events (id, kind, event, body) VALUES ($1, 'post', 'post.created', $2)`, [event, BODY]);
    for (const [id, status, attempts] of [[pending, 'pending', 0], [failed, 'failed', 1], [recoverable, 'failed', 1]]) {
      await insert(
        `INSERT INTO webhook_deliveries (id, event_id, endpoint_id, url, event, status, attempts, updated_at) VALUES ($1, $2, $3, $4, 'post.created', $5, $6, now())`,
        [id, event, endpointId, `${receiver.url}/hooks`, status, attempts],
      );
    }
    await insert(
      `INSERT INTO webhook_attempts (delivery_id, attempt_number, status_code, duration_ms, response_body) VALUES ($1, 1, 500, 12, 'down'), ($2, 1, 503, 9, 'busy')`,
      [failed, recoverable],
    );
    await migrator.up();

    workerDb = createDatabase(harness.env.databaseUrl, { poolMax: 5 });
    api = await harness.start('a');
    operator = await createServiceKey(harness.db, ['*']);
    worker = startWorker(harness.env.config, workerDb);
    await worker.worker.waitUntilReady();
  });

  afterAll(async () => {
    await worker?.close();
    await workerDb?.close();
    await receiver.close();
    await harness.close();
  });

  const details = async (id: string) => {
    const res = await api.request({ url: `/api/v1/webhooks/${id}`, headers: operator.headers });
    return { status: res.statusCode, body: res.json() as { id: string; status: string; attempts: { number: number; status_code: number | null }[] } };
  };
  /** The delivery once its worker recorded the attempt it is making, if any: a request arrives before its record. */
  const settled = (id: string) =>
    waitFor(async () => {
      const read = await details(id);
      return read.body.status === 'succeeded' || read.body.status === 'failed' ? read : undefined;
    }, 10_000, `delivery ${id} settled`);
  const arrivalsOf = (id: string) => receiver.requests.filter((request) => request.headers['webhook-id'] === id);

  it('When such a delivery was pending at the migration, then the worker claims it and delivers its body once', async () => {
    const [arrival] = await receiver.waitForRequests(1, 10_000);

    expect(arrival.headers['webhook-id']).toBe(pending);
    expect(arrival.body.toString()).toBe(BODY);
    const read = await settled(pending);
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ id: pending, status: 'succeeded', attempts: [{ number: 1, status_code: 200 }] });
    expect(arrivalsOf(pending)).toHaveLength(1);
  });

  it('When such a failed delivery is read and redelivered, then GET shows it with its attempts and the redelivery arrives with its webhook-id', async () => {
    const before = await details(failed);
    expect(before.status).toBe(200);
    expect(before.body).toMatchObject({ id: failed, status: 'failed', attempts: [{ number: 1, status_code: 500 }] });

    const res = await api.request({ method: 'POST', url: `/api/v1/webhooks/${failed}/redeliver`, headers: operator.headers });

    expect(res.statusCode).toBe(202);
    await receiver.waitForRequests(2, 10_000);
    expect(arrivalsOf(failed)).toHaveLength(1);
    expect(arrivalsOf(failed)[0].body.toString()).toBe(BODY);
    const after = await settled(failed);
    expect(after.body).toMatchObject({ status: 'succeeded', attempts: [{ number: 1, status_code: 500 }, { number: 2, status_code: 200 }] });
  });

  it('When such a delivery and a new one are redelivered at the same moment, then each arrives once more with its own webhook-id', async () => {
    const sent = await api.request({
      method: 'POST',
      url: '/api/v1/webhooks',
      headers: operator.headers,
      payload: { url: `${receiver.url}/hooks`, event: 'post.created', payload: { fresh: true }, secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' },
    });
    const fresh = (sent.json() as { id: string }).id;
    await receiver.waitForRequests(3, 10_000);
    expect((await settled(fresh)).body).toMatchObject({ status: 'succeeded' });

    const answers = await Promise.all(
      [pending, fresh].map((id) => api.request({ method: 'POST', url: `/api/v1/webhooks/${id}/redeliver`, headers: operator.headers })),
    );

    expect(answers.map((answer) => answer.statusCode)).toEqual([202, 202]);
    await receiver.waitForRequests(5, 10_000);
    expect([arrivalsOf(pending).length, arrivalsOf(fresh).length]).toEqual([2, 2]);
    expect((await settled(pending)).body).toMatchObject({ status: 'succeeded', attempts: [{ number: 1 }, { number: 2 }] });
    expect((await settled(fresh)).body).toMatchObject({ status: 'succeeded', attempts: [{ number: 1 }, { number: 2 }] });
  });

  it('When its endpoint is recovered, then such a failed delivery is attempted again', async () => {
    const res = await api.request({
      method: 'POST',
      url: `/api/v1/endpoints/${endpointId}/recover`,
      headers: operator.headers,
      payload: { since: new Date(Date.now() - DAY_MS).toISOString() },
    });

    expect(res.statusCode).toBe(202);
    expect(res.json()).toEqual({ count: 1 });
    await receiver.waitForRequests(6, 10_000);
    expect(arrivalsOf(recoverable)).toHaveLength(1);
    expect((await settled(recoverable)).body).toMatchObject({ status: 'succeeded', attempts: [{ number: 1, status_code: 503 }, { number: 2, status_code: 200 }] });
  });
});
