import { createUser } from '../support/factories';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';

/** docs/design.md §12: RATE_LIMIT_PER_MIN per principal (per client address before authentication). */
describe('rate limit', () => {
  let harness: ApiHarness;
  let a: ApiClient;
  let b: ApiClient;

  beforeAll(async () => {
    harness = await createApiHarness();
    // Two api processes' worth of apps over one Redis prefix: the count is shared.
    a = await harness.start('a', { rateLimitPerMin: 4 });
    b = await harness.start('b', { rateLimitPerMin: 4 });
  });

  afterAll(() => harness.close());

  it('when a user passes the limit across both layouts, then the next request is 429 in each layout shape with Retry-After and RateLimit headers', async () => {
    const user = await createUser(harness.db);
    const statuses = [];
    for (const api of [a, b, a, b]) statuses.push((await api.request({ url: '/api/v1/posts', headers: user.headers })).statusCode);
    expect(statuses).toEqual([204, 404, 204, 404]);

    for (const [api, body] of [
      [a, { status: 429, message: expect.stringMatching(/^Rate limit exceeded: 4 requests per minute/) }],
      [b, { message: expect.stringMatching(/^Rate limit exceeded: 4 requests per minute/) }],
    ] as const) {
      const res = await api.request({ url: '/api/v1/posts', headers: user.headers });
      expect(res.statusCode).toBe(429);
      expect(res.json()).toEqual(body);
      expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(60);
      expect(res.headers['ratelimit-limit']).toBe('4');
      expect(res.headers['ratelimit-remaining']).toBe('0');
      expect(res.headers['ratelimit-reset']).toBe(res.headers['retry-after']);
    }

    const other = await createUser(harness.db);
    expect((await a.request({ url: '/api/v1/posts', headers: other.headers })).statusCode).toBe(204);
  });

  it('when unauthenticated requests pass the limit, then they count against the address and get 429 instead of 401', async () => {
    const scoped = await harness.start('b', { rateLimitPerMin: 3, redisPrefix: `${harness.env.redisPrefix}ip` });
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await scoped.request({ url: '/api/v1/posts', headers: { authorization: 'Bearer nope', user_id: '1' } })).statusCode);
    expect(statuses).toEqual([401, 401, 401, 429]);
    // An unknown route outside /api/v1/posts needs no credentials, but counts the same.
    expect((await scoped.request({ url: '/api/v1/nothing-here' })).statusCode).toBe(429);
    // A user is counted on their own.
    const user = await createUser(harness.db);
    expect((await scoped.request({ url: '/api/v1/posts', headers: user.headers })).statusCode).toBe(404);
  });

  it('when many requests of one user arrive at once on two processes, then exactly the limit passes and the rest are 429', async () => {
    const prefix = `${harness.env.redisPrefix}burst`;
    const first = await harness.start('b', { rateLimitPerMin: 7, redisPrefix: prefix });
    const second = await harness.start('b', { rateLimitPerMin: 7, redisPrefix: prefix });
    const user = await createUser(harness.db);
    const responses = await Promise.all(
      Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? first : second).request({ url: '/api/v1/posts', headers: user.headers })),
    );
    const statuses = responses.map((res) => res.statusCode).sort();
    expect(statuses).toEqual([...Array(7).fill(404), ...Array(13).fill(429)]);
  });

  it('when RATE_LIMIT_PER_MIN is 0, then there is no limit', async () => {
    const unlimited = await harness.start('a', { rateLimitPerMin: 0, redisPrefix: `${harness.env.redisPrefix}off` });
    const user = await createUser(harness.db);
    const responses = await Promise.all(Array.from({ length: 12 }, () => unlimited.request({ url: '/api/v1/posts', headers: user.headers })));
    expect(responses.map((res) => res.statusCode)).toEqual(Array(12).fill(204));
  });
});
