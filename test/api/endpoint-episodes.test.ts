import { QueryTypes } from 'sequelize';
import { createUser, TestUser } from '../support/factories';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';
import { createServiceKey, TestServiceKey } from './support/operations';

/** An endpoint's failure episode over the API (docs/design.md §6.6, §11.1): its stats and a re-enable's endpoint.recovered. */
describe('endpoint failure episodes over the API', () => {
  let harness: ApiHarness;
  let a: ApiClient;
  let b: ApiClient;
  let operator: TestServiceKey;
  let alice: TestUser;
  let bob: TestUser;

  beforeAll(async () => {
    harness = await createApiHarness();
    a = await harness.start('a');
    b = await harness.start('b');
    operator = await createServiceKey(harness.db, ['*']);
    alice = await createUser(harness.db);
    bob = await createUser(harness.db);
  });

  afterAll(() => harness.close());

  const create = async (headers: Record<string, string>, payload: object): Promise<number> =>
    (await a.request({ method: 'POST', url: '/api/v1/endpoints', headers, payload })).json().id;

  /** The state the worker leaves: an open episode, with what it announced; `active` false for a disable. */
  async function failing(id: number, state: { announced: string[]; active?: boolean; failures?: number }): Promise<{ episodeId: string; since: Date }> {
    const [row] = await harness.db.sequelize.query<{ episode_id: string; failing_since: Date }>(
      `UPDATE webhook_endpoints
          SET episode_id = 'epi_' || md5(random()::text), failing_since = now() - interval '5 minutes', consecutive_failures = $2,
              last_failure_status_code = 503, last_failure_error = NULL, episode_events = $3::text[], active = $4,
              disabled_reason = CASE WHEN $4 THEN NULL ELSE 'No successful attempt since then' END
        WHERE id = $1 RETURNING episode_id, failing_since`,
      { bind: [id, state.failures ?? 7, state.announced, state.active ?? true], type: QueryTypes.SELECT },
    );
    return { episodeId: row.episode_id, since: row.failing_since };
  }

  /** Each `endpoint.recovered` event about `id`, with the URLs its deliveries go to and whether they were queued. */
  async function recoveredAbout(id: number) {
    return harness.db.sequelize.query<{ data: Record<string, unknown>; kind: string; urls: string[]; queued: boolean }>(
      `SELECT ev.body::jsonb -> '_data' AS data, ev.kind, array_agg(d.url ORDER BY d.url) AS urls, bool_and(d.enqueued_at IS NOT NULL) AS queued
         FROM webhook_events ev JOIN webhook_deliveries d ON d.event_id = ev.id
        WHERE ev.event = 'endpoint.recovered' AND (ev.body::jsonb -> '_data' ->> 'endpoint_id')::int = $1
        GROUP BY ev.id, ev.body, ev.kind`,
      { bind: [id], type: QueryTypes.SELECT },
    );
  }

  it('When an endpoint has an open episode, then its stats show failing_since and consecutive_failures in both layouts; null when none is open', async () => {
    const id = await create(alice.headers, { url: 'https://alice.example.com/stats' });
    const healthy = await b.request({ url: `/api/v1/endpoints/${id}/stats`, headers: alice.headers });
    const { since } = await failing(id, { announced: ['endpoint.failing'], failures: 12 });

    const statsA = await a.request({ url: `/api/v1/endpoints/${id}/stats`, headers: alice.headers });
    const statsB = await b.request({ url: `/api/v1/endpoints/${id}/stats?series=1h`, headers: operator.headers });

    expect(healthy.json()).toMatchObject({ failing_since: null, consecutive_failures: null });
    expect(statsA.json()).toMatchObject({ failing_since: since.toISOString(), consecutive_failures: 12 });
    expect(statsB.json()).toMatchObject({ failing_since: since.toISOString(), consecutive_failures: 12 });
  });

  it('When a disabled endpoint whose episode was announced is re-enabled twice at once, then endpoint.recovered goes once to the endpoints subscribed by name, queued at once, and the episode is closed', async () => {
    const id = await create(alice.headers, { url: 'https://alice.example.com/down?token=t', events: ['post.created', 'endpoint.recovered'] });
    // Userinfo as a row written before the API refused it.
    await harness.db.sequelize.query("UPDATE webhook_endpoints SET url = 'https://hook:pw@alice.example.com/down?token=t' WHERE id = $1", { bind: [id] });
    await create(operator.headers, { url: 'https://ops.example.com/watch', events: ['endpoint.recovered'] });
    await create(operator.headers, { url: 'https://ops.example.com/every-event' });
    await create(alice.headers, { url: 'https://alice.example.com/watch', events: ['endpoint.recovered'] });
    await create(alice.headers, { url: 'https://alice.example.com/every-event' });
    await create(bob.headers, { url: 'https://bob.example.com/watch', events: ['endpoint.recovered'] });
    const { episodeId, since } = await failing(id, { announced: ['endpoint.failing', 'endpoint.disabled'], active: false });

    const [viaA, viaB] = await Promise.all([
      a.request({ method: 'PATCH', url: `/api/v1/endpoints/${id}`, headers: alice.headers, payload: { active: true } }),
      b.request({ method: 'PATCH', url: `/api/v1/endpoints/${id}`, headers: operator.headers, payload: { active: true } }),
    ]);

    expect([viaA.statusCode, viaB.statusCode]).toEqual([200, 200]);
    expect(viaA.json()).toMatchObject({ active: true, disabled_reason: null });
    const events = await recoveredAbout(id);
    expect(events).toEqual([
      {
        kind: 'operational',
        urls: ['https://alice.example.com/watch', 'https://ops.example.com/watch'],
        queued: true,
        data: {
          endpoint_id: id,
          url: 'https://alice.example.com/down',
          user_id: alice.user.userId,
          reason: expect.stringMatching(/^re-enabled by (its owner|an operator)$/),
          failing_since: since.toISOString(),
          consecutive_failures: 7,
          last_status_code: 503,
          last_error: null,
          occurred_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT[\d:.]+Z$/),
          episode_id: episodeId,
        },
      },
    ]);
    const stats = await a.request({ url: `/api/v1/endpoints/${id}/stats`, headers: alice.headers });
    expect(stats.json()).toMatchObject({ failing_since: null, consecutive_failures: null, disabled_reason: null });
  });

  it('When an endpoint is re-enabled after an episode that announced nothing, or set active while active, then nothing is emitted', async () => {
    const quiet = await create(operator.headers, { url: 'https://ops.example.com/quiet' });
    const stillFailing = await create(operator.headers, { url: 'https://ops.example.com/still-failing' });
    await create(operator.headers, { url: 'https://ops.example.com/watch-2', events: ['endpoint.recovered'] });
    await failing(quiet, { announced: [], active: false });
    await failing(stillFailing, { announced: ['endpoint.failing'] });

    const reenabled = await a.request({ method: 'PATCH', url: `/api/v1/endpoints/${quiet}`, headers: operator.headers, payload: { active: true } });
    const untouched = await b.request({ method: 'PATCH', url: `/api/v1/endpoints/${stillFailing}`, headers: operator.headers, payload: { active: true } });

    expect([reenabled.statusCode, untouched.statusCode]).toEqual([200, 200]);
    expect(await recoveredAbout(quiet)).toEqual([]);
    expect(await recoveredAbout(stillFailing)).toEqual([]);
    // The re-enable closed the quiet episode; an endpoint that stayed active is still failing.
    expect((await a.request({ url: `/api/v1/endpoints/${quiet}/stats`, headers: operator.headers })).json().failing_since).toBeNull();
    expect((await a.request({ url: `/api/v1/endpoints/${stillFailing}/stats`, headers: operator.headers })).json().consecutive_failures).toBe(7);
  });

  it('When an endpoint subscribed to operational events is replayed, then none of them is sent again (replay skips kind operational)', async () => {
    const down = await create(operator.headers, { url: 'https://ops.example.com/down-again' });
    await failing(down, { announced: ['endpoint.failing'], active: false });
    await a.request({ method: 'PATCH', url: `/api/v1/endpoints/${down}`, headers: operator.headers, payload: { active: true } });
    expect(await recoveredAbout(down)).toHaveLength(1);
    const late = await create(operator.headers, { url: 'https://ops.example.com/late-watch', events: ['endpoint.recovered'] });

    const replayed = await b.request({
      method: 'POST',
      url: `/api/v1/endpoints/${late}/replay`,
      headers: operator.headers,
      payload: { since: new Date(Date.now() - 3_600_000).toISOString() },
    });

    expect([replayed.statusCode, replayed.json()]).toEqual([202, { count: 0 }]);
  });
});
