import { type Server, type Socket, connect, createServer } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { EncryptionError, InvalidWebhookError, LogicError, WebhookRequest, createWebhookProducer, deriveSecret, verifyHex } from '../../shared';
import { type TestEnvironment, createTestEnvironment } from '../support/environment';
import { type RecordedRequest, type RecordingServer, startRecordingServer } from '../support/recording-server';
import { createProducer, type Producer, resetAndClose, startWorker } from '../worker/support/harness';
import { waitFor } from '../support/wait-for';

const VECTOR_BODY =
  '{"_data":{"status":"OK","user":{"id":42,"email":"user@example.com"}},"_config":{"app.webhook.event":"user.registered","app.webhook.signable":1}}';

describe('WebhookRequest.enqueue()', () => {
  let env: TestEnvironment;
  let producer: Producer;
  let receiver: RecordingServer;
  let running: ReturnType<typeof startWorker>;

  beforeAll(async () => {
    env = await createTestEnvironment({ WEBHOOK_RETRY_SCHEDULE: '0.05' }, 'worker');
  });

  beforeEach(async () => {
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
    receiver = await startRecordingServer();
    running = startWorker(env.config, producer.db);
  });

  afterEach(async () => {
    await running.close();
    await resetAndClose(producer);
    await receiver.close();
  });

  afterAll(async () => {
    await env.cleanup();
  });

  /** Standard Webhooks verification by the reference library; a secret without `whsec_` is its UTF-8 bytes (docs/design.md §7). */
  function verifiesStandard(request: RecordedRequest, secret: string): unknown {
    return new Webhook(Buffer.from(secret, 'utf8'), { format: 'raw' }).verify(request.body.toString('utf8'), {
      'webhook-id': String(request.headers['webhook-id']),
      'webhook-timestamp': String(request.headers['webhook-timestamp']),
      'webhook-signature': String(request.headers['webhook-signature']),
    });
  }

  it('When enqueued with an explicit producer, then the worker delivers the exact envelope under the returned webhook-id, signed with the secret', async () => {
    const hook = new WebhookRequest(`${receiver.url}/users`)
      .setHeaders({ 'X-Tenant': 'acme' })
      .setPayload({ status: 'OK', user: { id: 42, email: 'user@example.com' } })
      .setEvent('user.registered')
      .sign('your-shared-secret');

    const id = await hook.enqueue(producer);

    const [request] = await receiver.waitForRequests(1);
    expect(id).toMatch(/^msg_/);
    expect(hook.getWebhookId()).toBe(id);
    expect(request.method).toBe('POST');
    expect(request.path).toBe('/users');
    expect(request.body.toString('utf8')).toBe(VECTOR_BODY);
    expect(request.headers['webhook-id']).toBe(id);
    expect(request.headers['x-tenant']).toBe('acme');
    expect(hook.getSecret()).toBe('your-shared-secret');
    expect(request.headers['x-signature']).toBe('7a578c485cdeedd8e4f2ebf78d8e944abd81ef08cacff81f53e4104f539ac9a0');
    expect(verifiesStandard(request, 'your-shared-secret')).toEqual(JSON.parse(VECTOR_BODY));
    const delivery = await producer.db.models.WebhookDelivery.findByPk(id, { rejectOnEmpty: true });
    await waitFor(async () => (await delivery.reload()).status === 'succeeded', 5_000, 'succeeded');
  });

  it('When the method, algo and signature header are set, then the worker uses them', async () => {
    const hook = new WebhookRequest(`${receiver.url}/in`, 'put')
      .setPayload('{"a": [1, "/ü"]}')
      .setEvent('x.changed')
      .setAlgo('sha512')
      .setSignatureHeader('X-Hub-Signature')
      .setSecret('s3cret');

    const id = await hook.enqueue(producer);

    const [request] = await receiver.waitForRequests(1);
    expect(request.method).toBe('PUT');
    expect(request.headers['webhook-id']).toBe(id);
    expect(request.body.toString('utf8')).toBe('{"_data":{"a":[1,"/ü"]},"_config":{"app.webhook.event":"x.changed","app.webhook.signable":1}}');
    expect(request.headers['x-signature']).toBeUndefined();
    expect(verifyHex(request.body, 's3cret', request.headers['x-hub-signature'], 'sha512')).toBe(true);
  });

  it('When neither sign() nor a secret was used, then the body is still signed, with the secret derived from the caller\'s app key that getSecret() returns', async () => {
    // The worker's APP_KEY differs: the caller's derived secret must travel with the delivery.
    const hook = new WebhookRequest(`${receiver.url}/in`, 'POST', 0, { appKey: 'caller-app-key-0123456789', salt: 'caller-salt' })
      .setPayload({ n: 1 })
      .setEvent('n.created');
    expect(hook.getSecret()).toBeNull();

    const id = await hook.enqueue(producer);

    const secret = deriveSecret('caller-app-key-0123456789', 'caller-salt');
    expect(secret).not.toBe(deriveSecret(env.config.appKey, env.config.webhookSalt));
    expect(hook.getSecret()).toBe(secret);
    const [request] = await receiver.waitForRequests(1);
    expect(request.headers['webhook-id']).toBe(id);
    expect(request.body.toString('utf8')).toBe('{"_data":{"n":1},"_config":{"app.webhook.event":"n.created","app.webhook.signable":1}}');
    expect(verifyHex(request.body, secret, request.headers['x-signature'])).toBe(true);
    expect(WebhookRequest.listen(String(request.headers['x-signature']), 'n.*').setSecret(secret).unpack(null, request.body)).toEqual({ n: 1 });
  });

  it('When no producer is given, then one default producer from the environment is reused, and closeDefaultProducer() closes it', async () => {
    const saved = { DATABASE_URL: process.env.DATABASE_URL, REDIS_URL: process.env.REDIS_URL, REDIS_PREFIX: process.env.REDIS_PREFIX };
    Object.assign(process.env, { DATABASE_URL: env.databaseUrl, REDIS_URL: env.redisUrl, REDIS_PREFIX: env.redisPrefix });
    try {
      const ids = [];
      for (const n of [1, 2]) {
        ids.push(await new WebhookRequest(`${receiver.url}/in`).setPayload({ n }).setEvent('n.created').sign('s').enqueue());
      }

      const requests = await receiver.waitForRequests(2);
      expect(new Set(requests.map((request) => request.headers['webhook-id']))).toEqual(new Set(ids));
    } finally {
      await WebhookRequest.closeDefaultProducer();
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
    await expect(WebhookRequest.closeDefaultProducer()).resolves.toBeUndefined();
  });

  it('When a fresh producer from createWebhookProducer reaches Redis slowly, then its first enqueue waits for it instead of leaving the job to the relay', async () => {
    const slow = await startSlowProxy(new URL(env.redisUrl), 300);
    const own = createWebhookProducer({ ...env.config, redisUrl: slow.url });
    try {
      const id = await new WebhookRequest(`${receiver.url}/in`).setPayload({ n: 1 }).setEvent('n.created').enqueue(own);

      const delivery = await producer.db.models.WebhookDelivery.findByPk(id, { rejectOnEmpty: true });
      expect(delivery.enqueuedAt).not.toBeNull();
      const [request] = await receiver.waitForRequests(1);
      expect(request.headers['webhook-id']).toBe(id);
    } finally {
      await own.close();
      await slow.close();
    }
  });

  it.each([
    ['no event', (hook: WebhookRequest) => hook.setPayload({ a: 1 }), LogicError],
    ['an empty payload', (hook: WebhookRequest) => hook.setEvent('x.y'), EncryptionError],
    ['a raw payload that is not JSON', (hook: WebhookRequest) => hook.setEvent('x.y').setPayload('{"a":'), EncryptionError],
    ['GET', (hook: WebhookRequest) => hook.setEvent('x.y').setPayload({ a: 1 }).setMethod('GET'), InvalidWebhookError],
  ])('When it has %s, then enqueue() throws and nothing is stored', async (_name, build, error) => {
    await expect(build(new WebhookRequest(`${receiver.url}/in`).sign('s')).enqueue(producer)).rejects.toBeInstanceOf(error);
    expect(await producer.db.models.WebhookDelivery.count()).toBe(0);
  });

  it('When the URL is not http(s), then InvalidWebhookError and nothing is stored', async () => {
    const hook = new WebhookRequest('ftp://example.com/in').setPayload({ a: 1 }).setEvent('x.y').sign('s');
    await expect(hook.enqueue(producer)).rejects.toBeInstanceOf(InvalidWebhookError);
    expect(await producer.db.models.WebhookDelivery.count()).toBe(0);
  });

  it('When called on a listening instance, then LogicError', async () => {
    await expect(WebhookRequest.listen('abc').enqueue(producer)).rejects.toBeInstanceOf(LogicError);
  });
});

/** A TCP proxy on 127.0.0.1 that connects each client to `target` only after `delayMs`; its URL keeps target's credentials and path. */
async function startSlowProxy(target: URL, delayMs: number): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const server: Server = createServer((client) => {
    sockets.add(client);
    client.on('error', () => undefined);
    const timer = setTimeout(() => {
      timers.delete(timer);
      const upstream = connect(Number(target.port || 6379), target.hostname);
      sockets.add(upstream);
      upstream.on('error', () => client.destroy());
      client.pipe(upstream).pipe(client);
    }, delayMs);
    timers.add(timer);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(target);
  url.hostname = '127.0.0.1';
  url.port = String((server.address() as { port: number }).port);
  return {
    url: url.toString(),
    async close() {
      for (const timer of timers) clearTimeout(timer);
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
