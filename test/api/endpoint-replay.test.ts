import { QueryTypes } from 'sequelize';
import { serializeEnvelope } from '../../shared/webhook/signing';
import { idTime } from '../../shared/webhook/ids';
import { createUser, TestUser } from '../support/factories';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';
import { createServiceKey, TestServiceKey } from './support/operations';

interface EventRow {
  id: string;
  kind: string;
  event: string;
  body: string;
  user_id: number | null;
}

/** docs/design.md §3.2 (events stored once) and §14.1 (replay). */
describe('events stored once, and replay', () => {
  let harness: ApiHarness;
  let a: ApiClient;
  let b: ApiClient;
  let operator: TestServiceKey;
  let alice: TestUser;
  let bob: TestUser;

  beforeAll(async () => {
    harness = await createApiHarness({ WEBHOOK_RETENTION_DAYS: '30' });
    a = await harness.start('a');
    b = await harness.start('b');
    operator = await createServiceKey(harness.db, ['*']);
    alice = await createUser(harness.db);
    bob = await createUser(harness.db);
  });

  afterAll(() => harness.close());

  const unique = (name: string) => `http://127.0.0.1:9/replay/${name}-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
  const createEndpoint = async (payload: object, headers = operator.headers) => {
    const res = await a.request({ method: 'POST', url: '/api/v1/endpoints', headers, payload });
    expect(res.statusCode).toBe(201);
    return res.json() as { id: number };
  };
  const createPost = async (user: TestUser, title: string) => {
    const res = await b.request({ method: 'POST', url: '/api/v1/posts', headers: user.headers, payload: { title, content: 'replayed' } });
    expect(res.json().status).toBe(2001);
    return Number(res.json().pid);
  };
  const replay = (endpointId: number, since: Date | string, headers = operator.headers, api = a) =>
    api.request({ method: 'POST', url: `/api/v1/endpoints/${endpointId}/replay`, headers, payload: { since: since instanceof Date ? since.toISOString() : since } });
  const deliveriesOf = (endpointId: number) =>
    harness.db.sequelize.query<{ id: string; event_id: string; body: string | null; status: string; pid: number }>(
      `SELECT d.id, d.event_id, d.body, d.status, (e.body::jsonb -> '_data' ->> 'pid')::int AS pid
         FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id
        WHERE d.endpoint_id = $1 ORDER BY d.created_at, d.sequence NULLS LAST, e.created_at`,
      { bind: [endpointId], type: QueryTypes.SELECT },
    );
  const eventOf = async (id: string) =>
    (await harness.db.sequelize.query<EventRow>('SELECT id, kind, event, body, user_id FROM webhook_events WHERE id = $1', { bind: [id], type: QueryTypes.SELECT }))[0];

  it('when a post change goes to three endpoints, then its body is stored once, in one event every delivery references, and the API shows event_id', async () => {
    const endpoints = [];
    for (const name of ['one', 'two', 'three']) endpoints.push(await createEndpoint({ url: unique(name), events: ['post.created'] }));
    const pid = await createPost(alice, 'Stored once');

    const rows = (await Promise.all(endpoints.map(({ id }) => deliveriesOf(id)))).flat();
    expect(rows).toHaveLength(3);
    expect(new Set(rows.map((row) => row.event_id)).size).toBe(1);
    expect(rows.every((row) => row.body === null && row.pid === pid)).toBe(true);
    const event = await eventOf(rows[0].event_id);
    expect(event).toMatchObject({ kind: 'post', event: 'post.created', user_id: alice.user.userId });
    expect(event.id).toMatch(/^evt_[A-Za-z0-9_-]{22}$/);
    expect(JSON.parse(event.body)).toMatchObject({ _data: { pid, title: 'Stored once' }, _config: { 'app.webhook.event': 'post.created' } });

    const shown = await a.request({ method: 'GET', url: `/api/v1/webhooks/${rows[0].id}`, headers: operator.headers });
    expect(shown.json()).toMatchObject({ id: rows[0].id, event_id: event.id });
    for (const id of [rows[0].id, event.id]) expect(Math.abs(idTime(id)!.getTime() - Date.now())).toBeLessThan(60_000);
  });

  it('when a post is changed with no endpoint subscribed, then the event is still recorded, so a later endpoint can replay it', async () => {
    const title = `Nobody listens ${Date.now()}`;
    const pid = await createPost(bob, title);
    const [event] = await harness.db.sequelize.query<EventRow>(`SELECT * FROM webhook_events WHERE kind = 'post' AND body::jsonb -> '_data' ->> 'pid' = $1`, {
      bind: [String(pid)],
      type: QueryTypes.SELECT,
    });
    expect(JSON.parse(event.body)._data.title).toBe(title);
  });

  it('when an ad-hoc send and a test are made, then each makes its own event, of its kind, holding the exact bytes', async () => {
    const sent = await a.request({ method: 'POST', url: '/api/v1/webhooks', headers: operator.headers, payload: { url: unique('adhoc'), event: 'order.paid', payload: { n: 1 }, secret: 'whsec_dW51c2VkLWJ5dGVzLXNlY3JldA==' } });
    expect(sent.json()).toEqual({ id: expect.stringMatching(/^msg_/) });
    const [delivery] = await harness.db.sequelize.query<{ event_id: string }>('SELECT event_id FROM webhook_deliveries WHERE id = $1', {
      bind: [sent.json().id],
      type: QueryTypes.SELECT,
    });
    expect(await eventOf(delivery.event_id)).toMatchObject({ kind: 'send', event: 'order.paid', body: serializeEnvelope({ n: 1 }, { event: 'order.paid', signable: true }) });

    const { id } = await createEndpoint({ url: unique('tested') });
    const tested = await a.request({ method: 'POST', url: `/api/v1/endpoints/${id}/test`, headers: operator.headers });
    expect(tested.statusCode).toBe(202);
    const [test] = await deliveriesOf(id);
    expect(await eventOf(test.event_id)).toMatchObject({ kind: 'test', event: 'webhook.test' });
  });

  it('when a new endpoint replays, then it gets the past events it would receive now (events, filter, owner), oldest first, each once', async () => {
    const marker = `Replay ${Date.now()}`;
    const live = await createEndpoint({ url: unique('live'), events: ['post.created', 'post.updated'] });
    const since = new Date();
    const pids: number[] = [];
    for (let n = 0; n < 4; n++) pids.push(await createPost(alice, `${marker} ${n}`));
    const bobs = await createPost(bob, `${marker} bob`);
    const updated = await b.request({ method: 'PUT', url: `/api/v1/posts/${pids[0]}`, headers: alice.headers, payload: { title: `${marker} 0`, content: 'changed' } });
    expect(updated.statusCode).toBe(200);

    // Alice's own endpoint, made afterwards: her post.created events only, and the filter keeps 1 and 3.
    const late = await createEndpoint({ url: unique('late'), events: ['post.created'], filter: { title: [`${marker} 1`, `${marker} 3`, `${marker} bob`] } }, alice.headers);
    const res = await replay(late.id, since, alice.headers, b);
    expect(res.statusCode).toBe(202);
    expect(res.json()).toEqual({ count: 2 });
    const rows = await deliveriesOf(late.id);
    expect(rows.map((row) => row.pid)).toEqual([pids[1], pids[3]]);
    expect(rows.every((row) => row.status === 'pending')).toBe(true);
    expect((await replay(late.id, since, alice.headers)).json()).toEqual({ count: 0 });
    expect(await deliveriesOf(late.id)).toHaveLength(2);

    // An endpoint that got every event as it happened gets nothing again.
    expect((await replay(live.id, since)).json()).toEqual({ count: 0 });

    // An operator endpoint made afterwards gets everyone's events, in the order they were made.
    const watcher = await createEndpoint({ url: unique('watcher'), events: ['post.created', 'post.updated'] });
    expect((await replay(watcher.id, since)).json()).toEqual({ count: 6 });
    expect((await deliveriesOf(watcher.id)).map((row) => row.pid)).toEqual([...pids, bobs, pids[0]]);
    const replayed = (await deliveriesOf(watcher.id))[5];
    const original = (await deliveriesOf(live.id))[5];
    expect(replayed.event_id).toBe(original.event_id);
  });

  /** Publishes `count` events of `event` over POST /events, through both apis, a few at a time. */
  const publishMany = async (event: string, count: number, marker: string) => {
    for (let from = 0; from < count; from += 25) {
      const batch = Array.from({ length: Math.min(25, count - from) }, (_, n) =>
        (n % 2 ? a : b).request({ method: 'POST', url: '/api/v1/events', headers: operator.headers, payload: { event, payload: { marker, n: from + n } } }),
      );
      for (const res of await Promise.all(batch)) expect(res.statusCode).toBe(202);
    }
  };
  const eventsPerDelivery = (rows: { event_id: string }[]) => {
    const counts = new Map<string, number>();
    for (const row of rows) counts.set(row.event_id, (counts.get(row.event_id) ?? 0) + 1);
    return [...new Set(counts.values())];
  };

  it('when two replays of one endpoint arrive at the same moment through two apis, then each past event gets one delivery row', async () => {
    const since = new Date();
    await publishMany('post.deleted', 300, `twice ${Date.now()}`);
    for (let round = 0; round < 3; round++) {
      const late = await createEndpoint({ url: unique(`twice-${round}`), events: ['post.deleted'] });
      const answers = await Promise.all([replay(late.id, since, operator.headers, a), replay(late.id, since, operator.headers, b)]);
      expect(answers.map((res) => res.statusCode)).toEqual([202, 202]);
      expect(answers.map((res) => res.json().count).sort((x, y) => x - y)).toEqual([0, 300]);
      const rows = await deliveriesOf(late.id);
      expect(rows).toHaveLength(300);
      expect(eventsPerDelivery(rows)).toEqual([1]);
    }
  });

  it('when replays of an endpoint run while events are published to it, then every event reaches it exactly once', async () => {
    const target = await createEndpoint({ url: unique('racing'), events: ['webhook.test'] });
    const since = new Date();
    const marker = `racing ${Date.now()}`;
    const replays: Promise<unknown>[] = [];
    const published = publishMany('webhook.test', 150, marker);
    for (let n = 0; n < 10; n++) {
      replays.push(replay(target.id, since, operator.headers, n % 2 ? a : b).then((res) => expect(res.statusCode).toBe(202)));
      await new Promise((resolve) => setTimeout(resolve, 15));
    }
    await Promise.all([published, ...replays]);
    const rows = await deliveriesOf(target.id);
    expect(rows).toHaveLength(150);
    expect(eventsPerDelivery(rows)).toEqual([1]);
  });

  it('when a replay reaches past retention, names an unknown or foreign endpoint, or a disabled one, then it is refused with a clear status', async () => {
    const { id } = await createEndpoint({ url: unique('limits') });
    const old = await replay(id, new Date(Date.now() - 29.5 * 86_400_000));
    expect(old.statusCode).toBe(400);
    expect(old.json().message).toContain('since must be within the last 29 day(s)');
    expect((await replay(id, 'yesterday')).statusCode).toBe(400);
    expect((await replay(id, new Date(), alice.headers)).statusCode).toBe(404);
    expect((await replay(999_999, new Date())).statusCode).toBe(404);
    await a.request({ method: 'PATCH', url: `/api/v1/endpoints/${id}`, headers: operator.headers, payload: { active: false } });
    expect((await replay(id, new Date(Date.now() - 60_000))).statusCode).toBe(409);
  });
});
