import type { AddressInfo } from 'node:net';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../services/api/src/app';
import { parseEnvelope } from '../../shared/webhook/signing';
import { createServiceKey, TestServiceKey } from '../api/support/operations';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { TestUser, createUser } from '../support/factories';
import { RecordedRequest, RecordingServer, startRecordingServer } from '../support/recording-server';
import { Producer, createProducer, startWorker } from '../worker/support/harness';
import { waitFor } from '../support/wait-for';

interface Answer {
  statusCode: number;
  json(): any;
}

const DELIVERY_KEYS = [
  'attempt_count',
  'created_at',
  'delivered_at',
  'endpoint_id',
  'event',
  'event_id',
  'id',
  'last_error',
  'last_status_code',
  'next_attempt_at',
  'status',
  'url',
];

/** The webhook routes of docs/design.md §6.2 and §11.1 over HTTP, against a real worker and receiver. */
describe('webhook routes', () => {
  let env: TestEnvironment;
  let producer: Producer;
  let receiver: RecordingServer;
  let worker: { close(): Promise<void> };
  let app: FastifyInstance;
  let operator: TestServiceKey;
  let alice: TestUser;
  let bob: TestUser;

  beforeAll(async () => {
    // The breaker would open after a few failures and postpone the failing deliveries here.
    env = await createTestEnvironment({ WEBHOOK_RETRY_SCHEDULE: '0.05', WEBHOOK_BREAKER_FAILURES: '1000' }, 'api');
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
    operator = await createServiceKey(producer.db, ['*']);
    alice = await createUser(producer.db);
    bob = await createUser(producer.db);
    receiver = await startRecordingServer();
    worker = startWorker(env.config, producer.db);
    app = buildApp({ ...env.config, apiLayout: 'a' }, { database: producer.db, queue: producer.queue });
    await app.listen({ host: '127.0.0.1', port: 0 });
  });

  afterEach(async () => {
    receiver.reset();
    receiver.setReply({});
    await producer.db.models.WebhookEndpoint.update({ active: false }, { where: {} });
  });

  afterAll(async () => {
    await app.close();
    await worker.close();
    await producer.queue.obliterate({ force: true });
    await producer.close();
    await receiver.close();
    await env.cleanup();
  });

  /** Calls the real Layout A api over HTTP with `headers` (a user's or a service key's). */
  async function call(method: string, path: string, headers: Record<string, string>, body?: unknown): Promise<Answer> {
    const { port } = app.server.address() as AddressInfo;
    const response = await fetch(`http://127.0.0.1:${port}${path}`, {
      method,
      headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { statusCode: response.status, json: () => JSON.parse(text) };
  }

  const post = (path: string, body?: unknown, headers = operator.headers) => call('POST', path, headers, body);
  const get = (path: string, headers = operator.headers) => call('GET', path, headers);
  const addEndpoint = async (headers: Record<string, string>, path: string, events: string[] = []) =>
    (await post('/api/v1/endpoints', { url: `${receiver.url}${path}`, events }, headers)).json() as { id: number; secret: string };
  const settled = (id: string, headers = operator.headers) =>
    waitFor(async () => {
      const got = (await get(`/api/v1/webhooks/${id}`, headers)).json();
      return (got.status === 'succeeded' || got.status === 'failed') && got;
    });

  it('When a service posts a webhook, then it gets 202 with the id, and GET shows the delivery and its attempts in the §11.1 shape', async () => {
    const response = await post('/api/v1/webhooks', {
      url: `${receiver.url}/hook`,
      event: 'invoice.paid',
      payload: { invoice: 12 },
      method: 'put',
      headers: { 'X-Source': 'billing' },
      secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    });

    expect(response.statusCode).toBe(202);
    const { id } = response.json();
    expect(id).toMatch(/^msg_/);
    const [request] = await receiver.waitForRequests(1);
    expect(request.method).toBe('PUT');
    expect(request.headers['webhook-id']).toBe(id);
    expect(request.headers['x-source']).toBe('billing');
    const view = await settled(id);
    expect(Object.keys(view).sort()).toEqual([...DELIVERY_KEYS, 'attempts'].sort());
    expect(view).toMatchObject({ id, endpoint_id: null, event: 'invoice.paid', status: 'succeeded', attempt_count: 1, last_status_code: 200 });
    expect(view.attempts).toEqual([
      { number: 1, url: `${receiver.url}/hook`, status_code: 200, error: null, duration_ms: expect.any(Number), response_excerpt: '{"ok":true}', created_at: expect.any(String) },
    ]);
  });

  it('When a user token or a key without webhooks:send posts a webhook or an event, then 403 names the scope', async () => {
    const reader = await createServiceKey(producer.db, ['webhooks:read']);
    const body = { url: `${receiver.url}/hook`, event: 'a.b', payload: { a: 1 }, secret: 's' };

    const byUser = await post('/api/v1/webhooks', body, alice.headers);
    const byUserInvalid = await post('/api/v1/webhooks', {}, alice.headers);
    const byReader = await post('/api/v1/webhooks', body, reader.headers);
    const eventByUser = await post('/api/v1/events', { event: 'post.created', payload: { a: 1 } }, alice.headers);

    expect([byUser.statusCode, byUser.json()]).toEqual([403, { status: 403, message: 'A service key with the scope webhooks:send is required.' }]);
    expect(byUserInvalid.statusCode).toBe(403);
    expect([byReader.statusCode, byReader.json()]).toEqual([403, { status: 403, message: 'This key lacks the scope webhooks:send.' }]);
    expect(eventByUser.statusCode).toBe(403);
  });

  it('When a send or an event is retried with the same Idempotency-Key, then the first answer comes back and nothing is sent twice', async () => {
    await addEndpoint(operator.headers, '/idempotent', ['post.created']);
    const webhook = { url: `${receiver.url}/once`, event: 'a.b', payload: { n: 1 }, secret: 's' };
    const keyed = (key: string) => ({ ...operator.headers, 'idempotency-key': key });

    const first = await post('/api/v1/webhooks', webhook, keyed('send-1'));
    const again = await post('/api/v1/webhooks', webhook, keyed('send-1'));
    const changed = await post('/api/v1/webhooks', { ...webhook, payload: { n: 2 } }, keyed('send-1'));
    const event = await post('/api/v1/events', { event: 'post.created', payload: { n: 1 } }, keyed('event-1'));
    const eventAgain = await post('/api/v1/events', { event: 'post.created', payload: { n: 1 } }, keyed('event-1'));

    expect([first.statusCode, again.statusCode, again.json()]).toEqual([202, 202, first.json()]);
    expect(changed.statusCode).toBe(409);
    expect([event.statusCode, eventAgain.json()]).toEqual([202, event.json()]);
    await receiver.waitForRequests(2);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(receiver.requests.map((request) => request.path).sort()).toEqual(['/idempotent', '/once']);
  });

  it('When the body is invalid or has no secret, then the answer is 400 with the reason', async () => {
    const responses = await Promise.all([
      post('/api/v1/webhooks', { url: 'ftp://example.com', event: 'a', payload: { a: 1 }, secret: 's' }),
      post('/api/v1/webhooks', { url: 'http://example.com', payload: { a: 1 }, secret: 's' }),
      post('/api/v1/webhooks', { url: 'http://example.com', event: 'a', payload: {}, secret: 's' }),
      post('/api/v1/webhooks', { url: 'http://example.com', event: 'a', payload: { a: 1 }, method: 'GET', secret: 's' }),
      post('/api/v1/webhooks', { url: 'http://example.com', event: 'a', payload: { a: 1 }, extra: true, secret: 's' }),
      post('/api/v1/webhooks', { url: 'http://example.com', event: 'a', payload: '{not json', secret: 's' }),
      post('/api/v1/webhooks', { url: 'http://example.com', event: 'a', payload: { a: 1 } }),
    ]);

    for (const response of responses) {
      expect(response.statusCode).toBe(400);
      expect(response.json()).toEqual({ status: 400, message: expect.any(String) });
    }
    expect(responses[1].json().message).toMatch(/event/);
    expect(responses[6].json().message).toMatch(/secret/);
  });

  it("When a user's post produces a post event, then their own endpoint and the operator's get it, and the user reads and redelivers only their own", async () => {
    await addEndpoint(operator.headers, '/ops', ['post.created']);
    const mine = await addEndpoint(alice.headers, '/alice');
    const theirs = await addEndpoint(bob.headers, '/bob');

    const created = await post('/api/v1/posts/create', { title: 'Owned event', body: 'text', userId: alice.user.userId }, alice.headers);

    expect(created.statusCode).toBe(200);
    const requests = await receiver.waitForRequests(2);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(receiver.requests.map((request) => request.path).sort()).toEqual(['/alice', '/ops']);
    const byPath = (path: string) => requests.find((request) => request.path === path) as RecordedRequest;
    const mineId = byPath('/alice').headers['webhook-id'] as string;
    const opsId = byPath('/ops').headers['webhook-id'] as string;
    const view = await settled(mineId, alice.headers);
    expect(view).toMatchObject({ id: mineId, endpoint_id: mine.id, event: 'post.created', status: 'succeeded', attempts: [{ number: 1, status_code: 200 }] });
    expect((await get(`/api/v1/webhooks/${opsId}`, alice.headers)).statusCode).toBe(404);
    expect((await get(`/api/v1/webhooks/${mineId}`, bob.headers)).statusCode).toBe(404);
    expect((await post(`/api/v1/webhooks/${opsId}/redeliver`, undefined, alice.headers)).statusCode).toBe(404);
    expect((await post(`/api/v1/webhooks/${mineId}/redeliver`, undefined, bob.headers)).statusCode).toBe(404);
    const listed = (await get('/api/v1/webhooks?event=post.created', alice.headers)).json();
    expect(listed.data.map((delivery: { id: string }) => delivery.id)).toEqual([mineId]);
    expect(theirs.id).toBeGreaterThan(0);

    receiver.reset();
    const redelivered = await post(`/api/v1/webhooks/${mineId}/redeliver`, undefined, alice.headers);
    expect([redelivered.statusCode, redelivered.json()]).toEqual([202, { id: mineId }]);
    const [again] = await receiver.waitForRequests(1);
    expect([again.path, again.headers['webhook-id']]).toEqual(['/alice', mineId]);
  });

  it('When a finished delivery is redelivered, then exactly one new attempt arrives with the same webhook-id, also after Redis lost the job; while pending it is 409', async () => {
    receiver.setReply({ status: 500 });
    const { id } = (await post('/api/v1/webhooks', { url: `${receiver.url}/hook`, event: 'a.b', payload: { n: 1 }, secret: 's' })).json();
    expect((await settled(id)).status).toBe('failed');
    await producer.queue.remove(id);
    receiver.reset();
    // The receiver holds the new attempt, so the delivery is still pending when the second redelivery asks.
    receiver.setReply({ status: 500, delayMs: 1000 });

    const redelivered = await post(`/api/v1/webhooks/${id}/redeliver`);
    const again = await post(`/api/v1/webhooks/${id}/redeliver`);

    expect([redelivered.statusCode, redelivered.json()]).toEqual([202, { id }]);
    expect(again.statusCode).toBe(409);
    const [request] = await receiver.waitForRequests(1);
    expect(request.headers['webhook-id']).toBe(id);
    const view = await settled(id);
    expect(view.attempts.map((attempt: { status_code: number }) => attempt.status_code)).toEqual([500, 500, 500]);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(receiver.requests).toHaveLength(1);
  });

  it('When the endpoint of a delivery is disabled, then redelivery is refused with 409', async () => {
    const endpoint = await addEndpoint(operator.headers, '/disabled', ['post.updated']);
    const { ids } = (await post('/api/v1/events', { event: 'post.updated', payload: { pid: 1 } })).json();
    await settled(ids[0]);
    await call('PATCH', `/api/v1/endpoints/${endpoint.id}`, operator.headers, { active: false });

    const refused = await post(`/api/v1/webhooks/${ids[0]}/redeliver`);

    expect([refused.statusCode, refused.json()]).toEqual([409, { status: 409, message: `Endpoint ${endpoint.id} is disabled; enable it first.` }]);
  });

  it("When a service fans an event out, then subscribed operator endpoints and, with user_id, that user's endpoints get it; unknown events are 400", async () => {
    const subscribed = await addEndpoint(operator.headers, '/ops-sub', ['post.deleted']);
    await addEndpoint(operator.headers, '/ops-other', ['post.created']);
    const mine = await addEndpoint(alice.headers, '/alice-all');
    await addEndpoint(bob.headers, '/bob-all');

    const operatorsOnly = await post('/api/v1/events', { event: 'post.deleted', payload: { pid: 9, uuid: 'u', user_id: 3 } });
    const withUser = await post('/api/v1/events', { event: 'post.deleted', payload: { pid: 9 }, user_id: alice.user.userId });
    const unknown = await post('/api/v1/events', { event: 'invoice.unknown', payload: { a: 1 } });

    expect(operatorsOnly.statusCode).toBe(202);
    expect(operatorsOnly.json().ids).toHaveLength(1);
    expect(withUser.json().ids).toHaveLength(2);
    expect([unknown.statusCode, unknown.json()]).toEqual([400, { status: 400, message: 'Unknown event type: invoice.unknown.' }]);
    const requests = await receiver.waitForRequests(3);
    expect(requests.map((request) => request.path).sort()).toEqual(['/alice-all', '/ops-sub', '/ops-sub']);
    const endpoints = await Promise.all(withUser.json().ids.map(async (id: string) => (await get(`/api/v1/webhooks/${id}`)).json().endpoint_id));
    expect(endpoints.sort()).toEqual([subscribed.id, mine.id].sort());
  });

  it('When an endpoint is tested, then a signed webhook.test delivery arrives; a disabled one is refused with 409', async () => {
    const endpoint = await addEndpoint(alice.headers, '/test-me', ['post.created']);

    const tested = await post(`/api/v1/endpoints/${endpoint.id}/test`, undefined, alice.headers);

    expect(tested.statusCode).toBe(202);
    const [request] = await receiver.waitForRequests(1);
    expect(request.headers['webhook-id']).toBe(tested.json().id);
    const envelope = parseEnvelope(request.body);
    expect([envelope.event, envelope.signable]).toEqual(['webhook.test', true]);
    expect(envelope.data).toMatchObject({ endpoint_id: endpoint.id, message: 'This is a test webhook.' });
    await call('PATCH', `/api/v1/endpoints/${endpoint.id}`, alice.headers, { active: false });
    expect((await post(`/api/v1/endpoints/${endpoint.id}/test`, undefined, alice.headers)).statusCode).toBe(409);
  });

  it('When an endpoint recovers after an outage, then its failed deliveries since the time get one new attempt each, with the same ids', async () => {
    const endpoint = await addEndpoint(operator.headers, '/outage', ['post.created']);
    receiver.setReply({ status: 503 });
    const before = new Date();
    const ids: string[] = [];
    for (let n = 0; n < 3; n += 1) ids.push(...(await post('/api/v1/events', { event: 'post.created', payload: { n } })).json().ids);
    for (const id of ids) expect((await settled(id)).status).toBe('failed');
    receiver.setReply({});
    receiver.reset();

    const later = await post(`/api/v1/endpoints/${endpoint.id}/recover`, { since: new Date(Date.now() + 60_000).toISOString() });
    const recovered = await post(`/api/v1/endpoints/${endpoint.id}/recover`, { since: before.toISOString() });
    const noSince = await post(`/api/v1/endpoints/${endpoint.id}/recover`, {});

    expect([later.statusCode, later.json()]).toEqual([202, { count: 0 }]);
    expect([recovered.statusCode, recovered.json()]).toEqual([202, { count: 3 }]);
    expect(noSince.statusCode).toBe(400);
    const requests = await receiver.waitForRequests(3);
    expect(requests.map((request) => request.headers['webhook-id']).sort()).toEqual([...ids].sort());
    for (const id of ids) expect((await settled(id)).status).toBe('succeeded');
  });

  it("When an endpoint's stats are read, then they count the last 24 h of attempts with latencies, last success and failure, and the circuit", async () => {
    const endpoint = await addEndpoint(alice.headers, '/stats', ['post.created']);
    const empty = (await get(`/api/v1/endpoints/${endpoint.id}/stats`, alice.headers)).json();
    receiver.replyOnce({ status: 500 });

    const { ids } = (await post('/api/v1/events', { event: 'post.created', payload: { n: 1 }, user_id: alice.user.userId })).json();
    await settled(ids[0], alice.headers);
    const stats = await get(`/api/v1/endpoints/${endpoint.id}/stats`, alice.headers);

    expect(empty).toEqual({
      attempts_24h: 0,
      success_rate_24h: null,
      p50_ms: null,
      p95_ms: null,
      last_success_at: null,
      last_failure_at: null,
      circuit: 'closed',
      disabled_reason: null,
      failing_since: null,
      consecutive_failures: null,
    });
    expect(stats.statusCode).toBe(200);
    const body = stats.json();
    // The 500 opened a failure episode, which the success closed.
    expect(body).toMatchObject({ attempts_24h: 2, success_rate_24h: 0.5, circuit: 'closed', disabled_reason: null, failing_since: null, consecutive_failures: null });
    expect(body.p50_ms).toBeGreaterThanOrEqual(0);
    expect(body.p95_ms).toBeGreaterThanOrEqual(body.p50_ms);
    expect(Date.parse(body.last_success_at)).toBeGreaterThan(Date.parse(body.last_failure_at));
    expect((await get(`/api/v1/endpoints/${endpoint.id}/stats`, bob.headers)).statusCode).toBe(404);
  });

  it('When post events, a test and an endpoint.disabled notice are sent, then each data validates against its event type schema in the catalog', async () => {
    const endpoint = await addEndpoint(alice.headers, '/schemas');
    await addEndpoint(operator.headers, '/notices', ['endpoint.disabled']);
    await addEndpoint(operator.headers, '/gone', ['post.created']);
    receiver.setReply((request) => (request.path === '/gone' ? { status: 410 } : {}));
    const catalog = (await get('/api/v1/event-types', alice.headers)).json().data as Array<{ name: string; schema: object }>;
    const ajv = addFormats(new Ajv({ strict: true, allErrors: true }));

    const created = (await post('/api/v1/posts/create', { title: 'Schema', body: 'checked', userId: alice.user.userId }, alice.headers)).json();
    const pid = created.item.postId;
    await call('PUT', `/api/v1/posts/update/${pid}`, alice.headers, { title: 'Schema 2' });
    await call('DELETE', `/api/v1/posts/delete/${pid}`, alice.headers);
    await post(`/api/v1/endpoints/${endpoint.id}/test`, undefined, alice.headers);

    await receiver.waitForRequests(6);
    const events = receiver.requests.filter((request) => request.path !== '/gone').map((request) => parseEnvelope(request.body));
    expect(events.map((envelope) => envelope.event).sort()).toEqual(['endpoint.disabled', 'post.created', 'post.deleted', 'post.updated', 'webhook.test']);
    for (const envelope of events) {
      const type = catalog.find((entry) => entry.name === envelope.event);
      const validate = ajv.compile(type!.schema);
      expect({ event: type!.name, valid: validate(envelope.data), errors: validate.errors ?? null }).toEqual({ event: type!.name, valid: true, errors: null });
    }
  });
});
