import { QueryTypes } from 'sequelize';
import { Webhook } from 'standardwebhooks';
import { addDeliveryJobs } from '../../shared/queue';
import { redeliverWebhook } from '../../shared/deliveries/enqueue';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { createUser } from '../support/factories';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { Producer, addEndpoint, buildPostData, createProducer, deliveryRows, recordEvent, resetAndClose, startWorker } from './support/harness';
import { waitFor } from '../support/wait-for';

const OPERATOR_SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

describe('webhook worker: endpoint health, disabled and deleted endpoints', () => {
  let env: TestEnvironment;
  let producer: Producer;
  let receiver: RecordingServer;
  let running: ReturnType<typeof startWorker> | undefined;

  beforeAll(async () => {
    env = await createTestEnvironment(
      { WEBHOOK_RETRY_SCHEDULE: '0.3,0.3,0.3,0.3,0.3,0.3,0.3,0.3', WEBHOOK_DISABLE_AFTER_S: '1', WEBHOOK_BREAKER_FAILURES: '1000' },
      'worker',
    );
  });

  beforeEach(async () => {
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
    receiver = await startRecordingServer();
  });

  afterEach(async () => {
    await running?.close();
    running = undefined;
    await resetAndClose(producer);
    await receiver.close();
  });

  afterAll(async () => {
    await env.cleanup();
  });

  /** Operator endpoint subscribed to endpoint.disabled, and a user's endpoint subscribed to it too. */
  async function addWatchers() {
    const operator = await addEndpoint(producer.db, `${receiver.url}/operator`, { events: ['endpoint.disabled'], secret: OPERATOR_SECRET });
    const { user } = await createUser(producer.db);
    const own = await addEndpoint(producer.db, `${receiver.url}/user`, { events: ['endpoint.disabled'] });
    await producer.db.models.WebhookEndpoint.update({ userId: user.userId }, { where: { id: own.id } });
    return operator;
  }

  it('When an endpoint fails with no success for WEBHOOK_DISABLE_AFTER_S, then it is disabled with the reason and operator endpoints get endpoint.disabled', async () => {
    await addWatchers();
    const failing = await addEndpoint(producer.db, `${receiver.url}/failing`, { events: ['post.created'] });
    receiver.setReply((request) => (request.path === '/failing' ? { status: 500 } : { status: 200 }));
    // The endpoint has not been edited for longer than the limit either.
    await producer.db.sequelize.query(`UPDATE webhook_endpoints SET updated_at = now() - interval '1 hour' WHERE id = $1`, { bind: [failing.id] });
    running = startWorker(env.config, producer.db);

    await recordEvent(producer, 'post.created');

    const stored = await waitFor(async () => {
      const endpoint = await producer.db.models.WebhookEndpoint.findByPk(failing.id);
      return endpoint?.active === false && endpoint;
    }, 15_000, 'endpoint disabled');
    expect(stored.disabledReason).toMatch(
      /^No successful attempt since \d{4}-\d\d-\d\dT[\d:.]+Z \(WEBHOOK_DISABLE_AFTER_S=1\); disabled at \d{4}-\d\d-\d\dT[\d:.]+Z$/,
    );
    const [notice] = await receiver.waitForRequests(1).then(() =>
      waitFor(() => {
        const found = receiver.requests.filter((request) => request.path !== '/failing');
        return found.length > 0 && found;
      }, 10_000, 'notice'),
    );
    expect(notice.path).toBe('/operator');
    const body = new Webhook(OPERATOR_SECRET).verify(notice.body.toString('utf8'), {
      'webhook-id': String(notice.headers['webhook-id']),
      'webhook-timestamp': String(notice.headers['webhook-timestamp']),
      'webhook-signature': String(notice.headers['webhook-signature']),
    }) as { _data: Record<string, unknown>; _config: Record<string, unknown> };
    expect(body._config).toEqual({ 'app.webhook.event': 'endpoint.disabled', 'app.webhook.signable': 1 });
    // The data of every endpoint event (docs/design.md §6.6), and the disable's own time.
    expect(body._data).toEqual({
      endpoint_id: failing.id,
      url: `${receiver.url}/failing`,
      user_id: null,
      reason: stored.disabledReason,
      failing_since: stored.failingSince!.toISOString(),
      consecutive_failures: stored.consecutiveFailures,
      last_status_code: 500,
      last_error: null,
      occurred_at: stored.updatedAt.toISOString(),
      episode_id: stored.episodeId,
      disabled_at: stored.updatedAt.toISOString(),
    });
    expect(stored.episodeId).toMatch(/^epi_/);
    expect(stored.episodeEvents).toEqual(['endpoint.disabled']);
    // The delivery to the disabled endpoint is not attempted again.
    const [failed] = await waitFor(async () => {
      const rows = (await deliveryRows(producer.db)).filter((row) => row.endpointId === failing.id);
      return rows[0]?.status === 'failed' && rows;
    }, 5_000, 'delivery ended');
    expect(failed.lastError).toBe('endpoint disabled');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(receiver.requests.filter((request) => request.path === '/user')).toHaveLength(0);
  });

  it('When an endpoint answers 410 Gone, then operator endpoints also get endpoint.disabled', async () => {
    await addWatchers();
    const gone = await addEndpoint(producer.db, `${receiver.url}/gone`, { events: ['post.created'] });
    receiver.setReply((request) => (request.path === '/gone' ? { status: 410 } : { status: 200 }));
    running = startWorker(env.config, producer.db);

    await recordEvent(producer, 'post.created');

    const notice = await waitFor(() => receiver.requests.find((request) => request.path === '/operator'), 10_000, 'notice');
    const data = JSON.parse(notice.body.toString('utf8'))._data;
    expect(data.endpoint_id).toBe(gone.id);
    expect(data.reason).toMatch(/^410 Gone from /);
    expect(receiver.requests.filter((request) => request.path === '/user')).toHaveLength(0);
  });

  it('When a user’s endpoint is disabled, then endpoint.disabled goes out as an operational event to the endpoints that list it by name, operator ones and that user’s own, never to itself', async () => {
    const { user: alice } = await createUser(producer.db);
    const { user: bob } = await createUser(producer.db);
    const own = async (path: string, userId: number, events: string[]) => {
      const endpoint = await addEndpoint(producer.db, `${receiver.url}${path}`, { events });
      await producer.db.models.WebhookEndpoint.update({ userId }, { where: { id: endpoint.id } });
      return endpoint;
    };
    await addEndpoint(producer.db, `${receiver.url}/operator`, { events: ['endpoint.disabled'] });
    await addEndpoint(producer.db, `${receiver.url}/operator-every-event`);
    await own('/alice-watch', alice.userId, ['endpoint.disabled']);
    await own('/bob-watch', bob.userId, ['endpoint.disabled']);
    const gone = await own('/alice-gone', alice.userId, ['post.created', 'endpoint.disabled']);
    const withCredentials = `${receiver.url.replace('://', '://hook:pw@')}/alice-gone?token=secret`;
    await producer.db.models.WebhookEndpoint.update({ url: withCredentials }, { where: { id: gone.id } });
    receiver.setReply((request) => (request.path === '/alice-gone' ? { status: 410 } : { status: 200 }));
    running = startWorker(env.config, producer.db);

    await recordEvent(producer, 'post.created', buildPostData({ user_id: alice.userId }));

    const notices = () => receiver.requests.filter((request) => request.headers['webhook-id'] && JSON.parse(request.body.toString('utf8'))._config?.['app.webhook.event'] === 'endpoint.disabled');
    await waitFor(() => notices().length >= 2, 10_000, 'notices');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(notices().map((request) => request.path).sort()).toEqual(['/alice-watch', '/operator']);
    const data = JSON.parse(notices()[0].body.toString('utf8'))._data;
    expect(data).toMatchObject({ endpoint_id: gone.id, url: `${receiver.url}/alice-gone`, reason: expect.stringMatching(/^410 Gone from /) });
    const [event] = await producer.db.sequelize.query<{ kind: string; user_id: number | null }>(
      `SELECT kind, user_id FROM webhook_events WHERE event = 'endpoint.disabled' AND (body::jsonb -> '_data' ->> 'endpoint_id')::int = $1`,
      { bind: [gone.id], type: QueryTypes.SELECT },
    );
    expect(event).toEqual({ kind: 'operational', user_id: alice.userId });
  });

  it('When an operator endpoint watching endpoint.disabled has a stored filter of the wrong shape, then the disable still commits and only it misses the notice', async () => {
    await addWatchers();
    for (const [name, filter] of [['string', 'text'], ['array', [1]], ['deep', { reason: JSON.parse(`${'['.repeat(3000)}1${']'.repeat(3000)}`) }]] as const) {
      const bad = await addEndpoint(producer.db, `${receiver.url}/bad-${name}`, { events: ['endpoint.disabled'] });
      // Written by hand, past the API's checks, as an older version or an operator might have.
      await producer.db.sequelize.query('UPDATE webhook_endpoints SET filter = $1::jsonb WHERE id = $2', { bind: [JSON.stringify(filter), bad.id] });
    }
    const gone = await addEndpoint(producer.db, `${receiver.url}/gone`, { events: ['post.created'] });
    receiver.setReply((request) => (request.path === '/gone' ? { status: 410 } : { status: 200 }));
    running = startWorker(env.config, producer.db);

    await recordEvent(producer, 'post.created');

    const notice = await waitFor(() => receiver.requests.find((request) => request.path === '/operator'), 10_000, 'notice');
    expect(JSON.parse(notice.body.toString('utf8'))._data.endpoint_id).toBe(gone.id);
    expect((await producer.db.models.WebhookEndpoint.findByPk(gone.id))?.active).toBe(false);
    const [delivery] = (await deliveryRows(producer.db)).filter((row) => row.endpointId === gone.id);
    expect([delivery.status, delivery.attempts]).toEqual(['failed', 1]);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(receiver.requests.map((request) => request.path).sort()).toEqual(['/gone', '/operator']);
  });

  it('When a delivery’s endpoint was deleted, then it fails with "endpoint deleted" and is never sent, signed or not', async () => {
    const endpoint = await addEndpoint(producer.db, `${receiver.url}/deleted`);
    await recordEvent(producer, 'post.created');
    const [row] = await deliveryRows(producer.db);
    await producer.queue.obliterate({ force: true });
    await producer.db.models.WebhookEndpoint.destroy({ where: { id: endpoint.id } });
    running = startWorker(env.config, producer.db);

    await addDeliveryJobs(producer.queue, [{ deliveryId: row.id }]);

    const failed = await waitFor(async () => {
      await row.reload();
      return row.status === 'failed' && row;
    }, 5_000, 'failed');
    expect(failed.endpointId).toBeNull();
    expect(failed.lastError).toBe('endpoint deleted');
    expect(failed.attempts).toBe(0);
    expect(receiver.requests).toHaveLength(0);
  });

  it('When a delivery to a disabled endpoint is redelivered, then the worker does not send it', async () => {
    const endpoint = await addEndpoint(producer.db, `${receiver.url}/off`);
    running = startWorker(env.config, producer.db);
    await recordEvent(producer, 'post.created');
    const [row] = await waitFor(async () => {
      const rows = await deliveryRows(producer.db);
      return rows[0]?.status === 'succeeded' && rows;
    }, 5_000, 'first delivery');
    await producer.db.models.WebhookEndpoint.update({ active: false }, { where: { id: endpoint.id } });

    await redeliverWebhook(producer, row.id);

    await waitFor(async () => {
      await row.reload();
      return row.status === 'failed';
    }, 5_000, 'redelivery refused');
    expect(row.lastError).toBe('endpoint disabled');
    expect(row.attempts).toBe(1);
    expect(receiver.requests).toHaveLength(1);
  });

  it('When a redelivery’s job is lost with Redis, then the revived job still makes exactly one attempt', async () => {
    await addEndpoint(producer.db, `${receiver.url}/once`);
    receiver.setReply({ status: 500 });
    await recordEvent(producer, 'post.created');
    const [row] = await deliveryRows(producer.db);
    // A delivery that failed for good, then redelivered; Redis loses the redelivery's job.
    await producer.db.models.WebhookDelivery.update({ status: 'failed', attempts: 8 }, { where: { id: row.id } });
    await redeliverWebhook(producer, row.id);
    await producer.queue.obliterate({ force: true });
    await producer.connection.del(`${env.redisPrefix}:webhooks:outbox-sentinel`);

    const pass = await producer.outbox.relayOnce();
    expect(pass.swept).toBe(true);
    expect((await producer.queue.getJob(row.id))?.name).toBe('redeliver');
    running = startWorker(env.config, producer.db);

    await waitFor(async () => {
      await row.reload();
      return row.status === 'failed' && row.attempts === 9;
    }, 5_000, 'one more attempt');
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    await row.reload();
    expect(row.attempts).toBe(9);
    expect(row.status).toBe('failed');
    expect(receiver.requests).toHaveLength(1);
  });
});
