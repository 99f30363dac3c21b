import { QueryTypes } from 'sequelize';
import { createUser, TestUser } from '../support/factories';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';
import { createServiceKey, TestServiceKey } from './support/operations';

/** docs/design.md §14.1 `filter`: the matching rules, their limits, and no delivery row for a non-match. */
describe('endpoint filters', () => {
  let harness: ApiHarness;
  let a: ApiClient;
  let b: ApiClient;
  let operator: TestServiceKey;
  let alice: TestUser;

  beforeAll(async () => {
    harness = await createApiHarness();
    a = await harness.start('a');
    b = await harness.start('b');
    operator = await createServiceKey(harness.db, ['*']);
    alice = await createUser(harness.db);
  });

  afterAll(() => harness.close());

  const matches = async (filter: unknown, data: unknown) =>
    (
      await harness.db.sequelize.query<{ matches: boolean }>('SELECT webhook_filter_matches($1::jsonb, $2::jsonb) AS matches', {
        bind: [JSON.stringify(filter), JSON.stringify(data)],
        type: QueryTypes.SELECT,
      })
    )[0].matches;

  it.each([
    ['every key must match', { a: 1, b: 'x' }, { a: 1, b: 'x', c: true }, true],
    ['one key differs', { a: 1, b: 'x' }, { a: 1, b: 'y' }, false],
    ['a key missing from the data never matches', { a: null }, { b: 1 }, false],
    ['null equals null', { a: null }, { a: null }, true],
    ['type-strict: 1 is not "1"', { a: 1 }, { a: '1' }, false],
    ['type-strict: true is not 1', { a: true }, { a: 1 }, false],
    ['an array in the filter is any-of', { status: ['paid', 'shipped'] }, { status: 'shipped' }, true],
    ['any-of with no match', { status: ['paid', 'shipped'] }, { status: 'open' }, false],
    ['an object matches recursively', { user: { plan: 'pro' } }, { user: { plan: 'pro', id: 7 } }, true],
    ['a nested key missing', { user: { plan: 'pro' } }, { user: { id: 7 } }, false],
    ['an object against a scalar', { user: { plan: 'pro' } }, { user: 'pro' }, false],
    ['a data array matches when one element does', { tags: 'red' }, { tags: ['blue', 'red'] }, true],
    ['a data array with no matching element', { tags: 'red' }, { tags: ['blue'] }, false],
    ['objects inside a data array', { items: { sku: 'A1' } }, { items: [{ sku: 'B2' }, { sku: 'A1', n: 2 }] }, true],
    ['any-of against a data array', { tags: ['red', 'green'] }, { tags: ['blue', 'green'] }, true],
    ['the empty filter matches every object', {}, { anything: 1 }, true],
    ['data that is not an object', { a: 1 }, [1], false],
  ])('when %s, then the filter %j against %j gives %s', async (_rule, filter, data, expected) => {
    expect(await matches(filter, data)).toBe(expected);
  });

  /** `value` inside `depth` arrays, one in the next. */
  const nested = (depth: number, value: unknown): unknown => (depth === 0 ? value : [nested(depth - 1, value)]);

  it.each([
    { shape: 'a stored string', filter: 'text', data: { a: 1 }, expected: false },
    { shape: 'a stored array', filter: [{ a: 1 }], data: { a: 1 }, expected: false },
    { shape: 'a stored number', filter: 7, data: { a: 1 }, expected: false },
    { shape: 'a stored JSON null (no filter)', filter: null, data: { a: 1 }, expected: true },
    { shape: 'five levels of objects', filter: { a: { b: { c: { d: { e: 1 } } } } }, data: { a: { b: { c: { d: { e: 1 } } } } }, expected: true },
    { shape: 'six levels of objects', filter: { a: { b: { c: { d: { e: { f: 1 } } } } } }, data: { a: { b: { c: { d: { e: { f: 1 } } } } } }, expected: false },
    { shape: 'five levels, arrays counted', filter: { a: nested(4, 1) }, data: { a: 1 }, expected: true },
    { shape: 'six levels, arrays counted', filter: { a: nested(5, 1) }, data: { a: 1 }, expected: false },
    { shape: 'a 40-deep array', filter: { a: nested(40, 1) }, data: { a: 1 }, expected: false },
    { shape: 'a 3000-deep array', filter: { a: nested(3000, 1) }, data: { a: 1 }, expected: false },
    { shape: 'matched against data arrays five deep', filter: { a: 1 }, data: { a: nested(5, 1) }, expected: true },
    { shape: 'matched against data arrays six deep', filter: { a: 1 }, data: { a: nested(6, 1) }, expected: false },
    { shape: 'matched against a 3000-deep data array', filter: { a: 1 }, data: { a: nested(3000, 1) }, expected: false },
  ])('when the filter is $shape, then matching never raises and gives $expected', async ({ filter, data, expected }) => {
    expect(await matches(filter, data)).toBe(expected);
  });

  const create = (payload: object, api = a, headers = operator.headers) => api.request({ method: 'POST', url: '/api/v1/endpoints', headers, payload });
  const deliveriesTo = async (url: string) =>
    harness.db.sequelize.query<{ event: string }>('SELECT event FROM webhook_deliveries WHERE url = $1', { bind: [url], type: QueryTypes.SELECT });

  it('when a post is created, then only endpoints whose filter matches its data get a delivery row', async () => {
    const title = `Filtered ${Date.now()}`;
    const matching = `http://127.0.0.1:9/filter/match-${Date.now()}`;
    const other = `http://127.0.0.1:9/filter/other-${Date.now()}`;
    expect((await create({ url: matching, events: ['post.created'], filter: { title: [title, 'x'] } })).statusCode).toBe(201);
    expect((await create({ url: other, events: ['post.created'], filter: { title: 'something else' } }, b)).statusCode).toBe(201);

    expect((await b.request({ method: 'POST', url: '/api/v1/posts', headers: alice.headers, payload: { title, content: 'C' } })).json().status).toBe(2001);
    expect((await a.request({ method: 'POST', url: '/api/v1/posts/create', headers: alice.headers, payload: { title, body: 'C', userId: alice.user.userId } })).statusCode).toBe(200);

    expect(await deliveriesTo(matching)).toHaveLength(2);
    expect(await deliveriesTo(other)).toHaveLength(0);
  });

  it('when a service publishes an event, then the filter decides per endpoint as well', async () => {
    const gold = `http://127.0.0.1:9/filter/gold-${Date.now()}`;
    const silver = `http://127.0.0.1:9/filter/silver-${Date.now()}`;
    await create({ url: gold, events: ['post.updated'], filter: { tier: 'gold' } });
    await create({ url: silver, events: ['post.updated'], filter: { tier: 'silver' } });
    const res = await a.request({ method: 'POST', url: '/api/v1/events', headers: operator.headers, payload: { event: 'post.updated', payload: { pid: 1, tier: 'gold' } } });
    expect(res.statusCode).toBe(202);
    expect(await deliveriesTo(gold)).toEqual([{ event: 'post.updated' }]);
    expect(await deliveriesTo(silver)).toEqual([]);
  });

  it('when a service publishes its payload as a string, then fan-out, replay and the body all see the same data, and a filter matches only an object', async () => {
    const stamp = `${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
    const filtered = `http://127.0.0.1:9/filter/string-a-${stamp}`;
    const everything = `http://127.0.0.1:9/filter/string-all-${stamp}`;
    const { id } = (await create({ url: filtered, events: ['post.deleted'], filter: { a: 1 } })).json();
    await create({ url: everything, events: ['post.deleted'] });
    const since = new Date();
    const publish = (payload: string) => a.request({ method: 'POST', url: '/api/v1/events', headers: operator.headers, payload: { event: 'post.deleted', payload } });
    const bodiesTo = async (url: string) =>
      (
        await harness.db.sequelize.query<{ body: string }>(
          'SELECT e.body FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id WHERE d.url = $1 ORDER BY d.created_at',
          { bind: [url], type: QueryTypes.SELECT },
        )
      ).map((row) => JSON.parse(row.body)._data);

    // A string holding JSON is the value it encodes; any other string, or one encoding a string, stays a string.
    for (const payload of ['{"a":1}', 'plain text', JSON.stringify('{"a":1}'), '[{"a":1}]']) expect((await publish(payload)).statusCode).toBe(202);

    expect(await bodiesTo(filtered)).toEqual([{ a: 1 }]);
    expect(await bodiesTo(everything)).toEqual([{ a: 1 }, 'plain text', '{"a":1}', [{ a: 1 }]]);
    const replayed = await a.request({ method: 'POST', url: `/api/v1/endpoints/${id}/replay`, headers: operator.headers, payload: { since: since.toISOString() } });
    expect(replayed.json()).toEqual({ count: 0 });
    expect(await deliveriesTo(filtered)).toHaveLength(1);
  });

  it('when stored filters have the wrong shape or depth, then every write succeeds, those endpoints get nothing, and the others get theirs', async () => {
    const stamp = `${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
    const url = (name: string) => `http://127.0.0.1:9/filter/stored-${name}-${stamp}`;
    const bad: [string, unknown][] = [
      ['string', 'text'],
      ['array', [{ title: 'x' }]],
      ['deep', { title: nested(40, 'x') }],
      ['deeper', nested(3000, 'x')],
    ];
    const badIds: number[] = [];
    for (const [name, filter] of bad) {
      const { id } = (await create({ url: url(name), events: ['post.created', 'post.updated'] })).json();
      // Written by hand, past the API's checks, as an older version or an operator might have.
      await harness.db.sequelize.query('UPDATE webhook_endpoints SET filter = $1::jsonb WHERE id = $2', { bind: [JSON.stringify(filter), id] });
      badIds.push(id);
    }
    await create({ url: url('good'), events: ['post.created', 'post.updated'], filter: { tier: 'gold' } });
    await create({ url: url('all'), events: ['post.created', 'post.updated'] });
    const since = new Date();

    const viaB = await b.request({ method: 'POST', url: '/api/v1/posts', headers: alice.headers, payload: { title: 'x', content: 'C' } });
    expect(viaB.json().status).toBe(2001);
    const viaA = await a.request({ method: 'POST', url: '/api/v1/posts/create', headers: alice.headers, payload: { title: 'x', body: 'C', userId: alice.user.userId } });
    expect(viaA.statusCode).toBe(200);
    const updated = await b.request({ method: 'PUT', url: `/api/v1/posts/${viaB.json().pid}`, headers: alice.headers, payload: { title: 'x', content: 'D' } });
    expect(updated.statusCode).toBe(200);
    for (const payload of [{ tier: 'gold' }, { tier: nested(3000, 'gold') }]) {
      const published = await a.request({ method: 'POST', url: '/api/v1/events', headers: operator.headers, payload: { event: 'post.updated', payload } });
      expect(published.statusCode).toBe(202);
    }
    for (const id of badIds) {
      const replayed = await b.request({ method: 'POST', url: `/api/v1/endpoints/${id}/replay`, headers: operator.headers, payload: { since: since.toISOString() } });
      expect([replayed.statusCode, replayed.json()]).toEqual([202, { count: 0 }]);
    }

    for (const [name] of bad) expect(await deliveriesTo(url(name))).toEqual([]);
    expect(await deliveriesTo(url('good'))).toEqual([{ event: 'post.updated' }]);
    expect(await deliveriesTo(url('all'))).toHaveLength(5);
  });

  it('when a filter is set, changed or removed, then it reads back as sent, and null takes every event', async () => {
    const { id, filter } = (await create({ url: 'https://f.example.com/hooks', filter: { user_id: [1, 2] } })).json();
    expect(filter).toEqual({ user_id: [1, 2] });
    const patched = await b.request({ method: 'PATCH', url: `/api/v1/endpoints/${id}`, headers: operator.headers, payload: { filter: null } });
    expect(patched.json()).toMatchObject({ filter: null });
  });

  it.each([
    [['not', 'an', 'object'], 'filter'],
    ['text', 'filter'],
    [{ a: { b: { c: { d: { e: { f: 1 } } } } } }, 'filter: at most 5 levels of objects and arrays.'],
    [{ a: [[[[[1]]]]] }, 'filter: at most 5 levels of objects and arrays.'],
    [{ a: nestedArrays(40) }, 'filter: at most 5 levels of objects and arrays.'],
    [{ big: 'x'.repeat(4100) }, 'filter: at most 4096 bytes of JSON.'],
  ])('when the filter is %j, then the create is 400 naming the field', async (filter, message) => {
    const res = await create({ url: 'https://f.example.com/bad', filter });
    expect(res.statusCode).toBe(400);
    expect(res.json().message).toContain(message);
  });

  it('when the filter nests objects and arrays 5 levels in all, then it is accepted on create and PATCH', async () => {
    const filter = { a: [{ b: [{ c: 1 }] }] };
    const res = await create({ url: 'https://f.example.com/five', filter });
    expect([res.statusCode, res.json().filter]).toEqual([201, filter]);
    const arrays = { a: [[[['x']]]] };
    const patched = await b.request({ method: 'PATCH', url: `/api/v1/endpoints/${res.json().id}`, headers: operator.headers, payload: { filter: arrays } });
    expect([patched.statusCode, patched.json().filter]).toEqual([200, arrays]);
  });

  it('when a PATCH sends a filter 100,000 arrays deep, then it is 400 and the stored filter is unchanged', async () => {
    const { id } = (await create({ url: 'https://f.example.com/deep', filter: { keep: true } })).json();
    const deep = `{"filter":{"a":${'['.repeat(100_000)}${']'.repeat(100_000)}}}`;
    const res = await a.request({ method: 'PATCH', url: `/api/v1/endpoints/${id}`, headers: { ...operator.headers, 'content-type': 'application/json' }, payload: deep });
    expect(res.statusCode).toBe(400);
    expect(res.json().message).toContain('filter: at most 5 levels of objects and arrays.');
    expect((await harness.db.models.WebhookEndpoint.findByPk(id))!.filter).toEqual({ keep: true });
  });
});

/** `depth` arrays, each holding the next, the innermost holding 1. */
function nestedArrays(depth: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}
