import { request as httpRequest } from 'node:http';
import { createUser, TestUser } from '../support/factories';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';
import { createServiceKey, TestServiceKey } from './support/operations';

const LAYOUT_401 = {
  a: { status: 401, message: 'Invalid authentication token or client ID.' },
  b: { message: 'Invalid credentials.' },
};

/** The posts routes of each layout, written with the request target spelled as given. */
const POSTS_ROUTES = {
  a: (posts: string) => [
    ['GET', posts],
    ['GET', `${posts}/100000`],
    ['POST', `${posts}/create`],
    ['PUT', `${posts}/update/100000`],
    ['DELETE', `${posts}/delete/100000`],
    ['GET', `${posts}/nope/x`],
  ],
  b: (posts: string) => [
    ['GET', posts],
    ['GET', `${posts}/100000`],
    ['POST', posts],
    ['PUT', `${posts}/100000`],
    ['DELETE', `${posts}/100000`],
    ['GET', `${posts}/nope/x`],
  ],
} as const;

/** Spellings of /api/v1/posts that the router takes for it, but a look at the raw target does not. */
const SPELLINGS = ['/api/v1/%70osts', '/api/v1/post%73', '/api/v1/%70%6F%73%74%73', 'http://evil.example/api/v1/posts', 'http://x/api/v1/%70osts'];

interface RawResponse {
  status: number;
  body: unknown;
}

/**
 * Sends one request with the request target exactly as given (percent-encoded or absolute form),
 * which fetch would normalise away.
 */
function sendRaw(client: ApiClient, method: string, target: string, headers: Record<string, string>, payload?: object): Promise<RawResponse> {
  const { hostname, port } = new URL(client.baseUrl);
  const body = payload === undefined ? undefined : JSON.stringify(payload);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host: hostname, port, method, path: target, headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, body: text === '' ? null : JSON.parse(text) });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * Which rules a request gets is decided by the route the router matched (docs/design.md §4, §11.1):
 * a posts route spelled with percent-encoding or as an absolute-form target is still a posts
 * route, refusing service keys and portal sessions with the layout's 401.
 */
describe('rules by the matched route, not the raw request target', () => {
  let harness: ApiHarness;
  let layouts: Record<'a' | 'b', ApiClient>;
  let operator: TestServiceKey;
  let alice: TestUser;
  const sessions: Record<'a' | 'b', Record<string, string>> = { a: {}, b: {} };

  beforeAll(async () => {
    harness = await createApiHarness();
    layouts = { a: await harness.start('a'), b: await harness.start('b') };
    operator = await createServiceKey(harness.db, ['*']);
    alice = await createUser(harness.db);
    for (const layout of ['a', 'b'] as const) {
      const link = await layouts[layout].request({ method: 'POST', url: '/api/v1/portal-links', headers: operator.headers, payload: { user_id: alice.user.userId } });
      const token = new URL(link.json().url).hash.replace(/^#token=/, '');
      const opened = await layouts[layout].request({ method: 'POST', url: '/api/v1/portal-sessions', payload: { token } });
      expect(opened.statusCode).toBe(201);
      sessions[layout] = { authorization: `Bearer ${opened.json().token}` };
    }
  });

  afterAll(() => harness.close());

  const post = { title: 't', content: 'c', body: 'c' };

  it.each(['a', 'b'] as const)('when Layout %s gets a service key on a posts route spelled another way, then each is 401 with the layout body', async (layout) => {
    for (const spelling of SPELLINGS) {
      for (const [method, target] of POSTS_ROUTES[layout](spelling)) {
        const res = await sendRaw(layouts[layout], method, target, operator.headers, method === 'POST' || method === 'PUT' ? post : undefined);
        expect({ method, target, ...res }).toEqual({ method, target, status: 401, body: LAYOUT_401[layout] });
      }
    }
  });

  it.each(['a', 'b'] as const)('when Layout %s gets a portal session on a posts route spelled another way, then each is 401 with the layout body', async (layout) => {
    for (const spelling of SPELLINGS) {
      for (const [method, target] of POSTS_ROUTES[layout](spelling)) {
        const res = await sendRaw(layouts[layout], method, target, sessions[layout], method === 'POST' || method === 'PUT' ? post : undefined);
        expect({ method, target, ...res }).toEqual({ method, target, status: 401, body: LAYOUT_401[layout] });
      }
    }
  });

  it.each(['a', 'b'] as const)('when Layout %s gets a user token on a posts route spelled another way, then it answers as the plain path does', async (layout) => {
    const plain = await sendRaw(layouts[layout], 'GET', '/api/v1/posts', alice.headers);
    for (const spelling of SPELLINGS) {
      const res = await sendRaw(layouts[layout], 'GET', spelling, alice.headers);
      expect({ spelling, ...res }).toEqual({ spelling, ...plain });
    }
  });

  it.each(['a', 'b'] as const)('when Layout %s gets a service key on an operations route spelled another way, then it is served', async (layout) => {
    for (const target of ['/api/v1/%65ndpoints', 'http://x/api/v1/endpoints']) {
      const res = await sendRaw(layouts[layout], 'GET', target, operator.headers);
      expect({ target, status: res.status }).toEqual({ target, status: 200 });
    }
  });
});
