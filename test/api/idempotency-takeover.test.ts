import { Client } from 'pg';
import { createUser, TestUser } from '../support/factories';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';
import { countPosts } from './support/rows';
import { waitFor } from '../support/wait-for';

/**
 * docs/design.md "Idempotency": a key taken over after its lease lapsed never makes a second
 * post. Two holders of one key are made for real: the first request claims the key and is held
 * at its insert (a transaction of the test locks the posts table), its lease is made to lapse,
 * a second request with the same key on another process takes the key over and is held there
 * too; then both insert at once.
 */
describe('an Idempotency-Key taken over after its lease lapsed', () => {
  let harness: ApiHarness;
  let user: TestUser;
  let holder: Client;
  let keyNumber = 0;

  beforeAll(async () => {
    harness = await createApiHarness();
    user = await createUser(harness.db);
    holder = new Client({ connectionString: harness.env.databaseUrl });
    await holder.connect();
  });

  afterAll(async () => {
    await holder.end();
    await harness.close();
  });

  const waitingOnPosts = async () => {
    const [[{ waiting }]] = (await harness.db.sequelize.query(
      `SELECT count(*)::int AS waiting FROM pg_locks WHERE relation = 'posts'::regclass AND NOT granted`,
    )) as [{ waiting: number }[], unknown];
    return waiting;
  };

  const LAYOUTS = {
    a: { url: '/api/v1/posts/create', payload: (title: string) => ({ title, body: 'once', userId: user.user.userId }), pidOf: (body: any) => body.item.postId },
    b: { url: '/api/v1/posts', payload: (title: string) => ({ title, content: 'once' }), pidOf: (body: any) => Number(body.pid) },
  };

  it.each(['a', 'b'] as const)('when both holders of one key write on Layout %s, then one post is recorded and the second gets the first one\'s post', async (layout) => {
    const [first, second]: ApiClient[] = [await harness.start(layout), await harness.start(layout)];
    const { url, payload, pidOf } = LAYOUTS[layout];
    const key = `takeover-${layout}-${++keyNumber}`;
    const title = `Taken over ${layout}`;
    const send = (api: ApiClient) => api.request({ method: 'POST', url, headers: { ...user.headers, 'idempotency-key': key }, payload: payload(title) });
    const before = await countPosts(harness.db);

    await holder.query('BEGIN');
    await holder.query('LOCK TABLE posts IN SHARE MODE');
    const firstAnswer = send(first);
    await waitFor(async () => (await waitingOnPosts()) >= 1, 10_000, 'the first request held at its insert');
    // Its lease lapses (as when its process stalls past it); the key is free for the same request.
    await harness.db.sequelize.query(`UPDATE idempotency_keys SET lease_expires_at = now() - interval '1 second' WHERE idempotency_key = '${key}'`);
    const secondAnswer = send(second);
    await waitFor(async () => (await waitingOnPosts()) >= 2, 10_000, 'the second request, which took the key over, held at its insert');
    await holder.query('COMMIT');

    const answers = await Promise.all([firstAnswer, secondAnswer]);
    for (const answer of answers) expect(answer.statusCode).toBe(200);
    const [firstPid, secondPid] = answers.map((answer) => pidOf(answer.json()));
    expect(secondPid).toBe(firstPid);
    expect(await countPosts(harness.db)).toBe(before + 1);
    const [rows] = await harness.db.sequelize.query(`SELECT pid FROM posts WHERE post_title = '${title}'`);
    expect(rows).toEqual([{ pid: firstPid }]);
    const [keys] = await harness.db.sequelize.query(`SELECT post_pid FROM idempotency_keys WHERE idempotency_key = '${key}'`);
    expect(keys).toEqual([{ post_pid: firstPid }]);
  });
});
