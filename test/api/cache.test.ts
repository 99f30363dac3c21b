import Redis from 'ioredis';
import { createUser, TestUser } from '../support/factories';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';

describe('Layout A read cache (docs/design.md §3.1)', () => {
  let harness: ApiHarness;
  let a: ApiClient;
  let b: ApiClient;
  let alice: TestUser;
  let redis: Redis;

  const createThroughB = async (title: string) =>
    Number((await b.request({ method: 'POST', url: '/api/v1/posts', headers: alice.headers, payload: { title, content: 'c' } })).json().pid);
  const readThroughA = async (pid: number) => a.request({ url: `/api/v1/posts/${pid}`, headers: alice.headers });

  beforeAll(async () => {
    harness = await createApiHarness();
    a = await harness.start('a');
    b = await harness.start('b');
    alice = await createUser(harness.db);
    redis = new Redis(harness.env.redisUrl);
  });

  afterAll(async () => {
    redis.disconnect();
    await harness.close();
  });

  it('when Layout A reads a post, then later reads come from Redis under the prefix', async () => {
    const pid = await createThroughB('Cached');
    expect((await readThroughA(pid)).json().item.title).toBe('Cached');
    expect(await redis.exists(`${harness.env.redisPrefix}:posts:post:${pid}`)).toBe(1);
    // A change behind the api's back is invisible while the entry lives: the read is served from Redis.
    await harness.db.sequelize.query(`UPDATE posts SET post_title = 'Changed behind the cache' WHERE pid = ${pid}`);
    expect((await readThroughA(pid)).json().item.title).toBe('Cached');
  });

  it('when a post is updated through Layout B, then Layout A reads the new version at once', async () => {
    const pid = await createThroughB('Before');
    expect((await readThroughA(pid)).json().item.title).toBe('Before');
    const updated = await b.request({ method: 'PUT', url: `/api/v1/posts/${pid}`, headers: alice.headers, payload: { title: 'After', content: 'new' } });
    expect(updated.json()).toEqual({ status: 2001, message: 'Post updated successfully.' });
    expect((await readThroughA(pid)).json().item).toMatchObject({ title: 'After', body: 'new' });
  });

  it('when a post is created or deleted through Layout B, then the Layout A list reflects it at once', async () => {
    const list = async () => (await a.request({ url: '/api/v1/posts?limit=100', headers: alice.headers })).json().items.map((item: { id: number }) => item.id);
    const before = await list();
    const pid = await createThroughB('New in B');
    expect(await list()).toEqual([pid, ...before]);
    expect((await readThroughA(pid)).statusCode).toBe(200);
    await b.request({ method: 'DELETE', url: `/api/v1/posts/${pid}`, headers: alice.headers });
    expect(await list()).toEqual(before);
    expect((await readThroughA(pid)).statusCode).toBe(204);
  });

  it.each([
    ['with the rate limit (its round trip reads the generation)', 6000],
    ['without the rate limit (a GET of the generation per turn)', 0],
  ])('when another Layout A process updates or deletes a post this one has read, then this one answers the change at once, %s', async (_how, rateLimitPerMin) => {
    const reader = await harness.start('a', { rateLimitPerMin });
    const writer = await harness.start('a', { rateLimitPerMin });
    const pid = await createThroughB('Read twice');
    for (let i = 0; i < 3; i++) expect((await reader.request({ url: `/api/v1/posts/${pid}`, headers: alice.headers })).json().item.title).toBe('Read twice');

    const updated = await writer.request({ method: 'PUT', url: `/api/v1/posts/update/${pid}`, headers: alice.headers, payload: { title: 'Changed' } });
    expect(updated.statusCode).toBe(200);
    expect((await reader.request({ url: `/api/v1/posts/${pid}`, headers: alice.headers })).json().item.title).toBe('Changed');

    expect((await writer.request({ method: 'DELETE', url: `/api/v1/posts/delete/${pid}`, headers: alice.headers })).statusCode).toBe(204);
    expect((await reader.request({ url: `/api/v1/posts/${pid}`, headers: alice.headers })).statusCode).toBe(204);
  });

  it('when Redis is unreachable, then Layout A still serves reads and writes from PostgreSQL', async () => {
    const offline = await harness.start('a', { redisUrl: 'redis://127.0.0.1:1' });
    const pid = await createThroughB('Served without Redis');
    const read = await offline.request({ url: `/api/v1/posts/${pid}`, headers: alice.headers });
    expect(read.statusCode).toBe(200);
    expect(read.json().item.title).toBe('Served without Redis');
    expect((await offline.request({ url: '/api/v1/posts', headers: alice.headers })).statusCode).toBe(200);
    const created = await offline.request({
      method: 'POST',
      url: '/api/v1/posts/create',
      headers: alice.headers,
      payload: { title: 'Written without Redis', body: 'b', userId: alice.user.userId },
    });
    expect(created.statusCode).toBe(200);
  });
});
