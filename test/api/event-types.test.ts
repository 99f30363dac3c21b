import { QueryTypes } from 'sequelize';
import { createUser, TestUser } from '../support/factories';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';
import { createServiceKey, TestServiceKey } from './support/operations';

const OPERATIONAL = ['endpoint.disabled', 'endpoint.failing', 'endpoint.recovered', 'delivery.exhausted'];
const BUILT_IN = ['post.created', 'post.updated', 'post.deleted', 'webhook.test', ...OPERATIONAL];

describe('event types catalog (docs/design.md §11.1)', () => {
  let harness: ApiHarness;
  let a: ApiClient;
  let b: ApiClient;
  let operator: TestServiceKey;
  let alice: TestUser;

  beforeAll(async () => {
    harness = await createApiHarness();
    a = await harness.start('a');
    b = await harness.start('b');
    operator = await createServiceKey(harness.db, ['endpoints:write', 'webhooks:send']);
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

  it('When the catalog is listed, then each operational event names its data with a closed JSON Schema (docs/design.md §6.6)', async () => {
    const { data } = (await a.request({ url: '/api/v1/event-types', headers: operator.headers })).json();
    const schemas = new Map<string, { required: string[]; additionalProperties: boolean }>(data.map((type: { name: string; schema: never }) => [type.name, type.schema]));
    const endpointFields = ['endpoint_id', 'url', 'user_id', 'reason', 'failing_since', 'consecutive_failures', 'last_status_code', 'last_error', 'occurred_at', 'episode_id'];

    expect(schemas.get('endpoint.failing')).toMatchObject({ required: endpointFields, additionalProperties: false });
    expect(schemas.get('endpoint.recovered')).toMatchObject({ required: endpointFields, additionalProperties: false });
    expect(schemas.get('endpoint.disabled')).toMatchObject({ required: [...endpointFields, 'disabled_at'], additionalProperties: false });
    expect(schemas.get('delivery.exhausted')).toMatchObject({
      required: ['delivery_id', 'endpoint_id', 'event', 'attempt_count', 'last_status_code', 'last_error', 'occurred_at', 'episode_id'],
      additionalProperties: false,
    });
  });

  it.each(OPERATIONAL)('When a caller sends, publishes or adds %s, then each route answers 400 and nothing is written', async (name) => {
    const shouted = ` ${name.toUpperCase()} `;
    const addType = await a.request({ method: 'POST', url: '/api/v1/event-types', headers: operator.headers, payload: { name } });
    const publish = await b.request({ method: 'POST', url: '/api/v1/events', headers: operator.headers, payload: { event: name, payload: { endpoint_id: 1 } } });
    const send = (event: string) =>
      a.request({
        method: 'POST',
        url: '/api/v1/webhooks',
        headers: operator.headers,
        payload: { url: 'https://hooks.example.com/in', event, payload: { endpoint_id: 1 }, secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' },
      });
    const [sent, sentShouted] = [await send(name), await send(shouted)];

    const reserved = `Event ${name} is reserved: the system sends it about endpoints and deliveries (an operational event).`;
    expect([addType.statusCode, addType.json()]).toEqual([400, { status: 400, message: reserved }]);
    expect([publish.statusCode, publish.json()]).toEqual([400, { message: reserved }]);
    expect([sent.statusCode, sent.json()]).toEqual([400, { status: 400, message: reserved }]);
    expect([sentShouted.statusCode, sentShouted.json().message]).toEqual([400, expect.stringContaining('is reserved')]);
    const written = await harness.db.sequelize.query<{ count: number }>(`SELECT count(*)::int AS count FROM webhook_events WHERE lower(trim(event)) = $1`, {
      bind: [name],
      type: QueryTypes.SELECT,
    });
    expect(written).toEqual([{ count: 0 }]);
  });
});
