import { createUser } from '../support/factories';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';
import { findUser } from './support/rows';

describe('Layout A quota (docs/design.md §4)', () => {
  let harness: ApiHarness;
  let api: ApiClient;

  const quotaUsed = async (userId: number) => (await findUser(harness.db, userId))!.quotaUsed;

  beforeAll(async () => {
    harness = await createApiHarness({ QUOTA_PERIOD_S: '3600' });
    api = await harness.start('a');
  });

  afterAll(() => harness.close());

  it('when 50 requests race for a quota of 10, then exactly 10 pass and 40 get 401 with Retry-After', async () => {
    const { user, headers } = await createUser(harness.db, { quotaLimit: 10 });
    const responses = await Promise.all(Array.from({ length: 50 }, () => api.request({ url: '/api/v1/posts', headers })));
    const passed = responses.filter((res) => res.statusCode !== 401);
    const refused = responses.filter((res) => res.statusCode === 401);
    expect(passed).toHaveLength(10);
    expect(refused).toHaveLength(40);
    for (const res of refused) {
      expect(res.json()).toEqual({ status: 401, message: 'Quota exceeded limit: 10' });
      expect(Number(res.headers['retry-after'])).toBeGreaterThan(3500);
      expect(res.headers['ratelimit-remaining']).toBe('0');
    }
    expect(passed.map((res) => res.headers['ratelimit-remaining']).sort()).toEqual(['0', '1', '2', '3', '4', '5', '6', '7', '8', '9']);
    expect(await quotaUsed(user.userId)).toBe(10);
  });

  it('when a limited user makes a request, then RateLimit-Limit, -Remaining and -Reset describe the period', async () => {
    const { headers } = await createUser(harness.db, { quotaLimit: 5 });
    const res = await api.request({ url: '/api/v1/posts', headers });
    expect(res.statusCode).toBe(204);
    expect(res.headers['ratelimit-limit']).toBe('5');
    expect(res.headers['ratelimit-remaining']).toBe('4');
    expect(Number(res.headers['ratelimit-reset'])).toBeGreaterThan(3590);
    expect(Number(res.headers['ratelimit-reset'])).toBeLessThanOrEqual(3600);
  });

  it('when the period has passed, then the counter restarts', async () => {
    const { user, headers } = await createUser(harness.db, { quotaLimit: 2 });
    await api.request({ url: '/api/v1/posts', headers });
    await api.request({ url: '/api/v1/posts', headers });
    expect((await api.request({ url: '/api/v1/posts', headers })).statusCode).toBe(401);
    await harness.db.sequelize.query(`UPDATE users SET quota_period_start = now() - interval '3601 seconds' WHERE user_id = ${user.userId}`);
    const res = await api.request({ url: '/api/v1/posts', headers });
    expect(res.statusCode).toBe(204);
    expect(res.headers['ratelimit-remaining']).toBe('1');
    expect(await quotaUsed(user.userId)).toBe(1);
  });

  it('when the quota limit is 0, then requests are unlimited, uncounted and carry no RateLimit headers', async () => {
    const { user, headers } = await createUser(harness.db, { quotaLimit: 0 });
    const responses = await Promise.all(Array.from({ length: 20 }, () => api.request({ url: '/api/v1/posts', headers })));
    expect(responses.every((res) => res.statusCode === 204)).toBe(true);
    expect(responses[0].headers['ratelimit-limit']).toBeUndefined();
    expect(await quotaUsed(user.userId)).toBe(0);
  });

  it('when the credentials are wrong, then nothing is counted', async () => {
    const { user, headers } = await createUser(harness.db, { quotaLimit: 3 });
    const res = await api.request({ url: '/api/v1/posts', headers: { ...headers, authorization: 'Bearer wrong' } });
    expect(res.statusCode).toBe(401);
    expect(await quotaUsed(user.userId)).toBe(0);
  });

  it('when an unknown endpoint under /api/v1/posts is called, then it counts like any authenticated request', async () => {
    const { user, headers } = await createUser(harness.db, { quotaLimit: 3 });
    expect((await api.request({ url: '/api/v1/posts/nope', headers })).json()).toEqual({ status: 401, message: 'Invalid or missing endpoint.' });
    expect(await quotaUsed(user.userId)).toBe(1);
  });

  it('when Layout B serves a limited user, then no quota is counted', async () => {
    const b = await harness.start('b');
    const { user, headers } = await createUser(harness.db, { quotaLimit: 1 });
    await b.request({ url: '/api/v1/posts', headers });
    const res = await b.request({ url: '/api/v1/posts', headers });
    expect(res.statusCode).toBe(404);
    expect(await quotaUsed(user.userId)).toBe(0);
  });
});
