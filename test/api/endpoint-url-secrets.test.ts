import { QueryTypes } from 'sequelize';
import { createUser } from '../support/factories';
import { RecordingServer, startRecordingServer } from '../support/recording-server';
import { startWorker } from '../worker/support/harness';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';
import { createServiceKey, TestServiceKey } from './support/operations';
import { waitFor } from '../support/wait-for';

const USERINFO_REFUSED = 'credentials go in headers or auth, not in the URL';

/**
 * Credentials in an endpoint's URL (docs/design.md §11.3, §14.3): reasons and events show the URL
 * without userinfo and query; the endpoint and delivery objects show it with sensitive query
 * values masked, and a PATCH that sends the masked URL back keeps the stored values; a URL with
 * userinfo is refused.
 */
describe('credentials in endpoint URLs', () => {
  let harness: ApiHarness;
  let layouts: Record<'a' | 'b', ApiClient>;
  let operator: TestServiceKey;
  let receiver: RecordingServer;
  let otherHost: RecordingServer;
  let worker: ReturnType<typeof startWorker>;

  beforeAll(async () => {
    harness = await createApiHarness();
    layouts = { a: await harness.start('a'), b: await harness.start('b') };
    operator = await createServiceKey(harness.db, ['*']);
    [receiver, otherHost] = [await startRecordingServer(), await startRecordingServer()];
    worker = startWorker(harness.env.config, harness.db);
  });

  afterAll(async () => {
    await worker?.close();
    await Promise.all([receiver?.close(), otherHost?.close()]);
    await harness.close();
  });

  beforeEach(() => {
    receiver.reset();
    receiver.setReply({ status: 200 });
  });

  const create = async (url: string, events: string[] = []) => {
    const res = await layouts.a.request({ method: 'POST', url: '/api/v1/endpoints', headers: operator.headers, payload: { url, events } });
    expect(res.statusCode).toBe(201);
    return res.json() as { id: number; url: string };
  };
  const patch = (id: number, payload: object, layout: 'a' | 'b' = 'a') =>
    layouts[layout].request({ method: 'PATCH', url: `/api/v1/endpoints/${id}`, headers: operator.headers, payload });
  const storedUrl = async (id: number) => (await harness.db.models.WebhookEndpoint.findByPk(id))!.url;
  const testSend = async (id: number, host: RecordingServer = receiver) => {
    const res = await layouts.a.request({ method: 'POST', url: `/api/v1/endpoints/${id}/test`, headers: operator.headers });
    expect(res.statusCode).toBe(202);
    const [arrived] = await host.waitForRequests(1, 10_000);
    return { id: res.json().id as string, arrived };
  };

  it('when an endpoint whose URL has an api_key answers 410, then its disabled_reason and the endpoint.disabled event show the URL without the query', async () => {
    receiver.setReply({ status: 410 });
    const endpoint = await create(`${receiver.url}/hook?api_key=SECRET`, ['webhook.test']);
    await testSend(endpoint.id);

    const reason = await waitFor(async () => (await harness.db.models.WebhookEndpoint.findByPk(endpoint.id))!.disabledReason, 10_000, 'disabled');
    expect(reason).toMatch(new RegExp(`^410 Gone from ${receiver.url}/hook at `));
    expect(reason).not.toContain('SECRET');
    expect(reason).not.toContain('?');
    const shown = (await layouts.a.request({ url: `/api/v1/endpoints/${endpoint.id}`, headers: operator.headers })).json();
    expect(shown.disabled_reason).toBe(reason);

    const [event] = await harness.db.sequelize.query<{ body: string }>(
      `SELECT body FROM webhook_events WHERE event = 'endpoint.disabled' AND (body::jsonb -> '_data' ->> 'endpoint_id')::int = $1`,
      { bind: [endpoint.id], type: QueryTypes.SELECT },
    );
    expect(JSON.parse(event.body)._data.reason).toBe(reason);
    expect(event.body).not.toContain('SECRET');
  });

  it.each(['a', 'b'] as const)('when Layout %s shows an endpoint, then sensitive query values read as ******** and others as stored', async (layout) => {
    const url = `${receiver.url}/hook?api_key=SECRET&Access_Token=t0k&X-Sig=s1&oauth=o&page=2&plain`;
    const created = await create(url);
    const masked = `${receiver.url}/hook?api_key=********&Access_Token=********&X-Sig=********&oauth=********&page=2&plain`;
    expect(created.url).toBe(masked);
    const read = await layouts[layout].request({ url: `/api/v1/endpoints/${created.id}`, headers: operator.headers });
    expect(read.json().url).toBe(masked);
    const listed = await layouts[layout].request({ url: '/api/v1/endpoints?limit=100', headers: operator.headers });
    expect(listed.json().data.find((row: { id: number }) => row.id === created.id).url).toBe(masked);
    expect(listed.body).not.toContain('SECRET');
    expect(await storedUrl(created.id)).toBe(url);
  });

  it('when a PATCH sends the masked URL back, then the stored values are kept and the next delivery arrives with the real query', async () => {
    const { id, url } = await create(`${receiver.url}/hook?api_key=SECRET&page=2`);
    expect(url).toBe(`${receiver.url}/hook?api_key=********&page=2`);

    const changed = await patch(id, { url, description: 'kept' });
    expect(changed.statusCode).toBe(200);
    expect(changed.json().url).toBe(url);
    expect(await storedUrl(id)).toBe(`${receiver.url}/hook?api_key=SECRET&page=2`);

    const moved = await patch(id, { url: `${receiver.url}/other?page=3&api_key=********` }, 'b');
    expect(moved.statusCode).toBe(200);
    expect(await storedUrl(id)).toBe(`${receiver.url}/other?page=3&api_key=SECRET`);
    const { arrived } = await testSend(id);
    expect({ path: arrived.path, rawQuery: arrived.rawQuery }).toEqual({ path: '/other', rawQuery: 'page=3&api_key=SECRET' });
  });

  it('when a PATCH moves the URL to another origin with a masked query value, then it is 400 and nothing changes', async () => {
    const { id } = await create(`${receiver.url}/hook?token=SECRET`);
    const res = await patch(id, { url: `${otherHost.url}/hook?token=********` });
    expect(res.statusCode).toBe(400);
    expect(res.json().message).toContain('url: moving to another origin needs the masked credentials given again in the same PATCH: url query parameter token');
    expect(await storedUrl(id)).toBe(`${receiver.url}/hook?token=SECRET`);
  });

  it.each([
    ['a', { status: 400, message: USERINFO_REFUSED }],
    ['b', { message: USERINFO_REFUSED }],
  ] as const)('when Layout %s gets an endpoint URL with userinfo on create or update, then it is 400 with the message', async (layout, body) => {
    const { id } = await create(`${receiver.url}/hook`);
    const alice = await createUser(harness.db);
    for (const url of [receiver.url.replace('://', '://user:pw@'), receiver.url.replace('://', '://user@'), receiver.url.replace('://', '://:pw@')]) {
      for (const headers of [operator.headers, alice.headers]) {
        const created = await layouts[layout].request({ method: 'POST', url: '/api/v1/endpoints', headers, payload: { url: `${url}/hook` } });
        expect({ url, status: created.statusCode, body: created.json() }).toEqual({ url, status: 400, body });
      }
      const updated = await patch(id, { url: `${url}/hook` }, layout);
      expect({ url, status: updated.statusCode, body: updated.json() }).toEqual({ url, status: 400, body });
    }
    expect(await storedUrl(id)).toBe(`${receiver.url}/hook`);
  });

  it.each(['a', 'b'] as const)('when Layout %s shows a delivery, then its url has sensitive query values masked', async (layout) => {
    const { id } = await create(`${receiver.url}/hook?signature=SECRET&page=2`);
    const { id: deliveryId } = await testSend(id);
    const one = await layouts[layout].request({ url: `/api/v1/webhooks/${deliveryId}`, headers: operator.headers });
    expect(one.json().url).toBe(`${receiver.url}/hook?signature=********&page=2`);
    const listed = await layouts[layout].request({ url: `/api/v1/webhooks?endpoint_id=${id}`, headers: operator.headers });
    expect(listed.json().data.map((delivery: { url: string }) => delivery.url)).toEqual([`${receiver.url}/hook?signature=********&page=2`]);
    expect(listed.body + one.body).not.toContain('SECRET');
  });
});
