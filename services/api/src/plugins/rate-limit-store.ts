import type { RedisClient } from '../../../../shared/redis';

/** A principal's place in its current window. */
export interface WindowCount {
  /** Requests counted in the window so far, this one included. */
  current: number;
  /** Milliseconds left in the window. */
  ttl: number;
}

/** Counts requests per key in a fixed window shared by every api process. */
export interface RequestCounter {
  /**
   * Counts one request of `key`.
   *
   * @throws the Redis error when the count could not be made (the caller lets the request through)
   */
  count(key: string): Promise<WindowCount>;
}

type Counted = (error: Error | null, result?: [number, number]) => void;

/** The script's command, defined once per client. */
interface CountingClient {
  countRequests(key: string, windowMs: number, n: number, callback: Counted): void;
}

// A fixed window counting n requests at once (the one of @fastify/rate-limit's Redis store):
// the key's first count starts its window; later counts read what is left of it.
const COUNT_SCRIPT = `
local current = redis.call('INCRBY', KEYS[1], ARGV[2])
local ttl = tonumber(ARGV[1])
if current == tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ttl)
else
  ttl = redis.call('PTTL', KEYS[1])
end
return {current, ttl}
`;

interface Waiting {
  resolve(count: WindowCount): void;
  reject(error: Error): void;
}

/**
 * A Redis request counter whose concurrent counts of one key share one round trip: while a
 * key's script runs, the requests that arrive for it wait, then go together as one `INCRBY n`,
 * and each gets its own place in the count (the i-th of n sees `total - n + i`). The count
 * stays atomic in Redis, so the limit holds across api processes exactly; under load one
 * principal costs one Redis round trip per batch instead of one per request, and at low load
 * nothing waits.
 *
 * @param redis - the app's client (a Cluster too: one key per script)
 * @param nameSpace - key prefix, e.g. `<REDIS_PREFIX>:rate-limit:`
 * @param windowMs - the window's length, ms
 */
export function coalescingRedisCounter(redis: RedisClient, nameSpace: string, windowMs: number): RequestCounter {
  const client = redis as unknown as CountingClient;
  if (!client.countRequests) redis.defineCommand('countRequests', { numberOfKeys: 1, lua: COUNT_SCRIPT });
  // Per key, the requests waiting for the round trip under way.
  const queues = new Map<string, Waiting[]>();

  function send(key: string, batch: Waiting[]): void {
    queues.set(key, []);
    const counted: Counted = (error, result) => {
      if (error || !result) {
        const failure = error ?? new Error('rate limit script returned nothing');
        for (const waiting of batch) waiting.reject(failure);
      } else {
        batch.forEach((waiting, index) => waiting.resolve({ current: result[0] - batch.length + index + 1, ttl: result[1] }));
      }
      const next = queues.get(key)!;
      if (next.length > 0) send(key, next);
      else queues.delete(key);
    };
    client.countRequests(nameSpace + key, windowMs, batch.length, counted);
  }

  return {
    count(key) {
      return new Promise<WindowCount>((resolve, reject) => {
        const queue = queues.get(key);
        if (queue) queue.push({ resolve, reject });
        else send(key, [{ resolve, reject }]);
      });
    },
  };
}
