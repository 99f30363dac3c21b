import { Client } from 'pg';
import { createWebhooksClient, WebhooksApiError, WebhooksClient } from '../../clients/node/src';
import { runKeysCli } from '../../scripts/keys-cli';
import { createTestEnvironment, processEnv, TestEnvironment } from '../support/environment';
import { freePort, ServiceProcess, startService } from '../support/processes';
import { waitFor } from '../support/wait-for';

/**
 * The typed client (clients/node) against real api processes of both layouts: every call it
 * offers, its typed errors, and a send retried through an api killed mid-request that still
 * makes exactly one delivery.
 */
describe('the typed client against the api', () => {
  const LEASE_MS = 2_000;
  const SECRET = 'whsec_' + Buffer.from('client-test-secret-0123456789abcdef').toString('base64');
  let env: TestEnvironment;
  let db: Client;
  let key: string;
  const apis = new Map<'a' | 'b', { api: ServiceProcess; port: number }>();

  const startApi = async (layout: 'a' | 'b', port?: number) => {
    const listen = port ?? (await freePort());
    const vars = processEnv(env, { API_LAYOUT: layout, PORT: String(listen), HOST: '127.0.0.1', LOG_LEVEL: 'warn', IDEMPOTENCY_LEASE_MS: String(LEASE_MS) });
    apis.set(layout, { api: await startService(`api-${layout}`, 'dist/services/api/src/server.js', vars, listen), port: listen });
    return listen;
  };
  const clientOf = (layout: 'a' | 'b', retry = {}): WebhooksClient =>
    createWebhooksClient({ baseUrl: `http://127.0.0.1:${apis.get(layout)!.port}`, token: key, retry });
  const deliveriesTo = async (url: string) => (await db.query<{ id: string }>('SELECT id FROM webhook_deliveries WHERE url = $1', [url])).rows;

  beforeAll(async () => {
    env = await createTestEnvironment();
    db = new Client({ connectionString: env.databaseUrl });
    await db.connect();
    const lines: string[] = [];
    await runKeysCli(['create', '--name', 'client-test', '--scopes', '*'], { env: processEnv(env), stdout: (line) => lines.push(line), stderr: () => undefined });
    key = JSON.parse(lines[0]).key;
    await startApi('a');
    await startApi('b');
  });

  afterAll(async () => {
    await Promise.all([...apis.values()].map(({ api }) => api.stop('SIGKILL')));
    await db?.end();
    await env?.cleanup();
  });

  it.each(['a', 'b'] as const)('when a service sends a webhook through Layout %s, then it gets the delivery id, reads it back and redelivers it', async (layout) => {
    const client = clientOf(layout);
    const url = `http://127.0.0.1:9/hooks/${layout}`;
    const sent = await client.sendWebhook({ url, event: 'order.paid', payload: { order: 42 }, secret: SECRET });
    expect(sent.id).toMatch(/^msg_/);
    const delivery = await client.getDelivery(sent.id);
    expect(delivery).toMatchObject({ id: sent.id, url, event: 'order.paid' });
    const page = await client.listDeliveries({ event: 'order.paid', limit: 100 });
    expect(page.data.map((row) => row.id)).toContain(sent.id);

    await db.query(`UPDATE webhook_deliveries SET status = 'failed' WHERE id = $1`, [sent.id]);
    await client.redeliver(sent.id);
    expect((await db.query('SELECT status FROM webhook_deliveries WHERE id = $1', [sent.id])).rows[0].status).toBe('pending');
  });

  it('when a send is repeated with the same Idempotency-Key, then the api answers the first delivery again', async () => {
    const client = clientOf('a');
    const url = 'http://127.0.0.1:9/hooks/repeated';
    const input = { url, event: 'order.paid', payload: { order: 7 }, secret: SECRET };
    const first = await client.sendWebhook(input, { idempotencyKey: 'order-7-paid' });
    const again = await clientOf('b').sendWebhook(input, { idempotencyKey: 'order-7-paid' });
    expect(again.id).toBe(first.id);
    expect(await deliveriesTo(url)).toHaveLength(1);
  });

  it('when a service manages an endpoint and publishes an event, then each call answers typed data', async () => {
    const client = clientOf('b');
    const types = await client.listEventTypes();
    expect(types.data.map((type) => type.name)).toContain('post.created');
    const created = await client.createEndpoint({ url: 'http://127.0.0.1:9/hooks/managed', events: ['post.updated'], description: 'managed' });
    expect(created.secret).toMatch(/^whsec_/);
    expect(await client.getEndpoint(created.id)).toMatchObject({ id: created.id, events: ['post.updated'], active: true });
    expect(await client.updateEndpoint(created.id, { description: 'renamed' })).toMatchObject({ description: 'renamed' });
    expect((await client.listEndpoints()).data.map((endpoint) => endpoint.id)).toContain(created.id);
    const rotated = await client.rotateEndpointSecret(created.id, 1);
    expect(rotated.secret).not.toBe(created.secret);

    const since = new Date();
    const published = await client.publishEvent({ event: 'post.updated', payload: { pid: 1 } });
    expect(published.ids.length).toBeGreaterThanOrEqual(1);
    const late = await client.createEndpoint({ url: 'http://127.0.0.1:9/hooks/late', events: ['post.updated'] });
    expect(await client.replayEndpoint(late.id, since)).toEqual({ count: 1 });
    expect(await client.replayEndpoint(late.id, since)).toEqual({ count: 0 });
    const stats = await client.getEndpointStats(late.id, '1h');
    expect(stats).toMatchObject({ attempts_24h: 0, success_rate_24h: null, circuit: 'closed' });
    expect(stats.series).toHaveLength(60);
    expect(stats.series?.[59]).toMatchObject({ succeeded: 0, failed: 0, retried: 0, p50_ms: null, p95_ms: null });
    expect(await client.getEndpointStats(late.id)).not.toHaveProperty('series');
    const overview = await client.getStats('24h');
    expect(overview.endpoints).toBeGreaterThanOrEqual(2);
    expect(overview.series).toHaveLength(24);
    await client.deleteEndpoint(created.id);
    await expect(client.getEndpoint(created.id)).rejects.toMatchObject({ status: 404 });
  });

  it('when a service mints, lists and revokes a portal link, then each call answers typed data and the session works until the revoke', async () => {
    const client = clientOf('a');
    const [{ user_id: userId }] = (await db.query<{ user_id: number }>(`INSERT INTO users (user_name, user_email) VALUES ('portal', 'portal-client@example.com') RETURNING user_id`)).rows;
    const link = await client.createPortalLink({ user_id: userId, scope: 'read', ttl_s: 600 });
    expect(link.url).toMatch(/\/portal#token=pl_/);
    const page = await clientOf('b').listPortalLinks({ user_id: userId });
    expect(page.data).toEqual([expect.objectContaining({ id: link.id, scope: 'read', used_at: null, revoked_at: null })]);

    const opened = await client.api.POST('/api/v1/portal-sessions', { body: { token: new URL(link.url).hash.slice('#token='.length) } });
    // The process that revokes forgets the session at once; others within 1 s (test/api/portal-revocation.test.ts).
    const portal = createWebhooksClient({ baseUrl: `http://127.0.0.1:${apis.get('a')!.port}`, token: opened.data!.token });
    expect((await portal.listEndpoints()).data).toEqual([]);
    await client.revokePortalLink(link.id);
    await expect(portal.listEndpoints()).rejects.toMatchObject({ status: 401 });
    await expect(client.revokePortalLink(2_147_483_000)).rejects.toMatchObject({ name: 'WebhooksApiError', status: 404 });
  });

  it('when the api refuses a call, then the client throws a WebhooksApiError with the status and the api message', async () => {
    const client = clientOf('a');
    const refused = await client.sendWebhook({ url: 'not a url', event: 'order.paid', payload: {}, secret: SECRET }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(WebhooksApiError);
    expect(refused).toMatchObject({ status: 400 });
    expect((refused as WebhooksApiError).message).toMatch(/url/i);
    const anonymous = createWebhooksClient({ baseUrl: `http://127.0.0.1:${apis.get('b')!.port}`, token: 'sk_not_a_key' });
    await expect(anonymous.listEndpoints()).rejects.toMatchObject({ name: 'WebhooksApiError', status: 401 });
  });

  it('when the api dies while a send is in flight, then the client retries with the same key through the restarted api and one delivery is made', async () => {
    const { port } = apis.get('b')!;
    const client = clientOf('b', { maxRetries: 8, baseDelayMs: 300, maxDelayMs: 2_000 });
    const url = 'http://127.0.0.1:9/hooks/survives-a-crash';

    // Hold the send at its insert, kill the api there, and let PostgreSQL end the dead request.
    const lock = new Client({ connectionString: env.databaseUrl });
    await lock.connect();
    await lock.query('BEGIN');
    await lock.query('LOCK TABLE webhook_deliveries IN SHARE ROW EXCLUSIVE MODE');
    const sending = client.sendWebhook({ url, event: 'order.paid', payload: { order: 99 }, secret: SECRET }, { idempotencyKey: 'order-99-paid' });
    const waiting = await waitFor(
      async () =>
        (
          await db.query<{ pid: number }>(
            `SELECT a.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE NOT l.granted AND l.relation = 'webhook_deliveries'::regclass`,
          )
        ).rows[0],
      10_000,
      'the send to wait at its insert',
    );
    await apis.get('b')!.api.stop('SIGKILL');
    await db.query('SELECT pg_terminate_backend($1)', [waiting.pid]);
    await lock.query('ROLLBACK');
    await lock.end();
    await startApi('b', port);

    const sent = await sending;
    expect(sent.id).toMatch(/^msg_/);
    expect((await deliveriesTo(url)).map((row) => row.id)).toEqual([sent.id]);
  });
});
