import type { CacheEntry, PostCache } from './post-cache';
import type { PostRecord } from './post-record';
import type { PostPage, PostsRepository } from './posts-repository';

/** Layout A's reads: the repository's reads through the Redis cache (docs/design.md §3). */
export type PostReader = Pick<PostsRepository, 'findById' | 'list'>;

/**
 * Read-through: a hit is served from Redis; a miss reads PostgreSQL and stores the result
 * unless a write happened meanwhile. Misses (no post, empty page) are not cached.
 */
export function createCachedPostReader(repository: PostsRepository, cache: PostCache): PostReader {
  async function through<T>(entry: CacheEntry, load: () => Promise<T>, worthCaching: (value: T) => boolean): Promise<T> {
    const cached = await cache.read(entry);
    if (cached !== null) return JSON.parse(cached) as T;
    const generation = await cache.generation();
    const value = await load();
    if (generation !== null && worthCaching(value)) await cache.write(entry, JSON.stringify(value), generation);
    return value;
  }

  return {
    findById: (pid) =>
      through<PostRecord | null>({ kind: 'post', pid }, () => repository.findById(pid), (post) => post !== null),
    list: (limit, offset) =>
      through<PostPage>({ kind: 'list', limit, offset }, () => repository.list(limit, offset), (page) => page.posts.length > 0),
  };
}
