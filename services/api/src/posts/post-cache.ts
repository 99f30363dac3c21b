import { isCluster, type RedisClient } from '../../../../shared/redis';
import type { FastifyBaseLogger } from 'fastify';

/** A cached read: one post by pid, or one page of the newest-first list. */
export type CacheEntry = { kind: 'post'; pid: number } | { kind: 'list'; limit: number; offset: number };

/**
 * The Layout A read cache in Redis. Every method swallows Redis failures (logged at warn):
 * a cache outage degrades to database reads and never fails a request.
 */
export interface PostCache {
  /** The cached JSON text, or null on a miss or a Redis failure. */
  read(entry: CacheEntry): Promise<string | null>;
  /**
   * The current write generation, read after this call: read it before the database so a racing
   * write cannot be cached over. The calls of one event-loop turn share one GET, sent at the
   * end of the turn, so every caller sees a value read after it asked. Null on failure.
   */
  generation(): Promise<string | null>;
  /** Stores `json` only if no write happened since `generation` was read. */
  write(entry: CacheEntry, json: string, generation: string): Promise<void>;
  /** Drops the posts' entries and every list page, in one round trip; call after the write commits. */
  invalidate(pid: number | readonly number[]): Promise<void>;
}

export interface PostCacheOptions {
  /** Key prefix (REDIS_PREFIX); keys are `<prefix>:posts:*`. */
  prefix: string;
  /** Safety net for an invalidation lost to a Redis outage, seconds. */
  ttlSeconds: number;
  log: FastifyBaseLogger;
}

// KEYS: generation key, target key. ARGV: expected generation, value, ttl seconds, hash field ('' = plain key).
const CONDITIONAL_WRITE = `
if (redis.call('GET', KEYS[1]) or '0') ~= ARGV[1] then return 0 end
if ARGV[4] == '' then
  redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3])
else
  redis.call('HSET', KEYS[2], ARGV[4], ARGV[2])
  redis.call('EXPIRE', KEYS[2], ARGV[3])
end
return 1`;

/**
 * Creates the cache. Posts live under `<prefix>:posts:post:<pid>`, list pages as fields of
 * the hash `<prefix>:posts:lists`, so one DEL drops every page. A write bumps
 * `<prefix>:posts:generation`; a reader that saw an older generation does not store its result.
 * The write script and the invalidation touch the generation with the entries, so on a Redis
 * Cluster whose prefix is no hash tag (a partitioned queue, docs/design.md §13) the cache has a tag of
 * its own, `<prefix>:{posts}:...`, rather than sharing the queue's.
 */
export function createPostCache(redis: RedisClient, { prefix, ttlSeconds, log }: PostCacheOptions): PostCache {
  const base = isCluster(redis) && !/^\{[^{}]+\}$/.test(prefix) ? `${prefix}:{posts}` : `${prefix}:posts`;
  const generationKey = `${base}:generation`;
  const listsKey = `${base}:lists`;
  const postKey = (pid: number) => `${base}:post:${pid}`;
  const warn = (err: unknown, action: string) => log.warn({ err }, `post cache ${action} failed; using the database`);
  // Callers of generation() in this turn; one GET answers them all once the turn is over.
  let askers: ((generation: string | null) => void)[] = [];
  const readGeneration = async () => {
    const answer = askers;
    askers = [];
    let generation: string | null;
    try {
      generation = (await redis.get(generationKey)) ?? '0';
    } catch (err) {
      warn(err, 'generation read');
      generation = null;
    }
    for (const resolve of answer) resolve(generation);
  };

  return {
    async read(entry) {
      try {
        return entry.kind === 'post'
          ? await redis.get(postKey(entry.pid))
          : await redis.hget(listsKey, `${entry.limit}:${entry.offset}`);
      } catch (err) {
        warn(err, 'read');
        return null;
      }
    },
    generation() {
      return new Promise((resolve) => {
        if (askers.length === 0) setImmediate(() => void readGeneration());
        askers.push(resolve);
      });
    },
    async write(entry, json, generation) {
      const [key, field] = entry.kind === 'post' ? [postKey(entry.pid), ''] : [listsKey, `${entry.limit}:${entry.offset}`];
      try {
        await redis.eval(CONDITIONAL_WRITE, 2, generationKey, key, generation, json, ttlSeconds, field);
      } catch (err) {
        warn(err, 'write');
      }
    },
    async invalidate(pid) {
      try {
        const pids = typeof pid === 'number' ? [pid] : pid;
        await redis
          .multi()
          .incr(generationKey)
          .del(...pids.map(postKey), listsKey)
          .exec();
      } catch (err) {
        log.error({ err, pid }, 'post cache invalidation failed; cached reads may be stale until the TTL');
      }
    },
  };
}
