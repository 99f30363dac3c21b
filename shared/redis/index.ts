import Redis, { RedisOptions } from 'ioredis';

/**
 * How a connection behaves while Redis is away:
 * - `worker`: BullMQ Worker connections; commands wait for the reconnect forever
 *   (BullMQ requires `maxRetriesPerRequest: null`).
 * - `client`: producers and caches; commands fail fast so a request never hangs on Redis.
 */
export type RedisRole = 'worker' | 'client';

/**
 * Opens an ioredis connection to REDIS_URL with the settings its role needs.
 *
 * @param url - redis:// or rediss:// URL
 * @param role - see {@link RedisRole}
 * @param extra - further ioredis options, applied last
 */
export function createRedis(url: string, role: RedisRole, extra: RedisOptions = {}): Redis {
  const base: RedisOptions =
    role === 'worker'
      ? { maxRetriesPerRequest: null, enableReadyCheck: true }
      : { maxRetriesPerRequest: 1, enableOfflineQueue: false, connectTimeout: 2_000 };
  return new Redis(url, {
    ...base,
    // Reconnect forever with a capped backoff (milliseconds): Redis restarts must heal by themselves.
    retryStrategy: (times) => Math.min(times * 200, 2_000),
    lazyConnect: false,
    ...extra,
  });
}
