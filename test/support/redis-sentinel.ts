import { ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './processes';
import { waitFor } from './wait-for';

const run = promisify(execFile);

/** The monitored primary's name in every Sentinel set this module starts. */
export const SENTINEL_PRIMARY_NAME = 'pwprimary';

/**
 * A Redis primary with replicas and three Sentinels of its own for one test file, no
 * persistence, in a temp dir: what a Sentinel deployment runs (docs/design.md §13.2).
 */
export interface RedisSentinelSet {
  /** The Sentinels as REDIS_SENTINELS spells them: `127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3`. */
  sentinelsVariable: string;
  sentinels: { host: string; port: number }[];
  /** The data nodes' client ports: the first is the primary at start. */
  dataPorts: number[];
  /** The port of the primary the Sentinels name now. */
  primaryPort(): Promise<number>;
  /**
   * `SENTINEL FAILOVER` and waits until the Sentinels name another primary that answers as a
   * master; resolves to its port.
   */
  failover(): Promise<number>;
  /** SIGKILL of the data node on `port` (it stays dead until {@link restart}). */
  kill(port: number): Promise<void>;
  /** Starts the data node on `port` again, as a replica of the current primary. */
  restart(port: number): Promise<void>;
  /** Kills every server and removes the temp dir. */
  stop(): Promise<void>;
}

/**
 * Starts one primary and `replicas` replicas on free ports, then three Sentinels with
 * `down-after-milliseconds` 1000 and `failover-timeout` 3000 (docs/design.md §15.1's setting), and
 * resolves once every Sentinel sees the primary and every replica is in sync.
 *
 * @throws Error with the servers' output when a server does not come up in 15 s
 */
export async function startRedisSentinels(replicas = 1): Promise<RedisSentinelSet> {
  const dir = await mkdtemp(path.join(tmpdir(), 'redis-sentinel-'));
  const children = new Map<number, ChildProcess>();
  let output = '';
  const spawnServer = (port: number, args: string[]) => {
    const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout?.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-20_000)));
    child.stderr?.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-20_000)));
    children.set(port, child);
  };
  const cli = (port: number, ...args: string[]) => run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args]).then(({ stdout }) => stdout.trim());
  const dataNode = (port: number, primary?: number) =>
    spawnServer(port, ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no',
      ...(primary === undefined ? [] : ['--replicaof', '127.0.0.1', String(primary)])]);
  const killPort = async (port: number) => {
    const child = children.get(port);
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  };
  const stop = async () => {
    await Promise.all([...children.keys()].map(killPort));
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const dataPorts = [await freePort()];
    for (let i = 0; i < replicas; i += 1) dataPorts.push(await freePort());
    dataNode(dataPorts[0]);
    for (const port of dataPorts.slice(1)) dataNode(port, dataPorts[0]);
    for (const port of dataPorts) {
      await waitFor(async () => (await cli(port, 'ping').catch(() => '')) === 'PONG', 15_000, `redis-server on ${port}`);
    }
    for (const port of dataPorts.slice(1)) {
      await waitFor(async () => (await cli(port, 'info', 'replication')).includes('master_link_status:up'), 15_000, `the replica on ${port} to sync`);
    }
    const sentinels: { host: string; port: number }[] = [];
    for (let i = 0; i < 3; i += 1) {
      const port = await freePort();
      const conf = path.join(dir, `sentinel-${port}.conf`);
      await writeFile(
        conf,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${dir}`,
          `sentinel monitor ${SENTINEL_PRIMARY_NAME} 127.0.0.1 ${dataPorts[0]} 2`,
          `sentinel down-after-milliseconds ${SENTINEL_PRIMARY_NAME} 1000`,
          `sentinel failover-timeout ${SENTINEL_PRIMARY_NAME} 3000`,
          `sentinel parallel-syncs ${SENTINEL_PRIMARY_NAME} 1`,
          '',
        ].join('\n'),
      );
      spawnServer(port, [conf, '--sentinel']);
      sentinels.push({ host: '127.0.0.1', port });
    }
    const primaryPort = async () => {
      const answer = await cli(sentinels[0].port, 'sentinel', 'get-master-addr-by-name', SENTINEL_PRIMARY_NAME);
      return Number(answer.split('\n')[1]);
    };
    for (const { port } of sentinels) {
      await waitFor(async () => (await cli(port, 'sentinel', 'replicas', SENTINEL_PRIMARY_NAME).catch(() => '')).includes(String(dataPorts[1] ?? '')), 15_000, `sentinel on ${port}`);
    }
    // Each Sentinel must know the others before a failover can be voted.
    await waitFor(async () => (await cli(sentinels[0].port, 'sentinel', 'sentinels', SENTINEL_PRIMARY_NAME)).split('\n').filter((line) => line === 'name').length >= 2, 15_000, 'the Sentinels to find each other');
    const failover = async () => {
      const before = await primaryPort();
      await waitFor(async () => (await cli(sentinels[0].port, 'sentinel', 'failover', SENTINEL_PRIMARY_NAME).catch((error: Error) => error.message)) === 'OK', 15_000, 'SENTINEL FAILOVER to be accepted');
      let after = before;
      await waitFor(async () => {
        after = await primaryPort();
        return after !== before && (await cli(after, 'role').catch(() => '')).startsWith('master');
      }, 20_000, 'the Sentinels to name a new primary');
      return after;
    };
    const restart = async (port: number) => {
      dataNode(port, await primaryPort());
      await waitFor(async () => (await cli(port, 'ping').catch(() => '')) === 'PONG', 15_000, `redis-server on ${port}`);
    };
    return { sentinelsVariable: sentinels.map(({ host, port }) => `${host}:${port}`).join(','), sentinels, dataPorts, primaryPort, failover, kill: killPort, restart, stop };
  } catch (error) {
    await stop();
    throw new Error(`the Redis Sentinel set did not start: ${(error as Error).message}\n${output}`, { cause: error });
  }
}
