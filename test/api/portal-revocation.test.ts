import { announceCredentialChange } from '../../shared/auth/credential-changes';
import { createDatabase, Database } from '../../shared/db';
import { createTestEnvironment, processEnv, TestEnvironment } from '../support/environment';
import { createUser, TestUser } from '../support/factories';
import { freePort, runScript, ServiceProcess, startService } from '../support/processes';
import { createServiceKey, TestServiceKey } from './support/operations';

/**
 * docs/design.md §11.6 with §4 "Revocation": two api processes (as compose runs them,
 * from dist/) cache a portal session; deleting its link through one, deleting its user, or
 * replacing or revoking the user's token with the users CLI stops it in both within 1 s.
 */
describe('portal session revocation across api processes', () => {
  let env: TestEnvironment;
  let db: Database;
  let operator: TestServiceKey;
  const apis: { process: ServiceProcess; url: string }[] = [];

  async function call(url: string, path: string, init: { method?: string; headers?: Record<string, string>; body?: object } = {}) {
    const res = await fetch(url + path, {
      method: init.method ?? 'GET',
      headers: { ...(init.body ? { 'content-type': 'application/json' } : {}), ...init.headers },
      body: init.body ? JSON.stringify(init.body) : undefined,
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  }

  /** Mints a link for `user` through the first api and opens it through the second: the session's headers and link id. */
  async function openSession(user: TestUser) {
    const link = await call(apis[0].url, '/api/v1/portal-links', { method: 'POST', headers: operator.headers, body: { user_id: user.user.userId } });
    expect(link.status).toBe(201);
    const token = new URL(link.body.url).hash.replace('#token=', '');
    const session = await call(apis[1].url, '/api/v1/portal-sessions', { method: 'POST', body: { token } });
    expect(session.status).toBe(201);
    return { linkId: link.body.id as number, headers: { authorization: `Bearer ${session.body.token}` } };
  }

  async function warm(headers: Record<string, string>) {
    for (const { url } of apis) for (let i = 0; i < 3; i++) expect((await call(url, '/api/v1/endpoints', { headers })).status).toBe(200);
  }

  /** Requests each api until it answers 401, resolving with the slowest api's time in ms after `since` (the change's commit). */
  async function msUntilRefusedEverywhere(headers: Record<string, string>, since: number): Promise<number> {
    const times = await Promise.all(
      apis.map(async ({ url }) => {
        while (Date.now() - since < 5_000) {
          if ((await call(url, '/api/v1/endpoints', { headers })).status === 401) return Date.now() - since;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        return Infinity;
      }),
    );
    return Math.max(...times);
  }

  beforeAll(async () => {
    env = await createTestEnvironment();
    db = createDatabase(env.databaseUrl, { poolMax: 2 });
    operator = await createServiceKey(db, ['portal:write']);
    for (const layout of ['a', 'b']) {
      const port = await freePort();
      const vars = { ...processEnv(env), API_LAYOUT: layout, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn', RATE_LIMIT_PER_MIN: '0' };
      apis.push({ process: await startService(`api-${layout}`, 'dist/services/api/src/server.js', vars, port), url: `http://127.0.0.1:${port}` });
    }
  }, 60_000);

  afterAll(async () => {
    await Promise.all(apis.map(({ process }) => process.stop()));
    await db?.close();
    await env?.cleanup();
  });

  it('when a link is deleted through one process, then its session is refused by both within 1 s', async () => {
    const user = await createUser(db);
    const { linkId, headers } = await openSession(user);
    await warm(headers);
    const since = Date.now();
    expect((await call(apis[1].url, `/api/v1/portal-links/${linkId}`, { method: 'DELETE', headers: operator.headers })).status).toBe(204);
    expect(await msUntilRefusedEverywhere(headers, since)).toBeLessThan(1_000);
  });

  it('when the user is deleted and the change published, then their session is refused by both within 1 s', async () => {
    const user = await createUser(db);
    const { headers } = await openSession(user);
    await warm(headers);
    await db.sequelize.query('DELETE FROM users WHERE user_id = $1', { bind: [user.user.userId] });
    const since = Date.now();
    await announceCredentialChange(env.config, env.redisPrefix, { kind: 'user', userId: user.user.userId });
    expect(await msUntilRefusedEverywhere(headers, since)).toBeLessThan(1_000);
  });

  for (const command of ['token', 'revoke']) {
    it(`when the user's token is ${command === 'token' ? 'replaced' : 'revoked'} (\`users ${command}\`), then their session is refused by both within 1 s`, async () => {
      const user = await createUser(db);
      const { headers } = await openSession(user);
      await warm(headers);
      const cli = await runScript('dist/scripts/users-cli.js', [command, '--user-id', String(user.user.userId)], processEnv(env));
      expect(cli).toMatchObject({ code: 0, stderr: '' });
      expect(await msUntilRefusedEverywhere(headers, Date.now())).toBeLessThan(1_000);
    });
  }
});
