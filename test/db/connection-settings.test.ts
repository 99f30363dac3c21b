import { ConnectionError } from 'sequelize';
import { createDatabase, isDatabaseUnavailable } from '../../shared/db';
import { createTestEnvironment, TestEnvironment } from '../support/environment';
import { startTcpProxy } from '../support/tcp-proxy';

describe('the settings each new connection takes', () => {
  let env: TestEnvironment;

  beforeAll(async () => {
    env = await createTestEnvironment();
  });

  afterAll(() => env.cleanup());

  it('when the server goes away between a connection’s start-up and its plan setting, then the query fails as an outage (the api’s 503), not as a bad statement', async () => {
    const url = new URL(env.databaseUrl);
    const proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port || 5432) });
    proxy.dropOn('plan_cache_mode');
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
