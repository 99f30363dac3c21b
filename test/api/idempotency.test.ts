import { QueryTypes } from 'sequelize';
import { runKeysCli } from '../../scripts/keys-cli';
import { processEnv } from '../support/environment';
import { createUser, TestUser } from '../support/factories';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';
import { countPosts } from './support/rows';

/** docs/design.md §12.1 on both layouts' create. */
describe('Idempotency-Key', () => {
  let harness: ApiHarness;
  let a: ApiClient;
  let a2: ApiClient;
  let b: ApiClient;
  let user: TestUser;
  let keyNumber = 0;

  const freshKey = () => `order-${Date.now()}-${++keyNumber}`;
  const createA = (api: ApiClient, key: string, title = 'Once', who = user) =>
    api.request({ method: 'POST', url: '/api/v1/posts/create', headers: { ...who.headers, 'idempotency-key': key }, payload: { title, body: 'only once', userId: who.user.userId } });
  const createB = (key: string, title = 'Once') =>
    b.request({ method: 'POST', url: '/api/v1/posts', headers: { ...user.headers, 'idempotency-key': key }, payload: { title, content: 'only once' } });

  beforeAll(async () => {
    harness = await createApiHarness();
    [a, a2, b] = [await harness.start('a'), await harness.start('a'), await harness.start('b')];
    user = await createUser(harness.db);
  });

  afterAll(() => harness.close());

  it('when Layout A gets the same key and body again, even on another process, then it answers the first answer and creates one post', async () => {
    const key = freshKey();
    const before = await countPosts(harness.db);
    const first = await createA(a, key);
    const again = await createA(a2, key);
    expect(first.statusCode).toBe(200);
    expect(first.json()).toMatchObject({ status: 200, message: 'Post was successfully created.' });
    expect([again.statusCode, again.body]).toEqual([first.statusCode, first.body]);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    expect(await countPosts(harness.db)).toBe(before + 1);
  });

  it('when Layout B gets the same key and body again, then it answers the first answer and creates one post', async () => {
    const key = freshKey();
    const before = await countPosts(harness.db);
    const first = await createB(key);
    const again = await createB(key);
    expect(first.json()).toMatchObject({ status: 2001, message: 'Post added successfully.' });
    expect([again.statusCode, again.body]).toEqual([first.statusCode, first.body]);
    expect(await countPosts(harness.db)).toBe(before + 1);
  });

  it('when the same key comes with another body, then it is 409 in the layout shape', async () => {
    const keyA = freshKey();
    await createA(a, keyA, 'first');
    const reusedA = await createA(a, keyA, 'second');
    expect([reusedA.statusCode, reusedA.json()]).toEqual([409, { status: 409, message: 'Idempotency-Key reused with a different request.' }]);
    const keyB = freshKey();
    await createB(keyB, 'first');
    const reusedB = await createB(keyB, 'second');
    expect([reusedB.statusCode, reusedB.json()]).toEqual([409, { message: 'Idempotency-Key reused with a different request.' }]);
  });

  it('when 20 duplicates arrive at once on two processes, then exactly one post is made and all get its answer', async () => {
    const key = freshKey();
    const before = await countPosts(harness.db);
    const responses = await Promise.all(Array.from({ length: 20 }, (_, i) => createA(i % 2 ? a : a2, key)));
    expect(await countPosts(harness.db)).toBe(before + 1);
    expect(new Set(responses.map((res) => `${res.statusCode} ${res.body}`)).size).toBe(1);
    expect(responses[0].statusCode).toBe(200);
  });

  it('when two users send the same key, then each gets their own post', async () => {
    const other = await createUser(harness.db);
    const key = freshKey();
    const mine = await createA(a, key);
    const theirs = await createA(a, key, 'Once', other);
    expect(theirs.json().item.postId).not.toBe(mine.json().item.postId);
  });

  it.each([
    ['empty', ''],
    ['256 characters', 'k'.repeat(256)],
    ['non-ASCII', 'clé-é'],
  ])('when the key is %s, then it is 400 and nothing is created', async (_name, key) => {
    const before = await countPosts(harness.db);
    const res = await a.request({
      method: 'POST',
      url: '/api/v1/posts/create',
      headers: { ...user.headers, 'idempotency-key': encodeURIComponent(key) === key ? key : Buffer.from(key, 'utf8').toString('latin1') },
      payload: { title: 't', body: 'b', userId: user.user.userId },
    });
    expect([res.statusCode, res.json()]).toEqual([400, { status: 400, message: 'Idempotency-Key must be 1 to 255 printable ASCII characters.' }]);
    expect(await countPosts(harness.db)).toBe(before);
  });

  it('when a service key sends a webhook twice with one key, then one delivery is made and its id answered twice', async () => {
    const lines: string[] = [];
    await runKeysCli(['create', '--name', 'sender', '--scopes', 'webhooks:send'], {
      env: processEnv(harness.env),
      stdout: (line) => lines.push(line),
      stderr: () => undefined,
    });
    const headers = { authorization: `Bearer ${JSON.parse(lines[0]).key}`, 'idempotency-key': freshKey() };
    const payload = { url: 'http://127.0.0.1:9/hook', event: 'demo.ping', payload: { n: 1 }, secret: 'whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ=' };
    const deliveries = async () => Number((await harness.db.sequelize.query<{ n: string }>('SELECT count(*) AS n FROM webhook_deliveries', { type: QueryTypes.SELECT }))[0].n);
    const before = await deliveries();
    const first = await b.request({ method: 'POST', url: '/api/v1/webhooks', headers, payload });
    const again = await a.request({ method: 'POST', url: '/api/v1/webhooks', headers, payload });
    expect(first.statusCode).toBe(202);
    expect([again.statusCode, again.body]).toEqual([202, first.body]);
    expect(await deliveries()).toBe(before + 1);
  });

  it('when a body nested 100,000 levels deep comes with a key, then the answer is the route\'s own 400, never a 500', async () => {
    const lines: string[] = [];
    await runKeysCli(['create', '--name', 'deep', '--scopes', 'webhooks:send'], { env: processEnv(harness.env), stdout: (line) => lines.push(line), stderr: () => undefined });
    const headers = { authorization: `Bearer ${JSON.parse(lines[0]).key}`, 'content-type': 'application/json', 'idempotency-key': freshKey() };
    const payload = `{"event":"post.updated","payload":{"a":${'['.repeat(100_000)}${']'.repeat(100_000)}}}`;
    const res = await b.request({ method: 'POST', url: '/api/v1/events', headers, payload });
    expect(res.statusCode).toBe(400);
    const again = await a.request({ method: 'POST', url: '/api/v1/events', headers, payload });
    expect([again.statusCode, again.headers['idempotent-replayed']]).toEqual([400, 'true']);
  });

  it('when no key is sent, then every create makes a post', async () => {
    const before = await countPosts(harness.db);
    for (let i = 0; i < 2; i++) {
      await b.request({ method: 'POST', url: '/api/v1/posts', headers: user.headers, payload: { title: 'same', content: 'same' } });
    }
    expect(await countPosts(harness.db)).toBe(before + 2);
  });
});
