import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { TestEnvironment, createTestEnvironment } from '../support/environment';

const CLI = path.resolve(__dirname, '../../dist/scripts/endpoints-cli.js');

describe('endpoints CLI', () => {
  let env: TestEnvironment;

  beforeAll(async () => {
    if (!existsSync(CLI)) throw new Error('the CLI is not built: run `npm run build` first');
    env = await createTestEnvironment({}, 'cli');
  });

  afterAll(async () => {
    await env.cleanup();
  });

  function cli(...args: string[]) {
    const result = spawnSync(process.execPath, [CLI, ...args], {
      env: { PATH: process.env.PATH ?? '', NODE_ENV: 'test', DATABASE_URL: env.databaseUrl },
      encoding: 'utf8',
    });
    return { status: result.status, stdout: result.stdout, stderr: result.stderr };
  }

  it('When an endpoint is added without a secret, then one JSON line gives its id and a whsec_ secret of 32 random bytes', () => {
    const added = cli('add', '--url', 'https://example.com/hooks', '--events', 'post.created, post.deleted', '--description', 'shop');

    expect(added.status).toBe(0);
    expect(added.stdout.trim().split('\n')).toHaveLength(1);
    const { id, secret } = JSON.parse(added.stdout);
    expect(Number.isInteger(id)).toBe(true);
    expect(secret).toMatch(/^whsec_/);
    expect(Buffer.from(secret.slice(6), 'base64')).toHaveLength(32);
    const listed = cli('list').stdout.trim().split('\n').map((line) => JSON.parse(line));
    expect(listed).toContainEqual({
      id,
      url: 'https://example.com/hooks',
      events: ['post.created', 'post.deleted'],
      active: true,
      description: 'shop',
      disabledReason: null,
    });
  });

  it('When an endpoint is added with a secret and then disabled, then list shows it inactive', () => {
    const { id, secret } = JSON.parse(cli('add', '--url', 'http://127.0.0.1:3002/webhooks/posts', '--secret', 'my-secret').stdout);

    const disabled = cli('disable', '--id', String(id));

    expect(secret).toBe('my-secret');
    expect(JSON.parse(disabled.stdout)).toEqual({ id, active: false });
    const listed = cli('list').stdout.trim().split('\n').map((line) => JSON.parse(line));
    expect(listed.find((endpoint) => endpoint.id === id)).toMatchObject({ active: false, disabledReason: 'disabled by an operator' });
  });

  it.each([
    [['add'], 2, /--url is required/],
    [['add', '--url', 'ftp://example.com'], 2, /http or https/],
    [['add', '--url', 'http://example.com', '--secret', 'whsec_***'], 2, /--secret/],
    [['disable', '--id', 'abc'], 2, /positive integer/],
    [['disable', '--id', '999999'], 1, /No endpoint has id 999999/],
    [['remove'], 2, /Unknown command "remove"/],
    [['list', '--bogus'], 2, /bogus/],
  ])('When the command line is %j, then it exits %i with a clear error', (args, status, message) => {
    const result = cli(...(args as string[]));

    expect(result.status).toBe(status);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(message as RegExp);
  });
});
