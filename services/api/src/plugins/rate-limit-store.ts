import { isCluster, type RedisClient } from '../../../../shared/redis';

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

/** A key the counter reads in the same script as each count, and who wants what it read. */
export interface CountCompanion {
  key: string;
  /** Called before the batch's requests resume, with the key's value ('0' when missing) and when the script was sent (`performance.now()` ms). */
  seen(value: string, sentAt: number): void;
}

type Counted = (error: Error | null, result?: [number, number, string?]) => void;

/** The scripts' commands, defined once per client. */
interface CountingClient {
  countRequests(key: string, windowMs: number, n: number, callback: Counted): void;
  countRequestsAndRead(key: string, companionKey: string, windowMs: number, n: number, callback: Counted): void;
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
// The same, also reading a second key on the way (the round trip is paid anyway).
const COUNT_AND_READ_SCRIPT = COUNT_SCRIPT.replace('return {current, ttl}', "return {current, ttl, redis.call('GET', KEYS[2]) or '0'}");

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
 * @param companion - a key to read in each count's script; ignored on a Cluster, where it may
 *   live in another slot than the count
 */
export function coalescingRedisCounter(redis: RedisClient, nameSpace: string, windowMs: number, companion?: CountCompanion): RequestCounter {
  const client = redis as unknown as CountingClient;
  if (!client.countRequests) {
    redis.defineCommand('countRequests', { numberOfKeys: 1, lua: COUNT_SCRIPT });
    redis.defineCommand('countRequestsAndRead', { numberOfKeys: 2, lua: COUNT_AND_READ_SCRIPT });
  }
  const along = companion && !isCluster(redis) ? companion : undefined;
  // Per key, the requests waiting for the round trip under way.
  const queues = new Map<string, Waiting[]>();

  function send(key: string, batch: Waiting[]): void {
    queues.set(key, []);
    const sentAt = performance.now();
    const counted: Counted = (error, result) => {
      if (error || !result) {
        const failure = error ?? new Error('rate limit script returned nothing');
        for (const waiting of batch) waiting.reject(failure);
      } else {
        if (along && result[2] !== undefined) along.seen(result[2], sentAt);
        batch.forEach((waiting, index) => waiting.resolve({ current: result[0] - batch.length + index + 1, ttl: result[1] }));
      }
      const next = queues.get(key)!;
      if (next.length > 0) send(key, next);
      else queues.delete(key);
    };
    if (along) client.countRequestsAndRead(nameSpace + key, along.key, windowMs, batch.length, counted);
    else client.countRequests(nameSpace + key, windowMs, batch.length, counted);
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
