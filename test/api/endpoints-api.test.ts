import { createUser, TestUser } from '../support/factories';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';
import { createServiceKey, insertDelivery, TestServiceKey } from './support/operations';

const ENDPOINT_KEYS = ['active', 'auth', 'client_certificate', 'created_at', 'description', 'disabled_reason', 'events', 'filter', 'headers', 'id', 'ordering', 'public_key', 'rate_limit_per_s', 'signature_scheme', 'updated_at', 'url', 'user_id'];

describe('endpoints API (docs/design.md §11.1)', () => {
  let harness: ApiHarness;
  let a: ApiClient;
  let b: ApiClient;
  let operator: TestServiceKey;
  let reader: TestServiceKey;
  let alice: TestUser;
  let bob: TestUser;

  beforeAll(async () => {
    harness = await createApiHarness();
    a = await harness.start('a');
    b = await harness.start('b');
    operator = await createServiceKey(harness.db, ['*']);
    reader = await createServiceKey(harness.db, ['endpoints:read', 'webhooks:read']);
    alice = await createUser(harness.db);
    bob = await createUser(harness.db);
  });

  afterAll(() => harness.close());

  const create = (headers: Record<string, string>, payload: object, api = a) =>
    api.request({ method: 'POST', url: '/api/v1/endpoints', headers, payload });

  it('When an operator adds an endpoint, then it answers 201 with the endpoint object and its secret, and reads never show the secret', async () => {
    const res = await create(operator.headers, { url: 'https://ops.example.com/hooks', events: ['post.created'], description: 'ops' });

    expect(res.statusCode).toBe(201);
    const created = res.json();
    expect(Object.keys(created).sort()).toEqual([...ENDPOINT_KEYS, 'secret'].sort());
    expect(created).toMatchObject({ url: 'https://ops.example.com/hooks', events: ['post.created'], description: 'ops', active: true, disabled_reason: null, user_id: null });
    expect(Buffer.from(created.secret.slice(6), 'base64')).toHaveLength(32);
    const read = await a.request({ url: `/api/v1/endpoints/${created.id}`, headers: reader.headers });
    expect(read.statusCode).toBe(200);
    expect(Object.keys(read.json()).sort()).toEqual(ENDPOINT_KEYS);
    expect(read.body).not.toContain(created.secret);
  });

  it("When users add endpoints, then each owns theirs and sees only theirs; another's or an operator's answers 404", async () => {
    const mine = (await create(alice.headers, { url: 'https://alice.example.com/hooks', secret: 'alice-secret' })).json();
    const theirs = (await create(bob.headers, { url: 'https://bob.example.com/hooks' }, b)).json();
    const ops = (await create(operator.headers, { url: 'https://ops.example.com/private' })).json();

    expect(mine).toMatchObject({ user_id: alice.user.userId, secret: 'alice-secret' });
    expect(theirs.user_id).toBe(bob.user.userId);
    const list = (await a.request({ url: '/api/v1/endpoints', headers: alice.headers })).json();
    expect(list).toEqual({ data: [expect.objectContaining({ id: mine.id })], next_cursor: null });
    for (const id of [theirs.id, ops.id]) {
      const resA = await a.request({ url: `/api/v1/endpoints/${id}`, headers: alice.headers });
      const resB = await b.request({ url: `/api/v1/endpoints/${id}`, headers: alice.headers });
      // Byte for byte: Layout A's error shape is `{"status","message"}` in that order.
      expect([resA.statusCode, resA.body]).toEqual([404, '{"status":404,"message":"Endpoint not found."}']);
      expect([resB.statusCode, resB.body]).toEqual([404, '{"message":"Endpoint not found."}']);
      for (const [method, url, payload] of [
        ['PATCH', `/api/v1/endpoints/${id}`, { active: false }],
        ['DELETE', `/api/v1/endpoints/${id}`, undefined],
        ['POST', `/api/v1/endpoints/${id}/rotate-secret`, {}],
        ['POST', `/api/v1/endpoints/${id}/test`, undefined],
        ['POST', `/api/v1/endpoints/${id}/recover`, { since: '2026-01-01T00:00:00Z' }],
        ['GET', `/api/v1/endpoints/${id}/stats`, undefined],
      ] as const) {
        expect((await a.request({ method, url, headers: alice.headers, payload })).statusCode).toBe(404);
      }
    }
    const all = (await a.request({ url: '/api/v1/endpoints?limit=100', headers: reader.headers })).json();
    expect(all.data.map((endpoint: { id: number }) => endpoint.id)).toEqual(expect.arrayContaining([mine.id, theirs.id, ops.id]));
  });

  it('When event names are not in the catalog, then the answer is 400 naming them', async () => {
    const res = await create(alice.headers, { url: 'https://alice.example.com/x', events: ['post.created', 'post.archived', 'user.gone'] });
    const operatorCreate = await a.request({ method: 'POST', url: '/api/v1/endpoints', headers: operator.headers, payload: { url: 'https://x.example.com', events: ['nope.never'] } });

    expect([res.statusCode, res.json()]).toEqual([400, { status: 400, message: 'Unknown event types: post.archived, user.gone.' }]);
    expect(operatorCreate.json()).toEqual({ status: 400, message: 'Unknown event type: nope.never.' });
  });

  it('When a key lacks the scope, then 403 names it; bad bodies are 400', async () => {
    const noScope = await create(reader.headers, { url: 'https://x.example.com' });
    const badUrl = await create(operator.headers, { url: 'ftp://x.example.com' });
    const noUrl = await create(operator.headers, {}, b);

    expect([noScope.statusCode, noScope.json()]).toEqual([403, { status: 403, message: 'This key lacks the scope endpoints:write.' }]);
    expect(badUrl.statusCode).toBe(400);
    expect([noUrl.statusCode, noUrl.json().message]).toEqual([400, expect.stringMatching(/url/)]);
  });

  it('When an owner disables and re-enables an endpoint, then disabled_reason is set and cleared; url, events and description change', async () => {
    const { id } = (await create(alice.headers, { url: 'https://alice.example.com/toggle' })).json();
    const patch = (payload: object) => a.request({ method: 'PATCH', url: `/api/v1/endpoints/${id}`, headers: alice.headers, payload });

    const disabled = await patch({ active: false });
    const enabled = await patch({ active: true, url: 'https://alice.example.com/moved', events: ['post.deleted'], description: 'moved' });
    const empty = await patch({});

    expect(disabled.statusCode).toBe(200);
    expect(disabled.json()).toMatchObject({ id, active: false, disabled_reason: expect.stringMatching(/^disabled by its owner at \d{4}-/) });
    expect(enabled.json()).toMatchObject({ id, active: true, disabled_reason: null, url: 'https://alice.example.com/moved', events: ['post.deleted'], description: 'moved' });
    expect(empty.statusCode).toBe(400);
  });

  it('When an endpoint is deleted, then it is gone, its pending deliveries failed with "endpoint deleted", and operators still read them', async () => {
    const { id } = (await create(alice.headers, { url: 'https://alice.example.com/deleted' })).json();
    const pending = await insertDelivery(harness.db, { endpointId: id, status: 'pending' });
    const done = await insertDelivery(harness.db, { endpointId: id, status: 'succeeded' });

    const deleted = await a.request({ method: 'DELETE', url: `/api/v1/endpoints/${id}`, headers: alice.headers });

    expect(deleted.statusCode).toBe(204);
    expect((await a.request({ url: `/api/v1/endpoints/${id}`, headers: alice.headers })).statusCode).toBe(404);
    expect((await a.request({ url: `/api/v1/endpoints/${id}`, headers: reader.headers })).statusCode).toBe(404);
    const read = await a.request({ url: `/api/v1/webhooks/${pending}`, headers: reader.headers });
    expect(read.json()).toMatchObject({ id: pending, endpoint_id: id, status: 'failed', last_error: 'endpoint deleted' });
    expect((await a.request({ url: `/api/v1/webhooks/${done}`, headers: reader.headers })).json().status).toBe('succeeded');
    expect((await a.request({ url: `/api/v1/webhooks/${pending}`, headers: alice.headers })).statusCode).toBe(404);
    expect((await a.request({ method: 'DELETE', url: `/api/v1/endpoints/${id}`, headers: alice.headers })).statusCode).toBe(404);
  });

  it('When a secret is rotated, then the answer is the new secret and the old one keeps signing for overlap_hours', async () => {
    const { id, secret: old } = (await create(alice.headers, { url: 'https://alice.example.com/rotate' })).json();

    const rotated = await a.request({ method: 'POST', url: `/api/v1/endpoints/${id}/rotate-secret`, headers: alice.headers, payload: { overlap_hours: 2 } });
    const defaulted = await b.request({ method: 'POST', url: `/api/v1/endpoints/${id}/rotate-secret`, headers: operator.headers });
    const tooLong = await a.request({ method: 'POST', url: `/api/v1/endpoints/${id}/rotate-secret`, headers: alice.headers, payload: { overlap_hours: 169 } });

    expect(rotated.statusCode).toBe(200);
    expect(Object.keys(rotated.json())).toEqual(['secret']);
    expect(rotated.json().secret).toMatch(/^whsec_/);
    expect(rotated.json().secret).not.toBe(old);
    expect(defaulted.statusCode).toBe(200);
    const row = await harness.db.models.WebhookEndpoint.findByPk(id, { rejectOnEmpty: true });
    expect([row.secret, row.previousSecret]).toEqual([defaulted.json().secret, rotated.json().secret]);
    expect(Math.abs(row.previousSecretExpiresAt!.getTime() - Date.now() - 24 * 3_600_000)).toBeLessThan(60_000);
    expect(tooLong.statusCode).toBe(400);
  });

  it('When endpoints are paged, then pages are newest first with an opaque cursor; limits outside 1..100 are 400', async () => {
    const user = await createUser(harness.db);
    const ids: number[] = [];
    for (let n = 0; n < 5; n += 1) ids.push((await create(user.headers, { url: `https://paged.example.com/${n}` })).json().id);

    const first = (await a.request({ url: '/api/v1/endpoints?limit=2', headers: user.headers })).json();
    const second = (await a.request({ url: `/api/v1/endpoints?limit=2&cursor=${first.next_cursor}`, headers: user.headers })).json();
    const third = (await b.request({ url: `/api/v1/endpoints?limit=2&cursor=${second.next_cursor}`, headers: user.headers })).json();

    const seen = [...first.data, ...second.data, ...third.data].map((endpoint: { id: number }) => endpoint.id);
    expect(seen).toEqual([...ids].reverse());
    expect(third.next_cursor).toBeNull();
    for (const limit of ['0', '101', 'x']) {
      expect((await a.request({ url: `/api/v1/endpoints?limit=${limit}`, headers: user.headers })).statusCode).toBe(400);
    }
    expect((await a.request({ url: '/api/v1/endpoints?cursor=bogus', headers: user.headers })).json()).toEqual({ status: 400, message: 'Invalid cursor.' });
  });
});
