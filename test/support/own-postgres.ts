import { execFile } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';

const run = promisify(execFile);

/**
 * A PostgreSQL cluster of the test's own (initdb into a temporary folder, a free port), so a
 * test can stop it hard and start it again without touching the machine's shared server.
 */
export interface OwnPostgres {
  readonly port: number;
  /** `postgres://postgres@127.0.0.1:<port>/<database>`. */
  url(database?: string): string;
  /** Starts the server (again) and waits until it accepts connections. */
  start(): Promise<void>;
  /** `pg_ctl stop -m immediate`: the server dies at once, as in a crash or a lost host. */
  stopImmediately(): Promise<void>;
  /** Stops the server and deletes its data folder. */
  destroy(): Promise<void>;
}

/** The folder of the PostgreSQL server binaries (initdb, pg_ctl), newest version first. */
function binDirectory(): string {
  const fromEnv = process.env.PG_BIN_DIR;
  if (fromEnv) return fromEnv;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  for (const version of versions) {
    const bin = path.join(root, version, 'bin');
    if (existsSync(path.join(bin, 'initdb'))) return bin;
  }
  throw new Error('PostgreSQL server binaries not found: set PG_BIN_DIR to the folder holding initdb and pg_ctl');
}

/**
 * Creates and starts a cluster on `port` with trust authentication and without fsync: a
 * test's data need not survive the machine, but must survive the server's own crash, so
 * commits stay synchronous (a commit acknowledged before an immediate stop is kept).
 * PostgreSQL refuses to run as root, so as root the cluster belongs to the `postgres` user.
 *
 * @throws Error with initdb's or pg_ctl's output when either fails
 */
export async function startOwnPostgres(port: number): Promise<OwnPostgres> {
  const bin = binDirectory();
  const dataDir = mkdtempSync(path.join(tmpdir(), 'pg-own-'));
  const asRoot = process.getuid?.() === 0;
  const exec = async (command: string, args: string[]): Promise<void> => {
    const file = path.join(bin, command);
    try {
      if (asRoot) await run('runuser', ['-u', 'postgres', '--', file, ...args]);
      else await run(file, args);
    } catch (error) {
      const { stdout, stderr } = error as { stdout?: string; stderr?: string };
      throw new Error(`${command} failed: ${(error as Error).message}\n${stdout ?? ''}${stderr ?? ''}`);
    }
  };
  if (asRoot) {
    const { stdout } = await run('id', ['-u', 'postgres']);
    const { stdout: group } = await run('id', ['-g', 'postgres']);
    chownSync(dataDir, Number(stdout.trim()), Number(group.trim()));
  }
  chmodSync(dataDir, 0o700);
  await exec('initdb', ['-D', dataDir, '-U', 'postgres', '-A', 'trust', '--no-sync', '-E', 'UTF8']);
  const options = [
    `-p ${port}`,
    '-c listen_addresses=127.0.0.1',
    `-c unix_socket_directories=${dataDir}`,
    '-c fsync=off',
    '-c full_page_writes=off',
    '-c max_connections=200',
  ].join(' ');
  const url = (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`;

  const cluster: OwnPostgres = {
    port,
    url,
    async start() {
      await exec('pg_ctl', ['-D', dataDir, '-o', options, '-l', path.join(dataDir, 'server.log'), '-w', '-t', '60', 'start']);
      const deadline = Date.now() + 30_000;
      for (;;) {
        const client = new Client({ connectionString: url() });
        try {
          await client.connect();
          await client.query('SELECT 1');
          return;
        } catch (error) {
          if (Date.now() > deadline) throw error;
          await new Promise((resolve) => setTimeout(resolve, 100));
        } finally {
          await client.end().catch(() => undefined);
        }
      }
    },
    async stopImmediately() {
      await exec('pg_ctl', ['-D', dataDir, '-m', 'immediate', '-w', 'stop']);
    },
    async destroy() {
      await exec('pg_ctl', ['-D', dataDir, '-m', 'immediate', '-w', 'stop']).catch(() => undefined);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  await cluster.start();
  return cluster;
}
