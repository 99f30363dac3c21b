import { createUser, TestUser } from '../support/factories';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';
import { createServiceKey } from './support/operations';

// Layout A answers {"status":N,"message":".."}, Layout B {"message":".."} (docs/design.md §5).
const shape = (layout: 'a' | 'b', status: number, message: string) => (layout === 'a' ? { status, message } : { message });
const CREATE = { a: '/api/v1/posts/create', b: '/api/v1/posts' };

describe('malformed requests and server errors', () => {
  let harness: ApiHarness;
  let layouts: Record<'a' | 'b', ApiClient>;
  let alice: TestUser;

  beforeAll(async () => {
    harness = await createApiHarness();
    layouts = { a: await harness.start('a'), b: await harness.start('b') };
    alice = await createUser(harness.db);
  });

  afterAll(() => harness.close());

  describe.each(['a', 'b'] as const)('Layout %s', (layout) => {
    const post = (headers: Record<string, string>, payload: unknown) =>
      layouts[layout].request({ method: 'POST', url: CREATE[layout], headers: { ...alice.headers, ...headers }, payload });

    it('when the JSON is malformed, then it is 400 in the layout shape', async () => {
      const res = await post({ 'content-type': 'application/json' }, '{"title": "x",');
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual(shape(layout, 400, 'Malformed JSON body.'));
    });

    it('when a create has a JSON content type but no body, then it is a create without fields', async () => {
      const res = await post({ 'content-type': 'application/json' }, '');
      expect({ status: res.statusCode, body: res.json() }).toEqual(
        layout === 'a'
          ? { status: 400, body: { status: 400, message: 'Post title is required.' } }
          : { status: 200, body: { status: 2011, message: 'Post title is required.' } },
      );
    });

    it('when a DELETE carries a JSON content type and no body, as many clients send it, then the post is deleted', async () => {
      const created = await layouts[layout].request({
        method: 'POST',
        url: CREATE[layout],
        headers: alice.headers,
        payload: layout === 'a' ? { title: 't', body: 'b', userId: alice.user.userId } : { title: 't', content: 'c' },
      });
      const pid = layout === 'a' ? created.json().item.postId : created.json().pid;
      const url = layout === 'a' ? `/api/v1/posts/delete/${pid}` : `/api/v1/posts/${pid}`;

      const res = await layouts[layout].request({ method: 'DELETE', url, headers: { ...alice.headers, 'content-type': 'application/json' } });

      expect(res.statusCode).toBe(layout === 'a' ? 204 : 200);
      if (layout === 'b') expect(res.json()).toEqual({ status: 2001, message: 'Post deleted successfully.' });
    });

    it('when the content type is not supported, then it is 415 in the layout shape', async () => {
      const res = await post({ 'content-type': 'text/plain' }, 'title=x');
      expect(res.statusCode).toBe(415);
      expect(res.json()).toEqual(shape(layout, 415, 'Unsupported content type.'));
    });

    it('when the JSON body is over 1 MB, then it is 413 in the layout shape', async () => {
      const res = await post({ 'content-type': 'application/json' }, JSON.stringify({ title: 't', content: 'x'.repeat(1024 * 1024) }));
      expect(res.statusCode).toBe(413);
      expect(res.json()).toEqual(shape(layout, 413, 'Request body is too large.'));
    });

    it('when the body has an unknown field, then it is 400 naming it', async () => {
      const fields = layout === 'a' ? { title: 't', body: 'b', userId: alice.user.userId } : { title: 't', content: 'c' };
      const res = await post({}, { ...fields, admin: true });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual(shape(layout, 400, 'Unknown field: admin.'));
    });

    it.each([['an array', [1, 2]], ['a string', 'just text'], ['a number', 42]])('when the JSON body is %s, then it is 400', async (_kind, value) => {
      const res = await post({ 'content-type': 'application/json' }, JSON.stringify(value));
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual(shape(layout, 400, 'Request body must be a JSON object.'));
    });

    it('when the JSON carries __proto__, then it is 400, never 500', async () => {
      const res = await post({ 'content-type': 'application/json' }, '{"title":"t","__proto__":{"x":1}}');
      expect(res.statusCode).toBe(400);
    });
  });

  it('when Layout A create gets a wrongly typed field, then it is 400 (Layout B answers these in its 200 body)', async () => {
    const res = await layouts.a.request({
      method: 'POST',
      url: CREATE.a,
      headers: alice.headers,
      payload: { title: { nested: true }, body: 'b', userId: alice.user.userId },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ status: 400, message: 'Post title must be a string.' });
  });

  it.each(['a', 'b'] as const)('when PostgreSQL fails in Layout %s, then it is 500 without the reason', async (layout) => {
    // A database that does not exist: the auth query fails with a driver error naming it.
    const broken = await harness.start(layout, { databaseUrl: harness.env.databaseUrl.replace(/\/[^/]+$/, '/no_such_database') });
    const res = await broken.request({ url: '/api/v1/posts', headers: alice.headers });
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual(shape(layout, 500, 'Internal server error.'));
    expect(res.body).not.toMatch(/no_such_database/);
  });

  it.each(['a', 'b'] as const)('when the webhook routes are called in Layout %s, then they run behind auth with the layout error shape', async (layout) => {
    const api = await harness.start(layout);
    const anonymous = await api.request({ url: '/api/v1/webhooks/msg_unknown' });
    expect(anonymous.statusCode).toBe(401);
    const res = await api.request({ url: '/api/v1/webhooks/msg_unknown', headers: alice.headers });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual(shape(layout, 404, 'Webhook delivery not found.'));
    const byUser = await api.request({ method: 'POST', url: '/api/v1/webhooks', headers: alice.headers, payload: { event: 'x' } });
    expect([byUser.statusCode, byUser.json()]).toEqual([403, shape(layout, 403, 'A service key with the scope webhooks:send is required.')]);
    const { headers } = await createServiceKey(harness.db, ['webhooks:send']);
    const invalid = await api.request({ method: 'POST', url: '/api/v1/webhooks', headers, payload: { event: 'x' } });
    expect(invalid.statusCode).toBe(400);
    expect(invalid.json()).toEqual(shape(layout, 400, expect.stringContaining('url')));
  });
});
