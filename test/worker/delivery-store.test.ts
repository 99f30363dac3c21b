import { QueryTypes } from 'sequelize';
import { createDeliveryStore, AttemptRecord, DeliveryStore } from '../../services/webhook-worker/src/delivery-store';
import { createDatabase } from '../../shared/db';
import { createdAtOf } from '../../shared/db/partitions';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { Producer, addEndpoint, createProducer, deliveryRows, recordEvent, resetAndClose } from './support/harness';

/** A 2xx attempt as the processor records it. */
function success(deliveryId: string, endpointId: number, response = 'ok'): AttemptRecord {
  return {
    deliveryId,
    deliveryCreatedAt: createdAtOf(deliveryId),
    attemptNumber: 1,
    url: 'http://127.0.0.1:1/hooks',
    originEpoch: 0,
    statusCode: 200,
    error: null,
    durationMs: 7,
    response,
    status: 'succeeded',
    nextAttemptAt: null,
    endpointId,
    succeeded: true,
    goneReason: null,
    exhausted: false,
  };
}

describe('webhook worker: the delivery store records concurrent attempts together', () => {
  let env: TestEnvironment;
  let producer: Producer;
  let store: DeliveryStore;
  let endpoint: { id: number };

  beforeAll(async () => {
    env = await createTestEnvironment({}, 'worker');
  });

  beforeEach(async () => {
    producer = createProducer(env.config);
    store = createDeliveryStore(producer.db.sequelize, { disableAfterS: 3600 });
    endpoint = await addEndpoint(producer.db, 'http://127.0.0.1:9/hook', { events: ['post.created'] });
  });

  afterEach(async () => {
    await resetAndClose(producer);
  });

  afterAll(async () => {
    await env.cleanup();
  });

  async function claimAll(count: number): Promise<string[]> {
    for (let i = 0; i < count; i++) await recordEvent(producer, 'post.created');
    const ids = (await deliveryRows(producer.db)).map((row) => row.id);
    const claimed = await Promise.all(ids.map((id) => store.claim(id, false)));
    expect(claimed.map((delivery) => delivery?.id)).toEqual(ids);
    return ids;
  }

  it('When many attempts succeed at once, then each delivery is succeeded with its own attempt row and the endpoint is healthy again', async () => {
    const ids = await claimAll(30);
    await producer.db.sequelize.query(`UPDATE webhook_endpoints SET failing_since = now() - interval '1 minute', episode_id = 'epi_test', consecutive_failures = 3 WHERE id = $1`, {
      bind: [endpoint.id],
    });

    const results = await Promise.all(ids.map((id) => store.recordAttempt(success(id, endpoint.id, `answer of ${id}`))));

    expect(results).toEqual(ids.map(() => ({ noticeIds: [], disabledReason: null, originEpoch: 0 })));
    const rows = await deliveryRows(producer.db);
    for (const row of rows) {
      expect(row).toMatchObject({ status: 'succeeded', attempts: 1, lastStatusCode: 200, lastError: null, nextAttemptAt: null });
      expect(row.deliveredAt).toBeInstanceOf(Date);
    }
    const attempts = await producer.db.models.WebhookAttempt.findAll({ order: [['deliveryId', 'ASC']] });
    expect(attempts.map((attempt) => [attempt.deliveryId, attempt.attemptNumber, attempt.statusCode, attempt.responseBody])).toEqual(
      [...ids].sort().map((id) => [id, 1, 200, `answer of ${id}`]),
    );
    const stored = await producer.db.models.WebhookEndpoint.findByPk(endpoint.id);
    expect(stored).toMatchObject({ failingSince: null, episodeId: null, consecutiveFailures: 0, active: true });
  });

  it('When one delivery of a batch was deleted meanwhile, then only its own record fails and the others are recorded', async () => {
    const ids = await claimAll(4);
    // The four arrive within one linger and go together; the failed batch is then run record by record.
    const gone = ids[2];
    await producer.db.models.WebhookDelivery.destroy({ where: { id: gone } });

    const settled = await Promise.allSettled(ids.map((id) => store.recordAttempt(success(id, endpoint.id))));

    expect(settled.map((outcome) => outcome.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    const rows = await deliveryRows(producer.db);
    expect(rows.map((row) => [row.id, row.status])).toEqual(ids.filter((id) => id !== gone).map((id) => [id, 'succeeded']));
  });

  it('When several attempts that each disable the endpoint are recorded at once, then it is disabled once and each watcher gets one endpoint.disabled', async () => {
    const watcher = await addEndpoint(producer.db, 'http://127.0.0.1:9/watcher', { events: ['endpoint.disabled'] });
    const ids = await claimAll(6);
    const gone = (id: string): AttemptRecord => ({
      ...success(id, endpoint.id),
      statusCode: 410,
      status: 'failed',
      succeeded: false,
      goneReason: `410 Gone from http://127.0.0.1:9/hook (${id})`,
    });

    const results = await Promise.all(ids.map((id) => store.recordAttempt(gone(id))));

    const disabling = results.filter((result) => result.disabledReason !== null);
    expect(disabling).toHaveLength(1);
    expect(disabling[0].noticeIds).toHaveLength(1);
    const stored = await producer.db.models.WebhookEndpoint.findByPk(endpoint.id);
    expect([stored?.active, stored?.disabledReason]).toEqual([false, disabling[0].disabledReason]);
    const notices = (await deliveryRows(producer.db)).filter((row) => row.endpointId === watcher.id);
    expect(notices.map((row) => [row.id, row.event])).toEqual([[disabling[0].noticeIds[0], 'endpoint.disabled']]);
    expect((await deliveryRows(producer.db)).filter((row) => row.endpointId === endpoint.id).map((row) => row.status)).toEqual(ids.map(() => 'failed'));
  });

  it('When two workers announce the same circuit opening and record successes at once, then the episode gives one endpoint.failing and one endpoint.recovered', async () => {
    const watcher = await addEndpoint(producer.db, 'http://127.0.0.1:9/watcher', { events: ['endpoint.failing', 'endpoint.recovered'] });
    // Another worker process: a database handle and a store of its own.
    const other = createDatabase(env.config.databaseUrl, { poolMax: 5 });
    const otherStore = createDeliveryStore(other.sequelize, { disableAfterS: 3600 });
    try {
      const ids = await claimAll(12);
      const failure = (id: string): AttemptRecord => ({ ...success(id, endpoint.id), statusCode: 503, status: 'pending', nextAttemptAt: new Date(), succeeded: false });
      await Promise.all(ids.slice(0, 4).map((id, i) => (i % 2 ? otherStore : store).recordAttempt(failure(id))));
      const opened = await producer.db.models.WebhookEndpoint.findByPk(endpoint.id);
      expect(opened).toMatchObject({ consecutiveFailures: 4, lastFailureStatusCode: 503, episodeEvents: [] });

      // Both workers saw the circuit open, each twice (a failed probe, a Redis that forgot it).
      const failing = (await Promise.all([store, otherStore, store, otherStore].map((each) => each.circuitOpened(endpoint.id, 0)))).flat();
      const recovered = (await Promise.all(ids.slice(4).map((id, i) => (i % 2 ? otherStore : store).recordAttempt(success(id, endpoint.id))))).flatMap(
        (result) => result.noticeIds,
      );

      expect([failing.length, recovered.length]).toEqual([1, 1]);
      const notices = (await deliveryRows(producer.db)).filter((row) => row.endpointId === watcher.id);
      expect(notices.map((row) => [row.id, row.event])).toEqual([
        [failing[0], 'endpoint.failing'],
        [recovered[0], 'endpoint.recovered'],
      ]);
      const [failingData, recoveredData] = notices.map((row) => JSON.parse(row.body)._data);
      expect(recoveredData).toMatchObject({ episode_id: opened!.episodeId, failing_since: opened!.failingSince!.toISOString(), consecutive_failures: 4 });
      expect(failingData).toMatchObject({ episode_id: opened!.episodeId, reason: 'circuit opened after 4 consecutive failed attempts' });
      expect(await producer.db.models.WebhookEndpoint.findByPk(endpoint.id)).toMatchObject({ episodeId: null, failingSince: null, consecutiveFailures: 0 });
    } finally {
      await other.close();
    }
  });

  it('When a worker claims deliveries, then its connection still waits for the WAL flush of the statements after the claim', async () => {
    // One connection: the claim and the statement after it share it, as pooled statements do.
    const single = createDatabase(env.config.databaseUrl, { poolMax: 1 });
    try {
      for (let i = 0; i < 2; i++) await recordEvent(producer, 'post.created');
      const ids = (await deliveryRows(producer.db)).map((row) => row.id);
      const singleStore = createDeliveryStore(single.sequelize, { disableAfterS: 3600 });

      expect((await Promise.all(ids.map((id) => singleStore.claim(id, false)))).map((delivery) => delivery?.id)).toEqual(ids);

      const [setting] = await single.sequelize.query<{ synchronous_commit: string }>('SHOW synchronous_commit', { type: QueryTypes.SELECT });
      expect(setting.synchronous_commit).toBe('on');
      expect((await deliveryRows(producer.db)).map((row) => row.status)).toEqual(['delivering', 'delivering']);
    } finally {
      await single.close();
    }
  });

  it('When a recorded answer holds NUL characters, then the rest of its excerpt is stored', async () => {
    const [id] = await claimAll(1);

    await store.recordAttempt(success(id, endpoint.id, 'a\u0000b'));

    const attempt = await producer.db.models.WebhookAttempt.findOne({ where: { deliveryId: id } });
    expect(attempt?.responseBody).toBe('ab');
  });
});
