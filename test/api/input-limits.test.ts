import { safeEqual } from '../../services/api/src/plugins/admin-queues';
import { createUser, TestUser } from '../support/factories';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';
import { findPost } from './support/rows';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('input limits (docs/design.md §12) and the Layout A update alias', () => {
  let harness: ApiHarness;
  let a: ApiClient;
  let b: ApiClient;
  let user: TestUser;

  beforeAll(async () => {
    harness = await createApiHarness();
    [a, b] = [await harness.start('a'), await harness.start('b')];
    user = await createUser(harness.db);
  });

  afterAll(() => harness.close());

  const createOnA = async (title = 'A title', body = 'A body') => {
    const res = await a.request({ method: 'POST', url: '/api/v1/posts/create', headers: user.headers, payload: { title, body, userId: user.user.userId } });
    return res;
  };

  describe('x-request-id', () => {
    it.each([
      ['kept when short and plain', 'trace-1.2_3', true],
      ['replaced when longer than 64 characters', 'x'.repeat(65), false],
      ['replaced when it holds a space', 'two words', false],
      ['replaced when it holds a quote', 'a"b', false],
    ])('when a client sends one, then it is %s', async (_name, given, kept) => {
      const res = await b.request({ url: '/health', headers: { 'x-request-id': given } });
      if (kept) expect(res.headers['x-request-id']).toBe(given);
      else expect(res.headers['x-request-id']).toMatch(UUID);
    });

    it('when exactly 64 characters are sent, then they are kept', async () => {
      const given = 'a'.repeat(64);
      expect((await b.request({ url: '/health', headers: { 'x-request-id': given } })).headers['x-request-id']).toBe(given);
    });
  });

  describe('a NUL character', () => {
    it('when Layout A gets one in a title or body, then it is a 400, never a 500', async () => {
      for (const [title, body, message] of [
        ['bad\u0000title', 'fine', 'Post title cannot contain a NUL character.'],
        ['fine', 'bad\u0000body', 'Post content cannot contain a NUL character.'],
      ]) {
        const res = await createOnA(title, body);
        expect([res.statusCode, res.json()]).toEqual([400, { status: 400, message }]);
      }
      const created = (await createOnA()).json().item.postId;
      const res = await a.request({ method: 'PUT', url: `/api/v1/posts/update/${created}`, headers: user.headers, payload: { content: 'x\u0000y' } });
      expect([res.statusCode, res.json()]).toEqual([400, { status: 400, message: 'Post content cannot contain a NUL character.' }]);
    });

    it('when Layout B gets one, then create answers 2011 and update 4011', async () => {
      const create = await b.request({ method: 'POST', url: '/api/v1/posts', headers: user.headers, payload: { title: 'a\u0000b', content: 'c' } });
      expect([create.statusCode, create.json()]).toEqual([200, { status: 2011, message: 'Post title cannot contain a NUL character.' }]);
      const pid = (await b.request({ method: 'POST', url: '/api/v1/posts', headers: user.headers, payload: { title: 'ok', content: 'ok' } })).json().pid;
      const update = await b.request({ method: 'PUT', url: `/api/v1/posts/${pid}`, headers: user.headers, payload: { title: 'ok', content: 'c\u0000' } });
      expect([update.statusCode, update.json()]).toEqual([200, { status: 4011, message: 'Post content cannot contain a NUL character.' }]);
    });
  });

  describe('Layout A update takes body as well as content', () => {
    it('when body is sent, then it updates the content', async () => {
      const pid = (await createOnA()).json().item.postId;
      const res = await a.request({ method: 'PUT', url: `/api/v1/posts/update/${pid}`, headers: user.headers, payload: { body: 'Sent as body' } });
      expect([res.statusCode, res.json()]).toEqual([200, { status: 200, message: `Post ID: ${pid} successfully updated.` }]);
      expect((await findPost(harness.db, pid))!.postBody).toBe('Sent as body');
    });

    it('when body and content are equal, then it updates; when they differ, then 400 names both', async () => {
      const pid = (await createOnA()).json().item.postId;
      const same = await a.request({ method: 'PUT', url: `/api/v1/posts/update/${pid}`, headers: user.headers, payload: { content: 'Same', body: 'Same' } });
      expect(same.statusCode).toBe(200);
      const differ = await a.request({ method: 'PUT', url: `/api/v1/posts/update/${pid}`, headers: user.headers, payload: { content: 'One', body: 'Two' } });
      expect([differ.statusCode, differ.json()]).toEqual([400, { status: 400, message: 'Fields content and body differ: send one of them.' }]);
      expect((await findPost(harness.db, pid))!.postBody).toBe('Same');
    });

    it('when body is empty, then the content rules apply to it', async () => {
      const pid = (await createOnA()).json().item.postId;
      const res = await a.request({ method: 'PUT', url: `/api/v1/posts/update/${pid}`, headers: user.headers, payload: { body: '  ' } });
      expect([res.statusCode, res.json()]).toEqual([400, { status: 400, message: 'Post content is required.' }]);
    });
  });

  describe('admin password comparison', () => {
    it.each([
      ['the same password', 'correct horse', true],
      ['a prefix of it', 'correct', false],
      ['it with more after', 'correct horse battery', false],
      ['an empty one', '', false],
    ])('when given %s, then it matches only the exact password', (_name, given, matches) => {
      expect(safeEqual(given, 'correct horse')).toBe(matches);
    });
  });
});
