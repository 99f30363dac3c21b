import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { closeRedis, createRedis, whenReady } from '../../shared/redis';
import { SENTINEL_PRIMARY_NAME, startRedisSentinels, type RedisSentinelSet } from '../support/redis-sentinel';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy';
import { waitFor } from '../support/wait-for';

const run = promisify(execFile);
const cli = (port: number, ...args: string[]) => run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args]).then(({ stdout }) => stdout.trim());

/**
 * docs/design.md §13.2: a Sentinel connection follows every failover by itself. The
 * case here is the one a load run meets a few times in ten: the primary dies, the connection is
 * in its reconnect loop asking a Sentinel where the primary is, and the Sentinels' `+switch-master`
 * arrives during that question. The Sentinels are reached through proxies that hold the
 * question until the switch was announced, so the case happens every run. A closed connection
 * leaves nothing behind at the Sentinels.
 */
describe('a Sentinel connection that is reconnecting when the Sentinels name a new primary', () => {
  let set: RedisSentinelSet;
  let proxies: TcpProxy[] = [];

  beforeAll(async () => {
    set = await startRedisSentinels(1);
    proxies = await Promise.all(set.sentinels.map((sentinel) => startTcpProxy(sentinel)));
  }, 60_000);

  afterAll(async () => {
    await Promise.all(proxies.map((proxy) => proxy.close()));
    await set?.stop();
  });

  /** Connections subscribed to `+switch-master` on a Sentinel (Sentinels themselves only send commands to each other). */
  const subscribers = async () => {
    const lists = await Promise.all(set.sentinels.map(({ port }) => cli(port, 'client', 'list')));
    return lists.join('\n').split('\n').filter((line) => line.includes('cmd=subscribe')).length;
  };

  /** Whether the Sentinel on `sentinelPort` sees the replica on `replicaPort` up with its link to the primary up. */
  const promotable = async (sentinelPort: number, replicaPort: number) => {
    const fields = (await cli(sentinelPort, 'sentinel', 'replicas', SENTINEL_PRIMARY_NAME)).split('\n');
    const value = (name: string) => fields[fields.indexOf(name) + 1];
    return value('port') === String(replicaPort) && value('flags') === 'slave' && value('master-link-status') === 'ok';
  };

  it.each(['worker', 'client'] as const)(
    'when a %s connection asks a Sentinel for the primary while the switch is announced, then it reaches the new primary',
    async (role) => {
      const before = await set.primaryPort();
      const connection = createRedis(
        {
          redisUrl: 'redis://127.0.0.1:1',
          redisSentinels: proxies.map((proxy) => ({ host: '127.0.0.1', port: proxy.port })),
          redisSentinelName: SENTINEL_PRIMARY_NAME,
        },
        role,
      );
      connection.on('error', () => undefined);
      try {
        expect(await whenReady(connection, 10_000).ready).toBe(true);
        await waitFor(async () => (await subscribers()) >= set.sentinels.length, 10_000, 'the connection to watch the Sentinels for a switch');

        for (const proxy of proxies) proxy.hold();
        await set.kill(before);
        await waitFor(async () => (await set.primaryPort()) !== before, 30_000, 'the Sentinels to promote the replica');
        const after = await set.primaryPort();
        // Each Sentinel announces the switch as it learns it: give the last one a moment.
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        for (const proxy of proxies) proxy.release();

        expect(await whenReady(connection, 15_000).ready).toBe(true);
        await connection.set(`reconnect-${role}`, 'written after the switch');
        expect(await cli(after, 'get', `reconnect-${role}`)).toBe('written after the switch');
      } finally {
        for (const proxy of proxies) proxy.release();
        await closeRedis(connection);
      }
      // The killed node comes back as a replica, so the next case has one to promote.
      await set.restart(before);
      await waitFor(async () => (await Promise.all(set.sentinels.map(({ port }) => promotable(port, before)))).every(Boolean), 30_000, 'every Sentinel to see the restarted node as a replica in sync');
      await waitFor(async () => (await subscribers()) === 0, 10_000, 'the closed connection to leave the Sentinels');
    },
    90_000,
  );
});
