import { QueryTypes } from 'sequelize';
import { createUser, TestUser } from '../support/factories';
import { startTcpProxy, TcpProxy } from '../support/tcp-proxy';
import { ApiClient, ApiHarness, ApiResponse, createApiHarness } from './support/api-harness';
import { createServiceKey, TestServiceKey } from './support/operations';
import { waitFor } from '../support/wait-for';

/**
 * docs/design.md §12.1: a request whose connection to PostgreSQL is lost while its commit is
 * answered cannot know whether it committed. It answers 503 and keeps its Idempotency-Key:
 * until the lease lapses a retry gets 409 "in progress" with Retry-After; then it replays the
 * committed answer (or answers with the committed post), never a second post or delivery.
 * The apis reach PostgreSQL through a proxy that lets the commit through and loses its answer.
 */
describe('Idempotency-Key when the commit is sent and its answer lost', () => {
  const LEASE_MS = 6_000;
  let harness: ApiHarness;
  let proxy: TcpProxy;
  let a: ApiClient;
  let b: ApiClient;
  let user: TestUser;
  let sender: TestServiceKey;
  let n = 0;

  beforeAll(async () => {
    harness = await createApiHarness();
    const real = new URL(harness.env.databaseUrl);
    proxy = await startTcpProxy({ host: real.hostname, port: Number(real.port || 5432) });
    const viaProxy = new URL(real);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(proxy.port);
    a = await harness.start('a', { databaseUrl: viaProxy.toString(), idempotencyLeaseMs: LEASE_MS });
    b = await harness.start('b', { databaseUrl: viaProxy.toString(), idempotencyLeaseMs: LEASE_MS });
    user = await createUser(harness.db);
    sender = await createServiceKey(harness.db, ['*']);
  });

  afterAll(async () => {
    await harness?.close();
    await proxy?.close();
  });

  const unique = (what: string) => `lost-commit-${what}-${Date.now()}-${++n}`;
  const count = async (sql: string, bind: unknown[]) =>
    Number((await harness.db.sequelize.query<{ n: string }>(sql, { bind, type: QueryTypes.SELECT }))[0].n);
  const postsTitled = (title: string) =>
    harness.db.sequelize.query<{ pid: number }>('SELECT pid FROM posts WHERE post_title = $1', { bind: [title], type: QueryTypes.SELECT });
  const deliveriesCarrying = (marker: string) =>
    count('SELECT count(*) AS n FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id WHERE e.body LIKE $1', [`%${marker}%`]);
  /** Until the key's lease has lapsed (it is no longer renewed once its request answered). */
  const leaseLapsed = (key: string) =>
    waitFor(
      async () => (await count('SELECT count(*) AS n FROM idempotency_keys WHERE idempotency_key = $1 AND lease_expires_at <= now()', [key])) === 1,
      LEASE_MS + 5_000,
      'the lease to lapse',
    );
  const expectInProgress = (res: ApiResponse) => {
    expect(res.statusCode).toBe(409);
    expect(res.json().message).toBe('A request with this Idempotency-Key is in progress.');
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  };

  it.each(['a', 'b'] as const)(
    'when Layout %s loses the answer to a create it committed, then it answers 503, a retry within the lease gets 409 in progress, and one after answers the one post',
    async (layout) => {
      const key = unique(`create-${layout}`);
      const title = `Title ${key}`;
      const api = layout === 'a' ? a : b;
      const create = () =>
        api.request({
          method: 'POST',
          url: layout === 'a' ? '/api/v1/posts/create' : '/api/v1/posts',
          headers: { ...user.headers, 'idempotency-key': key },
          payload: layout === 'a' ? { title, body: 'once', userId: user.user.userId } : { title, content: 'once' },
        });
      proxy.loseCommitAnswer(title, 'drop');
      expect((await create()).statusCode).toBe(503);
      const [committed] = await postsTitled(title);
      expect(committed).toBeDefined();

      expectInProgress(await create());
      await leaseLapsed(key);
      const retry = await create();
      expect(retry.statusCode).toBe(200);
      if (layout === 'a') expect(retry.json()).toMatchObject({ status: 200, item: { postId: committed.pid } });
      else expect(retry.json()).toMatchObject({ status: 2001, pid: String(committed.pid) });
      const again = await create();
      expect([again.headers['idempotent-replayed'], again.body]).toEqual(['true', retry.body]);
      expect(await postsTitled(title)).toHaveLength(1);
    },
  );

  it('when POST /webhooks loses the answer to its commit, then it answers 503 and a retry replays the committed id, with one delivery', async () => {
    const key = unique('send');
    const send = () =>
      a.request({
        method: 'POST',
        url: '/api/v1/webhooks',
        headers: { ...sender.headers, 'idempotency-key': key },
        payload: { url: 'http://127.0.0.1:9/hook', event: 'demo.ping', payload: { marker: `body-${key}` }, secret: 'whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQ=' },
      });
    // Not the key itself: the key's claim carries it too.
    proxy.loseCommitAnswer(`body-${key}`, 'drop');
    expect((await send()).statusCode).toBe(503);
    expect(await deliveriesCarrying(key)).toBe(1);
    const [{ id }] = await harness.db.sequelize.query<{ id: string }>(
      'SELECT d.id FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id WHERE e.body LIKE $1',
      { bind: [`%${key}%`], type: QueryTypes.SELECT },
    );

    const retry = await send();
    expect([retry.statusCode, retry.json(), retry.headers['idempotent-replayed']]).toEqual([202, { id }, 'true']);
    expect((await send()).json()).toEqual({ id });
    expect(await deliveriesCarrying(key)).toBe(1);
  });

  it('when POST /events loses the answer to its commit, then it answers 503 and a retry replays the committed ids, with one delivery per endpoint', async () => {
    const key = unique('publish');
    const endpoints = [`http://127.0.0.1:9/lost-commit/${key}/1`, `http://127.0.0.1:9/lost-commit/${key}/2`];
    for (const url of endpoints) {
      const res = await a.request({ method: 'POST', url: '/api/v1/endpoints', headers: sender.headers, payload: { url, events: ['post.updated'], filter: { marker: `body-${key}` } } });
      expect(res.statusCode).toBe(201);
    }
    const publish = () =>
      b.request({ method: 'POST', url: '/api/v1/events', headers: { ...sender.headers, 'idempotency-key': key }, payload: { event: 'post.updated', payload: { marker: `body-${key}` } } });
    proxy.loseCommitAnswer(`body-${key}`, 'drop');
    expect((await publish()).statusCode).toBe(503);
    expect(await deliveriesCarrying(key)).toBe(2);
    const ids = (
      await harness.db.sequelize.query<{ id: string }>(
        'SELECT d.id FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id WHERE e.body LIKE $1 ORDER BY d.endpoint_id',
        { bind: [`%${key}%`], type: QueryTypes.SELECT },
      )
    ).map((row) => row.id);

    const retry = await publish();
    expect([retry.statusCode, retry.json(), retry.headers['idempotent-replayed']]).toEqual([202, { ids }, 'true']);
    expect(await deliveriesCarrying(key)).toBe(2);
  });

  it.each(['a', 'b'] as const)(
    'when Layout %s loses the answer to a batch of creates it committed, then no create of the batch is tried again alone: one post each',
    async (layout) => {
      const api = layout === 'a' ? a : b;
      const keys = [1, 2, 3].map((i) => unique(`batch-${layout}-${i}`));
      const titles = keys.map((key) => `Title ${key}`);
      const create = (i: number) =>
        api.request({
          method: 'POST',
          url: layout === 'a' ? '/api/v1/posts/create' : '/api/v1/posts',
          headers: { ...user.headers, 'idempotency-key': keys[i] },
          payload: layout === 'a' ? { title: titles[i], body: 'once', userId: user.user.userId } : { title: titles[i], content: 'once' },
        });
      // The first create waits on the test's lock; the two sent meanwhile go together in the next batch.
      const lock = await harness.db.sequelize.transaction();
      let answers: Promise<ApiResponse>[];
      try {
        await harness.db.sequelize.query('LOCK TABLE posts IN SHARE ROW EXCLUSIVE MODE', { transaction: lock });
        const first = create(0);
        await waitFor(
          async () => (await count("SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'", [])) === 1,
          10_000,
          'the first create to wait for the lock',
        );
        proxy.loseCommitAnswer(titles[1], 'drop');
        answers = [first, create(1), create(2)];
        // Their keys are claimed just before they join the group commit's queue.
        await waitFor(async () => (await count('SELECT count(*) AS n FROM idempotency_keys WHERE idempotency_key = ANY($1)', [keys.slice(1)])) === 2, 10_000, 'both keys claimed');
        await new Promise((resolve) => setTimeout(resolve, 200));
      } finally {
        await lock.rollback();
      }
      const [first, second] = await Promise.all(answers);
      expect([first.statusCode, second.statusCode]).toEqual([200, 503]);
      for (const title of titles) expect({ title, posts: (await postsTitled(title)).length }).toEqual({ title, posts: 1 });
    },
  );
});
