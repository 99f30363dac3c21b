import { isCluster, type RedisClient } from '../redis';
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
   * The current write generation, as read after the request arrived (or, without `arrivedAt`,
   * after this call): read it before the database so a racing write cannot be cached over, and
   * compare it with a copy's to know the copy current. A GET of this cache sent after
   * `arrivedAt` answers at once; otherwise the calls of one event-loop turn share one GET,
   * sent at the end of the turn. Null on failure.
   *
   * @param arrivedAt - when the request arrived, `performance.now()` ms
   */
  generation(arrivedAt?: number): Promise<string | null>;
  /**
   * Stores `json` only if no write happened since `generation` was read, it is at most
   * {@link MAX_CACHED_ENTRY_BYTES}, and its kind's byte budget has room for it.
   */
  write(entry: CacheEntry, json: string, generation: string): Promise<void>;
  /** Drops the posts' entries and every list page, in one round trip; call after the write commits. */
  invalidate(pid: number | readonly number[]): Promise<void>;
}

// KEYS: generation key, then the entries to drop (DEL in chunks: Lua unpacks a few thousand at
// most). One script rather than MULTI/EXEC: atomic alike, and no transaction pipeline in the client.
const INVALIDATE = `
redis.call('INCR', KEYS[1])
for i = 2, #KEYS, 1000 do
  redis.call('DEL', unpack(KEYS, i, math.min(i + 999, #KEYS)))
end
return 1`;

export interface PostCacheOptions {
  /** Key prefix (REDIS_PREFIX); keys are `<prefix>:posts:*`. */
  prefix: string;
  /** Safety net for an invalidation lost to a Redis outage, seconds. Default {@link POST_CACHE_TTL_SECONDS}. */
  ttlSeconds?: number;
  log: FastifyBaseLogger;
  /** What the list pages of one generation may take in Redis together, bytes. Default 16 MiB. */
  listsMaxBytes?: number;
  /**
   * What the posts written within one TTL may take in Redis together, bytes; as each lives one
   * TTL, those alive at once take at most twice this. Default 8 MiB.
   */
  postsMaxBytesPerTtl?: number;
}

/** How long a cached Layout A read lives even if an invalidation was lost to a Redis outage, seconds. */
export const POST_CACHE_TTL_SECONDS = 300;

/** The largest entry (a post's or a page's JSON, UTF-8) the cache keeps, in Redis or in memory, bytes. */
export const MAX_CACHED_ENTRY_BYTES = 1024 * 1024;

// The bytes held by the lists hash, a field of the hash itself: it goes with the hash (an
// invalidation's DEL, the TTL). No page field looks like it (`<limit>:<offset>`).
const LISTS_BYTES_FIELD = '#bytes';

// KEYS: generation key, target key, byte counter (of posts; for a page the lists hash again).
// ARGV: expected generation, value, ttl seconds, hash field ('' = plain key), byte budget.
// A post's counter lives one TTL from the first post it counts, so posts written in one such
// window fit the budget; a page's is the hash's own field, so the hash always fits it.
const CONDITIONAL_WRITE = `
if (redis.call('GET', KEYS[1]) or '0') ~= ARGV[1] then return 0 end
local size = #ARGV[2]
local budget = tonumber(ARGV[5])
if ARGV[4] == '' then
  if tonumber(redis.call('GET', KEYS[3]) or '0') + size > budget then return 0 end
  redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3])
  redis.call('INCRBY', KEYS[3], size)
  if redis.call('TTL', KEYS[3]) < 0 then redis.call('EXPIRE', KEYS[3], ARGV[3]) end
else
  local replaced = redis.call('HSTRLEN', KEYS[2], ARGV[4])
  if tonumber(redis.call('HGET', KEYS[2], '${LISTS_BYTES_FIELD}') or '0') - replaced + size > budget then return 0 end
  redis.call('HSET', KEYS[2], ARGV[4], ARGV[2])
  redis.call('HINCRBY', KEYS[2], '${LISTS_BYTES_FIELD}', size - replaced)
  redis.call('EXPIRE', KEYS[2], ARGV[3])
end
return 1`;

/**
 * Creates the cache. Posts live under `<prefix>:posts:post:<pid>`, list pages as fields of
 * the hash `<prefix>:posts:lists`, so one DEL drops every page. A write bumps
 * `<prefix>:posts:generation`; a reader that saw an older generation does not store its result.
 * Bounded in bytes: no entry over {@link MAX_CACHED_ENTRY_BYTES}; the pages of one generation
 * at most `listsMaxBytes` (the hash counts its own bytes); the posts written within one TTL at
 * most `postsMaxBytesPerTtl` (counted in `<prefix>:posts:post-bytes`, which lives one TTL).
 * A write past a budget is not stored: the read is answered from the database as on a miss.
 * The write script and the invalidation touch the generation with the entries, so on a Redis
 * Cluster whose prefix is no hash tag (a partitioned queue, docs/design.md §13.1) the cache has a tag of
 * its own, `<prefix>:{posts}:...`, rather than sharing the queue's.
 */
export function createPostCache(
  redis: RedisClient,
  { prefix, ttlSeconds = POST_CACHE_TTL_SECONDS, log, listsMaxBytes = 16 * 1024 * 1024, postsMaxBytesPerTtl = 8 * 1024 * 1024 }: PostCacheOptions,
): PostCache {
  const base = isCluster(redis) && !/^\{[^{}]+\}$/.test(prefix) ? `${prefix}:{posts}` : `${prefix}:posts`;
  const generationKey = `${base}:generation`;
  const listsKey = `${base}:lists`;
  const postKey = (pid: number) => `${base}:post:${pid}`;
  const postBytesKey = `${base}:post-bytes`;
  const warn = (err: unknown, action: string) => log.warn({ err }, `post cache ${action} failed; using the database`);
  // The newest generation read, with when its command was sent: it answers requests that arrived before.
  let latest = { generation: '', sentAt: -Infinity };
  const seen = (generation: string, sentAt: number) => {
    if (sentAt > latest.sentAt) latest = { generation, sentAt };
  };
  // Callers of generation() in this turn; one GET answers them all once the turn is over.
  let askers: ((generation: string | null) => void)[] = [];
  const readGeneration = async () => {
    const answer = askers;
    askers = [];
    let generation: string | null;
    try {
      const sentAt = performance.now();
      generation = (await redis.get(generationKey)) ?? '0';
      seen(generation, sentAt);
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
    generation(arrivedAt) {
      if (arrivedAt !== undefined && latest.sentAt >= arrivedAt) return Promise.resolve(latest.generation);
      return new Promise((resolve) => {
        if (askers.length === 0) setImmediate(() => void readGeneration());
        askers.push(resolve);
      });
    },
    async write(entry, json, generation) {
      if (Buffer.byteLength(json) > MAX_CACHED_ENTRY_BYTES) return;
      const [key, counter, field, budget] =
        entry.kind === 'post' ? [postKey(entry.pid), postBytesKey, '', postsMaxBytesPerTtl] : [listsKey, listsKey, `${entry.limit}:${entry.offset}`, listsMaxBytes];
      try {
        await redis.eval(CONDITIONAL_WRITE, 3, generationKey, key, counter, generation, json, ttlSeconds, field, budget);
      } catch (err) {
        warn(err, 'write');
      }
    },
    async invalidate(pid) {
      try {
        const pids = typeof pid === 'number' ? [pid] : pid;
        const keys = [generationKey, listsKey, ...pids.map(postKey)];
        await redis.eval(INVALIDATE, keys.length, ...keys);
      } catch (err) {
        log.error({ err, pid }, 'post cache invalidation failed; cached reads may be stale until the TTL');
      }
    },
  };
}
