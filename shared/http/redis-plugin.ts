import fp from 'fastify-plugin';
import type Redis from 'ioredis';

declare module 'fastify' {
  interface FastifyInstance {
    redis: Redis;
  }
}

/** Decorates the instance with `redis` and disconnects it when the app closes. */
export const redisPlugin = fp<{ redis: Redis }>(
  async (app, { redis }) => {
    app.decorate('redis', redis);
    app.addHook('onClose', async () => {
      await redis.quit().catch(() => redis.disconnect());
    });
  },
  { name: 'redis' },
);
