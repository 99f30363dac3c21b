import Redis from 'ioredis';
import pino from 'pino';
import { ByteBudgetCache } from '../../services/api/src/posts/byte-budget-cache';
import { createPostCache, MAX_CACHED_ENTRY_BYTES, PostCache } from '../../shared/posts/post-cache';
import { createTestEnvironment, TestEnvironment } from '../support/environment';

/** What a string takes in memory at most: two bytes per UTF-16 unit. */
const heapBytes = (text: string) => 2 * text.length;

describe('ByteBudgetCache (the Layout A copies in memory)', () => {
  it('when entries of real sizes are set, then what it keeps never weighs more than its budget and the oldest go first', () => {
    const budget = 1024 * 1024;
    const cache = new ByteBudgetCache<string, string>(budget);
    const pages = Array.from({ length: 40 }, (_, n) => `${n}`.padEnd(60_000, 'x'));
    for (const [n, page] of pages.entries()) {
      expect(cache.set(`page ${n}`, page, heapBytes(page))).toBe(true);
      expect(cache.bytes).toBeLessThanOrEqual(budget);
    }
    // 120,000 bytes each: eight fit in 1 MiB, the newest eight.
    expect(cache.size).toBe(8);
    expect(cache.bytes).toBe(8 * 120_000);
    expect(cache.get('page 31')).toBeUndefined();
    expect(cache.get('page 32')).toBe(pages[32]);
    expect(cache.get('page 39')).toBe(pages[39]);
  });

  it('when an entry weighs more than the whole budget, then it is not kept and the others stay', () => {
    const cache = new ByteBudgetCache<string, string>(1000);
    cache.set('small', 'a', 10);
    expect(cache.set('huge', 'b', 1001)).toBe(false);
    expect(cache.get('huge')).toBeUndefined();
    expect(cache.get('small')).toBe('a');
    expect(cache.bytes).toBe(10);
  });

  it('when an entry is replaced or deleted, then its bytes are given back', () => {
    const cache = new ByteBudgetCache<string, string>(1000);
    cache.set('k', 'a', 600);
    cache.set('k', 'b', 700);
    expect(cache.bytes).toBe(700);
    cache.delete('k');
    expect(cache.bytes).toBe(0);
    expect(cache.size).toBe(0);
  });
});

describe('the Redis post cache, bounded in bytes', () => {
  let env: TestEnvironment;
  let redis: Redis;

  const cacheWith = (budgets: { listsMaxBytes?: number; postsMaxBytesPerTtl?: number }): PostCache =>
    createPostCache(redis, { prefix: env.redisPrefix, ttlSeconds: 300, log: pino({ level: 'silent' }), ...budgets });
  const listsKey = () => `${env.redisPrefix}:posts:lists`;

  beforeAll(async () => {
    env = await createTestEnvironment();
    redis = new Redis(env.redisUrl);
  });

  beforeEach(async () => {
    await cacheWith({}).invalidate([1, 2, 3, 4]);
  });

  afterAll(async () => {
    redis.disconnect();
    await env.cleanup();
  });

  it('when list pages fill the budget of their generation, then the next is not stored, until a write starts a new generation', async () => {
    const cache = cacheWith({ listsMaxBytes: 100_000 });
    const page = 'p'.repeat(30_000);
    let generation = (await cache.generation())!;
    for (const offset of [0, 1, 2, 3]) await cache.write({ kind: 'list', limit: 10, offset }, page, generation);
    expect(await redis.hkeys(listsKey())).toEqual(expect.arrayContaining(['10:0', '10:1', '10:2']));
    expect(await redis.hexists(listsKey(), '10:3')).toBe(0);
    expect(await redis.hget(listsKey(), '#bytes')).toBe('90000');
    // Rewriting a stored page counts it once.
    await cache.write({ kind: 'list', limit: 10, offset: 0 }, page, generation);
    expect(await redis.hget(listsKey(), '#bytes')).toBe('90000');

    await cache.invalidate(1);
    generation = (await cache.generation())!;
    await cache.write({ kind: 'list', limit: 10, offset: 3 }, page, generation);
    expect(await cache.read({ kind: 'list', limit: 10, offset: 3 })).toBe(page);
    expect(await redis.hget(listsKey(), '#bytes')).toBe('30000');
  });

  it('when posts written within one TTL fill their budget, then the next is not stored', async () => {
    const cache = cacheWith({ postsMaxBytesPerTtl: 100_000 });
    const generation = (await cache.generation())!;
    const post = 'q'.repeat(40_000);
    for (const pid of [1, 2, 3]) await cache.write({ kind: 'post', pid }, post, generation);
    expect(await cache.read({ kind: 'post', pid: 1 })).toBe(post);
    expect(await cache.read({ kind: 'post', pid: 2 })).toBe(post);
    expect(await cache.read({ kind: 'post', pid: 3 })).toBeNull();
    expect(await redis.ttl(`${env.redisPrefix}:posts:post-bytes`)).toBeGreaterThan(0);
  });

  it('when an entry is over 1 MiB, then it is stored neither as a page nor as a post, however large the budgets', async () => {
    const cache = cacheWith({ listsMaxBytes: 64 * MAX_CACHED_ENTRY_BYTES, postsMaxBytesPerTtl: 64 * MAX_CACHED_ENTRY_BYTES });
    const generation = (await cache.generation())!;
    const over = 'é'.repeat(MAX_CACHED_ENTRY_BYTES / 2 + 1);
    await cache.write({ kind: 'list', limit: 100, offset: 0 }, over, generation);
    await cache.write({ kind: 'post', pid: 4 }, over, generation);
    expect(await cache.read({ kind: 'list', limit: 100, offset: 0 })).toBeNull();
    expect(await cache.read({ kind: 'post', pid: 4 })).toBeNull();
    const justFits = 'é'.repeat(MAX_CACHED_ENTRY_BYTES / 2);
    await cache.write({ kind: 'post', pid: 4 }, justFits, generation);
    expect(await cache.read({ kind: 'post', pid: 4 })).toBe(justFits);
  });
});
