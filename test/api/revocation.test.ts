import { runKeysCli } from '../../scripts/keys-cli';
import { runUsersCli } from '../../scripts/users-cli';
import { announceCredentialChange } from '../../shared/auth/credential-changes';
import { createDatabase, Database } from '../../shared/db';
import { createTestEnvironment, processEnv, TestEnvironment } from '../support/environment';
import { createUser, TestUser } from '../support/factories';
import { freePort, ServiceProcess, startService } from '../support/processes';
import { waitFor } from '../support/wait-for';

/**
 * docs/design.md §4 "Revocation": two api processes (as compose runs them, from dist/) cache verified
 * credentials; a rotation, a deletion or a revocation made elsewhere stops working in both
 * within 1 s.
 */
describe('revocation across api processes', () => {
  let env: TestEnvironment;
  let db: Database;
  const apis: { process: ServiceProcess; port: number }[] = [];

  const cliEnv = () => processEnv(env);
  const quiet = { get env() { return cliEnv(); }, stdout: () => undefined, stderr: () => undefined };

  async function status(port: number, url: string, headers: Record<string, string>): Promise<number> {
    const res = await fetch(`http://127.0.0.1:${port}${url}`, { headers });
    await res.arrayBuffer();
    return res.status;
  }

  /** Requests each api until it answers 401, resolving with the slowest api's time in ms after `since` (the change's commit). */
  async function msUntilRefusedEverywhere(url: string, headers: Record<string, string>, since: number): Promise<number> {
    const times = await Promise.all(
      apis.map(async ({ port }) => {
        while (Date.now() - since < 5_000) {
          if ((await status(port, url, headers)) === 401) return Date.now() - since;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        return Infinity;
      }),
    );
    return Math.max(...times);
  }

  async function warm(url: string, headers: Record<string, string>) {
    for (const { port } of apis) {
      for (let i = 0; i < 3; i++) expect(await status(port, url, headers)).not.toBe(401);
    }
  }

  beforeAll(async () => {
    env = await createTestEnvironment();
    db = createDatabase(env.databaseUrl, { poolMax: 2 });
    for (const layout of ['a', 'b']) {
      const port = await freePort();
      const process = await startService(
        `api-${layout}`,
        'dist/services/api/src/server.js',
        { ...cliEnv(), API_LAYOUT: layout, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'info', RATE_LIMIT_PER_MIN: '0' },
        port,
      );
      apis.push({ process, port });
    }
  }, 60_000);

  afterAll(async () => {
    await Promise.all(apis.map(({ process }) => process.stop()));
    await db?.close();
    await env?.cleanup();
  });

  const postsUrl = (user: TestUser) => `/api/v1/posts?user=${user.user.userId}`;

  it('when a user token is rotated with the users CLI, then the old token is refused by both processes within 1 s', async () => {
    const user = await createUser(db);
    await warm(postsUrl(user), user.headers);
    expect(await runUsersCli(['token', '--user-id', String(user.user.userId)], quiet)).toBe(0);
    expect(await msUntilRefusedEverywhere(postsUrl(user), user.headers, Date.now())).toBeLessThan(1_000);
  });

  it('when a user is deleted and the change published, then both processes refuse them within 1 s', async () => {
    const user = await createUser(db);
    await warm(postsUrl(user), user.headers);
    await db.sequelize.query('DELETE FROM users WHERE user_id = $1', { bind: [user.user.userId] });
    await announceCredentialChange(env.config, env.redisPrefix, { kind: 'user', userId: user.user.userId });
    expect(await msUntilRefusedEverywhere(postsUrl(user), user.headers, Date.now())).toBeLessThan(1_000);
  });

  it('when a service key is revoked with the keys CLI, then both processes refuse it within 1 s', async () => {
    const lines: string[] = [];
    expect(await runKeysCli(['create', '--name', 'ops', '--scopes', '*'], { ...quiet, stdout: (line) => lines.push(line) })).toBe(0);
    const { id, key } = JSON.parse(lines[0]);
    const headers = { authorization: `Bearer ${key}` };
    // Any route beside the posts routes; what it answers past authentication does not matter here.
    const url = '/api/v1/webhooks/00000000-0000-4000-8000-000000000000';
    await warm(url, headers);
    expect(await runKeysCli(['revoke', '--id', String(id)], quiet)).toBe(0);
    expect(await msUntilRefusedEverywhere(url, headers, Date.now())).toBeLessThan(1_000);
  });

  it('when a credential is refused, then the log says why at info level and never shows the token', async () => {
    const user = await createUser(db);
    const [api] = apis;
    const wrong = 'a-wrong-token-that-must-never-be-logged';
    const cases: [Record<string, string>, string][] = [
      [{}, 'missing_token'],
      [{ authorization: `Token ${wrong}`, user_id: String(user.user.userId) }, 'malformed_authorization'],
      [{ authorization: `Bearer ${wrong}` }, 'missing_user_id'],
      [{ authorization: `Bearer ${wrong}`, user_id: String(user.user.userId) }, 'unknown_token'],
      [{ authorization: user.headers.authorization, user_id: '99998' }, 'user_mismatch'],
    ];
    for (const [headers] of cases) expect(await status(api.port, '/api/v1/posts', headers)).toBe(401);
    const logged = () =>
      api.process
        .output()
        .split('\n')
        .filter((line) => line.includes('"authentication refused"'))
        .map((line) => JSON.parse(line) as { reason: string; level: number });
    // The log reaches the pipe a moment after the answer.
    await waitFor(async () => cases.every(([, reason]) => logged().some((line) => line.reason === reason)), 5_000, 'the refusals in the log');
    for (const [, reason] of cases) expect(logged().some((line) => line.reason === reason && line.level === 30)).toBe(true);
    expect(api.process.output()).not.toContain(wrong);
    expect(api.process.output()).not.toContain(user.token);
  });
});
