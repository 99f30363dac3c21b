import { Writable } from 'node:stream';
import pino from 'pino';
import type { Config } from '../../shared/config';
import { createEgressProxy } from '../../services/webhook-worker/src/destinations/http/egress-proxy';
import { createWebhookWorker } from '../../services/webhook-worker/src/worker';
import { readCircuitState } from '../../shared/endpoint-gate';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { ForwardProxy, startForwardProxy } from '../support/forward-proxy';
import { freePort } from '../support/processes';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { TEST_TLS, trustTestCertificate } from '../support/tls-fixture';
import { addEndpoint, createProducer, deliveryRows, Producer, recordEvent, resetAndClose, startWorker } from './support/harness';
import { waitFor } from '../support/wait-for';

/** The proxy's password as the operator writes it in WEBHOOK_PROXY_URL (`p@ss w0rd`, percent-encoded). */
const PASSWORD = 'p%40ss%20w0rd';
const CREDENTIALS = 'egress:p@ss w0rd';

describe('WEBHOOK_NO_PROXY entries', () => {
  const goesThroughProxy = (noProxy: string[], url: string) => {
    const proxy = createEgressProxy({ url: 'http://127.0.0.1:9', noProxy, maxSockets: 1 });
    try {
      return proxy.applies(new URL(url));
    } finally {
      proxy.close();
    }
  };

  it.each([
    [['hooks.example'], 'https://hooks.example/in', false],
    [['hooks.example'], 'https://eu.HOOKS.example/in', false],
    [['.hooks.example'], 'https://eu.hooks.example/in', false],
    [['hooks.example'], 'https://myhooks.example/in', true],
    [['hooks.example'], 'https://hooks.example.evil.example/in', true],
    [['10.0.0.0/8'], 'http://10.1.2.3:8080/in', false],
    [['10.0.0.0/8'], 'http://11.1.2.3/in', true],
    [['fd00::/8'], 'http://[fd00::5]/in', false],
    [['192.0.2.7'], 'http://192.0.2.7/in', false],
    [['*'], 'https://anything.example/in', false],
    [[], 'https://anything.example/in', true],
  ])('when WEBHOOK_NO_PROXY is %j, then %s goes through the proxy: %s', (noProxy, url, proxied) => {
    expect(goesThroughProxy(noProxy, url)).toBe(proxied);
  });
});

describe('webhook worker: egress proxy (WEBHOOK_PROXY_URL, WEBHOOK_NO_PROXY)', () => {
  let env: TestEnvironment;
  let producer: Producer;
  let receiver: RecordingServer;
  let proxy: ForwardProxy | undefined;
  let running: { close(): Promise<void> } | undefined;
  let restoreCAs: () => void;

  beforeAll(async () => {
    env = await createTestEnvironment({ WEBHOOK_RETRY_SCHEDULE: '0.05', WEBHOOK_TIMEOUT_MS: '3000' }, 'worker');
    restoreCAs = trustTestCertificate();
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
    await proxy?.close();
    proxy = undefined;
  });

  afterAll(async () => {
    restoreCAs();
    await env.cleanup();
  });

  const run = (overrides: Partial<Config>) => {
    running = startWorker({ ...env.config, ...overrides }, producer.db);
  };

  const settled = (count: number) =>
    waitFor(
      async () => {
        const rows = await deliveryRows(producer.db);
        return rows.length === count && rows.every((row) => row.status === 'succeeded' || row.status === 'failed') && rows;
      },
      10_000,
      `${count} settled deliveries`,
    );

  it('when WEBHOOK_PROXY_URL is set, then every http delivery reaches the proxy in absolute form and arrives with its exact bytes', async () => {
    proxy = await startForwardProxy();
    await addEndpoint(producer.db, `${receiver.url}/hooks/proxied?tenant=7`);
    run({ webhookProxyUrl: proxy.url });

    await recordEvent(producer, 'post.created');
    await recordEvent(producer, 'post.updated');
    await recordEvent(producer, 'post.deleted');

    const received = await receiver.waitForRequests(3);
    const rows = await settled(3);
    expect(rows.map((row) => row.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    expect(proxy.requests).toEqual(
      rows.map(() => ({ method: 'POST', target: `${receiver.url}/hooks/proxied?tenant=7`, proxyAuthorization: null })),
    );
    // The proxy forwarded them (it adds Via, RFC 9110 §7.6.3); the bodies are the signed bytes.
    expect(received.every((request) => /1\.1 .*\(proxy\//.test(String(request.headers.via)))).toBe(true);
    expect(received.map((request) => request.body.toString('utf8')).sort()).toEqual(rows.map((row) => row.body).sort());
    expect(received.map((request) => request.headers['webhook-id']).sort()).toEqual(rows.map((row) => row.id).sort());
  });

  it('when the endpoint is https, then the worker tunnels through the proxy with CONNECT and TLS runs end to end to the receiver', async () => {
    proxy = await startForwardProxy();
    const secure = await startRecordingServer({}, { tls: TEST_TLS });
    try {
      await addEndpoint(producer.db, `https://localhost:${secure.port}/hooks/tls`);
      run({ webhookProxyUrl: proxy.url });

      await recordEvent(producer, 'post.created');

      const [request] = await secure.waitForRequests(1);
      const [delivery] = await settled(1);
      expect(delivery.status).toBe('succeeded');
      expect(request.path).toBe('/hooks/tls');
      expect(request.body.toString('utf8')).toBe(delivery.body);
      expect(request.headers['webhook-id']).toBe(delivery.id);
      // Inside the tunnel the proxy sees nothing of the request: no Via, only the CONNECT.
      expect(request.headers.via).toBeUndefined();
      expect(proxy.requests).toEqual([{ method: 'CONNECT', target: `localhost:${secure.port}`, proxyAuthorization: null }]);
    } finally {
      await secure.close();
    }
  });

  it.each([
    ['a hostname', ['localhost'], (port: number) => `http://localhost:${port}`, (port: number) => `http://127.0.0.1:${port}`],
    ['a CIDR', ['10.0.0.0/8', '127.0.0.0/8'], (port: number) => `http://127.0.0.1:${port}`, (port: number) => `http://localhost:${port}`],
  ])('when WEBHOOK_NO_PROXY lists %s, then the deliveries it matches go directly and only the others pass through the proxy', async (_kind, noProxy, directBase, proxiedBase) => {
    proxy = await startForwardProxy();
    const direct = await startRecordingServer();
    try {
      await addEndpoint(producer.db, `${directBase(direct.port)}/hooks/direct`);
      await addEndpoint(producer.db, `${proxiedBase(receiver.port)}/hooks/proxied`);
      run({ webhookProxyUrl: proxy.url, webhookNoProxy: noProxy });

      await recordEvent(producer, 'post.created');

      expect((await settled(2)).map((row) => row.status)).toEqual(['succeeded', 'succeeded']);
      expect(direct.requests.map((request) => [request.path, request.headers.via])).toEqual([['/hooks/direct', undefined]]);
      expect(receiver.requests.map((request) => request.path)).toEqual(['/hooks/proxied']);
      expect(proxy.requests).toEqual([{ method: 'POST', target: `${proxiedBase(receiver.port)}/hooks/proxied`, proxyAuthorization: null }]);
    } finally {
      await direct.close();
    }
  });

  it('when the proxy URL has credentials, then the proxy gets them as Basic Proxy-Authorization and no attempt row or log line holds them', async () => {
    proxy = await startForwardProxy({ credentials: CREDENTIALS });
    const secure = await startRecordingServer({}, { tls: TEST_TLS });
    const { log, logger } = capturedLog();
    try {
      await addEndpoint(producer.db, `${receiver.url}/hooks/plain`);
      await addEndpoint(producer.db, `https://localhost:${secure.port}/hooks/tls`);
      const worker = createWebhookWorker({
        config: { ...env.config, webhookProxyUrl: `http://egress:${PASSWORD}@127.0.0.1:${proxy.port}` },
        db: producer.db,
        logger,
      });
      running = { close: async () => void (await worker.close(5_000)) };

      await recordEvent(producer, 'post.created');

      const rows = await settled(2);
      expect(rows.map((row) => row.status)).toEqual(['succeeded', 'succeeded']);
      const basic = `Basic ${Buffer.from(CREDENTIALS).toString('base64')}`;
      expect(proxy.requests.map((request) => [request.method, request.proxyAuthorization]).sort()).toEqual([
        ['CONNECT', basic],
        ['POST', basic],
      ]);
      // A hop-by-hop header: the receivers never see it.
      expect(receiver.requests[0].headers['proxy-authorization']).toBeUndefined();
      expect(secure.requests[0].headers['proxy-authorization']).toBeUndefined();
      await expectNoCredentials(log);
    } finally {
      await secure.close();
    }
  });

  it("when the proxy refuses the worker's credentials (407), then no attempt is used, the circuit stays closed, the log says so at error level, and the deliveries go once the credentials are right", async () => {
    proxy = await startForwardProxy({ credentials: CREDENTIALS });
    const secure = await startRecordingServer({}, { tls: TEST_TLS });
    const { log, logger } = capturedLog();
    const runWith = (password: string) => {
      const worker = createWebhookWorker({
        config: { ...env.config, webhookBreakerFailures: 1, webhookProxyUrl: `http://egress:${password}@127.0.0.1:${proxy!.port}` },
        db: producer.db,
        logger,
      });
      running = { close: async () => void (await worker.close(5_000)) };
    };
    try {
      const plain = await addEndpoint(producer.db, `${receiver.url}/hooks/plain`);
      const tls = await addEndpoint(producer.db, `https://localhost:${secure.port}/hooks/tls`);
      runWith('another-password');

      await recordEvent(producer, 'post.created');

      // Each delivery asked the proxy at least twice (http in absolute form, https with CONNECT).
      await waitFor(() => ['POST', 'CONNECT'].every((method) => proxy!.requests.filter((request) => request.method === method).length >= 2), 10_000, 'retries');
      await running?.close();
      const waiting = await deliveryRows(producer.db);
      expect(waiting.map((row) => [row.status, row.attempts, row.lastStatusCode, row.lastError])).toEqual([
        ['pending', 0, null, null],
        ['pending', 0, null, null],
      ]);
      expect(await producer.db.models.WebhookAttempt.count({ where: { deliveryId: waiting.map((row) => row.id) } })).toBe(0);
      for (const endpoint of [plain, tls]) expect(await readCircuitState(producer.connection, env.redisPrefix, endpoint.id)).toBe('closed');
      expect(log.map((line) => JSON.parse(line) as { level: number; msg: string }).filter((line) => line.level >= 50 && /407/.test(line.msg))).not.toHaveLength(0);

      runWith(PASSWORD);

      const rows = await settled(2);
      expect(rows.map((row) => [row.status, row.attempts])).toEqual([
        ['succeeded', 1],
        ['succeeded', 1],
      ]);
      expect([receiver.requests.length, secure.requests.length]).toEqual([1, 1]);
      await expectNoCredentials(log);
    } finally {
      await secure.close();
    }
  });

  it('when the proxy is down, then the attempts record the refused connection, never its address or credentials', async () => {
    const { log, logger } = capturedLog();
    const worker = createWebhookWorker({ config: { ...env.config, webhookProxyUrl: `http://egress:${PASSWORD}@127.0.0.1:${await freePort()}` }, db: producer.db, logger });
    running = { close: async () => void (await worker.close(5_000)) };
    await addEndpoint(producer.db, `${receiver.url}/hooks/unreachable`);

    await recordEvent(producer, 'post.updated');

    const [unreachable] = await settled(1);
    expect(unreachable).toMatchObject({ status: 'failed', lastError: 'ECONNREFUSED: connect ECONNREFUSED egress proxy' });
    expect(receiver.requests).toHaveLength(0);
    await expectNoCredentials(log);
  });

  it("when the proxy's policy refuses the CONNECT (403), then the delivery fails at once with \"egress proxy refused: 403\", the circuit does not count it, and the proxy's body is not the endpoint's response", async () => {
    const secure = await startRecordingServer({}, { tls: TEST_TLS });
    try {
      proxy = await startForwardProxy({ policy: { [`localhost:${secure.port}`]: 403 } });
      const endpoint = await addEndpoint(producer.db, `https://localhost:${secure.port}/hooks/refused`);
      run({ webhookProxyUrl: proxy.url, webhookBreakerFailures: 1 });

      await recordEvent(producer, 'post.created');

      const [delivery] = await settled(1);
      expect([delivery.status, delivery.attempts, delivery.lastStatusCode, delivery.lastError]).toEqual(['failed', 1, null, 'egress proxy refused: 403']);
      const attempts = await producer.db.models.WebhookAttempt.findAll({ where: { deliveryId: delivery.id } });
      expect(attempts.map((attempt) => [attempt.statusCode, attempt.responseBody])).toEqual([[null, null]]);
      expect(await readCircuitState(producer.connection, env.redisPrefix, endpoint.id)).toBe('closed');
      expect(secure.requests).toHaveLength(0);
    } finally {
      await secure.close();
    }
  });

  it.each([
    ['502', 502],
    ['503', 503],
    ['504', 504],
    ['500, as this proxy does when the target refuses the connection', null],
  ])('when the proxy answers the CONNECT with %s, then it is the endpoint\'s connection error: retried, counted by its circuit and health, and the proxy\'s body is not stored', async (_answer, status) => {
    const closedPort = await freePort();
    proxy = await startForwardProxy(status === null ? {} : { policy: { [`localhost:${closedPort}`]: status } });
    const endpoint = await addEndpoint(producer.db, `https://localhost:${closedPort}/hooks/unreachable`);
    run({ webhookProxyUrl: proxy.url, webhookBreakerFailures: 2 });

    await recordEvent(producer, 'post.created');

    const [delivery] = await settled(1);
    const error = `egress proxy could not reach the target: ${status ?? 500}`;
    expect([delivery.status, delivery.attempts, delivery.lastStatusCode, delivery.lastError]).toEqual(['failed', 2, null, error]);
    const attempts = await producer.db.models.WebhookAttempt.findAll({ where: { deliveryId: delivery.id }, order: [['attemptNumber', 'ASC']] });
    expect(attempts.map((attempt) => [attempt.statusCode, attempt.error, attempt.responseBody])).toEqual([
      [null, error, null],
      [null, error, null],
    ]);
    expect(await readCircuitState(producer.connection, env.redisPrefix, endpoint.id)).toBe('open');
    expect((await producer.db.models.WebhookEndpoint.findByPk(endpoint.id))?.failingSince).not.toBeNull();
  });

  it('when the SSRF guard is on and the target resolves to a private address, then it is refused before anything reaches the proxy', async () => {
    proxy = await startForwardProxy();
    await addEndpoint(producer.db, `http://localhost:${receiver.port}/hooks/internal`);
    await addEndpoint(producer.db, `http://[::ffff:127.0.0.1]:${receiver.port}/hooks/literal`);
    run({ webhookProxyUrl: proxy.url, webhookBlockPrivate: true, webhookPrivateAllowlist: ['10.0.0.0/8'] });

    await recordEvent(producer, 'post.created');

    const rows = await settled(2);
    expect(rows.map((row) => [row.status, row.attempts, row.lastError]).sort()).toEqual([
      ['failed', 1, 'Refused to deliver to [::ffff:7f00:1]: it resolves to a non-public address (SSRF guard).'],
      ['failed', 1, 'Refused to deliver to localhost: it resolves to a non-public address (SSRF guard).'],
    ]);
    expect(proxy.requests).toHaveLength(0);
    expect(receiver.requests).toHaveLength(0);
  });

  it('when the SSRF guard is on, then the proxy itself (on 127.0.0.1) is exempt and an allowlisted target is delivered through it', async () => {
    proxy = await startForwardProxy();
    await addEndpoint(producer.db, `http://localhost:${receiver.port}/hooks/allowlisted`);
    run({ webhookProxyUrl: proxy.url, webhookBlockPrivate: true, webhookPrivateAllowlist: ['localhost'] });

    await recordEvent(producer, 'post.created');

    const [delivery] = await settled(1);
    expect(delivery.status).toBe('succeeded');
    expect(proxy.requests).toEqual([{ method: 'POST', target: `http://localhost:${receiver.port}/hooks/allowlisted`, proxyAuthorization: null }]);
    expect(receiver.requests.map((request) => request.path)).toEqual(['/hooks/allowlisted']);
  });

  /** A debug-level pino logger whose lines are kept in `log`. */
  function capturedLog(): { log: string[]; logger: pino.Logger } {
    const log: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        log.push(chunk.toString());
        done();
      },
    });
    return { log, logger: pino({ level: 'debug' }, sink) };
  }

  /** Neither the log nor any stored attempt names the proxy's password, encoded or not, nor its Basic token. */
  async function expectNoCredentials(log: string[]): Promise<void> {
    const attempts = await producer.db.models.WebhookAttempt.findAll();
    const deliveries = await deliveryRows(producer.db);
    const stored = JSON.stringify([attempts.map((attempt) => attempt.toJSON()), deliveries.map((row) => row.toJSON())]);
    expect(attempts.length).toBeGreaterThan(0);
    expect(log.length).toBeGreaterThan(0);
    for (const secret of [PASSWORD, 'p@ss w0rd', Buffer.from(CREDENTIALS).toString('base64')]) {
      expect(stored).not.toContain(secret);
      expect(log.join('')).not.toContain(secret);
    }
  }
});
