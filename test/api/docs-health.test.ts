import { ApiHarness, createApiHarness } from './support/api-harness';

describe('OpenAPI document and health', () => {
  let harness: ApiHarness;

  beforeAll(async () => {
    harness = await createApiHarness();
  });

  afterAll(() => harness.close());

  it.each([
    ['a', ['/api/v1/posts', '/api/v1/posts/{id}', '/api/v1/posts/create', '/api/v1/posts/update/{id}', '/api/v1/posts/delete/{id}']],
    ['b', ['/api/v1/posts', '/api/v1/posts/{id}']],
  ] as const)('when /docs/json is fetched from Layout %s, then it lists the posts paths with responses', async (layout, paths) => {
    const api = await harness.start(layout);
    const res = await api.request({ url: '/docs/json' });
    expect(res.statusCode).toBe(200);
    const document = res.json();
    expect(document.openapi).toMatch(/^3\./);
    expect(Object.keys(document.paths)).toEqual(expect.arrayContaining([...paths]));
    for (const path of paths) {
      for (const operation of Object.values(document.paths[path]) as { responses: object }[]) {
        expect(Object.keys(operation.responses)).toContain('401');
      }
    }
    expect((await api.request({ url: '/docs' })).statusCode).toBeLessThan(400);
  });

  it('when the database and Redis answer, then /health and /ready are 200', async () => {
    const api = await harness.start('a');
    expect((await api.request({ url: '/health' })).json()).toEqual({ status: 'ok' });
    // The Redis connection is established asynchronously after start.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const ready = await api.request({ url: '/ready' });
    expect(ready.statusCode).toBe(200);
    expect(ready.json()).toEqual({ status: 'ready', checks: { database: 'up', redis: 'up' } });
  });

  it('when Redis is unreachable, then /ready is 503 naming Redis while /health stays 200', async () => {
    const api = await harness.start('b', { redisUrl: 'redis://127.0.0.1:1' });
    expect((await api.request({ url: '/health' })).statusCode).toBe(200);
    const ready = await api.request({ url: '/ready' });
    expect(ready.statusCode).toBe(503);
    expect(ready.json()).toEqual({ status: 'unavailable', checks: { database: 'up', redis: 'down' } });
  });

  it('when a response is sent, then it carries the request id, honouring a given X-Request-Id', async () => {
    const api = await harness.start('b');
    const res = await api.request({ url: '/health', headers: { 'x-request-id': 'trace-123' } });
    expect(res.headers['x-request-id']).toBe('trace-123');
  });
});
