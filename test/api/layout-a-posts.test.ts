import { buildPost, createUser, TestUser } from '../support/factories';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';
import { countPosts, findPost } from './support/rows';

describe('Layout A posts', () => {
  let harness: ApiHarness;
  let api: ApiClient;
  let alice: TestUser;
  let bob: TestUser;

  const create = (user: TestUser, overrides: Record<string, unknown> = {}) => {
    const { title, content } = buildPost();
    return api.request({
      method: 'POST',
      url: '/api/v1/posts/create',
      headers: user.headers,
      payload: { title, body: content, userId: user.user.userId, ...overrides },
    });
  };

  beforeAll(async () => {
    harness = await createApiHarness();
    api = await harness.start('a');
    alice = await createUser(harness.db);
    bob = await createUser(harness.db);
  });

  afterAll(() => harness.close());

  it('when there are no posts, then the list is 204 with an empty body', async () => {
    const res = await api.request({ url: '/api/v1/posts', headers: alice.headers });
    expect(res.statusCode).toBe(204);
    expect(res.body).toBe('');
  });

  it('when a post is created, then it answers 200 with the item and a pid from the sequence', async () => {
    const res = await create(alice, { title: 'Hello', body: 'World' });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toEqual({
      status: 200,
      message: 'Post was successfully created.',
      item: {
        postId: expect.any(Number),
        uuid: expect.stringMatching(/^[0-9a-f-]{36}$/),
        userId: alice.user.userId,
        title: 'Hello',
        body: 'World',
        image: null,
        created_date: expect.any(String),
        updated_date: expect.any(String),
      },
    });
    expect(body.item.postId).toBeGreaterThanOrEqual(100000);
  });

  it('when userId is another user, then create is 403 and nothing is stored', async () => {
    const before = await countPosts(harness.db);
    const res = await create(alice, { userId: bob.user.userId });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toEqual({ status: 403, message: 'userId must be the authenticated user.' });
    expect(await countPosts(harness.db)).toBe(before);
  });

  it('when posts exist, then the list is newest first with links and honours limit and offset', async () => {
    const first = (await create(alice)).json().item;
    const second = (await create(bob)).json().item;
    const res = await api.request({ url: '/api/v1/posts?limit=2', headers: alice.headers });
    expect(res.statusCode).toBe(200);
    const { status, items } = res.json();
    expect(status).toBe(200);
    expect(items.map((item: { id: number }) => item.id)).toEqual([second.postId, first.postId]);
    expect(items[0]).toEqual({
      id: second.postId,
      uuid: second.uuid,
      userId: bob.user.userId,
      title: second.title,
      body: second.body,
      image: null,
      link: `http://localhost:3000/api/v1/posts/${second.postId}`,
    });
    const next = await api.request({ url: '/api/v1/posts?limit=1&offset=1', headers: alice.headers });
    expect(next.json().items.map((item: { id: number }) => item.id)).toEqual([first.postId]);
  });

  it.each(['limit=0', 'limit=101', 'limit=abc', 'limit=', 'offset=-1', 'offset=1.5'])(
    'when the query is %s, then the list is 400',
    async (query) => {
      const res = await api.request({ url: `/api/v1/posts?${query}`, headers: alice.headers });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ status: 400, message: expect.stringMatching(/^(limit|offset) must be an integer from/) });
    },
  );

  it('when a post is read by id, then it answers 200 with the item', async () => {
    const created = (await create(alice)).json().item;
    const res = await api.request({ url: `/api/v1/posts/${created.postId}`, headers: bob.headers });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 200, item: created });
  });

  it.each(['999999', '99999999999999999999'])('when post %s does not exist, then reading it is 204 with an empty body', async (id) => {
    const res = await api.request({ url: `/api/v1/posts/${id}`, headers: alice.headers });
    expect(res.statusCode).toBe(204);
    expect(res.body).toBe('');
  });

  it('when the owner updates a post, then it answers 200 and the change is visible', async () => {
    const created = (await create(alice)).json().item;
    const res = await api.request({
      method: 'PUT',
      url: `/api/v1/posts/update/${created.postId}`,
      headers: alice.headers,
      payload: { content: 'Rewritten' },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 200, message: `Post ID: ${created.postId} successfully updated.` });
    const read = await api.request({ url: `/api/v1/posts/${created.postId}`, headers: alice.headers });
    expect(read.json().item).toMatchObject({ title: created.title, body: 'Rewritten' });
  });

  it('when another user updates or deletes a post, then it is 404 and the post is unchanged', async () => {
    const created = (await create(alice)).json().item;
    const update = await api.request({
      method: 'PUT',
      url: `/api/v1/posts/update/${created.postId}`,
      headers: bob.headers,
      payload: { title: 'Stolen' },
    });
    expect(update.statusCode).toBe(404);
    expect(update.json()).toEqual({ status: 404, message: `Post ID: ${created.postId} not found.` });
    const remove = await api.request({ method: 'DELETE', url: `/api/v1/posts/delete/${created.postId}`, headers: bob.headers });
    expect(remove.statusCode).toBe(404);
    const row = await findPost(harness.db, created.postId);
    expect(row?.postTitle).toBe(created.title);
  });

  it('when a missing post is updated or deleted, then it is 404', async () => {
    const update = await api.request({ method: 'PUT', url: '/api/v1/posts/update/999999', headers: alice.headers, payload: { title: 'x' } });
    expect(update.statusCode).toBe(404);
    const remove = await api.request({ method: 'DELETE', url: '/api/v1/posts/delete/999999', headers: alice.headers });
    expect(remove.statusCode).toBe(404);
    expect(remove.json()).toEqual({ status: 404, message: 'Post ID: 999999 not found.' });
  });

  it('when the owner deletes a post, then it is 204 and reading it is 204', async () => {
    const created = (await create(alice)).json().item;
    const res = await api.request({ method: 'DELETE', url: `/api/v1/posts/delete/${created.postId}`, headers: alice.headers });
    expect(res.statusCode).toBe(204);
    expect(res.body).toBe('');
    expect((await api.request({ url: `/api/v1/posts/${created.postId}`, headers: alice.headers })).statusCode).toBe(204);
    expect(await findPost(harness.db, created.postId)).toBeNull();
  });

  it.each([
    ['GET', '/api/v1/'],
    ['GET', '/api/v1'],
    ['POST', '/api/v1/anything/else'],
    ['DELETE', '/api/v1/users/1'],
  ])('when %s %s is called, then it is 401 invalid endpoint', async (method, url) => {
    const res = await api.request({ method: method as 'GET', url });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ status: 401, message: 'Invalid or missing endpoint.' });
  });

  it.each([
    ['POST', '/api/v1/posts'],
    ['GET', '/api/v1/posts/abc'],
    ['GET', '/api/v1/posts/create'],
    ['PATCH', '/api/v1/posts/update/1'],
  ])('when an authenticated %s %s matches no route, then it is 401 invalid endpoint', async (method, url) => {
    const res = await api.request({ method: method as 'GET', url, headers: alice.headers });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ status: 401, message: 'Invalid or missing endpoint.' });
  });

  it('when an unknown path under /api/v1/posts has no credentials, then the auth middleware answers first', async () => {
    const res = await api.request({ method: 'GET', url: '/api/v1/posts/abc' });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ status: 401, message: 'Invalid authentication token or client ID.' });
  });
});
