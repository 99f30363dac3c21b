import { execFile } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { createDatabase } from '../../shared/db';
import { createMigrator } from '../../shared/db/migrate';
import { freePort } from './processes';
import { startTcpProxy, type TcpProxy } from './tcp-proxy';

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
  /**
   * `pg_ctl stop -m fast`: an orderly shutdown; each open session is ended with SQLSTATE 57P01
   * (admin_shutdown), as when an operator or a failover manager stops a primary.
   */
  stopFast(): Promise<void>;
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

// PostgreSQL refuses to run as root, so as root its binaries run as the `postgres` user.
const asRoot = process.getuid?.() === 0;

/** Runs a server binary (initdb, pg_ctl, pg_basebackup). @throws Error with its output when it fails */
async function exec(command: string, args: string[]): Promise<void> {
  const file = path.join(binDirectory(), command);
  try {
    if (asRoot) await run('runuser', ['-u', 'postgres', '--', file, ...args]);
    else await run(file, args);
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    throw new Error(`${command} failed: ${(error as Error).message}\n${stdout ?? ''}${stderr ?? ''}`);
  }
}

/** An empty temporary folder the server may own (mode 0700; the `postgres` user's as root). */
async function dataFolder(): Promise<string> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'pg-own-'));
  if (asRoot) {
    const { stdout } = await run('id', ['-u', 'postgres']);
    const { stdout: group } = await run('id', ['-g', 'postgres']);
    chownSync(dataDir, Number(stdout.trim()), Number(group.trim()));
  }
  chmodSync(dataDir, 0o700);
  return dataDir;
}

/**
 * The server of `dataDir` on `port` with `settings` (`name=value`) on its command line, so a
 * standby copied from the folder does not inherit them. Without fsync: a test's data need
 * not survive the machine, but must survive the server's own crash, so commits stay
 * synchronous (a commit acknowledged before an immediate stop is kept).
 */
function clusterAt(dataDir: string, port: number, settings: readonly string[]): OwnPostgres {
  const options = [
    `-p ${port}`,
    '-c listen_addresses=127.0.0.1',
    `-c unix_socket_directories=${dataDir}`,
    '-c fsync=off',
    '-c full_page_writes=off',
    '-c max_connections=200',
    ...settings.map((setting) => `-c ${setting}`),
  ].join(' ');
  const url = (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`;
  return {
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
    async stopFast() {
      await exec('pg_ctl', ['-D', dataDir, '-m', 'fast', '-w', 'stop']);
    },
    async destroy() {
      await exec('pg_ctl', ['-D', dataDir, '-m', 'immediate', '-w', 'stop']).catch(() => undefined);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Creates and starts a cluster on `port` with trust authentication (initdb's defaults also
 * let 127.0.0.1 connect for replication, so a standby can be copied from it).
 *
 * @throws Error with initdb's or pg_ctl's output when either fails
 */
export async function startOwnPostgres(port: number): Promise<OwnPostgres> {
  const dataDir = await dataFolder();
  await exec('initdb', ['-D', dataDir, '-U', 'postgres', '-A', 'trust', '--no-sync', '-E', 'UTF8']);
  const cluster = clusterAt(dataDir, port, []);
  await cluster.start();
  return cluster;
}

/** A primary, its streaming standby, and the one address the services use (docs/design.md §13.3). */
export interface PrimaryWithStandby {
  primary: OwnPostgres;
  /** A hot standby (read-only queries) made with `pg_basebackup -R`, streaming from the primary. */
  standby: OwnPostgres;
  /**
   * The address, a TCP proxy standing in for a DNS name or a virtual IP: it reaches the primary
   * until the test moves it (`address.retarget(standby.port)`).
   */
  address: TcpProxy;
  /** `postgres://postgres@127.0.0.1:<address port>/<database>`. */
  url(database?: string): string;
  /** Stops the primary: `fast` ends its sessions with 57P01 (the default), `immediate` as a crash. */
  stopPrimary(mode?: 'fast' | 'immediate'): Promise<void>;
  /** `pg_ctl promote` on the standby; resolves once it accepts writes. */
  promote(): Promise<void>;
  /** Resolves once the standby has replayed everything the primary had written when called. */
  caughtUp(): Promise<void>;
  /** Pauses (`pg_wal_replay_pause()`) or resumes the standby's replay; WAL still streams in. */
  pauseReplay(): Promise<void>;
  resumeReplay(): Promise<void>;
  /**
   * Stops the standby receiving WAL (its `primary_conninfo` emptied and reloaded, so the WAL
   * receiver ends), as when the network between them breaks: the standby stays up and
   * readable, and replays everything it had received. Resolves once no WAL receiver runs.
   */
  cutReplication(): Promise<void>;
  /** Undoes {@link cutReplication} (nothing when not cut); resolves once the standby streams again. */
  restoreReplication(): Promise<void>;
  /** Stops both servers, deletes their folders and closes the address. */
  destroy(): Promise<void>;
}

/**
 * Starts a primary and a streaming hot standby of it on free ports, and an address in front
 * of the primary. With `synchronous`, the primary waits for the standby to have flushed each
 * commit before acknowledging it (`synchronous_standby_names = '*'`, set once the standby
 * streams, so set-up commits never wait for a standby not there yet); the standby's own
 * settings leave it empty, so once promoted it acknowledges commits alone.
 *
 * @throws Error with the tools' output when initdb, pg_basebackup or pg_ctl fails, or when
 *   the standby does not stream within 30 s
 */
export async function startPrimaryWithStandby(options: { synchronous: boolean }): Promise<PrimaryWithStandby> {
  const primary = await startOwnPostgres(await freePort());
  const standbyDir = await dataFolder();
  const standbyPort = await freePort();
  const standby = clusterAt(standbyDir, standbyPort, []);
  let address: TcpProxy | undefined;
  try {
    await exec('pg_basebackup', ['-h', '127.0.0.1', '-p', String(primary.port), '-U', 'postgres', '-D', standbyDir, '-R', '-X', 'stream', '-c', 'fast', '--no-sync']);
    await standby.start();
    if (options.synchronous) {
      await withClient(primary.url(), async (client) => {
        await client.query(`ALTER SYSTEM SET synchronous_standby_names = '*'`);
        await client.query('SELECT pg_reload_conf()');
      });
    }
    const wanted = options.synchronous ? 'sync' : 'async';
    await until(async () => {
      const { rows } = await withClient(primary.url(), (client) => client.query<{ sync_state: string }>(`SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'`));
      return rows.some((row) => row.sync_state === wanted);
    }, `the standby streaming (${wanted})`);
    address = await startTcpProxy({ host: '127.0.0.1', port: primary.port });
  } catch (error) {
    await standby.destroy();
    await primary.destroy();
    throw error;
  }
  const proxy = address;
  let cutConninfo: string | undefined;
  const setConninfo = (conninfo: string) =>
    withClient(standby.url(), async (client) => {
      await client.query(`ALTER SYSTEM SET primary_conninfo = ${client.escapeLiteral(conninfo)}`);
      await client.query('SELECT pg_reload_conf()');
    });
  const receiving = async () =>
    (await withClient(standby.url(), (client) => client.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_wal_receiver'))).rows[0].n > 0;
  return {
    primary,
    standby,
    address: proxy,
    url: (database = 'postgres') => `postgres://postgres@127.0.0.1:${proxy.port}/${database}`,
    stopPrimary: (mode = 'fast') => (mode === 'fast' ? primary.stopFast() : primary.stopImmediately()),
    async promote() {
      await exec('pg_ctl', ['-D', standbyDir, '-w', '-t', '60', 'promote']);
      await until(
        async () => !(await withClient(standby.url(), (client) => client.query<{ standby: boolean }>('SELECT pg_is_in_recovery() AS standby'))).rows[0].standby,
        'the promoted standby accepting writes',
      );
    },
    async caughtUp() {
      const { rows } = await withClient(primary.url(), (client) => client.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn'));
      await until(async () => {
        const replayed = await withClient(standby.url(), (client) =>
          client.query<{ done: boolean }>('SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS done', [rows[0].lsn]),
        );
        return replayed.rows[0].done;
      }, 'the standby catching up');
    },
    async pauseReplay() {
      await withClient(standby.url(), (client) => client.query('SELECT pg_wal_replay_pause()'));
    },
    async resumeReplay() {
      await withClient(standby.url(), (client) => client.query('SELECT pg_wal_replay_resume()'));
    },
    async cutReplication() {
      if (cutConninfo !== undefined) return;
      const { rows } = await withClient(standby.url(), (client) => client.query<{ primary_conninfo: string }>('SHOW primary_conninfo'));
      cutConninfo = rows[0].primary_conninfo;
      await setConninfo('');
      await until(async () => !(await receiving()), 'the standby’s WAL receiver ending');
    },
    async restoreReplication() {
      if (cutConninfo === undefined) return;
      await setConninfo(cutConninfo);
      cutConninfo = undefined;
      await until(receiving, 'the standby streaming again');
    },
    async destroy() {
      await proxy.close();
      await standby.destroy();
      await primary.destroy();
    },
  };
}

async function withClient<T>(url: string, work: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** Polls `check` every 100 ms until it is true. @throws Error naming `what` after 30 s */
async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * Creates database `name` on `cluster` and runs the project's migrations on it.
 *
 * @returns its URL on the cluster itself
 */
export async function createMigratedDatabase(cluster: OwnPostgres, name: string): Promise<string> {
  await withClient(cluster.url(), (client) => client.query(`CREATE DATABASE "${name}"`));
  const database = createDatabase(cluster.url(name), { poolMax: 1 });
  try {
    await createMigrator(database.sequelize).up();
  } finally {
    await database.close();
  }
  return cluster.url(name);
}
