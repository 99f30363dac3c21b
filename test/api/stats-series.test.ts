import type { SeriesBucket } from '../../shared/operations/endpoint-stats';
import { createUser, TestUser } from '../support/factories';
import { ApiClient, ApiHarness, createApiHarness } from './support/api-harness';
import { createServiceKey, insertDelivery, TestServiceKey } from './support/operations';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const STATS_KEYS = [
  'attempts_24h',
  'circuit',
  'consecutive_failures',
  'disabled_reason',
  'failing_since',
  'last_failure_at',
  'last_success_at',
  'p50_ms',
  'p95_ms',
  'success_rate_24h',
];

/** One attempt of the fixture: when, with what answer (null: no answer) and how long. */
interface Attempt {
  at: Date;
  status: number | null;
  ms: number;
}

describe('stats series for charts (docs/design.md §14.1)', () => {
  let harness: ApiHarness;
  let a: ApiClient;
  let b: ApiClient;
  let reader: TestServiceKey;
  let sender: TestServiceKey;
  let alice: TestUser;
  let bob: TestUser;
  let aliceEndpoint: number;
  let bobEndpoint: number;
  let operatorEndpoint: number;
  /** The current minute when the fixture was made; attempts sit at known offsets from it. */
  let minute: number;
  const at = (offsetMs: number) => new Date(minute + offsetMs);

  async function addDelivery(endpointId: number, status: string, attempts: Attempt[]): Promise<void> {
    const id = await insertDelivery(harness.db, { endpointId, status, createdAt: attempts[0].at });
    for (const [index, attempt] of attempts.entries()) {
      await harness.db.sequelize.query(
        `INSERT INTO webhook_attempts (delivery_id, delivery_created_at, attempt_number, status_code, error, duration_ms, attempted_at)
         VALUES ($1, $7, $2, $3, $4, $5, $6)`,
        { bind: [id, index + 1, attempt.status, attempt.status === null ? 'timeout' : null, attempt.ms, attempt.at, attempts[0].at] },
      );
    }
  }

  const get = (url: string, headers: Record<string, string>, api = a) => api.request({ url, headers });
  /** The bucket holding `time` in a series. */
  const bucketOf = (series: SeriesBucket[], time: Date, width: number) => series.find((bucket) => Date.parse(bucket.start) === Math.floor(time.getTime() / width) * width);
  /**
   * An interval's counts exactly and its latencies within 5% of the exact figures (they come
   * from the duration histogram's log-spaced buckets).
   */
  const expectBucket = (bucket: SeriesBucket | undefined, counts: Partial<SeriesBucket>, [p50, p95]: [number, number]) => {
    expect(bucket).toMatchObject(counts);
    expect(Math.abs((bucket?.p50_ms ?? Infinity) - p50)).toBeLessThanOrEqual(0.05 * p50);
    expect(Math.abs((bucket?.p95_ms ?? Infinity) - p95)).toBeLessThanOrEqual(0.05 * p95);
  };
  const sum = (series: SeriesBucket[], field: 'succeeded' | 'failed' | 'retried') => series.reduce((total, bucket) => total + bucket[field], 0);

  beforeAll(async () => {
    harness = await createApiHarness();
    [a, b] = [await harness.start('a'), await harness.start('b')];
    reader = await createServiceKey(harness.db, ['endpoints:read']);
    sender = await createServiceKey(harness.db, ['webhooks:send']);
    [alice, bob] = [await createUser(harness.db), await createUser(harness.db)];
    const create = async (headers: Record<string, string>, url: string) =>
      (await a.request({ method: 'POST', url: '/api/v1/endpoints', headers, payload: { url } })).json().id as number;
    const operator = await createServiceKey(harness.db, ['endpoints:write']);
    aliceEndpoint = await create(alice.headers, 'https://alice.example.com/hooks');
    bobEndpoint = await create(bob.headers, 'https://bob.example.com/hooks');
    operatorEndpoint = await create(operator.headers, 'https://ops.example.com/hooks');

    minute = Math.floor(Date.now() / MINUTE) * MINUTE;
    // Ten minutes ago: a 503 then a 2xx (one retried, one succeeded).
    await addDelivery(aliceEndpoint, 'succeeded', [
      { at: at(-10 * MINUTE + 10_000), status: 503, ms: 100 },
      { at: at(-10 * MINUTE + 20_000), status: 200, ms: 300 },
    ]);
    // Thirty minutes ago: a 500, then no answer, then given up (one retried, one failed).
    await addDelivery(aliceEndpoint, 'failed', [
      { at: at(-30 * MINUTE + 5_000), status: 500, ms: 50 },
      { at: at(-30 * MINUTE + 15_000), status: null, ms: 1000 },
    ]);
    // Two minutes ago: a 503 whose retry is still to come.
    await addDelivery(aliceEndpoint, 'pending', [{ at: at(-2 * MINUTE + 1_000), status: 503, ms: 20 }]);
    // Three hours ago (only in the 24 h series) and two days ago (in neither).
    await addDelivery(aliceEndpoint, 'succeeded', [{ at: at(-3 * HOUR), status: 204, ms: 70 }]);
    await addDelivery(aliceEndpoint, 'succeeded', [{ at: at(-48 * HOUR), status: 200, ms: 70 }]);
    // Other principals' endpoints, in the same minute as Alice's first delivery.
    await addDelivery(bobEndpoint, 'succeeded', [{ at: at(-10 * MINUTE + 30_000), status: 200, ms: 10 }]);
    await addDelivery(operatorEndpoint, 'failed', [{ at: at(-10 * MINUTE + 40_000), status: 410, ms: 10 }]);
  });

  afterAll(() => harness.close());

  it('when an owner asks for the last hour, then 60 one-minute intervals, oldest first, count each attempt by outcome with its latencies, empty ones as zeros', async () => {
    const res = await get(`/api/v1/endpoints/${aliceEndpoint}/stats?series=1h`, alice.headers);

    expect(res.statusCode).toBe(200);
    const { series, ...stats } = res.json() as { series: SeriesBucket[] };
    expect(Object.keys(stats).sort()).toEqual(STATS_KEYS);
    expect(series).toHaveLength(60);
    const starts = series.map((bucket) => Date.parse(bucket.start));
    for (const [index, start] of starts.entries()) {
      expect(start % MINUTE).toBe(0);
      if (index > 0) expect(start - starts[index - 1]).toBe(MINUTE);
    }
    // The last interval is the current minute (the clock may have turned since the fixture).
    expect([minute, minute + MINUTE]).toContain(starts[59]);

    expectBucket(bucketOf(series, at(-10 * MINUTE), MINUTE), { start: at(-10 * MINUTE).toISOString(), succeeded: 1, failed: 0, retried: 1 }, [200, 290]);
    expectBucket(bucketOf(series, at(-30 * MINUTE), MINUTE), { start: at(-30 * MINUTE).toISOString(), succeeded: 0, failed: 1, retried: 1 }, [525, 953]);
    expectBucket(bucketOf(series, at(-2 * MINUTE), MINUTE), { start: at(-2 * MINUTE).toISOString(), succeeded: 0, failed: 0, retried: 1 }, [20, 20]);
    const busy = new Set([-10, -30, -2].map((offset) => at(offset * MINUTE).toISOString()));
    for (const bucket of series.filter((bucket) => !busy.has(bucket.start))) {
      expect(bucket).toEqual({ start: bucket.start, succeeded: 0, failed: 0, retried: 0, p50_ms: null, p95_ms: null });
    }
  });

  it('when an owner asks for the last 24 hours, then 24 hourly intervals hold the attempts of the day, not older ones', async () => {
    const res = await get(`/api/v1/endpoints/${aliceEndpoint}/stats?series=24h`, alice.headers, b);

    expect(res.statusCode).toBe(200);
    const { series, attempts_24h: attempts } = res.json() as { series: SeriesBucket[]; attempts_24h: number };
    expect(series).toHaveLength(24);
    for (const [index, bucket] of series.entries()) {
      expect(Date.parse(bucket.start) % HOUR).toBe(0);
      if (index > 0) expect(Date.parse(bucket.start) - Date.parse(series[index - 1].start)).toBe(HOUR);
    }
    expectBucket(bucketOf(series, at(-3 * HOUR), HOUR), { succeeded: 1 }, [70, 70]);
    expect([sum(series, 'succeeded'), sum(series, 'failed'), sum(series, 'retried')]).toEqual([2, 1, 3]);
    expect(attempts).toBe(6);
  });

  it('when series is not asked for, then the stats have no series; any other value is a 400 in the layout shape', async () => {
    const plain = await get(`/api/v1/endpoints/${aliceEndpoint}/stats`, alice.headers);
    const overview = await get('/api/v1/stats', alice.headers);
    const badA = await get(`/api/v1/endpoints/${aliceEndpoint}/stats?series=7d`, alice.headers);
    const badB = await get('/api/v1/stats?series=', reader.headers, b);

    expect(Object.keys(plain.json()).sort()).toEqual(STATS_KEYS);
    expect(overview.json()).not.toHaveProperty('series');
    expect([badA.statusCode, badA.json()]).toEqual([400, { status: 400, message: '"series" must be one of [1h, 24h]' }]);
    expect([badB.statusCode, badB.json()]).toEqual([400, { message: '"series" must be one of [1h, 24h]' }]);
  });

  it("when users read the overview, then it covers their own endpoints only; another's endpoint stats answer 404", async () => {
    const mine = (await get('/api/v1/stats?series=1h', alice.headers)).json();
    const bobs = (await get('/api/v1/stats?series=1h', bob.headers, b)).json();
    const foreign = await get(`/api/v1/endpoints/${aliceEndpoint}/stats?series=1h`, bob.headers);

    expect(mine).toMatchObject({ endpoints: 1, endpoints_disabled: 0, attempts_24h: 6, success_rate_24h: 0.3333 });
    expect(bucketOf(mine.series, at(-10 * MINUTE), MINUTE)).toMatchObject({ succeeded: 1, failed: 0, retried: 1 });
    expect([sum(mine.series, 'succeeded'), sum(mine.series, 'failed'), sum(mine.series, 'retried')]).toEqual([1, 1, 3]);
    expect(bobs).toMatchObject({ endpoints: 1, attempts_24h: 1, success_rate_24h: 1, p50_ms: 10 });
    expect(bucketOf(bobs.series, at(-10 * MINUTE), MINUTE)).toEqual({ start: at(-10 * MINUTE).toISOString(), succeeded: 1, failed: 0, retried: 0, p50_ms: 10, p95_ms: 10 });
    expect(sum(bobs.series, 'succeeded')).toBe(1);
    expect(foreign.statusCode).toBe(404);
  });

  it('when an operator reads the overview, then every endpoint counts, a disabled one is counted as such; a key without endpoints:read gets 403', async () => {
    await harness.db.sequelize.query('UPDATE webhook_endpoints SET active = false WHERE id = $1', { bind: [operatorEndpoint] });
    const res = await get('/api/v1/stats?series=1h', reader.headers);
    const refused = await get('/api/v1/stats', sender.headers);

    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ endpoints: 3, endpoints_disabled: 1, attempts_24h: 8 });
    expectBucket(bucketOf(body.series, at(-10 * MINUTE), MINUTE), { succeeded: 2, failed: 1, retried: 1 }, [55, 270]);
    expect([refused.statusCode, refused.json()]).toEqual([403, { status: 403, message: 'This key lacks the scope endpoints:read.' }]);
  });
});
