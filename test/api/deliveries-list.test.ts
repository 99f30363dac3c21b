import { createUser, TestUser } from '../support/factories';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';
import { createServiceKey, insertDelivery, TestServiceKey } from './support/operations';

describe('GET /api/v1/webhooks: filters and cursor pages (docs/design.md §11.1)', () => {
  let harness: ApiHarness;
  let a: ApiClient;
  let b: ApiClient;
  let reader: TestServiceKey;
  let alice: TestUser;
  let aliceEndpoint: number;
  let operatorEndpoint: number;

  beforeAll(async () => {
    harness = await createApiHarness();
    a = await harness.start('a');
    b = await harness.start('b');
    reader = await createServiceKey(harness.db, ['webhooks:read']);
    alice = await createUser(harness.db);
    const { WebhookEndpoint } = harness.db.models;
    aliceEndpoint = (await WebhookEndpoint.create({ url: 'https://alice.example.com', secret: 's', description: null, userId: alice.user.userId })).id;
    operatorEndpoint = (await WebhookEndpoint.create({ url: 'https://ops.example.com', secret: 's', description: null })).id;
  });

  afterAll(() => harness.close());

  const list = async (query: string, headers = reader.headers, api = a) => {
    const res = await api.request({ url: `/api/v1/webhooks${query}`, headers });
    expect(res.statusCode).toBe(200);
    return res.json() as { data: Array<{ id: string }>; next_cursor: string | null };
  };

  it('When deliveries are paged while new ones arrive, then every delivery present at the start is seen exactly once, newest first', async () => {
    // Several rows share one created_at: the keyset's id breaks the tie.
    const sameTime = new Date('2026-11-20T12:00:00.123456Z');
    const before: string[] = [];
    for (let n = 0; n < 12; n += 1) {
      before.push(await insertDelivery(harness.db, { endpointId: operatorEndpoint, event: 'post.updated', createdAt: n % 3 === 0 ? sameTime : new Date(Date.UTC(2026, 10, 20, 11, n)) }));
    }
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await list(`?event=post.updated&limit=5${cursor ? `&cursor=${cursor}` : ''}`, reader.headers, pages % 2 === 0 ? a : b);
      seen.push(...page.data.map((delivery) => delivery.id));
      cursor = page.next_cursor;
      pages += 1;
      // Newer and older rows inserted between pages, as a busy system would.
      await insertDelivery(harness.db, { endpointId: operatorEndpoint, event: 'post.updated' });
      await insertDelivery(harness.db, { endpointId: operatorEndpoint, event: 'post.updated', createdAt: new Date('2026-11-20T11:30:00Z') });
    } while (cursor && pages < 20);

    const original = seen.filter((id) => before.includes(id));
    expect(new Set(seen).size).toBe(seen.length);
    expect(original.sort()).toEqual([...before].sort());
    const firstPage = await list('?event=post.updated&limit=100');
    const created = firstPage.data.map((delivery) => Date.parse((delivery as unknown as { created_at: string }).created_at));
    expect(created).toEqual([...created].sort((x, y) => y - x));
  });

  it('When filters are given, then status, event, endpoint_id and the created_at window each narrow the list', async () => {
    const failed = await insertDelivery(harness.db, { endpointId: aliceEndpoint, event: 'post.deleted', status: 'failed', createdAt: new Date('2026-10-01T00:00:00Z') });
    const done = await insertDelivery(harness.db, { endpointId: aliceEndpoint, event: 'post.deleted', status: 'succeeded', createdAt: new Date('2026-10-02T00:00:00Z') });
    const other = await insertDelivery(harness.db, { endpointId: operatorEndpoint, event: 'post.deleted', status: 'failed', createdAt: new Date('2026-10-03T00:00:00Z') });
    const ids = (page: { data: Array<{ id: string }> }) => page.data.map((delivery) => delivery.id);

    expect(ids(await list('?event=post.deleted'))).toEqual([other, done, failed]);
    expect(ids(await list('?event=post.deleted&status=failed'))).toEqual([other, failed]);
    expect(ids(await list(`?event=post.deleted&endpoint_id=${aliceEndpoint}`))).toEqual([done, failed]);
    expect(ids(await list('?event=post.deleted&since=2026-10-02T00:00:00Z&until=2026-10-02T23:59:59Z'))).toEqual([done]);
    expect(ids(await list('?event=post.deleted', alice.headers))).toEqual([done, failed]);
    expect(ids(await list(`?endpoint_id=${operatorEndpoint}`, alice.headers))).toEqual([]);
  });

  it('When the limit or a filter is malformed, then the answer is 400 in the layout shape; default limit is 20', async () => {
    for (let n = 0; n < 21; n += 1) await insertDelivery(harness.db, { endpointId: operatorEndpoint, event: 'post.created' });

    const defaulted = await list('?event=post.created');
    const responses = await Promise.all(
      ['?limit=0', '?limit=101', '?limit=ten', '?status=lost', '?since=yesterday', '?endpoint_id=x', '?cursor=abc'].map((query) =>
        b.request({ url: `/api/v1/webhooks${query}`, headers: reader.headers }),
      ),
    );

    expect(defaulted.data).toHaveLength(20);
    expect(defaulted.next_cursor).toEqual(expect.any(String));
    for (const res of responses) expect([res.statusCode, res.json()]).toEqual([400, { message: expect.any(String) }]);
  });

  it('When a key lacks webhooks:read, then listing is 403', async () => {
    const writer = await createServiceKey(harness.db, ['endpoints:write']);
    const res = await a.request({ url: '/api/v1/webhooks', headers: writer.headers });
    expect([res.statusCode, res.json()]).toEqual([403, { status: 403, message: 'This key lacks the scope webhooks:read.' }]);
  });
});
