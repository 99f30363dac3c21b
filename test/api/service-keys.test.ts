import { QueryTypes } from 'sequelize';
import type { FastifyPluginAsync } from 'fastify';
import { runKeysCli } from '../../scripts/keys-cli';
import type { ApiRoutes } from '../../services/api/src/routes/api-routes';
import { processEnv } from '../support/environment';
import { createUser, TestUser } from '../support/factories';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';

const LAYOUT_A_401 = { status: 401, message: 'Invalid authentication token or client ID.' };
const LAYOUT_B_401 = { message: 'Invalid credentials.' };

// A route beside the webhook and operations routes (mounted through the layout's route list),
// answering with the principal the auth hook set.
const whoami: ApiRoutes = (async (app) => {
  app.get('/whoami', async (request) => ({ principal: request.principal, user: request.user }));
}) as FastifyPluginAsync as ApiRoutes;

describe('service keys (docs/design.md §4)', () => {
  let harness: ApiHarness;
  let layouts: Record<'a' | 'b', ApiClient>;
  let alice: TestUser;

  async function keys(...argv: string[]) {
    const stdout: string[] = [];
    const stderr: string[] = [];
    const code = await runKeysCli(argv, {
      env: processEnv(harness.env),
      stdout: (line) => stdout.push(line),
      stderr: (line) => stderr.push(line),
    });
    return { code, stdout, stderr: stderr.join('\n') };
  }

  async function createKey(scopes = 'webhooks:send,webhooks:read'): Promise<{ id: number; key: string; scopes: string[] }> {
    const { code, stdout } = await keys('create', '--name', 'billing', '--scopes', scopes);
    expect(code).toBe(0);
    return JSON.parse(stdout[0]);
  }

  const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

  beforeAll(async () => {
    harness = await createApiHarness();
    layouts = { a: await harness.start('a', {}, { apiRoutes: [whoami] }), b: await harness.start('b', {}, { apiRoutes: [whoami] }) };
    alice = await createUser(harness.db, { quotaLimit: 100 });
  });

  afterAll(() => harness.close());

  it.each(['a', 'b'] as const)('when Layout %s gets a service key on a route beside the posts routes, then the key is the principal', async (layout) => {
    const created = await createKey();
    const res = await layouts[layout].request({ url: '/api/v1/whoami', headers: bearer(created.key) });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ principal: { kind: 'service', keyId: created.id, name: 'billing', scopes: ['webhooks:send', 'webhooks:read'] }, user: null });
    expect(res.headers['ratelimit-limit']).toBeUndefined();
  });

  it.each(['a', 'b'] as const)('when Layout %s gets a user token on a route beside the posts routes, then the user is the principal', async (layout) => {
    const res = await layouts[layout].request({ url: '/api/v1/whoami', headers: alice.headers });
    expect(res.statusCode).toBe(200);
    const user = { kind: 'user', userId: alice.user.userId, quotaLimit: 100 };
    expect(res.json()).toEqual({ principal: user, user });
  });

  it('when Layout A serves a limited user beside the posts routes, then the quota counts it', async () => {
    const res = await layouts.a.request({ url: '/api/v1/whoami', headers: alice.headers });
    expect(res.headers['ratelimit-limit']).toBe('100');
  });

  it.each([
    ['a', LAYOUT_A_401, [['GET', '/api/v1/posts'], ['GET', '/api/v1/posts/100000'], ['POST', '/api/v1/posts/create'], ['PUT', '/api/v1/posts/update/100000'], ['DELETE', '/api/v1/posts/delete/100000'], ['GET', '/api/v1/posts/nope/x']]],
    ['b', LAYOUT_B_401, [['GET', '/api/v1/posts'], ['GET', '/api/v1/posts/10000'], ['POST', '/api/v1/posts'], ['PUT', '/api/v1/posts/10000'], ['DELETE', '/api/v1/posts/10000'], ['GET', '/api/v1/posts/nope/x']]],
  ] as const)('when Layout %s gets a valid service key on the posts routes, then each is 401 with the layout body', async (layout, body, routes) => {
    const created = await createKey('*');
    for (const [method, url] of routes) {
      const res = await layouts[layout].request({ method, url, headers: bearer(created.key), payload: method === 'POST' || method === 'PUT' ? { title: 't', content: 'c', body: 'c' } : undefined });
      expect({ method, url, status: res.statusCode, body: res.json() }).toEqual({ method, url, status: 401, body });
    }
  });

  it.each([
    ['a', LAYOUT_A_401],
    ['b', LAYOUT_B_401],
  ] as const)('when Layout %s gets an unknown, malformed or revoked key, then it is 401 with the layout body', async (layout, body) => {
    const created = await createKey();
    expect((await keys('revoke', '--id', String(created.id))).code).toBe(0);
    for (const authorization of [`Bearer sk_${'A'.repeat(43)}`, 'Bearer sk_short', `Bearer ${created.key}`]) {
      const res = await layouts[layout].request({ url: '/api/v1/whoami', headers: { authorization } });
      expect({ authorization, status: res.statusCode, body: res.json() }).toEqual({ authorization, status: 401, body });
    }
  });

  it('when a key is used, then last_used_at is recorded once, not on every request', async () => {
    const created = await createKey();
    const lastUsed = async () => {
      const [row] = await harness.db.sequelize.query<{ last_used_at: Date | null }>('SELECT last_used_at FROM service_keys WHERE id = $1', {
        bind: [created.id],
        type: QueryTypes.SELECT,
      });
      return row.last_used_at;
    };
    expect(await lastUsed()).toBeNull();
    await layouts.b.request({ url: '/api/v1/whoami', headers: bearer(created.key) });
    let first: Date | null = null;
    for (let i = 0; i < 50 && !first; i++) {
      first = await lastUsed();
      if (!first) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(first).toBeInstanceOf(Date);
    await layouts.b.request({ url: '/api/v1/whoami', headers: bearer(created.key) });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await lastUsed()).toEqual(first);
  });

  describe('npm run keys', () => {
    it('when a key is created, then one JSON line gives the key, stored only as its sha256', async () => {
      const { code, stdout } = await keys('create', '--name', 'ops', '--scopes', 'endpoints:read, endpoints:write,endpoints:read');
      expect(code).toBe(0);
      expect(stdout).toHaveLength(1);
      const created = JSON.parse(stdout[0]);
      expect(stdout[0]).toBe(JSON.stringify({ id: created.id, key: created.key, scopes: ['endpoints:read', 'endpoints:write'] }));
      expect(created.key).toMatch(/^sk_[A-Za-z0-9_-]{43}$/);
      const [row] = await harness.db.sequelize.query<{ key_hash: string; name: string }>('SELECT key_hash, name FROM service_keys WHERE id = $1', {
        bind: [created.id],
        type: QueryTypes.SELECT,
      });
      expect(row.name).toBe('ops');
      expect(row.key_hash).toMatch(/^[0-9a-f]{64}$/);
      expect(row.key_hash).not.toContain(created.key.slice(3));
    });

    it('when keys are listed, then each shows its scopes and revocation but never the key', async () => {
      const live = await createKey('webhooks:read');
      const dead = await createKey('*');
      await keys('revoke', '--id', String(dead.id));
      const { code, stdout } = await keys('list');
      expect(code).toBe(0);
      const listed = stdout.map((line) => JSON.parse(line));
      expect(listed.find((key) => key.id === live.id)).toMatchObject({ name: 'billing', scopes: ['webhooks:read'], revoked_at: null });
      expect(listed.find((key) => key.id === dead.id).revoked_at).toMatch(/^\d{4}-\d\d-\d\dT/);
      expect(stdout.join('\n')).not.toContain(live.key);
    });

    it('when --help is given, then it prints the usage and exits 0', async () => {
      const { code, stdout } = await keys('--help');
      expect(code).toBe(0);
      expect(stdout.join('\n')).toMatch(/npm run keys -- create --name NAME --scopes/);
    });

    it.each([
      [[], /missing command/],
      [['rotate'], /unknown command "rotate"/],
      [['create', '--scopes', '*'], /--name is required/],
      [['create', '--name', 'x'], /--scopes is required/],
      [['create', '--name', 'x', '--scopes', 'webhooks:send,posts:write'], /unknown scope posts:write/],
      [['create', '--name', 'x', '--scopes', ' , '], /at least one scope/],
      [['revoke'], /--id is required/],
      [['revoke', '--id', 'abc'], /--id must be a positive integer/],
    ])('when the arguments are %j, then it exits 2 with the reason and the usage', async (argv, reason) => {
      const { code, stdout, stderr } = await keys(...argv);
      expect(code).toBe(2);
      expect(stdout).toEqual([]);
      expect(stderr).toMatch(reason);
      expect(stderr).toContain('usage:');
    });

    it('when an unknown key is revoked, then it exits 1 with a clear error', async () => {
      expect(await keys('revoke', '--id', '999999')).toMatchObject({ code: 1, stderr: 'error: no service key with id 999999' });
    });
  });
});
