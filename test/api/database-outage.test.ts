import { createUser, TestUser } from '../support/factories';
import { startTcpProxy, TcpProxy } from '../support/tcp-proxy';
import { ApiClient, ApiHarness, ApiRequest, createApiHarness } from './support/api-harness';
import { createServiceKey, TestServiceKey } from './support/operations';

// PostgreSQL is shared by every test here, so it is made unreachable through a proxy the
// apis connect to, never stopped (docs/design.md §6.7).
let harness: ApiHarness;
let proxy: TcpProxy;
let user: TestUser;
let sender: TestServiceKey;
let apiA: ApiClient;
let apiB: ApiClient;

beforeAll(async () => {
  harness = await createApiHarness();
  user = await createUser(harness.db);
  sender = await createServiceKey(harness.db, ['webhooks:send']);
  const real = new URL(harness.env.databaseUrl);
  proxy = await startTcpProxy({ host: real.hostname, port: Number(real.port || 5432) });
  const viaProxy = new URL(real);
  viaProxy.hostname = '127.0.0.1';
  viaProxy.port = String(proxy.port);
  apiA = await harness.start('a', { databaseUrl: viaProxy.toString() });
  apiB = await harness.start('b', { databaseUrl: viaProxy.toString() });
});

afterAll(async () => {
  await proxy.restore();
  await harness.close();
  await proxy.close();
});

const UNAVAILABLE_A = { status: 503, message: 'Service temporarily unavailable.' };
const UNAVAILABLE_B = { message: 'Service temporarily unavailable.' };

const WEBHOOK = { url: 'http://127.0.0.1:9/hook', event: 'demo.ping', payload: { ping: true }, secret: 'whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ=' };

// An unknown endpoint is not listed: once the caller's credentials are cached (docs/design.md §4,
// "Revocation"), answering it needs no database.
function routesOfA(): ApiRequest[] {
  const headers = user.headers;
  return [
    { url: '/api/v1/posts', headers },
    { url: '/api/v1/posts/1', headers },
    { method: 'POST', url: '/api/v1/posts/create', headers, payload: { title: 'T', body: 'B', userId: user.user.userId } },
    { method: 'PUT', url: '/api/v1/posts/update/1', headers, payload: { title: 'T' } },
    { method: 'DELETE', url: '/api/v1/posts/delete/1', headers },
    { method: 'POST', url: '/api/v1/webhooks', headers: sender.headers, payload: WEBHOOK },
  ];
}

function routesOfB(): ApiRequest[] {
  const headers = user.headers;
  return [
    { url: '/api/v1/posts', headers },
    { url: '/api/v1/posts/1', headers },
    { method: 'POST', url: '/api/v1/posts', headers, payload: { title: 'T', content: 'C' } },
    { method: 'PUT', url: '/api/v1/posts/1', headers, payload: { title: 'T', content: 'C' } },
    { method: 'DELETE', url: '/api/v1/posts/1', headers },
    { method: 'POST', url: '/api/v1/webhooks', headers: sender.headers, payload: WEBHOOK },
  ];
}

async function expectUnavailable(api: ApiClient, requests: ApiRequest[], body: object): Promise<void> {
  for (const request of requests) {
    const response = await api.request(request);
    expect({ route: `${request.method ?? 'GET'} ${request.url}`, status: response.statusCode, retryAfter: response.headers['retry-after'], body: response.json() }).toEqual({
      route: `${request.method ?? 'GET'} ${request.url}`,
      status: 503,
      retryAfter: '5',
      body,
    });
  }
}

/** Polls until the api serves `request` with something other than 503; returns that status. */
async function whenServing(api: ApiClient, request: ApiRequest, boundMs: number): Promise<number> {
  const deadline = Date.now() + boundMs;
  for (;;) {
    const { statusCode } = await api.request(request);
    if (statusCode !== 503 || Date.now() > deadline) return statusCode;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe('PostgreSQL unreachable', () => {
  it('when PostgreSQL refuses connections, then every api route answers 503 with Retry-After: 5 in its layout, /ready 503, and both recover when it is back', async () => {
    expect((await apiA.request({ url: '/api/v1/posts', headers: user.headers })).statusCode).toBe(204);
    expect((await apiB.request({ url: '/ready' })).statusCode).toBe(200);

    await proxy.cut('refuse');
    await expectUnavailable(apiA, routesOfA(), UNAVAILABLE_A);
    await expectUnavailable(apiB, routesOfB(), UNAVAILABLE_B);
    for (const api of [apiA, apiB]) {
      const ready = await api.request({ url: '/ready' });
      expect([ready.statusCode, ready.json().checks.database]).toEqual([503, 'down']);
      expect((await api.request({ url: '/health' })).statusCode).toBe(200);
    }

    await proxy.restore();
    expect(await whenServing(apiA, { url: '/api/v1/posts', headers: user.headers }, 10_000)).toBe(204);
    expect(await whenServing(apiB, { method: 'POST', url: '/api/v1/posts', headers: user.headers, payload: { title: 'Back', content: 'Again' } }, 10_000)).toBe(200);
    expect((await apiB.request({ url: '/api/v1/posts', headers: user.headers })).json()).toEqual([expect.objectContaining({ title: 'Back' })]);
    expect((await apiA.request({ url: '/ready' })).statusCode).toBe(200);
  });

  it('when the PostgreSQL host stops answering, then a request answers 503 within the connect timeout, not after a 30 s pool wait', async () => {
    await proxy.cut('hang');
    try {
      // The first request may meet a pooled connection the cut just broke; the second must connect anew.
      for (const attempt of [1, 2]) {
        const started = Date.now();
        const response = await apiB.request({ url: '/api/v1/posts', headers: user.headers });
        const elapsed = Date.now() - started;
        expect([attempt, response.statusCode, response.headers['retry-after'], response.json()]).toEqual([attempt, 503, '5', UNAVAILABLE_B]);
        // The connect timeout is 10 s (a busy host's connects must not fail); well under the old 30 s wait.
        expect(elapsed).toBeLessThan(20_000);
      }
    } finally {
      await proxy.restore();
    }
    expect(await whenServing(apiB, { url: '/ready' }, 10_000)).toBe(200);
  });
});
