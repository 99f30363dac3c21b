import type { Config } from '../../shared/config';
import { readCircuitState } from '../../shared/endpoint-gate';
import { OPERATOR, createEndpoint, updateEndpoint } from '../../shared/operations';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { ForwardProxy, startForwardProxy } from '../support/forward-proxy';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { TokenServer, startTokenServer } from '../support/token-server';
import { createProducer, deliveryRows, Producer, recordEvent, resetAndClose, startWorker } from './support/harness';
import { waitFor } from '../support/wait-for';

const CLIENT = { id: 'sender app', secret: 's3cret:with/odd chars' };

/**
 * docs/design.md §14.4, `auth`: OAuth2 client credentials toward an endpoint, against a token
 * server and a receiver of the test's own that accepts only the tokens that server issued.
 */
describe('webhook worker: OAuth2 client credentials toward an endpoint', () => {
  let env: TestEnvironment;
  let producer: Producer;
  let receiver: RecordingServer;
  let tokens: TokenServer;
  let proxy: ForwardProxy | undefined;
  const workers: { close(): Promise<void> }[] = [];

  beforeAll(async () => {
    env = await createTestEnvironment({ WEBHOOK_RETRY_SCHEDULE: '0.05', WEBHOOK_TIMEOUT_MS: '3000' }, 'worker');
  });

  beforeEach(async () => {
    producer = createProducer(env.config);
    await producer.queue.waitUntilReady();
    tokens = await startTokenServer(CLIENT);
    // The receiver checks the bearer token against the token server, as a resource server would.
    receiver = await startRecordingServer();
    receiver.setReply((request) => (tokens.accepts(request.headers.authorization) ? { status: 204 } : { status: 401, body: 'invalid_token' }));
  });

  afterEach(async () => {
    await Promise.all(workers.splice(0).map((worker) => worker.close()));
    await resetAndClose(producer);
    await Promise.all([receiver.close(), tokens.close(), proxy?.close()]);
    proxy = undefined;
  });

  afterAll(async () => {
    await env.cleanup();
  });

  const run = (overrides: Partial<Config> = {}) => workers.push(startWorker({ ...env.config, ...overrides }, producer.db));
  const addEndpoint = async (auth: Record<string, unknown> = {}, url = `${receiver.url}/hooks`) =>
    (
      await createEndpoint(producer.db, {
        url,
        userId: null,
        auth: { type: 'oauth2_client_credentials', token_url: tokens.url, client_id: CLIENT.id, client_secret: CLIENT.secret, ...auth },
      })
    ).endpoint.id;
  const settled = (count: number) =>
    waitFor(
      async () => {
        const rows = await deliveryRows(producer.db);
        return rows.length === count && rows.every((row) => row.status === 'succeeded' || row.status === 'failed') && rows;
      },
      15_000,
      `${count} settled deliveries`,
    );
  const post = async (count: number) => {
    for (let i = 0; i < count; i += 1) await recordEvent(producer, 'post.created');
  };

  it('when an endpoint has auth, then the worker gets a token by client credentials with HTTP Basic and every delivery carries it, one token for all', async () => {
    await addEndpoint({ scope: 'hooks:write', audience: 'https://hooks.example' });
    run();

    await post(5);

    const rows = await settled(5);
    expect(rows.map((row) => [row.status, row.attempts])).toEqual(Array(5).fill(['succeeded', 1]));
    expect(tokens.requests).toEqual([
      { client: CLIENT, form: { grant_type: 'client_credentials', scope: 'hooks:write', audience: 'https://hooks.example' }, clientCertificate: null },
    ]);
    const bearers = new Set(receiver.requests.map((request) => request.headers.authorization));
    expect(bearers.size).toBe(1);
    expect(tokens.accepts([...bearers][0])).toBe(true);
  });

  it('when the client secret is wrong, then the attempts fail with "oauth2 token: HTTP 401 invalid_client", nothing reaches the endpoint, and the token server is asked once for the deliveries within 5 s', async () => {
    await addEndpoint({ client_secret: 'wrong' });
    run({ webhookRetrySchedule: [] });

    await post(3);

    const rows = await settled(3);
    expect(rows.map((row) => [row.status, row.lastStatusCode, row.lastError])).toEqual(Array(3).fill(['failed', null, 'oauth2 token: HTTP 401 invalid_client']));
    const attempts = await producer.db.models.WebhookAttempt.findAll({ where: { deliveryId: rows.map((row) => row.id) } });
    expect(attempts.map((attempt) => [attempt.statusCode, attempt.error, attempt.responseBody])).toEqual(Array(3).fill([null, 'oauth2 token: HTTP 401 invalid_client', null]));
    expect(JSON.stringify(attempts)).not.toContain('token-server-body');
    expect(receiver.requests).toHaveLength(0);
    expect(tokens.requests).toHaveLength(1);
  });

  it('when no token can be had, then the attempts count toward the endpoint\'s circuit and health like a connection error', async () => {
    const id = await addEndpoint({ client_secret: 'wrong' });
    run({ webhookBreakerFailures: 2 });

    await post(1);

    const [row] = await settled(1);
    expect([row.status, row.attempts, row.lastError]).toEqual(['failed', 2, 'oauth2 token: HTTP 401 invalid_client']);
    expect(await readCircuitState(producer.connection, env.redisPrefix, id)).toBe('open');
    expect((await producer.db.models.WebhookEndpoint.findByPk(id))?.failingSince).not.toBeNull();
  });

  it('when the token expires, then the next delivery after its life (max(expires_in − 30 s, expires_in / 2)) gets a new one', async () => {
    tokens.setExpiresIn(2);
    await addEndpoint();
    run();

    await post(1);
    await settled(1);
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    await post(1);

    const rows = await settled(2);
    expect(rows.map((row) => row.status)).toEqual(['succeeded', 'succeeded']);
    expect(tokens.requests).toHaveLength(2);
    const [first, second] = receiver.requests.map((request) => request.headers.authorization);
    expect(first).not.toBe(second);
  });

  it('when the endpoint answers 401 to a cached token, then the worker drops it, gets a fresh one and sends again once in the same attempt', async () => {
    await addEndpoint();
    run();
    await post(1);
    await settled(1);

    tokens.revokeAll();
    await post(1);

    const rows = await settled(2);
    expect(rows.map((row) => [row.status, row.attempts, row.lastStatusCode])).toEqual([
      ['succeeded', 1, 204],
      ['succeeded', 1, 204],
    ]);
    expect(tokens.requests).toHaveLength(2);
    const second = receiver.requests.filter((request) => request.headers['webhook-id'] === rows[1].id);
    expect(second.map((request) => tokens.accepts(request.headers.authorization))).toEqual([false, true]);
    const attempts = await producer.db.models.WebhookAttempt.findAll({ where: { deliveryId: rows[1].id } });
    expect(attempts.map((attempt) => attempt.statusCode)).toEqual([204]);
  });

  it('when the endpoint answers 401 whatever the token, then each attempt sends twice and fetches one fresh token, never more', async () => {
    receiver.setReply({ status: 401 });
    await addEndpoint();
    run();

    await post(1);

    const [row] = await settled(1);
    expect([row.status, row.attempts, row.lastStatusCode]).toEqual(['failed', 2, 401]);
    // Attempt 1: a token, 401, a fresh token, 401. Attempt 2: the cached one, 401, a fresh one, 401.
    expect(receiver.requests).toHaveLength(4);
    expect(tokens.requests).toHaveLength(3);
  });

  it('when the endpoint has a rate limit, then the resend after a 401 takes a slot of its own', async () => {
    const id = await addEndpoint();
    await producer.db.models.WebhookEndpoint.update({ rateLimitPerS: 1 }, { where: { id } });
    receiver.setReply({ status: 401 });
    run({ webhookRetrySchedule: [] });

    await post(1);

    const [row] = await settled(1);
    expect([row.status, row.lastStatusCode]).toEqual(['failed', 401]);
    const [first, again] = receiver.requests.map((request) => request.receivedAt);
    // At 1 attempt a second, the resend waits for the window to have room again.
    expect(again - first).toBeGreaterThanOrEqual(900);
  });

  it('when an egress proxy is set, then the token request goes through it like the deliveries', async () => {
    proxy = await startForwardProxy();
    await addEndpoint();
    run({ webhookProxyUrl: proxy.url });

    await post(2);

    expect((await settled(2)).map((row) => row.status)).toEqual(['succeeded', 'succeeded']);
    expect(proxy.requests.map((request) => [request.method, request.target])).toEqual([
      ['POST', tokens.url],
      ['POST', `${receiver.url}/hooks`],
      ['POST', `${receiver.url}/hooks`],
    ]);
  });

  it('when the SSRF guard is on and only the endpoint is allowlisted, then the token URL is refused and the delivery fails at once with the reason', async () => {
    await addEndpoint({}, `http://localhost:${receiver.port}/hooks`);
    run({ webhookBlockPrivate: true, webhookPrivateAllowlist: ['localhost'] });

    await post(1);

    const [row] = await settled(1);
    expect([row.status, row.attempts, row.lastError]).toEqual(['failed', 1, 'oauth2 token: Refused to deliver to 127.0.0.1: it resolves to a non-public address (SSRF guard).']);
    expect(tokens.requests).toHaveLength(0);
    expect(receiver.requests).toHaveLength(0);
  });

  it('when two workers deliver to the endpoint, then each process keeps its own token and asks for it once', async () => {
    await addEndpoint();
    run();
    run();

    await post(12);

    expect((await settled(12)).every((row) => row.status === 'succeeded')).toBe(true);
    expect(tokens.requests.length).toBeGreaterThanOrEqual(1);
    expect(tokens.requests.length).toBeLessThanOrEqual(2);
    expect(receiver.requests.every((request) => tokens.accepts(request.headers.authorization))).toBe(true);
  });

  it('when the url and the client secret change, then the cached token is dropped and the next delivery reaches the new origin with a token for the new secret', async () => {
    const id = await addEndpoint();
    run();
    await post(1);
    await settled(1);

    const moved = await startRecordingServer();
    try {
      moved.setReply((request) => (tokens.accepts(request.headers.authorization) ? { status: 204 } : { status: 401 }));
      tokens.setClient(CLIENT.id, 'rotated');
      tokens.revokeAll();
      await updateEndpoint(producer.db, id, OPERATOR, {
        url: `${moved.url}/hooks`,
        auth: { type: 'oauth2_client_credentials', token_url: tokens.url, client_id: CLIENT.id, client_secret: 'rotated' },
      });
      await post(1);

      const rows = await settled(2);
      expect(rows.map((row) => [row.status, row.attempts])).toEqual([
        ['succeeded', 1],
        ['succeeded', 1],
      ]);
      expect(tokens.requests.map((request) => request.client?.secret)).toEqual([CLIENT.secret, 'rotated']);
      expect(moved.requests).toHaveLength(1);
      expect(tokens.accepts(moved.requests[0].headers.authorization)).toBe(true);
      expect(receiver.requests).toHaveLength(1);
    } finally {
      await moved.close();
    }
  });

  it('when a delivery made before the url moved is retried, then it goes to the new URL with a token, and the old origin gets nothing more', async () => {
    const id = await addEndpoint();
    receiver.setReply({ status: 503 });
    run({ webhookRetrySchedule: [1] });
    await post(1);
    const [first] = await receiver.waitForRequests(1);
    expect(tokens.accepts(first.headers.authorization)).toBe(true);

    const moved = await startRecordingServer();
    try {
      await updateEndpoint(producer.db, id, OPERATOR, {
        url: `${moved.url}/hooks`,
        auth: { type: 'oauth2_client_credentials', token_url: tokens.url, client_id: CLIENT.id, client_secret: CLIENT.secret },
      });
      const [row] = await settled(1);
      expect([row.status, row.attempts, row.url]).toEqual(['succeeded', 2, `${moved.url}/hooks`]);
      expect(receiver.requests).toHaveLength(1);
      expect(moved.requests).toHaveLength(1);
      expect(tokens.accepts(moved.requests[0].headers.authorization)).toBe(true);
    } finally {
      await moved.close();
    }
  });
});
