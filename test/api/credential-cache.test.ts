import { createCachedCredentialStore } from '../../services/api/src/plugins/credential-cache';
import { createCredentialStore, CredentialStore } from '../../services/api/src/plugins/credential-store';
import { createDatabase } from '../../shared/db';
import { createRedis } from '../../shared/redis';
import { createUser } from '../support/factories';
import { ApiHarness, createApiHarness } from './support/api-harness';
import { waitFor } from '../support/wait-for';

describe('credential cache (docs/design.md §4 "Revocation")', () => {
  let harness: ApiHarness;

  beforeAll(async () => {
    harness = await createApiHarness();
  });

  afterAll(() => harness.close());

  it('when a known user reads a cached Layout A post again, then PostgreSQL is not touched at all', async () => {
    const statements: string[] = [];
    const database = createDatabase(harness.env.databaseUrl, { poolMax: 2, logging: (sql) => statements.push(sql) });
    const api = await harness.start('a', { outboxRelayIntervalMs: 600_000 }, { database });
    const user = await createUser(harness.db);
    const created = await api.request({
      method: 'POST',
      url: '/api/v1/posts/create',
      headers: user.headers,
      payload: { title: 'cached', body: 'read twice', userId: user.user.userId },
    });
    const url = `/api/v1/posts/${created.json().item.postId}`;
    await waitFor(
      async () => {
        statements.length = 0;
        const res = await api.request({ url, headers: user.headers });
        expect(res.statusCode).toBe(200);
        return statements.length === 0;
      },
      5_000,
      'a read that touches no PostgreSQL',
    );
  });

  it('when the invalidation subscription is down, then nothing is served from the cache until it is back', async () => {
    const user = await createUser(harness.db);
    const real = createCredentialStore(harness.db.sequelize, { log: silentLog });
    let reads = 0;
    const counted: CredentialStore = { ...real, findUser: (id) => (reads++, real.findUser(id)) };
    const subscriber = createRedis(harness.env.config, 'client');
    const cache = createCachedCredentialStore(counted, { subscriber, prefix: harness.env.redisPrefix, log: silentLog, heartbeatMs: 100 });
    try {
      await waitFor(async () => cache.live, 5_000, 'the subscription');
      await cache.findUser(user.user.userId);
      await cache.findUser(user.user.userId);
      expect(reads).toBe(1);

      const closed = new Promise((resolve) => subscriber.once('close', resolve));
      subscriber.disconnect(true);
      await closed;
      expect(cache.live).toBe(false);
      await cache.findUser(user.user.userId);
      await cache.findUser(user.user.userId);
      expect(reads).toBe(3);

      await waitFor(async () => cache.live, 5_000, 'the subscription again');
      await cache.findUser(user.user.userId);
      await cache.findUser(user.user.userId);
      expect(reads).toBe(4);
    } finally {
      await cache.close();
    }
  });
});

const silentLog = { warn: () => undefined, info: () => undefined } as never;
