import { createUser, TestUser } from '../support/factories';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';

const EMOJI = '\u{1F600}';
const TITLE_REQUIRED = 'Post title is required.';
const TITLE_STRING = 'Post title must be a string.';
const TITLE_MAX = 'Post title cannot exceed 255 characters.';
const CONTENT_REQUIRED = 'Post content is required.';
const CONTENT_STRING = 'Post content must be a string.';

const ABSENT = Symbol('absent');
type Value = unknown | typeof ABSENT;

/** [case, title, content, expected first message] — docs/design.md §5. */
const CASES: [string, Value, Value, string][] = [
  ['title missing', ABSENT, 'c', TITLE_REQUIRED],
  ['title empty', '', 'c', TITLE_REQUIRED],
  ['title whitespace only', ' \t\n ', 'c', TITLE_REQUIRED],
  ['title null', null, 'c', TITLE_REQUIRED],
  ['title a number', 123, 'c', TITLE_STRING],
  ['title an array', ['a'], 'c', TITLE_STRING],
  ['title an object', { a: 1 }, 'c', TITLE_STRING],
  ['title 256 characters', 'a'.repeat(256), 'c', TITLE_MAX],
  ['title 256 emoji', EMOJI.repeat(256), 'c', TITLE_MAX],
  ['content missing', 't', ABSENT, CONTENT_REQUIRED],
  ['content empty', 't', '', CONTENT_REQUIRED],
  ['content whitespace only', 't', '   ', CONTENT_REQUIRED],
  ['content a boolean', 't', true, CONTENT_STRING],
  ['both invalid (title first)', ABSENT, 5, TITLE_REQUIRED],
  ['title too long and content missing (title first)', 'a'.repeat(300), ABSENT, TITLE_MAX],
];

function body(fields: Record<string, Value>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== ABSENT));
}

describe('validation messages (docs/design.md §5)', () => {
  let harness: ApiHarness;
  let a: ApiClient;
  let b: ApiClient;
  let alice: TestUser;
  let postA: number;
  let postB: string;

  beforeAll(async () => {
    harness = await createApiHarness();
    a = await harness.start('a');
    b = await harness.start('b');
    alice = await createUser(harness.db);
    postA = (await a.request({ method: 'POST', url: '/api/v1/posts/create', headers: alice.headers, payload: { title: 't', body: 'b', userId: alice.user.userId } })).json().item.postId;
    postB = (await b.request({ method: 'POST', url: '/api/v1/posts', headers: alice.headers, payload: { title: 't', content: 'c' } })).json().pid;
  });

  afterAll(() => harness.close());

  it.each(CASES)('when Layout B create gets %s, then it is HTTP 200 status 2011 with the first message', async (_case, title, content, message) => {
    const res = await b.request({ method: 'POST', url: '/api/v1/posts', headers: alice.headers, payload: body({ title, content }) });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 2011, message });
  });

  it.each(CASES)('when Layout B update gets %s, then it is HTTP 200 status 4011 with the first message', async (_case, title, content, message) => {
    const res = await b.request({ method: 'PUT', url: `/api/v1/posts/${postB}`, headers: alice.headers, payload: body({ title, content }) });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 4011, message });
  });

  it.each(CASES)('when Layout A create gets %s, then it is 400 with the first message', async (_case, title, content, message) => {
    const res = await a.request({
      method: 'POST',
      url: '/api/v1/posts/create',
      headers: alice.headers,
      payload: body({ title, body: content, userId: alice.user.userId }),
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ status: 400, message });
  });

  it.each(CASES.filter(([, title, content]) => title !== ABSENT && content !== ABSENT))(
    'when Layout A update gets %s, then it is 400 with the first message',
    async (_case, title, content, message) => {
      const res = await a.request({ method: 'PUT', url: `/api/v1/posts/update/${postA}`, headers: alice.headers, payload: { title, content } });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ status: 400, message });
    },
  );

  it('when Layout A update gets neither title nor content, then it is 400', async () => {
    const res = await a.request({ method: 'PUT', url: `/api/v1/posts/update/${postA}`, headers: alice.headers, payload: {} });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ status: 400, message: 'Post title or content is required.' });
  });

  it.each([
    [ABSENT, 'User ID is required.'],
    ['abc', 'User ID must be a positive integer.'],
    [1.5, 'User ID must be a positive integer.'],
  ])('when Layout A create gets userId %p, then it is 400 %s', async (userId, message) => {
    const res = await a.request({ method: 'POST', url: '/api/v1/posts/create', headers: alice.headers, payload: body({ title: 't', body: 'b', userId }) });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ status: 400, message });
  });

  it('when a title is 255 emoji (510 UTF-16 units, 1020 bytes), then both layouts store it whole', async () => {
    const title = EMOJI.repeat(255);
    const created = await a.request({ method: 'POST', url: '/api/v1/posts/create', headers: alice.headers, payload: { title, body: 'b', userId: alice.user.userId } });
    expect(created.statusCode).toBe(200);
    expect(created.json().item.title).toBe(title);
    const added = await b.request({ method: 'POST', url: '/api/v1/posts', headers: alice.headers, payload: { title, content: 'c' } });
    expect(added.json()).toMatchObject({ status: 2001 });
    const updated = await b.request({ method: 'PUT', url: `/api/v1/posts/${postB}`, headers: alice.headers, payload: { title, content: 'c' } });
    expect(updated.json()).toEqual({ status: 2001, message: 'Post updated successfully.' });
    const [rows] = await harness.db.sequelize.query(`SELECT char_length(post_title) AS length FROM posts WHERE post_title = '${title}'`);
    expect(rows).toEqual([{ length: 255 }, { length: 255 }, { length: 255 }]);
  });
});
