import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../services/api/src/app';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { TestUser, createUser } from '../support/factories';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { Producer, addEndpoint, createProducer, eventually, startWorker } from '../worker/support/harness';

interface Answer {
  statusCode: number;
  json(): any;
}

/** Calls the real Layout A api over HTTP as `user`, as another service would. */
async function call(app: FastifyInstance, method: string, path: string, user: TestUser, body?: unknown): Promise<Answer> {
  const { port } = app.server.address() as AddressInfo;
  const response = await fetch(`http://127.0.0.1:${port}${path}`, {
    method,
    headers: { ...user.headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { statusCode: response.status, json: () => JSON.parse(text) };
}

describe('webhook routes', () => {
  let env: TestEnvironment;
  let producer: Producer;
  let receiver: RecordingServer;
  let worker: { close(): Promise<void> };
  let app: FastifyInstance;
  let alice: TestUser;
  let bob: TestUser;

  beforeAll(async () => {
    env = await createTestEnvironment({ WEBHOOK_RETRY_SCHEDULE: '0.05' }, 'api');
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
    alice = await createUser(producer.db);
    bob = await createUser(producer.db);
    receiver = await startRecordingServer();
    worker = startWorker(env.config, producer.db);
    app = buildApp({ ...env.config, apiLayout: 'a' }, { database: producer.db, queue: producer.queue });
    await app.listen({ host: '127.0.0.1', port: 0 });
  });

  afterEach(() => {
    receiver.reset();
    receiver.setReply({});
  });

  afterAll(async () => {
    await app.close();
    await worker.close();
    await producer.queue.obliterate({ force: true });
    await producer.close();
    await receiver.close();
    await env.cleanup();
  });

  const post = (path: string, body?: unknown, user = alice) => call(app, 'POST', path, user, body);
  const get = (path: string, user = alice) => call(app, 'GET', path, user);

  it('When a service posts a webhook, then it gets 202 with the id, and GET shows the delivery and its attempts', async () => {
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
    const view = await eventually(async () => {
      const got = await get(`/api/v1/webhooks/${id}`);
      return got.json().status === 'succeeded' && got;
    });
    expect(view.statusCode).toBe(200);
    expect(view.json()).toMatchObject({
      id,
      event: 'invoice.paid',
      method: 'PUT',
      status: 'succeeded',
      lastStatusCode: 200,
      attempts: [{ number: 1, statusCode: 200, error: null, response: '{"ok":true}' }],
    });
  });

  it('When the body is invalid, then the answer is 400 with the reason', async () => {
    const responses = await Promise.all([
      post('/api/v1/webhooks', { url: 'ftp://example.com', event: 'a', payload: { a: 1 } }),
      post('/api/v1/webhooks', { url: 'http://example.com', payload: { a: 1 } }),
      post('/api/v1/webhooks', { url: 'http://example.com', event: 'a', payload: {} }),
      post('/api/v1/webhooks', { url: 'http://example.com', event: 'a', payload: { a: 1 }, method: 'GET' }),
      post('/api/v1/webhooks', { url: 'http://example.com', event: 'a', payload: { a: 1 }, extra: true }),
      post('/api/v1/webhooks', { url: 'http://example.com', event: 'a', payload: '{not json' }),
    ]);

    for (const response of responses) {
      expect(response.statusCode).toBe(400);
      expect(response.json()).toEqual({ status: 400, message: expect.any(String) });
    }
    expect(responses[1].json().message).toMatch(/event/);
  });

  it("When a user asks for an unknown delivery or another user's, then the answer is 404", async () => {
    const created = await post('/api/v1/webhooks', { url: `${receiver.url}/hook`, event: 'a.b', payload: [1] });
    const { id } = created.json();

    const unknown = await get('/api/v1/webhooks/msg_unknown');
    const foreign = await get(`/api/v1/webhooks/${id}`, bob);
    const foreignRedeliver = await post(`/api/v1/webhooks/${id}/redeliver`, undefined, bob);

    expect(unknown.statusCode).toBe(404);
    expect(foreign.statusCode).toBe(404);
    expect(foreignRedeliver.statusCode).toBe(404);
    expect(foreign.json()).toEqual({ status: 404, message: 'Webhook delivery not found.' });
  });

  it('When a finished delivery is redelivered, then one new attempt arrives with the same webhook-id; while pending it is 409', async () => {
    receiver.setReply({ status: 500 });
    const { id } = (await post('/api/v1/webhooks', { url: `${receiver.url}/hook`, event: 'a.b', payload: { n: 1 } })).json();
    await eventually(async () => {
      const got = await get(`/api/v1/webhooks/${id}`);
      return got.json().status === 'failed';
    });
    receiver.setReply({ status: 200 });
    receiver.reset();

    const redelivered = await post(`/api/v1/webhooks/${id}/redeliver`);
    const again = await post(`/api/v1/webhooks/${id}/redeliver`);

    expect(redelivered.statusCode).toBe(202);
    expect(redelivered.json()).toEqual({ id });
    expect(again.statusCode).toBe(409);
    const [request] = await receiver.waitForRequests(1);
    expect(request.headers['webhook-id']).toBe(id);
    const view = await eventually(async () => {
      const got = await get(`/api/v1/webhooks/${id}`);
      return got.json().status === 'succeeded' && got.json();
    });
    expect(view.attempts.map((a: { statusCode: number }) => a.statusCode)).toEqual([500, 500, 200]);
  });

  it("When a user's post produces a post event, then that user can read and redeliver its delivery; others cannot", async () => {
    const endpoint = await addEndpoint(producer.db, `${receiver.url}/posts`, { events: ['post.created'] });
    try {
      const created = await post('/api/v1/posts/create', { title: 'Owned event', body: 'text', userId: alice.user.userId });
      expect(created.statusCode).toBe(200);
      const [request] = await receiver.waitForRequests(1);
      const id = request.headers['webhook-id'] as string;

      const view = await eventually(async () => {
        const got = await get(`/api/v1/webhooks/${id}`);
        return got.json().status === 'succeeded' && got;
      });
      expect(view.json()).toMatchObject({ id, event: 'post.created', status: 'succeeded', attempts: [{ number: 1, statusCode: 200 }] });
      expect((await get(`/api/v1/webhooks/${id}`, bob)).statusCode).toBe(404);

      const redelivered = await post(`/api/v1/webhooks/${id}/redeliver`);
      expect(redelivered.statusCode).toBe(202);
      const [again] = await receiver.waitForRequests(2).then((requests) => requests.slice(1));
      expect(again.headers['webhook-id']).toBe(id);
    } finally {
      await producer.db.models.WebhookEndpoint.update({ active: false }, { where: { id: endpoint.id } });
    }
  });
});
