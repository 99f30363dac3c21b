import { ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './processes';
import { waitFor } from './wait-for';

const run = promisify(execFile);

/** A Redis Cluster of its own for one test file: masters only, no persistence, in a temp dir. */
export interface RedisClusterProcess {
  /** The masters, `127.0.0.1` and their client ports. */
  nodes: { host: string; port: number }[];
  /** The nodes as REDIS_CLUSTER_NODES spells them: `127.0.0.1:p1,127.0.0.1:p2,...`. */
  nodesVariable: string;
  /** Kills every server and removes the temp dir. */
  stop(): Promise<void>;
}

/**
 * Starts `masters` redis-server processes with `--cluster-enabled yes` on free ports (client
 * and cluster-bus ports both picked free, so nothing collides with other runs), joins them
 * with `redis-cli --cluster create`, and resolves once every node reports `cluster_state:ok`.
 *
 * @throws Error with the servers' output when a server or the cluster does not come up in 15 s
 */
export async function startRedisCluster(masters = 3): Promise<RedisClusterProcess> {
  const dir = await mkdtemp(path.join(tmpdir(), 'redis-cluster-'));
  const children: ChildProcess[] = [];
  let output = '';
  const stop = async () => {
    await Promise.all(
      children.map(async (child) => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        const exited = once(child, 'exit');
        child.kill('SIGKILL');
        await exited;
      }),
    );
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const nodes: { host: string; port: number }[] = [];
    for (let i = 0; i < masters; i += 1) {
      const port = await freePort();
      const busPort = await freePort();
      // `--save '' --appendonly no`: nothing is written but the cluster's own node file.
      const child = spawn(
        'redis-server',
        ['--port', String(port), '--cluster-port', String(busPort), '--bind', '127.0.0.1', '--cluster-enabled', 'yes',
          '--cluster-config-file', `nodes-${port}.conf`, '--dir', dir, '--save', '', '--appendonly', 'no'],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
      children.push(child);
      nodes.push({ host: '127.0.0.1', port });
    }
    const cli = (port: number, ...args: string[]) => run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args]);
    for (const { port } of nodes) {
      await waitFor(async () => (await cli(port, 'ping').catch(() => ({ stdout: '' }))).stdout.trim() === 'PONG', 15_000, `redis-server on ${port}`);
    }
    const addresses = nodes.map(({ host, port }) => `${host}:${port}`);
    await run('redis-cli', ['--cluster', 'create', ...addresses, '--cluster-replicas', '0', '--cluster-yes']);
    for (const { port } of nodes) {
      await waitFor(async () => (await cli(port, 'cluster', 'info')).stdout.includes('cluster_state:ok'), 15_000, `the cluster to be ok on ${port}`);
    }
    return { nodes, nodesVariable: addresses.join(','), stop };
  } catch (error) {
    await stop();
    throw new Error(`the Redis Cluster did not start: ${(error as Error).message}\n${output}`, { cause: error });
  }
}
