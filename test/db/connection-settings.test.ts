import { createServer, Server, Socket, connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { ConnectionError } from 'sequelize';
import { createDatabase, isDatabaseUnavailable } from '../../shared/db';
import { createTestEnvironment, TestEnvironment } from '../support/environment';

/**
 * A TCP proxy to PostgreSQL that drops a connection as soon as the client sends a statement
 * containing `marker`: the server "goes away" between a connection's start-up and that
 * statement.
 */
async function startDroppingProxy(target: URL, marker: string): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(Number(target.port || 5432), target.hostname);
    sockets.add(client).add(upstream);
    client.on('data', (chunk: Buffer) => {
      if (chunk.includes(marker)) {
        client.destroy();
        upstream.destroy();
      } else upstream.write(chunk);
    });
    upstream.pipe(client);
    for (const socket of [client, upstream]) socket.on('error', () => undefined).on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('the settings each new connection takes', () => {
  let env: TestEnvironment;

  beforeAll(async () => {
    env = await createTestEnvironment();
  });

  afterAll(() => env.cleanup());

  it('when the server goes away between a connection’s start-up and its plan setting, then the query fails as an outage (the api’s 503), not as a bad statement', async () => {
    const target = new URL(env.databaseUrl);
    const proxy = await startDroppingProxy(target, 'plan_cache_mode');
    const url = new URL(env.databaseUrl);
    url.hostname = '127.0.0.1';
    url.port = String(proxy.port);
    const db = createDatabase(url.toString(), { poolMax: 1 });
    try {
      const failure = await db.sequelize.query('SELECT 1').catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(ConnectionError);
      expect(isDatabaseUnavailable(failure)).toBe(true);
    } finally {
      await db.close();
      await proxy.close();
    }
  });

  it('when a connection is made, then it plans each prepared statement once (plan_cache_mode)', async () => {
    const db = createDatabase(env.databaseUrl, { poolMax: 1 });
    try {
      expect(await db.sequelize.query('SHOW plan_cache_mode', { plain: true })).toEqual({ plan_cache_mode: 'force_generic_plan' });
    } finally {
      await db.close();
    }
  });
});
