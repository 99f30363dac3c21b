import { runUsersCli } from '../../scripts/users-cli';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';
import { processEnv } from '../support/environment';
import { findUser } from './support/rows';

describe('users CLI (docs/design.md §4)', () => {
  let harness: ApiHarness;
  let api: ApiClient;

  async function run(...argv: string[]) {
    const stdout: string[] = [];
    const stderr: string[] = [];
    const code = await runUsersCli(argv, {
      env: processEnv(harness.env),
      stdout: (line) => stdout.push(line),
      stderr: (line) => stderr.push(line),
    });
    return { code, stdout, stderr: stderr.join('\n') };
  }

  const canRead = async (userId: number, token: string) =>
    (await api.request({ url: '/api/v1/posts/1', headers: { authorization: `Bearer ${token}`, user_id: String(userId) } })).statusCode !== 401;

  beforeAll(async () => {
    harness = await createApiHarness();
    api = await harness.start('b');
  });

  afterAll(() => harness.close());

  it('when a user is created, then one JSON line gives a working token stored only as its hash', async () => {
    const { code, stdout } = await run('create', '--name', 'Ann', '--email', 'ann@example.com', '--quota', '50');
    expect(code).toBe(0);
    expect(stdout).toHaveLength(1);
    const { user_id, token } = JSON.parse(stdout[0]);
    expect(stdout[0]).toBe(JSON.stringify({ user_id, token }));
    expect(token.length).toBeGreaterThanOrEqual(43);
    const user = await findUser(harness.db, user_id);
    expect(user).toMatchObject({ userName: 'Ann', userEmail: 'ann@example.com', quotaLimit: 50 });
    expect(user!.apiTokenHash).toMatch(/^[0-9a-f]{64}$/);
    expect(user!.apiTokenHash).not.toContain(token);
    expect(await canRead(user_id, token)).toBe(true);
  });

  it('when the next ids were taken explicitly (e.g. by a user.created webhook), then create takes the next free id', async () => {
    const first = JSON.parse((await run('create', '--name', 'Ed', '--email', 'ed@example.com')).stdout[0]);
    for (const id of [first.user_id + 1, first.user_id + 2]) {
      await harness.db.sequelize.query(`INSERT INTO users (user_id, user_name, user_email) VALUES (${id}, 'taken', 'taken${id}@example.com')`);
    }
    const { code, stdout } = await run('create', '--name', 'Di', '--email', 'di@example.com');
    expect(code).toBe(0);
    expect(JSON.parse(stdout[0]).user_id).toBe(first.user_id + 3);
  });

  it('when a token is rotated, then the new one works and the old one stops', async () => {
    const created = JSON.parse((await run('create', '--name', 'Bo', '--email', 'bo@example.com')).stdout[0]);
    const { code, stdout } = await run('token', '--user-id', String(created.user_id));
    expect(code).toBe(0);
    const rotated = JSON.parse(stdout[0]);
    expect(rotated.user_id).toBe(created.user_id);
    expect(rotated.token).not.toBe(created.token);
    expect(await canRead(created.user_id, rotated.token)).toBe(true);
    expect(await canRead(created.user_id, created.token)).toBe(false);
  });

  it('when a token is revoked, then it stops working', async () => {
    const created = JSON.parse((await run('create', '--name', 'Cy', '--email', 'cy@example.com')).stdout[0]);
    expect((await run('revoke', '--user-id', String(created.user_id))).code).toBe(0);
    expect(await canRead(created.user_id, created.token)).toBe(false);
  });

  it.each([
    [[], /missing command/],
    [['delete'], /unknown command "delete"/],
    [['toString'], /unknown command "toString"/],
    [['create', '--email', 'x@example.com'], /--name is required/],
    [['create', '--name', 'X', '--email', 'not-an-email'], /--email must be an email address/],
    [['create', '--name', 'X', '--email', 'x@example.com', '--quota', 'many'], /--quota must be a non-negative integer/],
    [['create', '--name', 'X', '--email', 'x@example.com', '--colour', 'red'], /Unknown option '--colour'/],
    [['token'], /--user-id is required/],
    [['token', '--user-id', '100000'], /--user-id must be between 1 and 99999/],
  ])('when the arguments are %j, then it exits 2 with the reason and the usage', async (argv, reason) => {
    const { code, stdout, stderr } = await run(...argv);
    expect(code).toBe(2);
    expect(stdout).toEqual([]);
    expect(stderr).toMatch(reason);
    expect(stderr).toContain('usage:');
  });

  it('when the email is taken or the user is unknown, then it exits 1 with a clear error', async () => {
    await run('create', '--name', 'Di', '--email', 'di@example.com');
    const duplicate = await run('create', '--name', 'Di', '--email', 'di@example.com');
    expect(duplicate).toMatchObject({ code: 1, stderr: 'error: a user with email di@example.com already exists' });
    const unknown = await run('token', '--user-id', '99998');
    expect(unknown).toMatchObject({ code: 1, stderr: 'error: no user with id 99998' });
  });
});
