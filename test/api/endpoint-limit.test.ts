import { QueryTypes } from 'sequelize';
import { loadConfig } from '../../shared/config';
import { createUser, TestUser } from '../support/factories';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';
import { createServiceKey, TestServiceKey } from './support/operations';

/**
 * A user owns at most MAX_ENDPOINTS_PER_USER endpoints (docs/design.md §11.2); the next create is 403
 * `Endpoint limit reached (N).`, also when creates race; operator endpoints are not counted.
 */
describe('endpoints per user', () => {
  let harness: ApiHarness;
  let layouts: Record<'a' | 'b', ApiClient>;
  let small: ApiClient;
  let operator: TestServiceKey;

  beforeAll(async () => {
    harness = await createApiHarness();
    layouts = { a: await harness.start('a'), b: await harness.start('b') };
    small = await harness.start('b', { maxEndpointsPerUser: 3 });
    operator = await createServiceKey(harness.db, ['*']);
  });

  afterAll(() => harness.close());

  const create = (client: ApiClient, headers: Record<string, string>, n: number) =>
    client.request({ method: 'POST', url: '/api/v1/endpoints', headers, payload: { url: `http://127.0.0.1:9/hooks/${n}` } });
  const owned = async (user: TestUser) => {
    const [{ count }] = await harness.db.sequelize.query<{ count: number }>(
      'SELECT count(*)::int AS count FROM webhook_endpoints WHERE user_id = $1 AND deleted_at IS NULL',
      { bind: [user.user.userId], type: QueryTypes.SELECT },
    );
    return count;
  };

  it('when the config names no limit, then it is 100', () => {
    expect(loadConfig({}, 'api').maxEndpointsPerUser).toBe(100);
    expect(loadConfig({ MAX_ENDPOINTS_PER_USER: '7' }, 'api').maxEndpointsPerUser).toBe(7);
    expect(() => loadConfig({ MAX_ENDPOINTS_PER_USER: '-1' }, 'api')).toThrow(/MAX_ENDPOINTS_PER_USER/);
  });

  it.each([
    ['a', { status: 403, message: 'Endpoint limit reached (100).' }],
    ['b', { message: 'Endpoint limit reached (100).' }],
  ] as const)('when a user of Layout %s has 100 endpoints, then the 101st is 403 with the layout body, operator endpoints aside', async (layout, body) => {
    const alice = await createUser(harness.db);
    for (let n = 0; n < 3; n++) expect((await create(layouts[layout], operator.headers, n)).statusCode).toBe(201);
    for (let n = 0; n < 100; n++) expect((await create(layouts[layout], alice.headers, n)).statusCode).toBe(201);

    const refused = await create(layouts[layout], alice.headers, 100);
    expect({ status: refused.statusCode, body: refused.json() }).toEqual({ status: 403, body });
    expect(await owned(alice)).toBe(100);
    // The limit is one user's: operators and other users still create.
    expect((await create(layouts[layout], operator.headers, 101)).statusCode).toBe(201);
    expect((await create(layouts[layout], (await createUser(harness.db)).headers, 0)).statusCode).toBe(201);
  });

  it('when 20 creates race with room for 5, then exactly 5 succeed and the rest are 403', async () => {
    const bob = await createUser(harness.db);
    for (let n = 0; n < 95; n++) expect((await create(layouts.a, bob.headers, n)).statusCode).toBe(201);

    const results = await Promise.all(Array.from({ length: 20 }, (_, n) => create(n % 2 === 0 ? layouts.a : layouts.b, bob.headers, 100 + n)));
    const statuses = results.map((res) => res.statusCode).sort();
    expect(statuses).toEqual([...Array(5).fill(201), ...Array(15).fill(403)]);
    expect(await owned(bob)).toBe(100);
  });

  it('when MAX_ENDPOINTS_PER_USER is 3, then the 4th is refused naming 3, and a deleted endpoint makes room', async () => {
    const carol = await createUser(harness.db);
    const ids: number[] = [];
    for (let n = 0; n < 3; n++) ids.push((await create(small, carol.headers, n)).json().id);
    const refused = await create(small, carol.headers, 3);
    expect({ status: refused.statusCode, body: refused.json() }).toEqual({ status: 403, body: { message: 'Endpoint limit reached (3).' } });

    expect((await small.request({ method: 'DELETE', url: `/api/v1/endpoints/${ids[0]}`, headers: carol.headers })).statusCode).toBe(204);
    expect((await create(small, carol.headers, 4)).statusCode).toBe(201);
  });
});
