import { createUser, TestUser } from '../support/factories';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';
import { createServiceKey, TestServiceKey } from './support/operations';

/** docs/design.md §14.1: an endpoint's static headers and its ordering, as fields of the endpoint object. */
describe('endpoint headers and ordering over the API', () => {
  let harness: ApiHarness;
  let a: ApiClient;
  let b: ApiClient;
  let operator: TestServiceKey;
  let alice: TestUser;

  beforeAll(async () => {
    harness = await createApiHarness();
    a = await harness.start('a');
    b = await harness.start('b');
    operator = await createServiceKey(harness.db, ['*']);
    alice = await createUser(harness.db);
  });

  afterAll(() => harness.close());

  const create = (payload: object, api = a, headers = operator.headers) => api.request({ method: 'POST', url: '/api/v1/endpoints', headers, payload });
  const patch = (id: number, payload: object, api = a) => api.request({ method: 'PATCH', url: `/api/v1/endpoints/${id}`, headers: operator.headers, payload });
  const stored = async (id: number) =>
    (await harness.db.models.WebhookEndpoint.findByPk(id, { attributes: ['headers', 'ordering'] }))!.get({ plain: true }) as { headers: Record<string, string>; ordering: string };

  it('when an endpoint is made with headers and fifo ordering, then names are stored lowercase and credentials read masked', async () => {
    const res = await create({ url: 'https://h.example.com/hooks', ordering: 'fifo', headers: { Authorization: 'Basic dXNlcjpwYXNz', 'X-Api-Key': 'k-123', 'X-Tenant': 'acme' } });
    expect(res.statusCode).toBe(201);
    const masked = { authorization: '********', 'x-api-key': '********', 'x-tenant': 'acme' };
    expect(res.json()).toMatchObject({ headers: masked, ordering: 'fifo' });
    expect((await b.request({ url: `/api/v1/endpoints/${res.json().id}`, headers: operator.headers })).json()).toMatchObject({ headers: masked, ordering: 'fifo' });
    const listed = (await a.request({ url: '/api/v1/endpoints?limit=100', headers: operator.headers })).json().data.find((e: { id: number }) => e.id === res.json().id);
    expect(listed).toMatchObject({ headers: masked, ordering: 'fifo' });
    expect(await stored(res.json().id)).toEqual({ headers: { authorization: 'Basic dXNlcjpwYXNz', 'x-api-key': 'k-123', 'x-tenant': 'acme' }, ordering: 'fifo' });
  });

  it('when a PATCH sends headers, then they replace the map, and "********" keeps a stored masked value', async () => {
    const { id } = (await create({ url: 'https://h.example.com/patch', headers: { authorization: 'Bearer old', 'x-tenant': 'acme' } })).json();
    const res = await patch(id, { headers: { authorization: '********', 'x-region': 'eu' } });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ headers: { authorization: '********', 'x-region': 'eu' }, ordering: 'unordered' });
    expect((await stored(id)).headers).toEqual({ authorization: 'Bearer old', 'x-region': 'eu' });
    expect((await patch(id, { ordering: 'fifo' }, b)).json()).toMatchObject({ ordering: 'fifo' });
    expect((await patch(id, { headers: {} })).json().headers).toEqual({});
  });

  it.each([
    [{ 'Content-Type': 'text/plain' }, 'content-type cannot be set'],
    [{ 'webhook-signature': 'v1,x', host: 'evil' }, 'webhook-signature, host cannot be set'],
    [{ 'X-Signature': 'abc' }, 'x-signature cannot be set'],
    [{ 'Keep-Alive': 'timeout=5', TE: 'trailers', Expect: '100-continue', 'Content-Encoding': 'gzip' }, 'keep-alive, te, expect, content-encoding cannot be set'],
    [{ 'bad name': 'x' }, '"bad name" is not a valid HTTP header name'],
    [{ 'x-multi': 'a\nb' }, 'the value of "x-multi" must be a string of printable characters'],
    [{ 'x-count': 3 }, 'the value of "x-count" must be a string'],
    [{ 'X-A': '1', 'x-a': '2' }, '"x-a" is given twice'],
    [{ 'x-big': 'v'.repeat(4100) }, 'at most 4096 bytes'],
    [{ 'x-tenant': '********' }, '"x-tenant" has no stored value to keep'],
  ])('when the headers are %j, then the create is 400 naming the header', async (headers, message) => {
    const res = await create({ url: 'https://h.example.com/bad', headers });
    expect(res.statusCode).toBe(400);
    expect(res.json().message).toContain(message);
    expect(res.json().message).toMatch(/^headers: /);
  });

  it('when a rate limit is set, then it reads back, null removes it, and anything but 1..10000 is 400 naming the field', async () => {
    const { id, rate_limit_per_s: limit } = (await create({ url: 'https://h.example.com/limited', rate_limit_per_s: 50 })).json();
    expect(limit).toBe(50);
    expect((await patch(id, { rate_limit_per_s: null }, b)).json()).toMatchObject({ rate_limit_per_s: null });
    for (const bad of [0, 10001, 2.5, '50']) {
      const res = await patch(id, { rate_limit_per_s: bad });
      expect(res.statusCode).toBe(400);
      expect(res.body).toMatch(/rate_limit_per_s/);
    }
  });

  it('when ordering is neither unordered nor fifo, then it is 400', async () => {
    const res = await create({ url: 'https://h.example.com/bad', ordering: 'lifo' }, b);
    expect(res.statusCode).toBe(400);
    expect(res.body).toMatch(/ordering/);
  });

  it('when a user sets headers on their own endpoint, then they read them masked like an operator', async () => {
    const res = await create({ url: 'https://alice.example.com/hooks', headers: { 'x-auth-token': 't' } }, a, alice.headers);
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject({ user_id: alice.user.userId, headers: { 'x-auth-token': '********' } });
  });
});
