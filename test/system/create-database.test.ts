import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { Client } from 'pg';
import { ROOT } from '../support/processes';
import { testServices, withDatabase } from '../support/services';
import { startTcpProxy, TcpProxy } from '../support/tcp-proxy';

const SCRIPT = path.join(ROOT, 'scripts', 'create-database.js');

interface Run {
  code: number;
  stdout: string;
  stderr: string;
  elapsedMs: number;
}

function run(args: string[], databaseUrl: string): Promise<Run> {
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(process.execPath, [SCRIPT, ...args], { env: { ...process.env, DATABASE_URL: databaseUrl } }, (error, stdout, stderr) => {
      resolve({ code: error ? Number(error.code) : 0, stdout, stderr, elapsedMs: Date.now() - started });
    });
  });
}

async function databaseExists(name: string): Promise<boolean> {
  const admin = new Client({ connectionString: testServices().adminDatabaseUrl });
  await admin.connect();
  try {
    return (await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount === 1;
  } finally {
    await admin.end();
  }
}

let proxy: TcpProxy;
let name: string;
let viaProxy: string;

beforeEach(async () => {
  const real = new URL(testServices().adminDatabaseUrl);
  proxy = await startTcpProxy({ host: real.hostname, port: Number(real.port || 5432) });
  // The run's prefix: the global teardown drops it.
  name = `pwt_${testServices().runId}_created_${randomBytes(3).toString('hex')}`;
  const url = new URL(withDatabase(testServices().adminDatabaseUrl, name));
  url.hostname = '127.0.0.1';
  url.port = String(proxy.port);
  viaProxy = url.toString();
});

afterEach(async () => {
  await proxy.close();
});

describe('scripts/create-database.js (the first step of npm run db:migrate and of compose)', () => {
  it('when PostgreSQL starts accepting connections only after a while, then it waits and creates the database', async () => {
    await proxy.cut('refuse');
    const restore = setTimeout(() => void proxy.restore(), 1_500);
    const result = await run(['--wait-seconds', '20'], viaProxy);
    clearTimeout(restore);
    expect([result.code, result.stdout.trim()]).toEqual([0, `created database ${name}`]);
    expect(result.stderr).toMatch(/^PostgreSQL at 127\.0\.0\.1:\d+ is not accepting connections yet \(.+\); retrying for up to 20 s\n$/);
    expect(await databaseExists(name)).toBe(true);
  });

  it('when PostgreSQL never answers, then it gives up after the bound with one line naming DATABASE_URL and exit code 1', async () => {
    await proxy.cut('refuse');
    const result = await run(['--wait-seconds', '1'], viaProxy);
    expect(result.code).toBe(1);
    expect(result.stderr.trim().split('\n').at(-1)).toMatch(/^error: cannot reach PostgreSQL at 127\.0\.0\.1:\d+ \(.+\)\. Set DATABASE_URL\.$/);
    expect(result.elapsedMs).toBeLessThan(15_000);
    expect(await databaseExists(name)).toBe(false);
  });

  it('when asked for help, then it prints its usage and exits 0; a wrong argument exits 2', async () => {
    const help = await run(['--help'], viaProxy);
    expect([help.code, help.stdout]).toEqual([0, expect.stringMatching(/^usage: node scripts\/create-database\.js \[--wait-seconds N\]/)]);
    const wrong = await run(['--wait-seconds', 'soon'], viaProxy);
    expect([wrong.code, wrong.stderr]).toEqual([2, expect.stringMatching(/^error: unexpected arguments: --wait-seconds soon\nusage:/)]);
  });
});
