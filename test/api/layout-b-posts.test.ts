import { buildPost, createUser, TestUser } from '../support/factories';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';
import { countPosts, findPost } from './support/rows';

describe('Layout B posts', () => {
  let harness: ApiHarness;
  let api: ApiClient;
  let alice: TestUser;
  let bob: TestUser;

  const create = async (user: TestUser, post: Record<string, unknown> = buildPost()) =>
    api.request({ method: 'POST', url: '/api/v1/posts', headers: user.headers, payload: post });

  beforeAll(async () => {
    harness = await createApiHarness();
    api = await harness.start('b');
    alice = await createUser(harness.db);
    bob = await createUser(harness.db);
  });

  afterAll(() => harness.close());

  it('when there are no posts, then the list is 404 No post found', async () => {
    const res = await api.request({ url: '/api/v1/posts', headers: alice.headers });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ message: 'No post found.' });
  });

  it('when a post is created, then it is HTTP 200 with status 2001 and a random 5-digit pid stored for the caller', async () => {
    const res = await create(alice, { title: 'Hello', content: 'World' });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toEqual({ status: 2001, message: 'Post added successfully.', pid: expect.stringMatching(/^\d{5}$/) });
    expect(Number(body.pid)).toBeGreaterThanOrEqual(10000);
    const row = await findPost(harness.db, Number(body.pid));
    expect(row).toMatchObject({ userId: alice.user.userId, postTitle: 'Hello', postBody: 'World', postImage: null });
  });

  it('when a post is created from an urlencoded form, then it is stored', async () => {
    const res = await api.request({
      method: 'POST',
      url: '/api/v1/posts',
      headers: { ...alice.headers, 'content-type': 'application/x-www-form-urlencoded' },
      payload: 'title=From+a+form&content=Form+content',
    });
    expect(res.json()).toMatchObject({ status: 2001 });
    expect((await findPost(harness.db, Number(res.json().pid)))?.postTitle).toBe('From a form');
  });

  it('when posts exist, then the list is newest first with string pids, X-Total-Count and limit/offset', async () => {
    const first = (await create(alice)).json().pid;
    const second = (await create(bob)).json().pid;
    const total = await countPosts(harness.db);
    const res = await api.request({ url: '/api/v1/posts?limit=2', headers: alice.headers });
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-total-count']).toBe(String(total));
    const posts = res.json();
    expect(posts.map((post: { pid: string }) => post.pid)).toEqual([second, first]);
    expect(posts[0]).toEqual({
      pid: second,
      title: expect.any(String),
      content: expect.any(String),
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    const page = await api.request({ url: '/api/v1/posts?limit=1&offset=1', headers: alice.headers });
    expect(page.json().map((post: { pid: string }) => post.pid)).toEqual([first]);
  });

  it('when posts hold characters JSON escapes, then the list body is byte for byte the JSON of the stored posts', async () => {
    const awkward = [
      { title: 'Quote " backslash \\ slash /', content: 'Line\nbreak\ttab\r\u0001\u001f\u007f é 😀 \u2028 </script>' },
      { title: 'Plain', content: '{"looks":"like json"}' },
    ];
    for (const post of awkward) await create(alice, post);
    // Microseconds the API cannot show: the answer must truncate them as the read path does.
    await harness.db.sequelize.query(`UPDATE posts SET updated_at = '2026-01-02T03:04:05.123999Z' WHERE post_title = ANY($1)`, {
      bind: [awkward.map((post) => post.title)],
    });
    const res = await api.request({ url: '/api/v1/posts?limit=2', headers: alice.headers });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    const [newest, older] = res.json().map((post: { pid: string }) => Number(post.pid));
    const rows = [(await findPost(harness.db, newest))!, (await findPost(harness.db, older))!];
    expect(res.body).toBe(
      JSON.stringify(
        rows.map((row) => ({
          pid: String(row.pid),
          title: row.postTitle,
          content: row.postBody,
          created_at: row.createdAt.toISOString(),
          updated_at: row.updatedAt.toISOString(),
        })),
      ),
    );
    expect(rows.map((row) => ({ title: row.postTitle, content: row.postBody }))).toEqual([awkward[1], awkward[0]]);
    expect(res.json()[0].updated_at).toBe('2026-01-02T03:04:05.123Z');
  });

  it('when the offset is past the end, then the list is 404', async () => {
    const res = await api.request({ url: '/api/v1/posts?offset=100000', headers: alice.headers });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ message: 'No post found.' });
  });

  it.each(['limit=0', 'limit=1001', 'offset=-1', 'limit=x'])('when the query is %s, then the list is 400 with a message', async (query) => {
    const res = await api.request({ url: `/api/v1/posts?${query}`, headers: alice.headers });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ message: expect.stringMatching(/^(limit|offset) must be an integer from/) });
  });

  it('when a post is read by id, then it answers 200 with the post object', async () => {
    const pid = (await create(alice, { title: 'Read me', content: 'Body' })).json().pid;
    const res = await api.request({ url: `/api/v1/posts/${pid}`, headers: bob.headers });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ pid, title: 'Read me', content: 'Body', created_at: expect.any(String), updated_at: expect.any(String) });
  });

  it('when a post does not exist, then reading it is 404 No post found', async () => {
    const res = await api.request({ url: '/api/v1/posts/1', headers: alice.headers });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ message: 'No post found.' });
  });

  it('when the owner updates a post, then it is 2001 and the post changes', async () => {
    const pid = (await create(alice)).json().pid;
    const res = await api.request({ method: 'PUT', url: `/api/v1/posts/${pid}`, headers: alice.headers, payload: { title: 'New', content: 'Text' } });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 2001, message: 'Post updated successfully.' });
    expect(await findPost(harness.db, Number(pid))).toMatchObject({ postTitle: 'New', postBody: 'Text' });
  });

  it('when another user updates a post, then it is 4011 Unable to update post. and nothing changes', async () => {
    const pid = (await create(alice, { title: 'Mine', content: 'Mine' })).json().pid;
    const res = await api.request({ method: 'PUT', url: `/api/v1/posts/${pid}`, headers: bob.headers, payload: { title: 'Yours', content: 'Yours' } });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 4011, message: 'Unable to update post.' });
    expect((await findPost(harness.db, Number(pid)))?.postTitle).toBe('Mine');
  });

  it('when a missing post is updated, then it is 4011 Unable to update post.', async () => {
    const res = await api.request({ method: 'PUT', url: '/api/v1/posts/1', headers: alice.headers, payload: { title: 'a', content: 'b' } });
    expect(res.json()).toEqual({ status: 4011, message: 'Unable to update post.' });
  });

  it('when the owner deletes a post, then it is 2001 Post deleted successfully. and the row is gone', async () => {
    const pid = (await create(alice)).json().pid;
    const res = await api.request({ method: 'DELETE', url: `/api/v1/posts/${pid}`, headers: alice.headers });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 2001, message: 'Post deleted successfully.' });
    expect(await findPost(harness.db, Number(pid))).toBeNull();
  });

  it('when another user or a missing post is deleted, then it is 2001 Unable to delete post. and the row stays', async () => {
    const pid = (await create(alice)).json().pid;
    const res = await api.request({ method: 'DELETE', url: `/api/v1/posts/${pid}`, headers: bob.headers });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 2001, message: 'Unable to delete post.' });
    expect(await findPost(harness.db, Number(pid))).not.toBeNull();
    const missing = await api.request({ method: 'DELETE', url: '/api/v1/posts/1', headers: alice.headers });
    expect(missing.json()).toEqual({ status: 2001, message: 'Unable to delete post.' });
  });

  it('when all random pids collide, then create is 2011 Unable to add post.', async () => {
    // Occupy every Layout B pid, so each random draw collides and the retry budget runs out.
    await harness.db.sequelize.query(
      `INSERT INTO posts (pid, post_uuid, user_id, post_title, post_body)
       SELECT n, gen_random_uuid(), ${alice.user.userId}, 'filler', 'filler' FROM generate_series(10000, 99999) AS n
       ON CONFLICT (pid) DO NOTHING`,
    );
    const res = await create(alice);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 2011, message: 'Unable to add post.' });
    await harness.db.sequelize.query(`DELETE FROM posts WHERE post_title = 'filler'`);
  });

  it('when most random pids are taken and many posts are created at once, then each gets its own free pid in range', async () => {
    // Four pids in five are taken: most draws collide and are retried.
    await harness.db.sequelize.query(
      `INSERT INTO posts (pid, post_uuid, user_id, post_title, post_body)
       SELECT n, gen_random_uuid(), ${alice.user.userId}, 'filler', 'filler' FROM generate_series(10000, 99999) AS n WHERE n % 5 <> 2
       ON CONFLICT (pid) DO NOTHING`,
    );
    const answers = await Promise.all(Array.from({ length: 12 }, () => create(alice)));
    const pids = answers.map((res) => Number(res.json().pid));
    expect(answers.map((res) => res.json().status)).toEqual(Array(12).fill(2001));
    expect(new Set(pids).size).toBe(12);
    for (const pid of pids) expect(pid % 5).toBe(2);
    await harness.db.sequelize.query(`DELETE FROM posts WHERE post_title = 'filler'`);
  });

  it.each([
    ['GET', '/api/v1/'],
    ['GET', '/api/v1'],
    ['GET', '/api/v1/users'],
    ['PUT', '/api/v1/anything/else'],
  ])('when %s %s is called, then it is 501 Endpoint not implemented.', async (method, url) => {
    const res = await api.request({ method, url });
    expect(res.statusCode).toBe(501);
    expect(res.json()).toEqual({ error: 'Endpoint not implemented.' });
  });

  it.each([
    ['PATCH', '/api/v1/posts/1'],
    ['GET', '/api/v1/posts/abc'],
    ['POST', '/api/v1/posts/1'],
  ])('when an authenticated %s %s matches no route, then it is 501', async (method, url) => {
    const res = await api.request({ method, url, headers: alice.headers });
    expect(res.statusCode).toBe(501);
    expect(res.json()).toEqual({ error: 'Endpoint not implemented.' });
  });

  it('when an unknown path under /api/v1/posts has no credentials, then the auth middleware answers 401 first', async () => {
    const res = await api.request({ method: 'PATCH', url: '/api/v1/posts/1' });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ message: 'Invalid credentials.' });
  });
});
