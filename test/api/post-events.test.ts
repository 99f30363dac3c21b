import { QueryTypes, Transaction } from 'sequelize';
import type { PostEventData, PostEventName, PostOutbox } from '../../shared/posts/post-events';
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

describe('post events (docs/design.md §6.1)', () => {
  let harness: ApiHarness;
  let alice: TestUser;
  const recorded: Recorded[] = [];

  /**
   * Records what each event of an update or a delete saw, inside and outside the post's
   * transaction; a create writes its event in the post's own statement, and its rows wait
   * for the relay here.
   */
  function createObservingRecorder(): PostOutbox {
    const exists = async (pid: number, transaction?: Transaction) =>
      (await harness.db.sequelize.query('SELECT 1 FROM posts WHERE pid = $1', { bind: [pid], type: QueryTypes.SELECT, transaction })).length > 0;
    return {
      async record(transaction, event, data) {
        recorded.push({ event, data, existsInside: await exists(data.pid, transaction), existsOutside: await exists(data.pid) });
      },
      queueCommitted: () => undefined,
    };
  }

  const failingRecorder: PostOutbox = {
    record: async () => {
      throw new Error('outbox unavailable');
    },
    queueCommitted: () => undefined,
  };

  /** The `_data` of the `post.created` event of `pid`, as its row holds it. */
  async function createdEventData(pid: number): Promise<unknown> {
    const events = await harness.db.sequelize.query<{ body: string }>(
      `SELECT body FROM webhook_events WHERE kind = 'post' AND event = 'post.created' AND body::jsonb -> '_data' ->> 'pid' = $1`,
      { bind: [String(pid)], type: QueryTypes.SELECT },
    );
    return events.map((event) => JSON.parse(event.body)._data as unknown);
  }

  beforeAll(async () => {
    harness = await createApiHarness();
    alice = await createUser(harness.db);
  });

  afterAll(() => harness.close());

  it('when a post is created, updated and deleted, then each write records its event with the data inside its transaction', async () => {
    const b = await harness.start('b', {}, { postEvents: createObservingRecorder() });
    const pid = Number((await b.request({ method: 'POST', url: '/api/v1/posts', headers: alice.headers, payload: { title: 'T', content: 'C' } })).json().pid);
    const created = await findPost(harness.db, pid);
    await b.request({ method: 'PUT', url: `/api/v1/posts/${pid}`, headers: alice.headers, payload: { title: 'T2', content: 'C2' } });
    const row = await findPost(harness.db, pid);
    await b.request({ method: 'DELETE', url: `/api/v1/posts/${pid}`, headers: alice.headers });

    // Created: its event row was written by the post's own statement, with the stored row's data.
    expect(await createdEventData(pid)).toEqual([
      {
        pid,
        uuid: created!.postUuid,
        user_id: alice.user.userId,
        title: 'T',
        content: 'C',
        image: null,
        created_at: created!.createdAt.toISOString(),
        updated_at: created!.updatedAt.toISOString(),
      },
    ]);
    // Updated: both sides see the row; deleted: only the outside still sees it.
    expect(recorded.map(({ event, existsInside, existsOutside }) => [event, existsInside, existsOutside])).toEqual([
      ['post.updated', true, true],
      ['post.deleted', false, true],
    ]);
    expect(recorded[0].data).toEqual({
      pid,
      uuid: row!.postUuid,
      user_id: alice.user.userId,
      title: 'T2',
      content: 'C2',
      image: null,
      created_at: row!.createdAt.toISOString(),
      updated_at: row!.updatedAt.toISOString(),
    });
    expect(recorded[1].data).toEqual({ pid, uuid: row!.postUuid, user_id: alice.user.userId });
  });

  it('when recording the event fails, then the post change is rolled back in both layouts', async () => {
    // The database refuses the events of these creates (their title), as an outbox that cannot be written would.
    await harness.db.sequelize.query(`CREATE FUNCTION refuse_test_events() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.body LIKE '%refused by the test%' THEN RAISE EXCEPTION 'outbox unavailable'; END IF;
        RETURN NEW;
      END $$`);
    await harness.db.sequelize.query('CREATE TRIGGER refuse_test_events BEFORE INSERT ON webhook_events FOR EACH ROW EXECUTE FUNCTION refuse_test_events()');
    try {
      const a = await harness.start('a', {}, { postEvents: failingRecorder });
      const b = await harness.start('b', {}, { postEvents: failingRecorder });
      const pid = Number((await b.request({ method: 'POST', url: '/api/v1/posts', headers: alice.headers, payload: { title: 'Kept', content: 'C' } })).json().pid);
      const before = await countPosts(harness.db);
      const viaA = await a.request({
        method: 'POST',
        url: '/api/v1/posts/create',
        headers: alice.headers,
        payload: { title: 'refused by the test', body: 'B', userId: alice.user.userId },
      });
      expect(viaA.statusCode).toBe(500);
      expect(viaA.json()).toEqual({ status: 500, message: 'Internal server error.' });
      const viaB = await b.request({ method: 'POST', url: '/api/v1/posts', headers: alice.headers, payload: { title: 'refused by the test', content: 'C' } });
      expect(viaB.json()).toEqual({ status: 2011, message: 'Unable to add post.' });
      expect(await countPosts(harness.db)).toBe(before);
      // An update records its event through the recorder, which fails.
      const updated = await b.request({ method: 'PUT', url: `/api/v1/posts/${pid}`, headers: alice.headers, payload: { title: 'Changed', content: 'C2' } });
      expect(updated.json()).toEqual({ status: 4011, message: 'Unable to update post.' });
      expect((await findPost(harness.db, pid))?.postTitle).toBe('Kept');
    } finally {
      await harness.db.sequelize.query('DROP TRIGGER refuse_test_events ON webhook_events');
      await harness.db.sequelize.query('DROP FUNCTION refuse_test_events()');
    }
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
