import { createHash } from 'node:crypto';
import { QueryTypes } from 'sequelize';
import { runKeysCli } from '../../scripts/keys-cli';
import { processEnv } from '../support/environment';
import { createUser, TestUser } from '../support/factories';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';
import { createServiceKey, TestServiceKey } from './support/operations';

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const REFUSED_LINK = 'This portal link is invalid, expired, revoked or already used.';
const shape = { a: (status: number, message: string) => ({ status, message }), b: (_status: number, message: string) => ({ message }) };

/**
 * Portal links (docs/design.md §11.6) over HTTP in both layouts: minting with `portal:write`,
 * the one-time exchange for a `ps_` session, what a session may and may not do, revocation and
 * the list.
 */
describe('portal links', () => {
  let harness: ApiHarness;
  let layouts: Record<'a' | 'b', ApiClient>;
  let operator: TestServiceKey;

  beforeAll(async () => {
    harness = await createApiHarness();
    layouts = { a: await harness.start('a'), b: await harness.start('b') };
    operator = await createServiceKey(harness.db, ['portal:write']);
  });

  afterAll(() => harness.close());

  async function mint(layout: 'a' | 'b', body: object, key: TestServiceKey = operator) {
    return layouts[layout].request({ method: 'POST', url: '/api/v1/portal-links', headers: key.headers, payload: body });
  }

  /** A link's token, from the fragment of its URL. */
  const tokenOf = (url: string) => new URL(url).hash.replace(/^#token=/, '');

  async function exchange(layout: 'a' | 'b', token: string) {
    return layouts[layout].request({ method: 'POST', url: '/api/v1/portal-sessions', payload: { token } });
  }

  /** Mints a link for `user` and opens it: the session's headers. */
  async function sessionFor(user: TestUser, scope: 'read' | 'manage' = 'manage', layout: 'a' | 'b' = 'a') {
    const link = (await mint(layout, { user_id: user.user.userId, scope })).json();
    const opened = await exchange(layout, tokenOf(link.url));
    expect(opened.statusCode).toBe(201);
    return { link, session: opened.json(), headers: { authorization: `Bearer ${opened.json().token}` } };
  }

  async function addEndpoint(user: TestUser) {
    const res = await layouts.a.request({ method: 'POST', url: '/api/v1/endpoints', headers: user.headers, payload: { url: 'http://127.0.0.1:9/hooks' } });
    expect(res.statusCode).toBe(201);
    return res.json().id as number;
  }

  it.each(['a', 'b'] as const)(
    'when Layout %s mints a link with portal:write, then it answers 201 {id, url, expires_at} with the token in the fragment, stored only as its sha256',
    async (layout) => {
      const { user } = await createUser(harness.db);
      const before = Date.now();
      const res = await mint(layout, { user_id: user.userId, scope: 'read', ttl_s: 600 });
      expect(res.statusCode).toBe(201);
      const body = res.json();
      expect(Object.keys(body).sort()).toEqual(['expires_at', 'id', 'url']);
      expect(body.url).toMatch(/^http:\/\/localhost:3000\/portal#token=pl_[A-Za-z0-9_-]{43}$/);
      expect(Date.parse(body.expires_at) - before).toBeGreaterThanOrEqual(599_000);
      expect(Date.parse(body.expires_at) - before).toBeLessThanOrEqual(602_000);
      const [row] = await harness.db.sequelize.query<Record<string, unknown>>('SELECT * FROM portal_links WHERE id = $1', {
        bind: [body.id],
        type: QueryTypes.SELECT,
      });
      expect(row).toMatchObject({ user_id: user.userId, token_hash: sha256(tokenOf(body.url)), scope: 'read', session_ttl_s: 3600, used_at: null, revoked_at: null, created_by_key_id: operator.id });
      expect(JSON.stringify(row)).not.toContain(tokenOf(body.url));
    },
  );

  it.each(['a', 'b'] as const)('when Layout %s is asked to mint by a user, a key without the scope or with bad input, then it refuses in its shape', async (layout) => {
    const alice = await createUser(harness.db);
    const reader = await createServiceKey(harness.db, ['endpoints:read', 'webhooks:read']);
    const everything = await createServiceKey(harness.db, ['*']);
    const cases: [object, Record<string, string>, number, string | RegExp][] = [
      [{ user_id: alice.user.userId }, alice.headers, 403, 'A service key with the scope portal:write is required.'],
      [{ user_id: alice.user.userId }, reader.headers, 403, 'This key lacks the scope portal:write.'],
      [{}, operator.headers, 400, /user_id/],
      [{ user_id: alice.user.userId, scope: 'admin' }, operator.headers, 400, /scope/],
      [{ user_id: alice.user.userId, ttl_s: 59 }, operator.headers, 400, /ttl_s/],
      [{ user_id: alice.user.userId, ttl_s: 86_401 }, operator.headers, 400, /ttl_s/],
      [{ user_id: alice.user.userId, session_ttl_s: 86_401 }, operator.headers, 400, /session_ttl_s/],
      [{ user_id: 99_998 }, operator.headers, 404, 'User 99998 not found.'],
    ];
    for (const [payload, headers, status, message] of cases) {
      const res = await layouts[layout].request({ method: 'POST', url: '/api/v1/portal-links', headers, payload });
      expect({ payload, status: res.statusCode }).toEqual({ payload, status });
      expect(res.json()).toEqual(shape[layout](status, expect.stringMatching(message) as unknown as string));
    }
    expect((await mint(layout, { user_id: alice.user.userId }, everything)).statusCode).toBe(201);
  });

  it.each(['a', 'b'] as const)(
    'when Layout %s exchanges a link, then it answers a ps_ session for that user and scope, and a second exchange is 401',
    async (layout) => {
      const { user } = await createUser(harness.db);
      const link = (await mint(layout, { user_id: user.userId, scope: 'read', session_ttl_s: 120 })).json();
      const before = Date.now();
      const first = await exchange(layout, tokenOf(link.url));
      expect(first.statusCode).toBe(201);
      const session = first.json();
      expect(session).toEqual({ token: expect.stringMatching(/^ps_[A-Za-z0-9_-]{43}$/), user_id: user.userId, scope: 'read', expires_at: expect.any(String) });
      expect(Date.parse(session.expires_at) - before).toBeGreaterThanOrEqual(119_000);
      expect(Date.parse(session.expires_at) - before).toBeLessThanOrEqual(122_000);
      const [stored] = await harness.db.sequelize.query<{ token_hash: string; used: boolean }>(
        'SELECT s.token_hash, l.used_at IS NOT NULL AS used FROM portal_sessions s JOIN portal_links l ON l.id = s.link_id WHERE l.id = $1',
        { bind: [link.id], type: QueryTypes.SELECT },
      );
      expect(stored).toEqual({ token_hash: sha256(session.token), used: true });

      const second = await exchange(layout, tokenOf(link.url));
      expect(second.statusCode).toBe(401);
      expect(second.json()).toEqual(shape[layout](401, REFUSED_LINK));
      for (const payload of [{ token: 'pl_not-a-link-of-this-api-0123456789abcdefghijk' }, { token: session.token }]) {
        expect((await layouts[layout].request({ method: 'POST', url: '/api/v1/portal-sessions', payload })).statusCode).toBe(401);
      }
      expect((await layouts[layout].request({ method: 'POST', url: '/api/v1/portal-sessions', payload: {} })).statusCode).toBe(400);
    },
  );

  it('when one link is exchanged ten times at the same moment on both layouts, then exactly one session is made', async () => {
    const { user } = await createUser(harness.db);
    const token = tokenOf((await mint('a', { user_id: user.userId })).json().url);
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => exchange(i % 2 ? 'a' : 'b', token)));
    expect(answers.map((res) => res.statusCode).sort()).toEqual([201, ...Array(9).fill(401)]);
    const [{ count }] = await harness.db.sequelize.query<{ count: number }>('SELECT count(*)::int AS count FROM portal_sessions WHERE user_id = $1', {
      bind: [user.userId],
      type: QueryTypes.SELECT,
    });
    expect(count).toBe(1);
  });

  it('when a link has expired or was revoked before it was opened, then the exchange is 401 and makes no session', async () => {
    const { user } = await createUser(harness.db);
    const expired = (await mint('a', { user_id: user.userId, ttl_s: 60 })).json();
    await harness.db.sequelize.query(`UPDATE portal_links SET expires_at = now() - interval '1 second' WHERE id = $1`, { bind: [expired.id] });
    const revoked = (await mint('b', { user_id: user.userId })).json();
    expect((await layouts.b.request({ method: 'DELETE', url: `/api/v1/portal-links/${revoked.id}`, headers: operator.headers })).statusCode).toBe(204);

    expect((await exchange('a', tokenOf(expired.url))).json()).toEqual(shape.a(401, REFUSED_LINK));
    expect((await exchange('b', tokenOf(revoked.url))).json()).toEqual(shape.b(401, REFUSED_LINK));
    const [{ count }] = await harness.db.sequelize.query<{ count: number }>('SELECT count(*)::int AS count FROM portal_sessions WHERE user_id = $1', {
      bind: [user.userId],
      type: QueryTypes.SELECT,
    });
    expect(count).toBe(0);
  });

  it.each(['a', 'b'] as const)('when a manage session calls Layout %s, then it acts as that user on their own endpoints and deliveries only', async (layout) => {
    const alice = await createUser(harness.db);
    const bob = await createUser(harness.db);
    const own = await addEndpoint(alice);
    const others = await addEndpoint(bob);
    const { headers } = await sessionFor(alice, 'manage', layout);
    const api = layouts[layout];

    const listed = await api.request({ url: '/api/v1/endpoints', headers });
    expect(listed.statusCode).toBe(200);
    expect(listed.json().data.map((endpoint: { id: number }) => endpoint.id)).toEqual([own]);
    expect((await api.request({ url: `/api/v1/endpoints/${others}`, headers })).statusCode).toBe(404);
    expect((await api.request({ url: '/api/v1/webhooks', headers })).statusCode).toBe(200);
    expect((await api.request({ url: '/api/v1/event-types', headers })).statusCode).toBe(200);

    const created = await api.request({ method: 'POST', url: '/api/v1/endpoints', headers, payload: { url: 'http://127.0.0.1:9/portal-made' } });
    expect(created.statusCode).toBe(201);
    expect(created.json().user_id).toBe(alice.user.userId);
    const changed = await api.request({ method: 'PATCH', url: `/api/v1/endpoints/${own}`, headers, payload: { description: 'from the portal' } });
    expect(changed.json()).toMatchObject({ id: own, description: 'from the portal' });
    expect((await api.request({ method: 'POST', url: `/api/v1/endpoints/${own}/test`, headers })).statusCode).toBe(202);
    expect((await api.request({ method: 'POST', url: `/api/v1/endpoints/${own}/rotate-secret`, headers, payload: {} })).statusCode).toBe(200);
    expect((await api.request({ method: 'DELETE', url: `/api/v1/endpoints/${created.json().id}`, headers })).statusCode).toBe(204);
    expect((await api.request({ method: 'PATCH', url: `/api/v1/endpoints/${others}`, headers, payload: { active: false } })).statusCode).toBe(404);
  });

  it.each(['a', 'b'] as const)('when a session calls Layout %s outside what it may do, then posts are 401, service routes 403 and writes of a read session 403', async (layout) => {
    const alice = await createUser(harness.db);
    const own = await addEndpoint(alice);
    const manage = await sessionFor(alice, 'manage', layout);
    const read = await sessionFor(alice, 'read', layout);
    const api = layouts[layout];
    const unauthorized = layout === 'a' ? { status: 401, message: 'Invalid authentication token or client ID.' } : { message: 'Invalid credentials.' };

    for (const headers of [manage.headers, read.headers]) {
      const posts = await api.request({ url: '/api/v1/posts', headers });
      expect(posts.statusCode).toBe(401);
      expect(posts.json()).toEqual(unauthorized);
      const forbidden: [string, string, object?][] = [
        ['POST', '/api/v1/webhooks', { url: 'http://127.0.0.1:9/x', event: 'x', payload: {}, secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw' }],
        ['POST', '/api/v1/events', { event: 'post.created', payload: {} }],
        ['POST', '/api/v1/portal-links', { user_id: alice.user.userId }],
        ['GET', `/api/v1/portal-links?user_id=${alice.user.userId}`],
      ];
      for (const [method, url, payload] of forbidden) {
        const res = await api.request({ method, url, headers, payload });
        expect({ method, url, status: res.statusCode }).toEqual({ method, url, status: 403 });
      }
    }
    // With the user id header beside it, a session token is a wrong user token, not a session.
    expect((await api.request({ url: '/api/v1/endpoints', headers: { ...read.headers, user_id: String(alice.user.userId) } })).statusCode).toBe(401);

    expect((await api.request({ url: `/api/v1/endpoints/${own}`, headers: read.headers })).statusCode).toBe(200);
    expect((await api.request({ url: `/api/v1/endpoints/${own}/stats`, headers: read.headers })).statusCode).toBe(200);
    const writes: [string, string, object?][] = [
      ['POST', '/api/v1/endpoints', { url: 'http://127.0.0.1:9/read-only' }],
      ['PATCH', `/api/v1/endpoints/${own}`, { active: false }],
      ['POST', `/api/v1/endpoints/${own}/test`],
      ['POST', `/api/v1/endpoints/${own}/rotate-secret`, {}],
      ['DELETE', `/api/v1/endpoints/${own}`],
    ];
    for (const [method, url, payload] of writes) {
      const res = await api.request({ method, url, headers: read.headers, payload });
      expect({ method, url, status: res.statusCode }).toEqual({ method, url, status: 403 });
      expect(res.json()).toEqual(shape[layout](403, 'This portal session is read-only.'));
    }
    const [endpoint] = await harness.db.sequelize.query<{ active: boolean }>('SELECT active FROM webhook_endpoints WHERE id = $1', { bind: [own], type: QueryTypes.SELECT });
    expect(endpoint.active).toBe(true);
  });

  it('when a session has expired, then it is refused with 401', async () => {
    const alice = await createUser(harness.db);
    const { link, headers } = await sessionFor(alice);
    await harness.db.sequelize.query(`UPDATE portal_sessions SET expires_at = now() - interval '1 second' WHERE link_id = $1`, { bind: [link.id] });
    expect((await layouts.b.request({ url: '/api/v1/endpoints', headers })).statusCode).toBe(401);
  });

  it.each(['a', 'b'] as const)('when Layout %s deletes a link in use, then its session is refused at once; a second delete is 204, an unknown id 404', async (layout) => {
    const alice = await createUser(harness.db);
    const { link, headers } = await sessionFor(alice);
    const api = layouts[layout];
    expect((await api.request({ url: '/api/v1/endpoints', headers })).statusCode).toBe(200);
    expect((await api.request({ method: 'DELETE', url: `/api/v1/portal-links/${link.id}`, headers: alice.headers })).statusCode).toBe(403);
    expect((await api.request({ method: 'DELETE', url: `/api/v1/portal-links/${link.id}`, headers: operator.headers })).statusCode).toBe(204);
    expect((await api.request({ url: '/api/v1/endpoints', headers })).statusCode).toBe(401);
    expect((await layouts[layout === 'a' ? 'b' : 'a'].request({ url: '/api/v1/endpoints', headers })).statusCode).toBe(401);
    expect((await api.request({ method: 'DELETE', url: `/api/v1/portal-links/${link.id}`, headers: operator.headers })).statusCode).toBe(204);
    const unknown = await api.request({ method: 'DELETE', url: '/api/v1/portal-links/2147483000', headers: operator.headers });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toEqual(shape[layout](404, 'Portal link not found.'));
    expect((await api.request({ method: 'DELETE', url: '/api/v1/portal-links/abc', headers: operator.headers })).statusCode).toBe(404);
  });

  it('when a user\'s links are listed, then they come newest first, paged, with their state and never a token', async () => {
    const alice = await createUser(harness.db);
    const bob = await createUser(harness.db);
    const links: { id: number; url: string }[] = [];
    for (const scope of ['read', 'manage', 'read']) links.push((await mint('a', { user_id: alice.user.userId, scope })).json());
    const ids = links.map((link) => link.id);
    await mint('a', { user_id: bob.user.userId });
    await exchange('a', tokenOf(links[1].url));
    await layouts.a.request({ method: 'DELETE', url: `/api/v1/portal-links/${ids[0]}`, headers: operator.headers });

    const first = await layouts.b.request({ url: `/api/v1/portal-links?user_id=${alice.user.userId}&limit=2`, headers: operator.headers });
    expect(first.statusCode).toBe(200);
    const page = first.json();
    expect(page.data.map((link: { id: number }) => link.id)).toEqual([ids[2], ids[1]]);
    expect(Object.keys(page.data[0]).sort()).toEqual(['created_at', 'expires_at', 'id', 'revoked_at', 'scope', 'session_ttl_s', 'used_at', 'user_id']);
    expect(page.data.map((link: { scope: string; used_at: string | null }) => [link.scope, link.used_at !== null])).toEqual([['read', false], ['manage', true]]);
    expect(first.body).not.toMatch(/pl_|token/);
    const second = (await layouts.b.request({ url: `/api/v1/portal-links?user_id=${alice.user.userId}&limit=2&cursor=${page.next_cursor}`, headers: operator.headers })).json();
    expect(second.data.map((link: { id: number }) => link.id)).toEqual([ids[0]]);
    expect(second.data[0].revoked_at).toEqual(expect.any(String));
    expect(second.next_cursor).toBeNull();

    expect((await layouts.a.request({ url: '/api/v1/portal-links', headers: operator.headers })).statusCode).toBe(400);
    expect((await layouts.a.request({ url: `/api/v1/portal-links?user_id=${alice.user.userId}`, headers: alice.headers })).statusCode).toBe(403);
    expect((await layouts.a.request({ url: '/api/v1/portal-links?user_id=99998', headers: operator.headers })).json()).toEqual({ data: [], next_cursor: null });
  });

  it('when a session and its user\'s token share the rate limit, then the session is refused 429 once the user spent it', async () => {
    const limited = await harness.start('b', { rateLimitPerMin: 3, redisPrefix: `${harness.env.redisPrefix}portal` });
    const alice = await createUser(harness.db);
    const { headers } = await sessionFor(alice, 'read', 'b');
    const statuses = [];
    for (const as of [alice.headers, alice.headers, headers, headers]) statuses.push((await limited.request({ url: '/api/v1/endpoints', headers: as })).statusCode);
    expect(statuses).toEqual([200, 200, 200, 429]);
  });

  it.each(['a', 'b'] as const)('when Layout %s documents its routes, then the portal routes are in /docs/json with their security, shapes and tag', async (layout) => {
    const document = (await layouts[layout].request({ url: '/docs/json' })).json();
    expect(document.tags).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'portal' })]));
    expect(document.components.securitySchemes.bearerToken.description).toContain('ps_');
    const routes: [string, string, string, number][] = [
      ['post', '/api/v1/portal-links', 'key', 201],
      ['get', '/api/v1/portal-links', 'key', 200],
      ['delete', '/api/v1/portal-links/{id}', 'key', 204],
      ['post', '/api/v1/portal-sessions', 'none', 201],
    ];
    for (const [method, path, security, success] of routes) {
      const operation = document.paths[path]?.[method];
      expect({ route: `${method} ${path}`, found: Boolean(operation) }).toEqual({ route: `${method} ${path}`, found: true });
      expect(operation.tags).toEqual(['portal']);
      expect(operation.security).toEqual(security === 'key' ? [{ bearerToken: [] }] : []);
      expect(Object.keys(operation.responses)).toEqual(expect.arrayContaining([String(success), '400', '401', '429']));
    }
    expect(document.paths['/api/v1/portal-links'].post.responses['201'].content['application/json'].schema.required).toEqual(['id', 'url', 'expires_at']);
    expect(document.paths['/api/v1/portal-links'].post.requestBody.content['application/json'].schema.properties.scope.enum).toEqual(['manage', 'read']);
    expect(document.paths['/api/v1/portal-sessions'].post.responses['201'].content['application/json'].schema.required).toEqual(['token', 'user_id', 'scope', 'expires_at']);
    expect(document.paths['/api/v1/portal-links'].get.parameters.map((parameter: { name: string }) => parameter.name)).toEqual(
      expect.arrayContaining(['user_id', 'limit', 'cursor']),
    );
  });

  describe('npm run keys -- portal-link', () => {
    async function keys(env: Record<string, string>, ...argv: string[]) {
      const stdout: string[] = [];
      const stderr: string[] = [];
      const code = await runKeysCli(argv, { env: processEnv(harness.env, env), stdout: (line) => stdout.push(line), stderr: (line) => stderr.push(line) });
      return { code, stdout, stderr: stderr.join('\n') };
    }

    it('when an operator mints a link on the command line, then it prints {id, url, expires_at} under APP_URL and the link opens once', async () => {
      const { user } = await createUser(harness.db);
      const { code, stdout } = await keys({ APP_URL: 'https://api.example.com/' }, 'portal-link', '--user-id', String(user.userId), '--scope', 'read', '--ttl-s', '120', '--session-ttl-s', '600');
      expect(code).toBe(0);
      const printed = JSON.parse(stdout[0]);
      expect(Object.keys(printed).sort()).toEqual(['expires_at', 'id', 'url']);
      expect(printed.url).toMatch(/^https:\/\/api\.example\.com\/portal#token=pl_/);
      const [row] = await harness.db.sequelize.query<Record<string, unknown>>('SELECT scope, session_ttl_s, created_by_key_id FROM portal_links WHERE id = $1', {
        bind: [printed.id],
        type: QueryTypes.SELECT,
      });
      expect(row).toEqual({ scope: 'read', session_ttl_s: 600, created_by_key_id: null });
      const opened = await exchange('b', tokenOf(printed.url));
      expect(opened.json()).toMatchObject({ user_id: user.userId, scope: 'read' });
      expect((await exchange('a', tokenOf(printed.url))).statusCode).toBe(401);
    });

    it('when APP_URL is not set, then the link points at the api\'s default address', async () => {
      const { user } = await createUser(harness.db);
      const { code, stdout } = await keys({}, 'portal-link', '--user-id', String(user.userId));
      expect(code).toBe(0);
      expect(JSON.parse(stdout[0]).url).toMatch(/^http:\/\/localhost:3000\/portal#token=pl_/);
    });

    it.each([
      [['portal-link'], 2, '--user-id is required'],
      [['portal-link', '--user-id', '0'], 2, '--user-id must be between 1 and 99999'],
      [['portal-link', '--user-id', '1', '--scope', 'admin'], 2, '--scope must be manage or read'],
      [['portal-link', '--user-id', '1', '--ttl-s', '59'], 2, '--ttl-s must be between 60 and 86400'],
      [['portal-link', '--user-id', '1', '--session-ttl-s', '86401'], 2, '--session-ttl-s must be between 60 and 86400'],
      [['portal-link', '--user-id', '99998'], 1, 'User 99998 not found.'],
    ])('when it is run with %j, then it exits %i saying %j', async (argv, exit, message) => {
      const { code, stderr, stdout } = await keys({}, ...argv);
      expect({ code, stdout }).toEqual({ code: exit, stdout: [] });
      expect(stderr).toContain(message);
    });
  });
});
