import type { CacheEntry, PostCache } from './post-cache';
import type { PostRecord } from './post-record';
import type { PostPage, PostsRepository } from './posts-repository';

/**
 * Layout A's reads: the repository's reads through the Redis cache (docs/design.md §3).
 * `arrivedAt` (`performance.now()` ms when the request arrived) lets a generation read made
 * since then answer; the repository ignores it.
 */
export interface PostReader {
  findById(pid: number, arrivedAt?: number): Promise<PostRecord | null>;
  list(limit: number, offset: number, arrivedAt?: number): Promise<PostPage>;
}

export interface CachedPostReaderOptions {
  /** Posts this process keeps in memory; the oldest goes first. Default 10 000. */
  maxPosts?: number;
  /** List pages this process keeps in memory; the oldest goes first. Default 100. */
  maxPages?: number;
  /**
   * How long a copy in memory may serve, ms. Only an invalidation lost to a Redis outage leaves
   * a copy stale, and then for at most this long past its Redis entry's TTL. Default 10 000.
   */
  lifetimeMs?: number;
}

/** A value kept in memory, valid while the cache's write generation is still `generation`. */
interface Remembered<T> {
  generation: string;
  value: T;
  expiresAt: number;
}

/**
 * Read-through: a hit is served from Redis; a miss reads PostgreSQL and stores the result
 * unless a write happened meanwhile. Misses (no post, empty page) are not cached.
 *
 * In front of Redis, each process keeps what it read in memory, tagged with the write
 * generation it read first; a copy serves only while the generation is unchanged. Every write
 * from either layout bumps the generation when it invalidates, and each read takes a
 * generation read after its request arrived (the rate limit's round trip reads it on the way;
 * else one GET per event-loop turn, shared), so a read that starts after a write was answered
 * never sees the memory's older copy: the cache stays exactly as fresh as Redis
 * alone, without moving the post through Redis on every read. Redis away: no generation, so
 * nothing is served from memory either. Values handed out are frozen: they are shared.
 */
export function createCachedPostReader(repository: PostsRepository, cache: PostCache, options: CachedPostReaderOptions = {}): PostReader {
  const { maxPosts = 10_000, maxPages = 100, lifetimeMs = 10_000 } = options;
  const posts = new Map<number, Remembered<PostRecord>>();
  const pages = new Map<string, Remembered<PostPage>>();

  async function through<K, T>(
    memory: Map<K, Remembered<T>>,
    maxEntries: number,
    key: K,
    arrivedAt: number | undefined,
    entry: CacheEntry,
    load: () => Promise<T>,
    worthCaching: (value: T) => boolean,
    freeze: (value: T) => T,
  ): Promise<T> {
    const generation = await cache.generation(arrivedAt);
    if (generation === null) return load();
    const known = memory.get(key);
    if (known !== undefined && known.generation === generation && known.expiresAt > Date.now()) return known.value;
    const cached = await cache.read(entry);
    let value: T;
    if (cached !== null) {
      value = JSON.parse(cached) as T;
    } else {
      value = await load();
      if (!worthCaching(value)) return value;
      await cache.write(entry, JSON.stringify(value), generation);
    }
    memory.delete(key);
    if (memory.size >= maxEntries) memory.delete(memory.keys().next().value as K);
    const kept = freeze(value);
    memory.set(key, { generation, value: kept, expiresAt: Date.now() + lifetimeMs });
    return kept;
  }

  return {
    findById: (pid, arrivedAt) =>
      through<number, PostRecord | null>(posts, maxPosts, pid, arrivedAt, { kind: 'post', pid }, () => repository.findById(pid), (post) => post !== null, Object.freeze),
    list: (limit, offset, arrivedAt) =>
      through<string, PostPage>(
        pages,
        maxPages,
        `${limit}:${offset}`,
        arrivedAt,
        { kind: 'list', limit, offset },
        () => repository.list(limit, offset),
        (page) => page.posts.length > 0,
        (page) => Object.freeze({ ...page, posts: Object.freeze(page.posts.map((post) => Object.freeze(post))) as PostRecord[] }),
      ),
  };
}
