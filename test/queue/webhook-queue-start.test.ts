import { QueueUnavailableError, WebhookQueue, addDeliveryJobs, createWebhookQueue } from '../../shared/queue';
import { RedisClient, closeRedis, createRedis, whenReady } from '../../shared/redis';
import { TestEnvironment, createTestEnvironment } from '../support/environment';
import { TcpProxy, startTcpProxy } from '../support/tcp-proxy';

describe('webhook queue: a producer that starts while Redis is slow', () => {
  let env: TestEnvironment;
  let proxy: TcpProxy;
  let redis: RedisClient;
  let queue: WebhookQueue | undefined;

  beforeAll(async () => {
    env = await createTestEnvironment({}, 'worker');
    const real = new URL(env.redisUrl);
    proxy = await startTcpProxy({ host: real.hostname, port: Number(real.port || 6379) });
    // The api's connection: commands give up after 1 s.
    redis = createRedis({ redisUrl: `redis://127.0.0.1:${proxy.port}` }, 'client', { commandTimeout: 1_000 });
    expect(await whenReady(redis, 5_000).ready).toBe(true);
  });

  afterAll(async () => {
    await queue?.close();
    await closeRedis(redis);
    await proxy.close();
    await env.cleanup();
  });

  it('When a command times out while the queue starts, then adds fail fast until Redis answers and succeed after, on the same queue', async () => {
    proxy.hold();
    queue = createWebhookQueue({ redisPrefix: env.redisPrefix }, redis);

    const started = Date.now();
    await expect(addDeliveryJobs(queue, [{ deliveryId: 'during-the-stall' }])).rejects.toBeInstanceOf(QueueUnavailableError);
    expect(Date.now() - started).toBeLessThan(2_500);

    proxy.release();
    await addDeliveryJobs(queue, [{ deliveryId: 'after-the-stall' }]);
    await addDeliveryJobs(queue, [{ deliveryId: 'later' }]);
    expect(await queue.at(0).getJobState('after-the-stall')).toBe('waiting');
    expect(await queue.at(0).getJobState('later')).toBe('waiting');
  });
});
