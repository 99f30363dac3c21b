import fp from 'fastify-plugin';
import { closeRedis, type RedisClient } from '../redis';

declare module 'fastify' {
  interface FastifyInstance {
    redis: RedisClient;
  }
}

/** Decorates the instance with `redis` and disconnects it when the app closes. */
export const redisPlugin = fp<{ redis: RedisClient }>(
  async (app, { redis }) => {
    app.decorate<RedisClient, 'redis'>('redis', redis);
    app.addHook('onClose', async () => {
      await closeRedis(redis);
    });
  },
  { name: 'redis' },
);
