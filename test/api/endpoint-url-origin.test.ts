import { QueryTypes } from 'sequelize';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { startWorker } from '../worker/support/harness';
import { ApiClient, ApiHarness, ApiResponse, createApiHarness } from './support/api-harness';
import { createServiceKey, TestServiceKey } from './support/operations';
import { waitFor } from '../support/wait-for';

/**
 * docs/design.md §14.3: a PATCH that moves `url` to another origin (scheme, host, port) while
 * masked credentials are stored is refused with 400 naming them, unless the same PATCH gives
 * them again; a credential the API only shows as "********" never reaches an origin chosen by
 * someone who never saw it. Checked through what a test send actually carries where.
 */
describe('moving an endpoint to another origin', () => {
  let harness: ApiHarness;
  let a: ApiClient;
  let b: ApiClient;
  let operator: TestServiceKey;
  let oldHost: RecordingServer;
  let newHost: RecordingServer;
  let worker: ReturnType<typeof startWorker>;

  beforeAll(async () => {
    harness = await createApiHarness();
    a = await harness.start('a');
    b = await harness.start('b');
    operator = await createServiceKey(harness.db, ['*']);
    [oldHost, newHost] = [await startRecordingServer(), await startRecordingServer()];
    worker = startWorker(harness.env.config, harness.db);
  });

  afterAll(async () => {
    await worker?.close();
    await Promise.all([oldHost?.close(), newHost?.close()]);
    await harness.close();
  });

  beforeEach(() => {
    oldHost.reset();
    newHost.reset();
  });

  const create = async (url: string, headers: Record<string, string>) => {
    const res = await a.request({ method: 'POST', url: '/api/v1/endpoints', headers: operator.headers, payload: { url, headers } });
    expect(res.statusCode).toBe(201);
    return res.json().id as number;
  };
  const patch = (id: number, payload: object, api = a) => api.request({ method: 'PATCH', url: `/api/v1/endpoints/${id}`, headers: operator.headers, payload });
  const stored = async (id: number) => (await harness.db.models.WebhookEndpoint.findByPk(id, { attributes: ['url', 'headers'] }))!.get({ plain: true });
  /** Sends a test delivery and returns the request it made, at whichever host it arrived. */
  const testSend = async (id: number, host: RecordingServer) => {
    const res = await a.request({ method: 'POST', url: `/api/v1/endpoints/${id}/test`, headers: operator.headers });
    expect(res.statusCode).toBe(202);
    const [arrived] = await host.waitForRequests(1, 10_000);
    return arrived;
  };

  it('when a PATCH moves the url to another origin and keeps a stored authorization, then it is 400 naming it and a test send still goes to the old origin only', async () => {
    const id = await create(`${oldHost.url}/hooks`, { authorization: 'Basic b2xkOnNlY3JldA==', 'x-tenant': 'acme' });
    for (const payload of [
      { url: `${newHost.url}/hooks` },
      { url: `${newHost.url}/hooks`, headers: { authorization: '********', 'x-tenant': 'acme' } },
      { url: `${newHost.url}/hooks`, events: [], description: 'moved' },
    ]) {
      const res = await patch(id, payload);
      expect(res.statusCode).toBe(400);
      expect(res.json().message).toContain('url: moving to another origin needs the masked credentials given again in the same PATCH: headers.authorization');
    }
    expect(await stored(id)).toEqual({ url: `${oldHost.url}/hooks`, headers: { authorization: 'Basic b2xkOnNlY3JldA==', 'x-tenant': 'acme' } });
    const arrived = await testSend(id, oldHost);
    expect(arrived.headers.authorization).toBe('Basic b2xkOnNlY3JldA==');
    expect(newHost.requests).toEqual([]);
  });

  it('when the same PATCH gives every masked credential again, then the move is accepted and the test send carries the new values to the new origin', async () => {
    const id = await create(`${oldHost.url}/hooks`, { authorization: 'Basic b2xkOnNlY3JldA==', 'x-api-key': 'old-key', 'x-tenant': 'acme' });
    const refused = await patch(id, { url: `${newHost.url}/in`, headers: { authorization: 'Bearer for-the-new-host', 'x-api-key': '********' } });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().message).toMatch(/: headers\.x-api-key\b/);
    expect(refused.json().message).not.toContain('headers.authorization');

    const res = await patch(id, { url: `${newHost.url}/in`, headers: { authorization: 'Bearer for-the-new-host', 'x-api-key': 'new-key' } }, b);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ url: `${newHost.url}/in`, headers: { authorization: '********', 'x-api-key': '********' } });
    const arrived = await testSend(id, newHost);
    expect([arrived.path, arrived.headers.authorization, arrived.headers['x-api-key'], arrived.headers['x-tenant']]).toEqual(['/in', 'Bearer for-the-new-host', 'new-key', undefined]);
    expect(oldHost.requests).toEqual([]);
  });

  it('when the move drops the masked headers, or only unmasked ones are stored, then it is accepted', async () => {
    const dropped = await create(`${oldHost.url}/hooks`, { authorization: 'Basic b2xkOnNlY3JldA==', 'x-tenant': 'acme' });
    expect((await patch(dropped, { url: `${newHost.url}/hooks`, headers: { 'x-tenant': 'acme' } })).statusCode).toBe(200);
    expect(await stored(dropped)).toEqual({ url: `${newHost.url}/hooks`, headers: { 'x-tenant': 'acme' } });
    const plain = await create(`${oldHost.url}/hooks`, { 'x-tenant': 'acme' });
    expect((await patch(plain, { url: `${newHost.url}/hooks` })).statusCode).toBe(200);
    expect((await testSend(plain, newHost)).headers['x-tenant']).toBe('acme');
  });

  it('when the url changes only its path, or names the same origin differently, then the stored credentials stay', async () => {
    const id = await create('https://Hooks.Example.com:443/a', { authorization: 'Basic b2xkOnNlY3JldA==' });
    for (const url of ['https://hooks.example.com/b?x=1', 'https://HOOKS.example.com:443/c']) {
      const res = await patch(id, { url });
      expect([res.statusCode, res.json().headers]).toEqual([200, { authorization: '********' }]);
    }
    expect((await stored(id)).headers).toEqual({ authorization: 'Basic b2xkOnNlY3JldA==' });
  });

  it.each([
    ['the scheme', 'http://hooks.example.com/a'],
    ['the port', 'https://hooks.example.com:8443/a'],
    ['the host', 'https://other.example.com/a'],
    ['a subdomain', 'https://eu.hooks.example.com/a'],
  ])('when only %s changes, then it is another origin and the move is refused', async (_part, url) => {
    const id = await create('https://hooks.example.com/a', { cookie: 'session=s3cret' });
    const res = await patch(id, { url });
    expect([res.statusCode, res.json().message]).toEqual([400, expect.stringContaining(': headers.cookie')]);
  });

  it('when a PATCH keeping the credentials lands right after a move that dropped them, then the keep finds nothing to keep and no credential reaches the new origin', async () => {
    const id = await create(`${oldHost.url}/hooks`, { authorization: 'Basic b2xkOnNlY3JldA==' });
    const waitingOnLocks = async (count: number) =>
      waitFor(async () => {
        const [{ n }] = await harness.db.sequelize.query<{ n: string }>(
          `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
          { type: QueryTypes.SELECT },
        );
        return Number(n) >= count;
      }, 10_000, `${count} requests waiting for the endpoint's row`);
    // The test holds the row, so both PATCHes are in flight at once, the move ahead of the keep.
    const holder = await harness.db.sequelize.transaction();
    let move: Promise<ApiResponse>;
    let keep: Promise<ApiResponse>;
    try {
      await harness.db.sequelize.query('SELECT 1 FROM webhook_endpoints WHERE id = $1 FOR UPDATE', { bind: [id], transaction: holder });
      move = patch(id, { url: `${newHost.url}/hooks`, headers: {} });
      await waitingOnLocks(1);
      keep = patch(id, { headers: { authorization: '********', 'x-region': 'eu' } }, b);
      await waitingOnLocks(2);
    } finally {
      await holder.rollback();
    }
    expect((await move).statusCode).toBe(200);
    const kept = await keep;
    expect([kept.statusCode, kept.json().message]).toEqual([400, expect.stringContaining('"authorization" has no stored value to keep')]);
    expect(await stored(id)).toEqual({ url: `${newHost.url}/hooks`, headers: {} });
    expect((await testSend(id, newHost)).headers.authorization).toBeUndefined();
  });
});
