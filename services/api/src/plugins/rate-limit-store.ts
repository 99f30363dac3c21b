import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
import type { RedisClient } from '../../../../shared/redis';

type Counted = (error: Error | null, result?: { current: number; ttl: number }) => void;

/** The script's command, defined once per client: `countRequests(key, windowMs, n, callback)`. */
interface CountingClient {
  countRequests(key: string, windowMs: number, n: number, callback: (error: Error | null, result?: [number, number]) => void): void;
}

// The fixed window of @fastify/rate-limit's own Redis store, counting n requests at once:
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

/** Requests of one key waiting for the round trip under way. */
interface KeyQueue {
  waiting: Counted[];
}

/**
 * A Redis store for `@fastify/rate-limit` with the fixed window of its own Redis store, whose
 * concurrent counts of one key share one round trip: while a key's script runs, the requests
 * that arrive for it wait, then go together as one `INCRBY n`, and each gets its own place in
 * the count (the i-th of n sees `total - n + i`). The count stays atomic in Redis, so the
 * limit holds across api processes exactly as before; under load one principal costs one
 * Redis round trip per batch instead of one per request, and at low load nothing waits.
 *
 * @param redis - the app's client (a Cluster too: one key per script)
 * @param nameSpace - key prefix, as the plugin's `nameSpace`
 */
export function coalescingRedisStore(redis: RedisClient, nameSpace: string): FastifyRateLimitStoreCtor {
  if (!(redis as unknown as Partial<CountingClient>).countRequests) redis.defineCommand('countRequests', { numberOfKeys: 1, lua: COUNT_SCRIPT });
  const client = redis as unknown as CountingClient;
  const queues = new Map<string, KeyQueue>();

  function send(key: string, queue: KeyQueue, windowMs: number): void {
    const batch = queue.waiting;
    queue.waiting = [];
    client.countRequests(nameSpace + key, windowMs, batch.length, (error, result) => {
      if (error || !result) batch.forEach((counted) => counted(error ?? new Error('rate limit script returned nothing')));
      else batch.forEach((counted, index) => counted(null, { current: result[0] - batch.length + index + 1, ttl: result[1] }));
      if (queue.waiting.length > 0) send(key, queue, windowMs);
      else queues.delete(key);
    });
  }

  class CoalescingRedisStore implements FastifyRateLimitStore {
    incr(key: string, counted: Counted, windowMs: number): void {
      const queue = queues.get(key);
      if (queue) {
        queue.waiting.push(counted);
        return;
      }
      const started: KeyQueue = { waiting: [counted] };
      queues.set(key, started);
      send(key, started, windowMs);
    }

    child(): FastifyRateLimitStore {
      // Route-level limits are not used: every route shares the principal's one count.
      return this;
    }
  }
  return CoalescingRedisStore;
}
