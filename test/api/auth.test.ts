import { announceCredentialChange } from '../../shared/auth/credential-changes';
import { createUser, TestUser } from '../support/factories';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';

const LAYOUT_A_401 = { status: 401, message: 'Invalid authentication token or client ID.' };
const LAYOUT_B_401 = { message: 'Invalid credentials.' };

describe('authentication (both layouts)', () => {
  let harness: ApiHarness;
  let layouts: Record<'a' | 'b', ApiClient>;
  let alice: TestUser;
  let bob: TestUser;

  beforeAll(async () => {
    harness = await createApiHarness();
    layouts = { a: await harness.start('a'), b: await harness.start('b') };
    alice = await createUser(harness.db);
    bob = await createUser(harness.db);
  });

  afterAll(() => harness.close());

  const cases = (): [string, Record<string, string>][] => [
    ['no headers', {}],
    ['no user id', { authorization: alice.headers.authorization }],
    ['no token', { user_id: alice.headers.user_id }],
    ['a wrong token', { authorization: 'Bearer not-the-token', user_id: alice.headers.user_id }],
    ["another user's id", { authorization: alice.headers.authorization, user_id: bob.headers.user_id }],
    ['a non-bearer scheme', { authorization: `Basic ${alice.token}`, user_id: alice.headers.user_id }],
    ['a non-numeric user id', { authorization: alice.headers.authorization, user_id: 'abc' }],
    ['an unknown user id', { authorization: alice.headers.authorization, user_id: '99999' }],
  ];

  it.each([
    ['a', LAYOUT_A_401],
    ['b', LAYOUT_B_401],
  ] as const)('when Layout %s gets bad credentials on every posts route, then each is 401 with the layout body', async (layout, expected) => {
    const routes: [string, string][] =
      layout === 'a'
        ? [['GET', '/api/v1/posts'], ['GET', '/api/v1/posts/100000'], ['POST', '/api/v1/posts/create'], ['PUT', '/api/v1/posts/update/100000'], ['DELETE', '/api/v1/posts/delete/100000']]
        : [['GET', '/api/v1/posts'], ['GET', '/api/v1/posts/10000'], ['POST', '/api/v1/posts'], ['PUT', '/api/v1/posts/10000'], ['DELETE', '/api/v1/posts/10000']];
    for (const [name, headers] of cases()) {
      for (const [method, url] of routes) {
        const res = await layouts[layout].request({ method, url, headers, payload: method === 'POST' || method === 'PUT' ? {} : undefined });
        expect({ name, method, url, status: res.statusCode, body: res.json() }).toEqual({ name, method, url, status: 401, body: expected });
      }
    }
  });

  it.each(['a', 'b'] as const)('when Layout %s gets X-Api-Client-Id instead of user_id, then the request is authenticated', async (layout) => {
    const res = await layouts[layout].request({
      url: '/api/v1/posts/1',
      headers: { authorization: alice.headers.authorization, 'x-api-client-id': alice.headers.user_id },
    });
    expect(res.statusCode).toBe(layout === 'a' ? 204 : 404);
  });

  it('when a token is revoked and the change published, then it no longer authenticates', async () => {
    const carol = await createUser(harness.db);
    expect((await layouts.b.request({ url: '/api/v1/posts/1', headers: carol.headers })).statusCode).toBe(404);
    await harness.db.sequelize.query('UPDATE users SET api_token_hash = NULL WHERE user_id = $1', { bind: [carol.user.userId] });
    await announceCredentialChange(harness.env.config, harness.env.redisPrefix, { kind: 'user', userId: carol.user.userId });
    const res = await layouts.b.request({ url: '/api/v1/posts/1', headers: carol.headers });
    expect(res.statusCode).toBe(401);
  });
});
