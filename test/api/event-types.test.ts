import { createUser, TestUser } from '../support/factories';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';
import { createServiceKey, TestServiceKey } from './support/operations';

const BUILT_IN = ['post.created', 'post.updated', 'post.deleted', 'webhook.test', 'endpoint.disabled'];

describe('event types catalog (DESIGN §11)', () => {
  let harness: ApiHarness;
  let a: ApiClient;
  let b: ApiClient;
  let operator: TestServiceKey;
  let alice: TestUser;

  beforeAll(async () => {
    harness = await createApiHarness();
    a = await harness.start('a');
    b = await harness.start('b');
    operator = await createServiceKey(harness.db, ['endpoints:write']);
    alice = await createUser(harness.db);
  });

  afterAll(() => harness.close());

  it('When any principal lists event types, then the built-in ones come with a JSON Schema of their data', async () => {
    const res = await b.request({ url: '/api/v1/event-types', headers: alice.headers });

    expect(res.statusCode).toBe(200);
    const { data } = res.json();
    expect(data.map((type: { name: string }) => type.name)).toEqual(BUILT_IN);
    for (const type of data) {
      expect(type).toEqual({ name: expect.any(String), description: expect.any(String), schema: expect.objectContaining({ type: 'object' }) });
    }
  });

  it('When an operator adds a type, then endpoints may subscribe to it and services may send it; users may not add one', async () => {
    const added = await a.request({
      method: 'POST',
      url: '/api/v1/event-types',
      headers: operator.headers,
      payload: { name: 'invoice.paid', description: 'An invoice was paid.', schema: { type: 'object', required: ['invoice'] } },
    });
    const again = await a.request({ method: 'POST', url: '/api/v1/event-types', headers: operator.headers, payload: { name: 'invoice.paid' } });
    const builtIn = await b.request({ method: 'POST', url: '/api/v1/event-types', headers: operator.headers, payload: { name: 'post.created' } });
    const byUser = await a.request({ method: 'POST', url: '/api/v1/event-types', headers: alice.headers, payload: { name: 'user.added' } });
    const badName = await a.request({ method: 'POST', url: '/api/v1/event-types', headers: operator.headers, payload: { name: 'Invoice Paid' } });
    const subscribed = await a.request({ method: 'POST', url: '/api/v1/endpoints', headers: alice.headers, payload: { url: 'https://a.example.com', events: ['invoice.paid'] } });

    expect([added.statusCode, added.json()]).toEqual([201, { name: 'invoice.paid', description: 'An invoice was paid.', schema: { type: 'object', required: ['invoice'] } }]);
    expect([again.statusCode, again.json()]).toEqual([409, { status: 409, message: 'Event type invoice.paid already exists.' }]);
    expect([builtIn.statusCode, builtIn.json()]).toEqual([409, { message: 'Event type post.created already exists.' }]);
    expect([byUser.statusCode, byUser.json()]).toEqual([403, { status: 403, message: 'A service key with the scope endpoints:write is required.' }]);
    expect([badName.statusCode, badName.json().message]).toEqual([400, expect.stringMatching(/lowercase and dotted/)]);
    expect(subscribed.statusCode).toBe(201);
    const listed = (await a.request({ url: '/api/v1/event-types', headers: operator.headers })).json();
    expect(listed.data.map((type: { name: string }) => type.name)).toEqual([...BUILT_IN, 'invoice.paid']);
  });
});
