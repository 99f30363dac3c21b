import Redis from 'ioredis';
import { createUser, TestUser } from '../support/factories';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';

const CONTENT_MAX = 'Post content cannot exceed 65535 characters.';
const EMOJI = '\u{1F600}';
const LONGEST = 'x'.repeat(65_535);
const TOO_LONG = 'x'.repeat(65_536);

/** docs/design.md "Posts validation" and "Caches": content of at most 65,535 characters, caches bounded in bytes. */
describe('post content limit and byte-bounded caches', () => {
  let harness: ApiHarness;
  let a: ApiClient;
  let b: ApiClient;
  let alice: TestUser;
  let redis: Redis;
  let postA: number;
  let postB: string;

  beforeAll(async () => {
    harness = await createApiHarness({ RATE_LIMIT_PER_MIN: '0' });
    a = await harness.start('a');
    b = await harness.start('b');
    alice = await createUser(harness.db);
    redis = new Redis(harness.env.redisUrl);
    postA = (await a.request({ method: 'POST', url: '/api/v1/posts/create', headers: alice.headers, payload: { title: 't', body: 'b', userId: alice.user.userId } })).json().item.postId;
    postB = (await b.request({ method: 'POST', url: '/api/v1/posts', headers: alice.headers, payload: { title: 't', content: 'c' } })).json().pid;
  });

  afterAll(async () => {
    redis.disconnect();
    await harness.close();
  });

  const storedLength = async (pid: number | string) => {
    const [rows] = await harness.db.sequelize.query(`SELECT char_length(post_body) AS length FROM posts WHERE pid = ${Number(pid)}`);
    return (rows as { length: number }[])[0]?.length;
  };

  describe('when content is 65,536 characters', () => {
    it('then Layout A create (JSON) is 400 with the message', async () => {
      const res = await a.request({ method: 'POST', url: '/api/v1/posts/create', headers: alice.headers, payload: { title: 't', body: TOO_LONG, userId: alice.user.userId } });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ status: 400, message: CONTENT_MAX });
    });

    it('then Layout A create (multipart, fields or one JSON field) is 400 with the message', async () => {
      const fields = new FormData();
      fields.set('title', 't');
      fields.set('body', TOO_LONG);
      fields.set('userId', String(alice.user.userId));
      const json = new FormData();
      json.set('body', JSON.stringify({ title: 't', body: TOO_LONG, userId: alice.user.userId }));
      for (const payload of [fields, json]) {
        const res = await a.request({ method: 'POST', url: '/api/v1/posts/create', headers: alice.headers, payload });
        expect(res.statusCode).toBe(400);
        expect(res.json()).toEqual({ status: 400, message: CONTENT_MAX });
      }
    });

    it('then Layout A update (as content or as body) is 400 with the message, and the post is unchanged', async () => {
      for (const payload of [{ content: TOO_LONG }, { body: TOO_LONG }, { title: 'new', content: TOO_LONG }]) {
        const res = await a.request({ method: 'PUT', url: `/api/v1/posts/update/${postA}`, headers: alice.headers, payload });
        expect(res.statusCode).toBe(400);
        expect(res.json()).toEqual({ status: 400, message: CONTENT_MAX });
      }
      expect(await storedLength(postA)).toBe(1);
    });

    it('then Layout B create (JSON or form) is 200 with status 2011 and the message', async () => {
      const json = await b.request({ method: 'POST', url: '/api/v1/posts', headers: alice.headers, payload: { title: 't', content: TOO_LONG } });
      const form = await b.request({
        method: 'POST',
        url: '/api/v1/posts',
        headers: { ...alice.headers, 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({ title: 't', content: TOO_LONG }).toString(),
      });
      for (const res of [json, form]) {
        expect(res.statusCode).toBe(200);
        expect(res.json()).toEqual({ status: 2011, message: CONTENT_MAX });
      }
    });

    it('then Layout B update is 200 with status 4011 and the message, and the post is unchanged', async () => {
      const res = await b.request({ method: 'PUT', url: `/api/v1/posts/${postB}`, headers: alice.headers, payload: { title: 't', content: TOO_LONG } });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ status: 4011, message: CONTENT_MAX });
      expect(await storedLength(postB)).toBe(1);
    });

    it('then a title over its limit is still reported first', async () => {
      const res = await b.request({ method: 'POST', url: '/api/v1/posts', headers: alice.headers, payload: { title: 'a'.repeat(256), content: TOO_LONG } });
      expect(res.json()).toEqual({ status: 2011, message: 'Post title cannot exceed 255 characters.' });
    });
  });

  it.each([
    ['65,535 ASCII characters', LONGEST],
    ['65,535 emoji (131,070 UTF-16 units)', EMOJI.repeat(65_535)],
  ])('when content is %s, then both layouts create and update with it', async (_case, content) => {
    const created = await a.request({ method: 'POST', url: '/api/v1/posts/create', headers: alice.headers, payload: { title: 't', body: content, userId: alice.user.userId } });
    expect(created.statusCode).toBe(200);
    expect(await storedLength(created.json().item.postId)).toBe(65_535);
    const updatedA = await a.request({ method: 'PUT', url: `/api/v1/posts/update/${postA}`, headers: alice.headers, payload: { content } });
    expect(updatedA.statusCode).toBe(200);
    expect(await storedLength(postA)).toBe(65_535);

    const added = await b.request({ method: 'POST', url: '/api/v1/posts', headers: alice.headers, payload: { title: 't', content } });
    expect(added.json()).toMatchObject({ status: 2001 });
    expect(await storedLength(added.json().pid)).toBe(65_535);
    const updatedB = await b.request({ method: 'PUT', url: `/api/v1/posts/${postB}`, headers: alice.headers, payload: { title: 't', content } });
    expect(updatedB.json()).toEqual({ status: 2001, message: 'Post updated successfully.' });
    expect(await storedLength(postB)).toBe(65_535);
  });

  describe('pages of big posts', () => {
    beforeAll(async () => {
      // 20 posts of 65,535 characters: about 1.3 MB of JSON in one page.
      for (let n = 0; n < 20; n++) {
        const res = await a.request({ method: 'POST', url: '/api/v1/posts/create', headers: alice.headers, payload: { title: `big ${n}`, body: LONGEST, userId: alice.user.userId } });
        expect(res.statusCode).toBe(200);
      }
    });

    it('when a Layout A page is over 1 MiB, then it is answered whole and not cached in Redis, while a small page is', async () => {
      const lists = `${harness.env.redisPrefix}:posts:lists`;
      const big = await a.request({ url: '/api/v1/posts?limit=20', headers: alice.headers });
      expect(big.statusCode).toBe(200);
      const items = big.json().items as { title: string; body: string }[];
      expect(items.map((item) => item.title)).toEqual(Array.from({ length: 20 }, (_, n) => `big ${19 - n}`));
      expect(items.every((item) => item.body === LONGEST)).toBe(true);
      expect(await redis.hexists(lists, '20:0')).toBe(0);
      // Asked again, it is read again and still correct.
      expect((await a.request({ url: '/api/v1/posts?limit=20', headers: alice.headers })).body).toBe(big.body);

      const small = await a.request({ url: '/api/v1/posts?limit=2', headers: alice.headers });
      expect(small.json().items).toHaveLength(2);
      expect(await redis.hexists(lists, '2:0')).toBe(1);
    });

    it('when a Layout B page holds more than 1 MiB of text, then it is answered whole, newest first, with its total', async () => {
      const newest = (await b.request({ method: 'POST', url: '/api/v1/posts', headers: alice.headers, payload: { title: 'small', content: 'small' } })).json().pid;
      const res = await b.request({ url: '/api/v1/posts?limit=1000', headers: alice.headers });
      expect(res.statusCode).toBe(200);
      const [[{ count }]] = (await harness.db.sequelize.query('SELECT count(*)::int AS count FROM posts')) as [{ count: number }[], unknown];
      const [ordered] = (await harness.db.sequelize.query('SELECT pid::text AS pid, post_body FROM posts ORDER BY created_at DESC, pid DESC')) as [{ pid: string; post_body: string }[], unknown];
      expect(res.headers['x-total-count']).toBe(String(count));
      // Not built whole: sent in chunks as they are read, with no length known up front.
      expect(res.headers['content-length']).toBeUndefined();
      const page = res.json() as { pid: string; content: string }[];
      expect(page.map((post) => post.pid)).toEqual(ordered.map((row) => row.pid));
      expect(page.map((post) => post.content)).toEqual(ordered.map((row) => row.post_body));
      // An offset into it: the same posts, from there on.
      const tail = (await b.request({ url: '/api/v1/posts?limit=1000&offset=3', headers: alice.headers })).json() as { pid: string }[];
      expect(tail.map((post) => post.pid)).toEqual(ordered.slice(3).map((row) => row.pid));
      // A page of little text is still built whole.
      const small = await b.request({ url: '/api/v1/posts?limit=1', headers: alice.headers });
      expect(small.headers['content-length']).toBe(String(Buffer.byteLength(small.body)));
      expect((small.json() as { pid: string }[]).map((post) => post.pid)).toEqual([newest]);
    });
  });
});
