import { ByteBudgetCache } from './byte-budget-cache';
import { type CacheEntry, MAX_CACHED_ENTRY_BYTES, type PostCache } from '../../../../shared/posts/post-cache';
import type { PostRecord } from '../../../../shared/posts/post-record';
import type { PostPage, PostsRepository } from '../../../../shared/posts/posts-repository';

/**
 * Layout A's reads: the repository's reads through the Redis cache (docs/design.md §3.1).
 * `arrivedAt` (`performance.now()` ms when the request arrived) lets a generation read made
 * since then answer; the repository ignores it.
 */
export interface PostReader {
  findById(pid: number, arrivedAt?: number): Promise<PostRecord | null>;
  list(limit: number, offset: number, arrivedAt?: number): Promise<PostPage>;
}

export interface CachedPostReaderOptions {
  /**
   * What the copies this process keeps in memory may weigh together, bytes; the oldest goes
   * first. Each copy is weighed at two bytes per UTF-16 unit of its JSON, twice (the parsed
   * value and the answer serialised from it), plus {@link POST_OVERHEAD_BYTES} per post.
   * Default 32 MiB.
   */
  maxMemoryBytes?: number;
  /**
   * How long a copy in memory may serve, ms. Only an invalidation lost to a Redis outage leaves
   * a copy stale, and then for at most this long past its Redis entry's TTL. Default 10 000.
   */
  lifetimeMs?: number;
}

/** Objects, numbers and the answer's URLs of one post in memory, beyond its text, bytes (an allowance). */
export const POST_OVERHEAD_BYTES = 1024;

/** A value kept in memory, valid while the cache's write generation is still `generation`. */
interface Remembered<T> {
  generation: string;
  value: T;
  expiresAt: number;
}

/**
 * Read-through: a hit is served from Redis; a miss reads PostgreSQL and stores the result
 * unless a write happened meanwhile. Misses (no post, empty page) are not cached, nor is an
 * entry whose JSON is over {@link MAX_CACHED_ENTRY_BYTES} (1 MiB): it is read again each time.
 *
 * In front of Redis, each process keeps what it read in memory, tagged with the write
 * generation it read first; a copy serves only while the generation is unchanged. Every write
 * from either layout bumps the generation when it invalidates, and each read takes a
 * generation read after its request arrived (the rate limit's round trip reads it on the way;
 * else one GET per event-loop turn, shared), so a read that starts after a write was answered
 * never sees the memory's older copy: the cache stays exactly as fresh as Redis
 * alone, without moving the post through Redis on every read. Redis away: no generation, so
 * nothing is served from memory either. Values handed out are frozen: they are shared. The
 * copies in memory are bounded in bytes ({@link CachedPostReaderOptions.maxMemoryBytes}).
 */
export function createCachedPostReader(repository: PostsRepository, cache: PostCache, options: CachedPostReaderOptions = {}): PostReader {
  const { maxMemoryBytes = 32 * 1024 * 1024, lifetimeMs = 10_000 } = options;
  // Posts by pid and list pages share one budget: `post:<pid>`, `list:<limit>:<offset>`.
  const memory = new ByteBudgetCache<string, Remembered<unknown>>(maxMemoryBytes);

  async function through<T>(
    key: string,
    arrivedAt: number | undefined,
    entry: CacheEntry,
    load: () => Promise<T>,
    postsOf: (value: T) => readonly PostRecord[],
    freeze: (value: T) => T,
  ): Promise<T> {
    const generation = await cache.generation(arrivedAt);
    if (generation === null) return load();
    const known = memory.get(key) as Remembered<T> | undefined;
    if (known !== undefined && known.generation === generation && known.expiresAt > Date.now()) return known.value;
    const cached = await cache.read(entry);
    let value: T;
    let json: string;
    if (cached !== null) {
      value = JSON.parse(cached) as T;
      json = cached;
    } else {
      value = await load();
      const posts = postsOf(value);
      // Misses are not cached; nor is a page whose text alone (each UTF-16 unit at least a byte of JSON) is over the limit.
      if (posts.length === 0 || posts.reduce((units, post) => units + post.title.length + post.content.length, 0) > MAX_CACHED_ENTRY_BYTES) return value;
      json = JSON.stringify(value);
      if (Buffer.byteLength(json) > MAX_CACHED_ENTRY_BYTES) return value;
      await cache.write(entry, json, generation);
    }
    const kept = freeze(value);
    memory.set(key, { generation, value: kept, expiresAt: Date.now() + lifetimeMs }, 4 * json.length + POST_OVERHEAD_BYTES * postsOf(kept).length);
    return kept;
  }

  return {
    findById: (pid, arrivedAt) =>
      through<PostRecord | null>(`post:${pid}`, arrivedAt, { kind: 'post', pid }, () => repository.findById(pid), (post) => (post === null ? [] : [post]), Object.freeze),
    list: (limit, offset, arrivedAt) =>
      through<PostPage>(
        `list:${limit}:${offset}`,
        arrivedAt,
        { kind: 'list', limit, offset },
        () => repository.list(limit, offset),
        (page) => page.posts,
        (page) => Object.freeze({ ...page, posts: Object.freeze(page.posts.map((post) => Object.freeze(post))) as PostRecord[] }),
      ),
  };
}
