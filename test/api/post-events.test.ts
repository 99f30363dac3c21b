import { QueryTypes, Transaction } from 'sequelize';
import type { PostEventData, PostEventName, PostEventRecorder } from '../../services/api/src/posts/post-events';
import { createUser, TestUser } from '../support/factories';
import { ApiHarness, createApiHarness } from './support/api-harness';
import { countPosts, findPost } from './support/rows';
import { serializeEnvelope } from '../../shared/webhook/signing';

interface Recorded {
  event: PostEventName;
  data: PostEventData;
  /** Whether the post row exists as seen inside the event's transaction. */
  existsInside: boolean;
  /** Whether it exists as seen from another connection at the same moment. */
  existsOutside: boolean;
}

describe('post events (DESIGN §6)', () => {
  let harness: ApiHarness;
  let alice: TestUser;
  const recorded: Recorded[] = [];

  /** Records what each event saw, inside and outside the post's transaction. */
  function createObservingRecorder(): PostEventRecorder {
    const exists = async (pid: number, transaction?: Transaction) =>
      (await harness.db.sequelize.query('SELECT 1 FROM posts WHERE pid = $1', { bind: [pid], type: QueryTypes.SELECT, transaction })).length > 0;
    return {
      async record(transaction, event, data) {
        recorded.push({ event, data, existsInside: await exists(data.pid, transaction), existsOutside: await exists(data.pid) });
      },
    };
  }

  const failingRecorder: PostEventRecorder = {
    record: async () => {
      throw new Error('outbox unavailable');
    },
  };

  beforeAll(async () => {
    harness = await createApiHarness();
    alice = await createUser(harness.db);
  });

  afterAll(() => harness.close());

  it('when a post is created, updated and deleted, then each write records its event with the data inside its transaction', async () => {
    const b = await harness.start('b', {}, { postEvents: createObservingRecorder() });
    const pid = Number((await b.request({ method: 'POST', url: '/api/v1/posts', headers: alice.headers, payload: { title: 'T', content: 'C' } })).json().pid);
    await b.request({ method: 'PUT', url: `/api/v1/posts/${pid}`, headers: alice.headers, payload: { title: 'T2', content: 'C2' } });
    const row = await findPost(harness.db, pid);
    await b.request({ method: 'DELETE', url: `/api/v1/posts/${pid}`, headers: alice.headers });

    // Created: only the transaction sees the row; deleted: only the outside still sees it.
    expect(recorded.map(({ event, existsInside, existsOutside }) => [event, existsInside, existsOutside])).toEqual([
      ['post.created', true, false],
      ['post.updated', true, true],
      ['post.deleted', false, true],
    ]);
    expect(recorded[1].data).toEqual({
      pid,
      uuid: row!.postUuid,
      user_id: alice.user.userId,
      title: 'T2',
      content: 'C2',
      image: null,
      created_at: row!.createdAt.toISOString(),
      updated_at: row!.updatedAt.toISOString(),
    });
    expect(recorded[2].data).toEqual({ pid, uuid: row!.postUuid, user_id: alice.user.userId });
  });

  it('when recording the event fails, then the post change is rolled back in both layouts', async () => {
    const a = await harness.start('a', {}, { postEvents: failingRecorder });
    const b = await harness.start('b', {}, { postEvents: failingRecorder });
    const before = await countPosts(harness.db);
    const viaA = await a.request({ method: 'POST', url: '/api/v1/posts/create', headers: alice.headers, payload: { title: 'T', body: 'B', userId: alice.user.userId } });
    expect(viaA.statusCode).toBe(500);
    expect(viaA.json()).toEqual({ status: 500, message: 'Internal server error.' });
    const viaB = await b.request({ method: 'POST', url: '/api/v1/posts', headers: alice.headers, payload: { title: 'T', content: 'C' } });
    expect(viaB.json()).toEqual({ status: 2011, message: 'Unable to add post.' });
    expect(await countPosts(harness.db)).toBe(before);
  });

  it('when many posts are created at once in either layout, then each gets its own post row and its own outbox row carrying its data', async () => {
    await harness.db.sequelize.query(`INSERT INTO webhook_endpoints (url, secret) VALUES ('http://127.0.0.1:9/batch', 'whsec_dW51c2VkLWJhdGNoLXNlY3JldA==')`);
    const a = await harness.start('a');
    const b = await harness.start('b');
    const sends = Array.from({ length: 24 }, (_, n) =>
      n % 2 === 0
        ? a.request({ method: 'POST', url: '/api/v1/posts/create', headers: alice.headers, payload: { title: `A${n}`, body: `body ${n}`, userId: alice.user.userId } })
        : b.request({ method: 'POST', url: '/api/v1/posts', headers: alice.headers, payload: { title: `B${n}`, content: `content ${n}` } }),
    );
    const answers = await Promise.all(sends);
    const pids = answers.map((answer, n) => Number(n % 2 === 0 ? answer.json().item.postId : answer.json().pid));
    expect(new Set(pids).size).toBe(24);
    const deliveries = await harness.db.sequelize.query<{ body: string }>(
      `SELECT e.body FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id WHERE d.url = 'http://127.0.0.1:9/batch' AND d.event = 'post.created'`,
      { type: QueryTypes.SELECT },
    );
    const data = deliveries.map((delivery) => JSON.parse(delivery.body)._data as { pid: number; title: string; content: string });
    expect(data.map((item) => item.pid).sort()).toEqual([...pids].sort());
    for (const [n, pid] of pids.entries()) {
      const item = data.find((candidate) => candidate.pid === pid)!;
      expect(item.title).toBe(n % 2 === 0 ? `A${n}` : `B${n}`);
      expect(item.content).toBe(n % 2 === 0 ? `body ${n}` : `content ${n}`);
    }
  });

  it('when posts with quotes, backslashes, non-ASCII text and U+2028 are created at once, then each outbox body is byte for byte the envelope of its stored row', async () => {
    await harness.db.sequelize.query(`INSERT INTO webhook_endpoints (url, secret) VALUES ('http://127.0.0.1:9/bytes', 'whsec_dW51c2VkLWJ5dGVzLXNlY3JldA==')`);
    const a = await harness.start('a');
    const b = await harness.start('b');
    const awkward = ['"quoted" \\u0000pid \\ back/slash', 'héllo wörld 日本語 😀', 'line\nbreak\ttab \u2028 \u2029', '"\\u0000created_at"'];
    const answers = await Promise.all(
      awkward.flatMap((text, n) => [
        a.request({ method: 'POST', url: '/api/v1/posts/create', headers: alice.headers, payload: { title: `A ${text}`, body: text, userId: alice.user.userId } }),
        b.request({ method: 'POST', url: '/api/v1/posts', headers: alice.headers, payload: { title: `B${n} ${text}`, content: text } }),
      ]),
    );
    const pids = answers.map((answer, n) => Number(n % 2 === 0 ? answer.json().item.postId : answer.json().pid));
    for (const pid of pids) {
      const row = (await findPost(harness.db, pid))!;
      const [delivery] = await harness.db.sequelize.query<{ body: string }>(
        `SELECT e.body FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
          WHERE d.url = 'http://127.0.0.1:9/bytes' AND e.body::jsonb -> '_data' ->> 'pid' = $1`,
        { bind: [String(pid)], type: QueryTypes.SELECT },
      );
      const data = {
        pid,
        uuid: row.postUuid,
        user_id: alice.user.userId,
        title: row.postTitle,
        content: row.postBody,
        image: null,
        created_at: row.createdAt.toISOString(),
        updated_at: row.updatedAt.toISOString(),
      };
      expect(delivery.body).toBe(serializeEnvelope(data, { event: 'post.created', signable: true }));
    }
  });
});
