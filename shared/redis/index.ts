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

/**
 * Deletes every key that starts with `prefix` (SCAN + UNLINK, never KEYS, so Redis is not
 * blocked), over a connection of its own that is closed before this resolves. For tests,
 * benchmarks and operators clearing one system's keys (REDIS_PREFIX).
 */
export async function deleteKeysByPrefix(url: string, prefix: string): Promise<void> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await redis.unlink(...keys);
    } while (cursor !== '0');
  } finally {
    // QUIT waits for the server to close; disconnect() would leave a 2 s timer behind.
    await redis.quit().catch(() => redis.disconnect());
  }
}

/** A wait for a connection to become ready; see {@link whenReady}. */
export interface ReadyWait {
  /** True once the connection is ready; false after the bound or `cancel()`. Never rejects. */
  ready: Promise<boolean>;
  /** Ends the wait at once (false), so a closing process is not held for the rest of the bound. */
  cancel(): void;
}

/**
 * Waits up to `timeoutMs` for the connection's `ready` event; the connection keeps
 * reconnecting either way.
 */
export function whenReady(redis: Redis, timeoutMs: number): ReadyWait {
  if (redis.status === 'ready') return { ready: Promise.resolve(true), cancel: () => undefined };
  let finish: (ready: boolean) => void = () => undefined;
  const ready = new Promise<boolean>((resolve) => {
    const onReady = () => finish(true);
    const timer = setTimeout(() => finish(false), timeoutMs);
    finish = (value) => {
      clearTimeout(timer);
      redis.off('ready', onReady);
      resolve(value);
    };
    redis.once('ready', onReady);
  });
  return { ready, cancel: () => finish(false) };
}
