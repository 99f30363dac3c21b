import { RedisClient, createRedis, whenReady } from '../../shared/redis';
import { TcpProxy, startTcpProxy } from '../support/tcp-proxy';
import { ApiHarness, createApiHarness } from './support/api-harness';
import { TestServiceKey, createServiceKey, insertDelivery } from './support/operations';

/** The api starts while Redis is too busy to answer, then Redis answers again. */
describe('redelivery after Redis stalled while the api started', () => {
  let harness: ApiHarness;
  let proxy: TcpProxy;
  let redis: RedisClient;
  let operator: TestServiceKey;

  beforeAll(async () => {
    harness = await createApiHarness();
    operator = await createServiceKey(harness.db, ['*']);
    const real = new URL(harness.env.redisUrl);
    proxy = await startTcpProxy({ host: real.hostname, port: Number(real.port || 6379) });
    // As the api's own: commands give up after 1 s. The app closes it.
    redis = createRedis({ redisUrl: `redis://127.0.0.1:${proxy.port}` }, 'client', { commandTimeout: 1_000 });
    expect(await whenReady(redis, 5_000).ready).toBe(true);
  });

  afterAll(async () => {
    await harness.close();
    await proxy.close();
  });

  it('When Redis does not answer while the api starts, then a redelivery answers 503 fast, and 202 once Redis answers again, without a restart', async () => {
    const id = await insertDelivery(harness.db, { status: 'failed' });
    proxy.hold();
    const api = await harness.start('a', {}, { redis });
    const redeliver = () => api.request({ method: 'POST', url: `/api/v1/webhooks/${id}/redeliver`, headers: operator.headers });

    const started = Date.now();
    const during = await redeliver();
    expect([during.statusCode, Date.now() - started < 2_500]).toEqual([503, true]);

    proxy.release();
    const after = await redeliver();
    expect([after.statusCode, after.json()]).toEqual([202, { id }]);
  });
});
