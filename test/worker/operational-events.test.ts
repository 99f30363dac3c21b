import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { QueryTypes } from 'sequelize';
import { Webhook } from 'standardwebhooks';
import type { Config } from '../../shared/config';
import { BUILT_IN_EVENT_TYPES } from '../../shared/operations';
import { enqueueWebhook } from '../../shared/deliveries/enqueue';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { createUser } from '../support/factories';
import { RecordedRequest, RecordingServer, startRecordingServer } from '../support/recording-server';
import { Producer, addEndpoint, buildPostData, createProducer, recordEvent, resetAndClose, startWorker } from './support/harness';
import { waitFor } from '../support/wait-for';

const WATCHER_SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const ENDPOINT_EVENTS = ['endpoint.failing', 'endpoint.recovered'];

/** The operational events of docs/design.md §6.6, end to end: a real receiver, the worker, Redis, PostgreSQL. */
describe('webhook worker: operational events (endpoint.failing, endpoint.recovered, delivery.exhausted)', () => {
  let env: TestEnvironment;
  let producer: Producer;
  let receiver: RecordingServer;
  const workers: ReturnType<typeof startWorker>[] = [];

  beforeAll(async () => {
    env = await createTestEnvironment(
      { WEBHOOK_RETRY_SCHEDULE: '0.2,0.2,0.2,0.2,0.2,0.2,0.2,0.2,0.2,0.2', WEBHOOK_BREAKER_FAILURES: '2' },
      'worker',
    );
  });

  beforeEach(async () => {
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
    receiver = await startRecordingServer();
  });

  afterEach(async () => {
    await Promise.all(workers.splice(0).map((worker) => worker.close()));
    await resetAndClose(producer);
    await receiver.close();
  });

  afterAll(async () => {
    await env.cleanup();
  });

  const start = (config: Partial<Config> = {}) => {
    const worker = startWorker({ ...env.config, ...config }, producer.db);
    workers.push(worker);
    return worker;
  };

  /** An endpoint of `userId` (null: an operator endpoint) at `path` of the receiver. */
  async function endpointAt(path: string, userId: number | null, events: string[]): Promise<number> {
    const { id } = await addEndpoint(producer.db, `${receiver.url}${path}`, { events, secret: WATCHER_SECRET });
    if (userId !== null) await producer.db.models.WebhookEndpoint.update({ userId }, { where: { id } });
    return id;
  }

  /** The operational events each path received, in arrival order, as `[path, event]`. */
  const noticesBy = (events: readonly string[]) =>
    receiver.requests
      .map((request) => [request, JSON.parse(request.body.toString('utf8')) as { _data: Record<string, unknown>; _config: Record<string, unknown> }] as const)
      .filter(([, body]) => events.includes(String(body._config['app.webhook.event'])))
      .map(([request, body]) => ({ path: request.path, event: String(body._config['app.webhook.event']), data: body._data, request }));

  const ajv = addFormats(new Ajv({ strict: true, allErrors: true }));
  /** The catalog's JSON Schema of `event` (GET /api/v1/event-types) accepts `data`: its errors, none when it does. */
  const schemaErrors = (event: string, data: unknown) => {
    const validate = ajv.compile(BUILT_IN_EVENT_TYPES.find((type) => type.name === event)!.schema!);
    return validate(data) ? [] : validate.errors;
  };

  const verified = (request: RecordedRequest) =>
    new Webhook(WATCHER_SECRET).verify(request.body.toString('utf8'), {
      'webhook-id': String(request.headers['webhook-id']),
      'webhook-timestamp': String(request.headers['webhook-timestamp']),
      'webhook-signature': String(request.headers['webhook-signature']),
    });

  /** Redis loses everything of this test's prefix: circuits, leases and queued jobs (the relay revives the jobs). */
  async function flushRedis(): Promise<void> {
    const keys = await producer.connection.keys(`${env.redisPrefix}:*`);
    if (keys.length > 0) await producer.connection.del(...keys);
  }

  const circuitOpen = async (endpointId: number) =>
    (await producer.connection.hget(`${env.redisPrefix}:webhooks:circuit:e:${endpointId}`, 'until')) !== null;

  /** The leases of the endpoint's attempts in flight (shared/queue circuitKeys, one partition). */
  const leasesOf = (endpointId: number) => `${env.redisPrefix}:webhooks:leases:e:${endpointId}`;

  const episodeOf = async (endpointId: number) =>
    (await producer.db.models.WebhookEndpoint.findByPk(endpointId))!;

  it('When a user’s receiver fails and then recovers, then the operator and that user’s endpoints subscribed by name get one endpoint.failing and one endpoint.recovered, and the endpoint itself and empty lists none', async () => {
    const { user: alice } = await createUser(producer.db);
    const { user: bob } = await createUser(producer.db);
    const flaky = await endpointAt('/alice-flaky', alice.userId, ['post.created', ...ENDPOINT_EVENTS]);
    await endpointAt('/operator', null, ENDPOINT_EVENTS);
    await endpointAt('/operator-every-event', null, []);
    await endpointAt('/alice-watch', alice.userId, ENDPOINT_EVENTS);
    await endpointAt('/alice-every-event', alice.userId, []);
    await endpointAt('/bob-watch', bob.userId, ENDPOINT_EVENTS);
    let healthy = false;
    receiver.setReply((request) => (request.path === '/alice-flaky' && !healthy ? { status: 503, body: 'down for maintenance' } : { status: 200 }));
    start();

    await recordEvent(producer, 'post.created', buildPostData({ user_id: alice.userId, pid: 1 }));
    await recordEvent(producer, 'post.created', buildPostData({ user_id: alice.userId, pid: 2 }));

    await waitFor(() => noticesBy(['endpoint.failing']).length >= 2, 15_000, 'endpoint.failing');
    const failing = await episodeOf(flaky);
    expect(failing.episodeId).toMatch(/^epi_/);
    expect(failing.consecutiveFailures).toBeGreaterThanOrEqual(2);

    // Healthy again, and Redis forgets the circuit (with no attempt in flight to open it again):
    // the next attempt ends the episode.
    await waitFor(async () => (await producer.connection.zcard(leasesOf(flaky))) === 0, 5_000, 'no attempt in flight');
    healthy = true;
    await flushRedis();
    await recordEvent(producer, 'post.created', buildPostData({ user_id: alice.userId, pid: 3 }));
    await waitFor(() => noticesBy(['endpoint.recovered']).length >= 2, 15_000, 'endpoint.recovered');
    await waitFor(async () => (await episodeOf(flaky)).episodeId === null, 5_000, 'episode closed');
    await new Promise((resolve) => setTimeout(resolve, 500));

    const notices = noticesBy(ENDPOINT_EVENTS);
    expect(notices.map(({ path, event }) => [path, event]).sort()).toEqual([
      ['/alice-watch', 'endpoint.failing'],
      ['/alice-watch', 'endpoint.recovered'],
      ['/operator', 'endpoint.failing'],
      ['/operator', 'endpoint.recovered'],
    ]);
    const failingNotice = notices.find((notice) => notice.path === '/operator' && notice.event === 'endpoint.failing')!;
    expect(verified(failingNotice.request)).toEqual({ _data: failingNotice.data, _config: { 'app.webhook.event': 'endpoint.failing', 'app.webhook.signable': 1 } });
    expect(failingNotice.data).toEqual({
      endpoint_id: flaky,
      url: `${receiver.url}/alice-flaky`,
      user_id: alice.userId,
      reason: expect.stringMatching(/^circuit opened after \d+ consecutive failed attempts$/),
      failing_since: failing.failingSince!.toISOString(),
      consecutive_failures: expect.any(Number),
      last_status_code: 503,
      last_error: null,
      occurred_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT[\d:.]+Z$/),
      episode_id: failing.episodeId,
    });
    for (const notice of notices) expect(schemaErrors(notice.event, notice.data)).toEqual([]);
    const recovered = notices.find((notice) => notice.path === '/alice-watch' && notice.event === 'endpoint.recovered')!;
    expect(recovered.data).toMatchObject({
      endpoint_id: flaky,
      user_id: alice.userId,
      reason: 'attempt succeeded with HTTP 200',
      failing_since: failing.failingSince!.toISOString(),
      last_status_code: 503,
      episode_id: failing.episodeId,
    });
    // Through the ordinary path: an operational event row and logged deliveries.
    const rows = await producer.db.sequelize.query<{ kind: string; event: string; deliveries: number }>(
      `SELECT ev.kind, ev.event, count(d.id)::int AS deliveries FROM webhook_events ev JOIN webhook_deliveries d ON d.event_id = ev.id
        WHERE ev.event LIKE 'endpoint.%' GROUP BY ev.id, ev.kind, ev.event ORDER BY ev.event`,
      { type: QueryTypes.SELECT },
    );
    expect(rows).toEqual([
      { kind: 'operational', event: 'endpoint.failing', deliveries: 2 },
      { kind: 'operational', event: 'endpoint.recovered', deliveries: 2 },
    ]);
  });

  it('When two workers share a failing endpoint and Redis loses its circuits twice, then each watcher gets exactly one endpoint.failing and one endpoint.recovered per episode', async () => {
    const flaky = await endpointAt('/flaky', null, ['post.created']);
    await endpointAt('/watch', null, ENDPOINT_EVENTS);
    let healthy = false;
    receiver.setReply((request) => (request.path === '/flaky' && !healthy ? { status: 500 } : { status: 200 }));
    start();
    start();
    for (let pid = 1; pid <= 20; pid += 1) await recordEvent(producer, 'post.created', buildPostData({ pid }));
    await waitFor(() => noticesBy(['endpoint.failing']).length === 1, 15_000, 'endpoint.failing');
    const { episodeId } = await episodeOf(flaky);

    // Redis forgets the open circuit: the revived jobs fail again and open it again, in the same episode.
    await flushRedis();
    // Open again, with no attempt in flight (no lease held) whose release could open it a third time.
    await waitFor(async () => (await circuitOpen(flaky)) && (await producer.connection.zcard(leasesOf(flaky))) === 0, 15_000, 'the circuit to open again');
    expect((await episodeOf(flaky)).consecutiveFailures).toBeGreaterThan(2);
    // Healthy, and Redis empty again: 20 successes, across both workers, end the episode together.
    healthy = true;
    await flushRedis();
    await waitFor(async () => {
      const [{ left }] = await producer.db.sequelize.query<{ left: number }>(
        `SELECT count(*)::int AS left FROM webhook_deliveries WHERE endpoint_id = $1 AND status <> 'succeeded'`,
        { bind: [flaky], type: QueryTypes.SELECT },
      );
      return left === 0;
    }, 20_000, 'every delivery to the flaky endpoint succeeded');
    await waitFor(() => noticesBy(['endpoint.recovered']).length >= 1, 10_000, 'endpoint.recovered');
    await new Promise((resolve) => setTimeout(resolve, 500));

    expect(noticesBy(ENDPOINT_EVENTS).map(({ path, event, data }) => [path, event, data.episode_id])).toEqual([
      ['/watch', 'endpoint.failing', episodeId],
      ['/watch', 'endpoint.recovered', episodeId],
    ]);
    expect(await episodeOf(flaky)).toMatchObject({ episodeId: null, failingSince: null, consecutiveFailures: 0, episodeEvents: [] });

    // Over time: failing again is a new episode, with its own notice.
    healthy = false;
    await recordEvent(producer, 'post.created', buildPostData({ pid: 21 }));
    await recordEvent(producer, 'post.created', buildPostData({ pid: 22 }));
    await waitFor(() => noticesBy(['endpoint.failing']).length === 2, 15_000, 'a second endpoint.failing');
    const second = noticesBy(['endpoint.failing'])[1].data;
    expect(second.episode_id).toMatch(/^epi_/);
    expect(second.episode_id).not.toBe(episodeId);
  });

  it('When a delivery uses every attempt, then delivery.exhausted goes out once, to the operator and the owner’s endpoints subscribed by name and never to the endpoint itself', async () => {
    const { user: alice } = await createUser(producer.db);
    const failing = await endpointAt('/alice-down', alice.userId, ['post.created', 'delivery.exhausted']);
    await endpointAt('/operator', null, ['delivery.exhausted']);
    await endpointAt('/operator-every-event', null, []);
    await endpointAt('/alice-watch', alice.userId, ['delivery.exhausted']);
    receiver.setReply((request) => (request.path === '/alice-down' ? { status: 502 } : { status: 200 }));
    start({ webhookRetrySchedule: [0.1, 0.1], webhookBreakerFailures: 1000 });

    await recordEvent(producer, 'post.created', buildPostData({ user_id: alice.userId }));

    await waitFor(() => noticesBy(['delivery.exhausted']).length >= 2, 15_000, 'delivery.exhausted');
    await new Promise((resolve) => setTimeout(resolve, 500));
    const notices = noticesBy(['delivery.exhausted']);
    expect(notices.map(({ path }) => path).sort()).toEqual(['/alice-watch', '/operator']);
    const [delivery] = await producer.db.models.WebhookDelivery.findAll({ where: { endpointId: failing } });
    expect(delivery.status).toBe('failed');
    expect(notices[0].data).toEqual({
      delivery_id: delivery.id,
      endpoint_id: failing,
      event: 'post.created',
      attempt_count: 3,
      last_status_code: 502,
      last_error: null,
      occurred_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT[\d:.]+Z$/),
      episode_id: (await episodeOf(failing)).episodeId,
    });
    expect(verified(notices[0].request)).toMatchObject({ _config: { 'app.webhook.event': 'delivery.exhausted' } });
    expect(schemaErrors('delivery.exhausted', notices[0].data)).toEqual([]);
  });

  it('When a delivery of an operational event is exhausted, then it emits nothing more, and an ad-hoc delivery’s exhaustion goes to operator endpoints only', async () => {
    const { user: alice } = await createUser(producer.db);
    await endpointAt('/down', null, ['post.created']);
    // Both watchers fail too: their delivery.exhausted deliveries end failed, and announce nothing.
    await endpointAt('/watch-down', null, ['delivery.exhausted']);
    await endpointAt('/watch-down-too', null, ['delivery.exhausted']);
    await endpointAt('/alice-watch', alice.userId, ['delivery.exhausted']);
    receiver.setReply((request) => (request.path === '/alice-watch' ? { status: 200 } : { status: 500 }));
    start({ webhookRetrySchedule: [0.1, 0.1], webhookBreakerFailures: 1000 });

    await recordEvent(producer, 'post.created', buildPostData({ user_id: alice.userId }));
    await enqueueWebhook({ url: `${receiver.url}/ad-hoc`, event: 'invoice.paid', payload: { id: 1 }, secret: WATCHER_SECRET, userId: alice.userId }, producer);

    const settled = async () => {
      const [{ open }] = await producer.db.sequelize.query<{ open: number }>(
        `SELECT count(*)::int AS open FROM webhook_deliveries WHERE status IN ('pending', 'delivering')`,
        { type: QueryTypes.SELECT },
      );
      return open === 0;
    };
    await waitFor(async () => noticesBy(['delivery.exhausted']).length >= 12 && (await settled()), 20_000, 'every delivery ended');
    await new Promise((resolve) => setTimeout(resolve, 500));

    const events = await producer.db.sequelize.query<{ about: string; deliveries: string[] }>(
      `SELECT ev.body::jsonb -> '_data' ->> 'event' AS about, array_agg(ep.url ORDER BY ep.url) AS deliveries
         FROM webhook_events ev JOIN webhook_deliveries d ON d.event_id = ev.id JOIN webhook_endpoints ep ON ep.id = d.endpoint_id
        WHERE ev.event = 'delivery.exhausted' GROUP BY ev.id, ev.body ORDER BY about`,
      { type: QueryTypes.SELECT },
    );
    expect(events).toEqual([
      { about: 'invoice.paid', deliveries: [`${receiver.url}/watch-down`, `${receiver.url}/watch-down-too`] },
      { about: 'post.created', deliveries: [`${receiver.url}/watch-down`, `${receiver.url}/watch-down-too`] },
    ]);
    for (const notice of noticesBy(['delivery.exhausted'])) expect(schemaErrors('delivery.exhausted', notice.data)).toEqual([]);
    const failedNotices = await producer.db.sequelize.query<{ failed: number }>(
      `SELECT count(*)::int AS failed FROM webhook_deliveries WHERE event = 'delivery.exhausted' AND status = 'failed' AND attempts = 3`,
      { type: QueryTypes.SELECT },
    );
    expect(failedNotices).toEqual([{ failed: 4 }]);
  });
});
